/*-------------------------------------------------------------------------
 *
 * test/ff1_vectors.c
 *	  Known-answer test of the FF1 behind public IDs, run by
 *	  "make installcheck" before pg_regress (Makefile, target ff1check).
 *
 * leaf.so computes public IDs with the 63-bit FF1 of src/leaf_ff1.c,
 * which is too narrow for NIST's published sample vectors (radix 10 and
 * 36).  So this program carries a general FF1, written from the same
 * definitions in SP 800-38G (any radix from 2 to 2^16, multi-precision
 * NUM and STR), which exists for the tests only and is not part of
 * leaf.so.  It checks:
 *
 *	- NIST's 9 FF1 samples (FF1samples.pdf, "Cryptographic Standards and
 *	  Guidelines: examples with intermediate values"), both directions;
 *	- that the general FF1 is a bijection over all 2^20 strings of a
 *	  20-bit domain, and decrypts back;
 *	- that src/leaf_ff1.c, the code leaf.so runs, gives what the general
 *	  FF1 gives for radix 2 over 63 numerals: 308 IDs (edges and 300 from a
 *	  fixed pseudo-random sequence) under five tweaks, both directions.
 *
 * The SQL functions are checked against known answers worked out apart
 * from leaf in sql/public_id.sql.  Output is TAP; the exit status is 1 if
 * a check failed.
 *
 *-------------------------------------------------------------------------
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "public_id/leaf_ff1.h"

/* Most numerals, and the largest radix, the general FF1 takes. */
#define FF1_MAXLEN			256
#define FF1_MAXRADIX		65536

/* Limbs of the multi-precision numbers: radix^v < 2^2048, d <= 260 bytes. */
#define BN_LIMBS			80

static int	tests_run = 0;
static int	tests_failed = 0;

static void
check(bool ok, const char *what)
{
	tests_run++;
	if (!ok)
		tests_failed++;
	printf("%s %d - %s\n", ok ? "ok" : "not ok", tests_run, what);
}

static void
die(const char *what)
{
	printf("Bail out! %s\n", what);
	exit(2);
}

/* ------------------------------------------- multi-precision numbers */

/* A non-negative number: n limbs of 32 bits, least significant first. */
typedef struct BigNum
{
	int			n;
	uint32_t	limb[BN_LIMBS];
} BigNum;

static void
bn_set_small(BigNum *a, uint32_t v)
{
	a->n = v ? 1 : 0;
	a->limb[0] = v;
}

/* a = a * mul + add */
static void
bn_mul_add_small(BigNum *a, uint32_t mul, uint32_t add)
{
	uint64_t	carry = add;

	for (int i = 0; i < a->n; i++)
	{
		uint64_t	cur = (uint64_t) a->limb[i] * mul + carry;

		a->limb[i] = (uint32_t) cur;
		carry = cur >> 32;
	}
	if (carry)
	{
		if (a->n >= BN_LIMBS)
			die("FF1 number too large");
		a->limb[a->n++] = (uint32_t) carry;
	}
}

/* a = a / div; returns a mod div */
static uint32_t
bn_divmod_small(BigNum *a, uint32_t div)
{
	uint64_t	rem = 0;

	for (int i = a->n - 1; i >= 0; i--)
	{
		uint64_t	cur = (rem << 32) | a->limb[i];

		a->limb[i] = (uint32_t) (cur / div);
		rem = cur % div;
	}
	while (a->n > 0 && a->limb[a->n - 1] == 0)
		a->n--;
	return (uint32_t) rem;
}

/* a = a - 1, for a > 0 */
static void
bn_sub_one(BigNum *a)
{
	for (int i = 0; i < a->n; i++)
	{
		if (a->limb[i]-- != 0)
			break;
	}
	while (a->n > 0 && a->limb[a->n - 1] == 0)
		a->n--;
}

static int
bn_bits(const BigNum *a)
{
	int			bits;
	uint32_t	top;

	if (a->n == 0)
		return 0;
	bits = 32 * (a->n - 1);
	for (top = a->limb[a->n - 1]; top; top >>= 1)
		bits++;
	return bits;
}

/* NUM(S): the number of a byte string, most significant byte first */
static void
bn_from_bytes(BigNum *a, const unsigned char *s, int len)
{
	bn_set_small(a, 0);
	for (int i = 0; i < len; i++)
		bn_mul_add_small(a, 256, s[i]);
}

/* NUM_radix(X): the number of a numeral string, most significant first */
static void
bn_from_numerals(BigNum *a, const uint16_t *x, int len, uint32_t radix)
{
	bn_set_small(a, 0);
	for (int i = 0; i < len; i++)
		bn_mul_add_small(a, radix, x[i]);
}

/* [a]^len: a as len bytes, most significant first; a < 256^len */
static void
bn_to_bytes(const BigNum *a, unsigned char *s, int len)
{
	if (bn_bits(a) > 8 * len)
		die("FF1 number does not fit its byte string");
	for (int i = 0; i < len; i++)
	{
		int			byte = i;	/* counted from the least significant */
		int			limb = byte / 4;

		s[len - 1 - i] = limb < a->n ? (a->limb[limb] >> (8 * (byte % 4))) & 0xff : 0;
	}
}

/* ---------------------------------------------------- FF1, any radix */

static void
aes_block(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in)
{
	if (!leaf_ff1_aes_block(ctx, out, in))
		die("AES encryption failed");
}

/*
 * FF1.Encrypt, or FF1.Decrypt if "decrypt" (SP 800-38G, Algorithms 7 and
 * 8): X of n numerals of the given radix into out (n numerals), under the
 * key of ctx and the tweak T of t bytes.  2 <= radix <= 2^16,
 * 2 <= n <= FF1_MAXLEN, every numeral below radix,
 * t <= LEAF_FF1_MAXTLEN.
 */
static void
ff1_digits(EVP_CIPHER_CTX *ctx, uint32_t radix,
		   const unsigned char *T, int t,
		   const uint16_t *X, int n, bool decrypt, uint16_t *out)
{
	int			u = n / 2;
	int			v = n - u;
	uint16_t	A[FF1_MAXLEN];
	uint16_t	B[FF1_MAXLEN];
	uint16_t	C[FF1_MAXLEN];
	uint16_t	ydig[FF1_MAXLEN];
	int			lenA = u;
	int			lenB = v;
	int			b;
	int			d;
	int			pad;
	int			qlen;
	unsigned char P[16];
	unsigned char Q[LEAF_FF1_MAXTLEN + 16 + 1 + 260];
	unsigned char S[16 * ((260 + 15) / 16)];
	BigNum		bn;

	if (radix < 2 || radix > FF1_MAXRADIX || n < 2 || n > FF1_MAXLEN ||
		t < 0 || t > LEAF_FF1_MAXTLEN)
		die("FF1 arguments out of range");

	/* 2. A = X[1..u]; B = X[u + 1..n] */
	memcpy(A, X, u * sizeof(uint16_t));
	memcpy(B, X + u, v * sizeof(uint16_t));

	/*
	 * 3. b = ceil(ceil(v * LOG(radix)) / 8).  ceil(v * LOG(radix)) is the
	 * least k with 2^k >= radix^v, the bit length of radix^v - 1: exact,
	 * with no floating point.
	 */
	bn_set_small(&bn, 1);
	for (int j = 0; j < v; j++)
		bn_mul_add_small(&bn, radix, 0);
	bn_sub_one(&bn);
	b = (bn_bits(&bn) + 7) / 8;

	/* 4. d = 4 * ceil(b / 4) + 4 */
	d = 4 * ((b + 3) / 4) + 4;

	/* 5. P */
	leaf_ff1_p(P, radix, u, n, t);

	/* Q = T || [0]^((-t-b-1) mod 16) || [i]^1 || [NUM_radix(B)]^b */
	pad = leaf_ff1_pad16(t + b + 1);
	qlen = t + pad + 1 + b;
	if (qlen > (int) sizeof(Q) || d > 260)
		die("FF1 domain too large for this program");
	memset(Q, 0, qlen);
	memcpy(Q, T, t);

	/* 6. the rounds; decryption runs them backwards with A and B swapped */
	for (int k = 0; k < LEAF_FF1_ROUNDS; k++)
	{
		int			i = decrypt ? LEAF_FF1_ROUNDS - 1 - k : k;
		int			m = (i % 2 == 0) ? u : v;
		unsigned char R[16];

		/* i. Q, with the half that is not changed in this round */
		Q[t + pad] = (unsigned char) i;
		if (!decrypt)
			bn_from_numerals(&bn, B, lenB, radix);
		else
			bn_from_numerals(&bn, A, lenA, radix);
		bn_to_bytes(&bn, Q + t + pad + 1, b);

		/* ii. R = PRF(P || Q) */
		memset(R, 0, 16);
		if (!leaf_ff1_prf_blocks(ctx, R, P, 1) ||
			!leaf_ff1_prf_blocks(ctx, R, Q, qlen / 16))
			die("AES encryption failed");

		/*
		 * iii. S = the first d bytes of R || CIPH(R xor [1]^16) || ... ||
		 * CIPH(R xor [ceil(d / 16) - 1]^16)
		 */
		memcpy(S, R, 16);
		for (int j = 1; j < (d + 15) / 16; j++)
		{
			unsigned char blk[16];

			memcpy(blk, R, 16);
			blk[12] ^= (j >> 24) & 0xff;
			blk[13] ^= (j >> 16) & 0xff;
			blk[14] ^= (j >> 8) & 0xff;
			blk[15] ^= j & 0xff;
			aes_block(ctx, S + 16 * j, blk);
		}

		/*
		 * iv. y = NUM(S).  Only y mod radix^m matters below: its m lowest
		 * numerals in that radix.
		 */
		bn_from_bytes(&bn, S, d);
		for (int j = m - 1; j >= 0; j--)
			ydig[j] = (uint16_t) bn_divmod_small(&bn, radix);

		if (!decrypt)
		{
			/* vi-vii. C = STR^m_radix((NUM_radix(A) + y) mod radix^m) */
			uint32_t	carry = 0;

			for (int j = m - 1; j >= 0; j--)
			{
				uint32_t	s = (uint32_t) A[j] + ydig[j] + carry;

				C[j] = (uint16_t) (s % radix);
				carry = s / radix;
			}
			/* viii-ix. A = B; B = C */
			memcpy(A, B, lenB * sizeof(uint16_t));
			lenA = lenB;
			memcpy(B, C, m * sizeof(uint16_t));
			lenB = m;
		}
		else
		{
			/* C = STR^m_radix((NUM_radix(B) - y) mod radix^m) */
			int32_t		borrow = 0;

			for (int j = m - 1; j >= 0; j--)
			{
				int32_t		s = (int32_t) B[j] - ydig[j] - borrow;

				borrow = s < 0;
				if (s < 0)
					s += radix;
				C[j] = (uint16_t) s;
			}
			/* B = A; A = C */
			memcpy(B, A, lenA * sizeof(uint16_t));
			lenB = lenA;
			memcpy(A, C, m * sizeof(uint16_t));
			lenA = m;
		}
	}

	/* 7. A || B */
	memcpy(out, A, lenA * sizeof(uint16_t));
	memcpy(out + lenA, B, lenB * sizeof(uint16_t));
}

/* ------------------------------------------------------------ helpers */

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	die("not a hex digit");
	return -1;
}

/* hex into bytes; returns the number of bytes */
static int
from_hex(const char *hex, unsigned char *out)
{
	int			len = (int) strlen(hex);

	for (int i = 0; i + 1 < len; i += 2)
		out[i / 2] = (unsigned char) ((hexval(hex[i]) << 4) | hexval(hex[i + 1]));
	return len / 2;
}

static EVP_CIPHER_CTX *
aes_from_hex(const char *keyhex)
{
	unsigned char key[32];
	int			klen = from_hex(keyhex, key);
	EVP_CIPHER_CTX *ctx = leaf_ff1_aes_new(key, klen);

	if (ctx == NULL)
		die("could not set up AES");
	return ctx;
}

/* FF1 of a string of numerals 0-9a-z of the given radix, into out */
static void
ff1_string(EVP_CIPHER_CTX *ctx, uint32_t radix, const char *tweakhex,
		   const char *in, bool decrypt, char *out)
{
	unsigned char tweak[LEAF_FF1_MAXTLEN];
	int			t = from_hex(tweakhex, tweak);
	int			n = (int) strlen(in);
	uint16_t	x[FF1_MAXLEN] = {0};
	uint16_t	y[FF1_MAXLEN];

	for (int i = 0; i < n; i++)
		x[i] = (uint16_t) (in[i] <= '9' ? in[i] - '0' : in[i] - 'a' + 10);
	ff1_digits(ctx, radix, tweak, t, x, n, decrypt, y);
	for (int i = 0; i < n; i++)
		out[i] = (char) (y[i] < 10 ? '0' + y[i] : 'a' + y[i] - 10);
	out[n] = '\0';
}

/* the general FF1 with radix 2 over the 63 bits of x, most significant first */
static uint64_t
ff1_general_63(EVP_CIPHER_CTX *ctx, const char *tweak, uint64_t x, bool decrypt)
{
	uint16_t	in[63];
	uint16_t	out[63];
	uint64_t	r = 0;

	for (int i = 0; i < 63; i++)
		in[i] = (uint16_t) ((x >> (62 - i)) & 1);
	ff1_digits(ctx, 2, (const unsigned char *) tweak, (int) strlen(tweak),
			   in, 63, decrypt, out);
	for (int i = 0; i < 63; i++)
		r = (r << 1) | out[i];
	return r;
}

/* splitmix64: a fixed sequence of IDs, the same on every run */
static uint64_t
next_id(uint64_t *state)
{
	uint64_t	z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return (z ^ (z >> 31)) >> 1;	/* 63 bits */
}

/* ----------------------------------------------------------- the checks */

int
main(void)
{
	/* FF1samples.pdf, samples 1 to 9 */
	static const char *const k128 = "2B7E151628AED2A6ABF7158809CF4F3C";
	static const char *const k192 = "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F";
	static const char *const k256 = "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94";
	static const char *const t10 = "39383736353433323130";
	static const char *const t11 = "3737373770717273373737";
	static const struct
	{
		int			no;
		uint32_t	radix;
		const char *tweak;
		const char *pt;
		const char *ct;
	}			samples[] = {
		{1, 10, "", "0123456789", "2433477484"},
		{2, 10, NULL, "0123456789", "6124200773"},
		{3, 36, NULL, "0123456789abcdefghi", "a9tv40mll9kdu509eum"},
		{4, 10, "", "0123456789", "2830668132"},
		{5, 10, NULL, "0123456789", "2496655549"},
		{6, 36, NULL, "0123456789abcdefghi", "xbj3kv35jrawxv32ysr"},
		{7, 10, "", "0123456789", "6657667009"},
		{8, 10, NULL, "0123456789", "1001623463"},
		{9, 36, NULL, "0123456789abcdefghi", "xs8a0azh2avyalyzuwd"},
	};
	/* the key of the public ID tests (sql/public_id.sql, 190_public_id.pl) */
	static const char *const key1 = "8f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";
	static const uint64_t edges[] = {
		0, 1, 2, UINT64_C(4611686018427387904), UINT64_C(9223372036854775807),
		UINT64_C(4294967295), UINT64_C(4294967296), UINT64_C(2147483647)
	};
	char		tweak200[201];
	char		tweak256[257];
	const char *tweaks[5];
	const char *tweak_names[5] = {"'order'", "''", "'zamówienie_łódź'", "200 bytes", "256 bytes"};
	char		what[200];
	char		buf[FF1_MAXLEN + 1];
	EVP_CIPHER_CTX *ctx;

	printf("1..25\n");

	for (int i = 0; i < 9; i++)
	{
		const char *key = i < 3 ? k128 : i < 6 ? k192 : k256;
		const char *tweak = samples[i].tweak ? samples[i].tweak :
			samples[i].radix == 10 ? t10 : t11;
		int			bits = (int) strlen(key) * 4;

		ctx = aes_from_hex(key);
		ff1_string(ctx, samples[i].radix, tweak, samples[i].pt, false, buf);
		snprintf(what, sizeof(what), "NIST FF1 sample %d (AES-%d, radix %u): %s -> %s",
				 samples[i].no, bits, samples[i].radix, samples[i].pt, samples[i].ct);
		check(strcmp(buf, samples[i].ct) == 0, what);
		ff1_string(ctx, samples[i].radix, tweak, samples[i].ct, true, buf);
		snprintf(what, sizeof(what), "NIST FF1 sample %d decrypts back", samples[i].no);
		check(strcmp(buf, samples[i].pt) == 0, what);
		EVP_CIPHER_CTX_free(ctx);
	}

	/* radix 2 over 20 numerals: every input, every output once */
	{
		static unsigned char seen[1 << 20];
		uint32_t	distinct = 0;
		uint32_t	back_wrong = 0;

		ctx = aes_from_hex(k128);
		for (uint32_t x = 0; x < (1u << 20); x++)
		{
			uint16_t	in[20];
			uint16_t	out[20];
			uint16_t	again[20];
			uint32_t	y = 0;

			for (int i = 0; i < 20; i++)
				in[i] = (uint16_t) ((x >> (19 - i)) & 1);
			ff1_digits(ctx, 2, (const unsigned char *) "", 0, in, 20, false, out);
			for (int i = 0; i < 20; i++)
			{
				if (out[i] > 1)
					die("radix 2 output numeral out of the domain");
				y = (y << 1) | out[i];
			}
			if (!seen[y])
				distinct++;
			seen[y] = 1;
			ff1_digits(ctx, 2, (const unsigned char *) "", 0, out, 20, true, again);
			if (memcmp(again, in, sizeof(in)) != 0)
				back_wrong++;
		}
		check(distinct == (1u << 20),
			  "radix 2, 20 numerals: the 1,048,576 inputs give 1,048,576 different outputs, all in the domain");
		check(back_wrong == 0, "... and decrypt back");
		EVP_CIPHER_CTX_free(ctx);
	}

	/* src/leaf_ff1.c against the general FF1, under the key of the tests */
	memset(tweak200, 'x', 200);
	tweak200[200] = '\0';
	memset(tweak256, 'y', 256);
	tweak256[256] = '\0';
	tweaks[0] = "order";
	tweaks[1] = "";
	tweaks[2] = "zamówienie_łódź";
	tweaks[3] = tweak200;
	tweaks[4] = tweak256;
	ctx = aes_from_hex(key1);
	for (int t = 0; t < 5; t++)
	{
		LeafFF1Tweak tw;
		uint64_t	state = 25;
		int			wrong = 0;

		if (!leaf_ff1_63_tweak(ctx, tweaks[t], (int) strlen(tweaks[t]), &tw))
			die("leaf_ff1_63_tweak failed");
		for (int k = 0; k < 308; k++)
		{
			uint64_t	x = k < 8 ? edges[k] : next_id(&state);
			uint64_t	fast;

			if (!leaf_ff1_63(ctx, &tw, x, false, &fast))
				die("leaf_ff1_63 failed");
			if (fast != ff1_general_63(ctx, tweaks[t], x, false))
				wrong++;
			if (!leaf_ff1_63(ctx, &tw, x, true, &fast))
				die("leaf_ff1_63 failed");
			if (fast != ff1_general_63(ctx, tweaks[t], x, true))
				wrong++;
		}
		snprintf(what, sizeof(what),
				 "tweak %s: the 63-bit FF1 of leaf.so gives what the general FF1 gives (308 IDs, both directions)",
				 tweak_names[t]);
		check(wrong == 0, what);
	}
	EVP_CIPHER_CTX_free(ctx);

	if (tests_run != 25)
		die("the plan is 25 checks");
	if (tests_failed > 0)
		printf("# %d of %d FF1 checks failed\n", tests_failed, tests_run);
	return tests_failed > 0 ? 1 : 0;
}
