/*-------------------------------------------------------------------------
 *
 * leaf_public_id.c
 *	  Public IDs: the IDs shown to users, a keyed permutation of the
 *	  non-negative bigints (FF1 of NIST SP 800-38G), reversible in SQL.
 *
 * leaf_public_id(id, tweak) maps 0 .. 2^63 - 1 onto itself, one to one,
 * in an order chosen by a secret key, so that the numbers users see tell
 * neither how many rows there are nor which came first;
 * leaf_private_id(public_id, tweak) is its inverse.  The permutation is
 * FF1 format-preserving encryption with AES, radix 2, over 63 numerals:
 * the ID's 63 bits, most significant first.  The tweak is the UTF-8 bytes
 * of a text; each tweak (biz_tag) gives a permutation of its own.  Nothing
 * here is a cipher of leaf's own: any correct FF1 implementation, given the
 * same key, tweak and numeral string, gives the same public IDs.
 *
 * FF1 is written twice, from the same definitions in the spec:
 *	- leaf_ff1_digits(): any radix from 2 to 2^16, up to LEAF_FF1_MAXLEN
 *	  numerals, with the multi-precision NUM and STR of the spec.  It
 *	  serves the test entry point leaf_ff1_test(), which no extension
 *	  script creates (the tests create it to run NIST's sample vectors);
 *	- leaf_ff1_id(): radix 2 and 63 numerals, where every number fits in
 *	  64 bits (b = 4 bytes for NUM(B), d = 8 bytes of S) and, with the
 *	  blocks of P and of the tweak chained once per tweak, each round costs
 *	  one AES block.
 * The tests check that both agree.
 *
 * The key: leaf.public_id_key_file names a file owned by the server's OS
 * user, with no access for group or others, holding 32, 48 or 64 hex
 * digits (AES-128, -192, -256), as PostgreSQL treats ssl_key_file.  Each
 * backend reads the file at its first call, and again at the first call
 * after a configuration reload (the setting's assign hook marks the key
 * stale); it builds its AES context only when the key read differs from
 * the one it holds.  The key never appears in a setting, a message or the
 * log, and the buffers that held it are wiped.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "leaf.h"

/* FF1 rounds (fixed by the spec). */
#define LEAF_FF1_ROUNDS			10

/* Longest tweak, in bytes: FF1's maxTlen, which the implementation picks. */
#define LEAF_FF1_MAXTLEN		256

/* Most numerals, and the largest radix, the general FF1 takes. */
#define LEAF_FF1_MAXLEN			256
#define LEAF_FF1_MAXRADIX		65536

/*
 * Smallest domain the general FF1 accepts: radix^n >= 1,000,000, the bound
 * of SP 800-38G Rev. 1 (the 2016 text asked for 100).  2^63 is far above.
 */
#define LEAF_FF1_MINDOMAIN		1000000

/* Public IDs: 63 numerals of radix 2, u = 31, v = 32. */
#define LEAF_PID_U				31
#define LEAF_PID_N				63

/* Length of a public ID in base 62: 62^11 > 2^63 > 62^10. */
#define LEAF_PID_TEXT_LEN		11

/* Tweaks whose chained blocks a backend keeps. */
#define LEAF_PID_TWEAKS			4

/* Limbs of the multi-precision numbers: radix^v < 2^2048, d <= 260 bytes. */
#define LEAF_BN_LIMBS			80

/* the setting */
static char *leaf_public_id_key_file = NULL;

/*
 * Per-backend key state.  pid_ctx is NULL when no key is configured (or
 * it could not be read); pid_key keeps the key in force, only to tell
 * whether the file still holds the same one after a reload.
 */
static EVP_CIPHER_CTX *pid_ctx = NULL;
static unsigned char pid_key[32];
static int	pid_keylen = 0;
static bool pid_stale = true;	/* read the key file at the next call */
static bool pid_exit_registered = false;

/*
 * The part of FF1's PRF input that depends only on the key and the tweak:
 * P || Q is P, then the blocks of Q made of the tweak and zeros, then a
 * last block holding the end of the tweak, zeros, the round number and
 * NUM(B).  "chain" is the CBC-MAC state after every block but that last
 * one; "last" is the last block with round number and NUM(B) zero.
 */
typedef struct LeafPidTweak
{
	bool		valid;
	int			tlen;
	unsigned char tweak[LEAF_FF1_MAXTLEN];
	unsigned char chain[16];
	unsigned char last[16];
} LeafPidTweak;

static LeafPidTweak pid_tweaks[LEAF_PID_TWEAKS];
static int	pid_tweak_next = 0;

/* The key of the test entry point, kept between its calls. */
static EVP_CIPHER_CTX *test_ctx = NULL;
static unsigned char test_key[32];
static int	test_keylen = 0;

static const char leaf_b62_digits[] =
"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

PG_FUNCTION_INFO_V1(leaf_public_id);
PG_FUNCTION_INFO_V1(leaf_private_id);
PG_FUNCTION_INFO_V1(leaf_public_id_text);
PG_FUNCTION_INFO_V1(leaf_private_id_text);
PG_FUNCTION_INFO_V1(leaf_ff1_test);


/* ---------------------------------------------------------------- AES */

/*
 * An AES-ECB context (no padding) for a 16-, 24- or 32-byte key, or NULL
 * if OpenSSL could not make one.
 */
static EVP_CIPHER_CTX *
leaf_aes_new(const unsigned char *key, int keylen)
{
	EVP_CIPHER_CTX *ctx;
	EVP_CIPHER *cipher;
	const char *name;
	bool		ok;

	name = keylen == 16 ? "AES-128-ECB" : keylen == 24 ? "AES-192-ECB" : "AES-256-ECB";
	/* an explicitly fetched cipher spares OpenSSL a lookup per block */
	cipher = EVP_CIPHER_fetch(NULL, name, NULL);
	if (cipher == NULL)
		return NULL;
	ctx = EVP_CIPHER_CTX_new();
	ok = ctx != NULL &&
		EVP_EncryptInit_ex(ctx, cipher, NULL, key, NULL) == 1 &&
		EVP_CIPHER_CTX_set_padding(ctx, 0) == 1;
	/* the context holds its own reference to the cipher */
	EVP_CIPHER_free(cipher);
	if (!ok)
	{
		EVP_CIPHER_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static void
leaf_aes_error(void)
{
	unsigned long e = ERR_get_error();

	ERR_clear_error();
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("could not set up AES encryption: %s",
					e ? ERR_reason_error_string(e) : "no reason given")));
}

/* CIPH_K: out = AES(in), one block. */
static inline void
leaf_aes_block(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in)
{
	int			outl;

	if (unlikely(EVP_EncryptUpdate(ctx, out, &outl, in, 16) != 1 || outl != 16))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("AES encryption failed")));
}

/* The CBC-MAC chain of PRF: y = CIPH(y xor block), for each block. */
static void
leaf_prf_blocks(EVP_CIPHER_CTX *ctx, unsigned char *y,
				const unsigned char *blocks, int nblocks)
{
	for (int j = 0; j < nblocks; j++)
	{
		for (int k = 0; k < 16; k++)
			y[k] ^= blocks[16 * j + k];
		leaf_aes_block(ctx, y, y);
	}
}

/*
 * P = [1]^1 || [2]^1 || [1]^1 || [radix]^3 || [10]^1 || [u mod 256]^1 ||
 * [n]^4 || [t]^4
 */
static void
leaf_ff1_p(unsigned char *p, uint32 radix, int u, int n, int t)
{
	p[0] = 1;
	p[1] = 2;
	p[2] = 1;
	p[3] = (radix >> 16) & 0xff;
	p[4] = (radix >> 8) & 0xff;
	p[5] = radix & 0xff;
	p[6] = LEAF_FF1_ROUNDS;
	p[7] = u & 0xff;
	p[8] = (n >> 24) & 0xff;
	p[9] = (n >> 16) & 0xff;
	p[10] = (n >> 8) & 0xff;
	p[11] = n & 0xff;
	p[12] = (t >> 24) & 0xff;
	p[13] = (t >> 16) & 0xff;
	p[14] = (t >> 8) & 0xff;
	p[15] = t & 0xff;
}

/* (-x) mod 16, for x >= 0 */
static inline int
leaf_pad16(int x)
{
	return (16 - x % 16) % 16;
}

/* ------------------------------------------- multi-precision numbers */

/* A non-negative number: n limbs of 32 bits, least significant first. */
typedef struct LeafBigNum
{
	int			n;
	uint32		limb[LEAF_BN_LIMBS];
} LeafBigNum;

static void
bn_set_small(LeafBigNum *a, uint32 v)
{
	a->n = v ? 1 : 0;
	a->limb[0] = v;
}

/* a = a * mul + add */
static void
bn_mul_add_small(LeafBigNum *a, uint32 mul, uint32 add)
{
	uint64		carry = add;

	for (int i = 0; i < a->n; i++)
	{
		uint64		cur = (uint64) a->limb[i] * mul + carry;

		a->limb[i] = (uint32) cur;
		carry = cur >> 32;
	}
	if (carry)
	{
		if (a->n >= LEAF_BN_LIMBS)
			elog(ERROR, "FF1 number too large");
		a->limb[a->n++] = (uint32) carry;
	}
}

/* a = a / div; returns a mod div */
static uint32
bn_divmod_small(LeafBigNum *a, uint32 div)
{
	uint64		rem = 0;

	for (int i = a->n - 1; i >= 0; i--)
	{
		uint64		cur = (rem << 32) | a->limb[i];

		a->limb[i] = (uint32) (cur / div);
		rem = cur % div;
	}
	while (a->n > 0 && a->limb[a->n - 1] == 0)
		a->n--;
	return (uint32) rem;
}

/* a = a - 1, for a > 0 */
static void
bn_sub_one(LeafBigNum *a)
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
bn_bits(const LeafBigNum *a)
{
	int			bits;
	uint32		top;

	if (a->n == 0)
		return 0;
	bits = 32 * (a->n - 1);
	for (top = a->limb[a->n - 1]; top; top >>= 1)
		bits++;
	return bits;
}

/* NUM(S): the number of a byte string, most significant byte first */
static void
bn_from_bytes(LeafBigNum *a, const unsigned char *s, int len)
{
	bn_set_small(a, 0);
	for (int i = 0; i < len; i++)
		bn_mul_add_small(a, 256, s[i]);
}

/* NUM_radix(X): the number of a numeral string, most significant first */
static void
bn_from_numerals(LeafBigNum *a, const uint16 *x, int len, uint32 radix)
{
	bn_set_small(a, 0);
	for (int i = 0; i < len; i++)
		bn_mul_add_small(a, radix, x[i]);
}

/* [a]^len: a as len bytes, most significant first; a < 256^len */
static void
bn_to_bytes(const LeafBigNum *a, unsigned char *s, int len)
{
	for (int i = 0; i < len; i++)
	{
		int			byte = i;	/* counted from the least significant */
		int			limb = byte / 4;

		s[len - 1 - i] = limb < a->n ? (a->limb[limb] >> (8 * (byte % 4))) & 0xff : 0;
	}
	Assert(bn_bits(a) <= 8 * len);
}

/* ---------------------------------------------------- FF1, any radix */

/*
 * FF1.Encrypt, or FF1.Decrypt if "decrypt" (SP 800-38G, Algorithms 7 and
 * 8): X of n numerals of the given radix into out (n numerals), under the
 * key of ctx and the tweak T of t bytes.  The caller has checked the
 * domain: 2 <= radix <= 2^16, 2 <= n <= LEAF_FF1_MAXLEN, every numeral
 * below radix, radix^n >= LEAF_FF1_MINDOMAIN, t <= LEAF_FF1_MAXTLEN.
 */
static void
leaf_ff1_digits(EVP_CIPHER_CTX *ctx, uint32 radix,
				const unsigned char *T, int t,
				const uint16 *X, int n, bool decrypt, uint16 *out)
{
	int			u = n / 2;
	int			v = n - u;
	uint16		A[LEAF_FF1_MAXLEN];
	uint16		B[LEAF_FF1_MAXLEN];
	uint16		C[LEAF_FF1_MAXLEN];
	uint16		ydig[LEAF_FF1_MAXLEN];
	int			lenA = u;
	int			lenB = v;
	int			b;
	int			d;
	int			pad;
	int			qlen;
	unsigned char P[16];
	unsigned char *Q;
	unsigned char *S;
	LeafBigNum	bn;

	Assert(radix >= 2 && radix <= LEAF_FF1_MAXRADIX);
	Assert(n >= 2 && n <= LEAF_FF1_MAXLEN && t >= 0 && t <= LEAF_FF1_MAXTLEN);

	/* 2. A = X[1..u]; B = X[u + 1..n] */
	memcpy(A, X, u * sizeof(uint16));
	memcpy(B, X + u, v * sizeof(uint16));

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
	pad = leaf_pad16(t + b + 1);
	qlen = t + pad + 1 + b;
	Q = palloc0(qlen);
	memcpy(Q, T, t);
	S = palloc(16 * ((d + 15) / 16));

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
		leaf_prf_blocks(ctx, R, P, 1);
		leaf_prf_blocks(ctx, R, Q, qlen / 16);

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
			leaf_aes_block(ctx, S + 16 * j, blk);
		}

		/*
		 * iv. y = NUM(S).  Only y mod radix^m matters below: its m lowest
		 * numerals in that radix.
		 */
		bn_from_bytes(&bn, S, d);
		for (int j = m - 1; j >= 0; j--)
			ydig[j] = (uint16) bn_divmod_small(&bn, radix);

		if (!decrypt)
		{
			/* vi-vii. C = STR^m_radix((NUM_radix(A) + y) mod radix^m) */
			uint32		carry = 0;

			Assert(lenA == m);
			for (int j = m - 1; j >= 0; j--)
			{
				uint32		s = (uint32) A[j] + ydig[j] + carry;

				C[j] = (uint16) (s % radix);
				carry = s / radix;
			}
			/* viii-ix. A = B; B = C */
			memcpy(A, B, lenB * sizeof(uint16));
			lenA = lenB;
			memcpy(B, C, m * sizeof(uint16));
			lenB = m;
		}
		else
		{
			/* C = STR^m_radix((NUM_radix(B) - y) mod radix^m) */
			int32		borrow = 0;

			Assert(lenB == m);
			for (int j = m - 1; j >= 0; j--)
			{
				int32		s = (int32) B[j] - ydig[j] - borrow;

				borrow = s < 0;
				if (s < 0)
					s += radix;
				C[j] = (uint16) s;
			}
			/* B = A; A = C */
			memcpy(B, A, lenA * sizeof(uint16));
			lenB = lenA;
			memcpy(A, C, m * sizeof(uint16));
			lenA = m;
		}
	}

	/* 7. A || B */
	Assert(lenA + lenB == n);
	memcpy(out, A, lenA * sizeof(uint16));
	memcpy(out + lenA, B, lenB * sizeof(uint16));
	pfree(Q);
	pfree(S);
}

/* ------------------------------------- FF1, radix 2 over 63 numerals */

/*
 * The blocks of P || Q that do not change from round to round, for one
 * tweak.  With radix 2, u = 31, v = 32: b = 4, so Q = T || [0]^((-t-5)
 * mod 16) || [i]^1 || [NUM(B)]^4, whose last block holds the round number
 * in byte 11 and NUM(B) in bytes 12-15; every earlier block is tweak and
 * zeros.
 */
static const LeafPidTweak *
leaf_pid_tweak(EVP_CIPHER_CTX *ctx, const char *tweak, int tlen)
{
	LeafPidTweak *e;
	unsigned char P[16];
	unsigned char Q[LEAF_FF1_MAXTLEN + 16 + 5];
	int			qlen;

	for (int i = 0; i < LEAF_PID_TWEAKS; i++)
	{
		e = &pid_tweaks[i];
		if (e->valid && e->tlen == tlen && memcmp(e->tweak, tweak, tlen) == 0)
			return e;
	}

	e = &pid_tweaks[pid_tweak_next];
	pid_tweak_next = (pid_tweak_next + 1) % LEAF_PID_TWEAKS;
	e->valid = false;

	leaf_ff1_p(P, 2, LEAF_PID_U, LEAF_PID_N, tlen);
	qlen = tlen + leaf_pad16(tlen + 5) + 5;
	memset(Q, 0, qlen);
	memcpy(Q, tweak, tlen);

	memset(e->chain, 0, 16);
	leaf_prf_blocks(ctx, e->chain, P, 1);
	leaf_prf_blocks(ctx, e->chain, Q, qlen / 16 - 1);
	memcpy(e->last, Q + qlen - 16, 16);
	memcpy(e->tweak, tweak, tlen);
	e->tlen = tlen;
	e->valid = true;
	return e;
}

/*
 * FF1 with radix 2 over the 63 bits of x, most significant first:
 * A = the top 31 bits, B = the low 32.  NUM(S) of d = 8 bytes is the first
 * 8 bytes of R, and (NUM(A) + y) mod 2^m is a masked 64-bit sum.
 */
static uint64
leaf_ff1_id(EVP_CIPHER_CTX *ctx, const LeafPidTweak *tw, uint64 x, bool decrypt)
{
	uint64		a = x >> 32;
	uint64		b = x & UINT64CONST(0xffffffff);

	Assert(x < (UINT64CONST(1) << LEAF_PID_N));
	for (int k = 0; k < LEAF_FF1_ROUNDS; k++)
	{
		int			i = decrypt ? LEAF_FF1_ROUNDS - 1 - k : k;
		uint64		mask = (i % 2 == 0) ? UINT64CONST(0x7fffffff) : UINT64CONST(0xffffffff);
		uint64		in = decrypt ? a : b;
		uint64		y;
		unsigned char blk[16];

		memcpy(blk, tw->last, 16);
		blk[11] = (unsigned char) i;
		blk[12] = (in >> 24) & 0xff;
		blk[13] = (in >> 16) & 0xff;
		blk[14] = (in >> 8) & 0xff;
		blk[15] = in & 0xff;
		for (int j = 0; j < 16; j++)
			blk[j] ^= tw->chain[j];
		leaf_aes_block(ctx, blk, blk);

		y = 0;
		for (int j = 0; j < 8; j++)
			y = (y << 8) | blk[j];

		if (!decrypt)
		{
			uint64		c = (a + y) & mask;

			a = b;
			b = c;
		}
		else
		{
			uint64		c = (b - y) & mask;

			b = a;
			a = c;
		}
	}
	return (a << 32) | b;
}

/* ------------------------------------------------------------ the key */

static void
leaf_public_id_key_file_assign(const char *newval, void *extra)
{
	/* applied at the next call, in the backend's own time */
	pid_stale = true;
}

void
leaf_public_id_init(void)
{
	DefineCustomStringVariable("leaf.public_id_key_file",
							   "Sets the file holding the key of public IDs (leaf_public_id).",
							   "The file must be owned by the server's user, with no access for group "
							   "or others, and hold 32, 48 or 64 hex digits (AES-128, -192, -256).",
							   &leaf_public_id_key_file,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, leaf_public_id_key_file_assign, NULL);
}

/* Drop the key in force and the tweak blocks made with it. */
static void
leaf_public_id_forget_key(void)
{
	if (pid_ctx != NULL)
	{
		/* frees and wipes the key schedule */
		EVP_CIPHER_CTX_free(pid_ctx);
		pid_ctx = NULL;
	}
	OPENSSL_cleanse(pid_key, sizeof(pid_key));
	pid_keylen = 0;
	OPENSSL_cleanse(pid_tweaks, sizeof(pid_tweaks));
	pid_tweak_next = 0;
}

static void
leaf_public_id_exit(int code, Datum arg)
{
	leaf_public_id_forget_key();
	if (test_ctx != NULL)
		EVP_CIPHER_CTX_free(test_ctx);
	test_ctx = NULL;
	OPENSSL_cleanse(test_key, sizeof(test_key));
}

static int
leaf_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Decode len hex digits into len / 2 bytes; false if one is not a hex
 * digit.  Says nothing about which.
 */
static bool
leaf_hex_decode(const char *hex, int len, unsigned char *out)
{
	bool		ok = true;

	for (int i = 0; i + 1 < len; i += 2)
	{
		int			hi = leaf_hexval(hex[i]);
		int			lo = leaf_hexval(hex[i + 1]);

		if (hi < 0 || lo < 0)
			ok = false;
		out[i / 2] = (unsigned char) (((hi & 0xf) << 4) | (lo & 0xf));
	}
	return ok && len % 2 == 0;
}

typedef enum LeafKeyFileStatus
{
	LEAF_KEYFILE_OK,
	LEAF_KEYFILE_MISSING,
	LEAF_KEYFILE_OPEN,			/* see saved_errno */
	LEAF_KEYFILE_NOT_REGULAR,
	LEAF_KEYFILE_OWNER,
	LEAF_KEYFILE_MODE,
	LEAF_KEYFILE_LENGTH,		/* see nchars */
	LEAF_KEYFILE_NOT_HEX
} LeafKeyFileStatus;

/*
 * Read the key file: its owner and mode, then its content, 32, 48 or 64
 * hex digits and at most one trailing newline.  Nothing here raises an
 * error, so the buffer is always wiped.
 */
static LeafKeyFileStatus
leaf_read_key_file(const char *path, unsigned char *key, int *keylen,
				   int *saved_errno, int *nchars)
{
	char		buf[64 + 2];
	struct stat st;
	int			fd;
	int			len = 0;
	LeafKeyFileStatus status = LEAF_KEYFILE_OK;

	/* O_NONBLOCK: a FIFO must not hang the backend; it is refused below */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | PG_BINARY, 0);
	if (fd < 0)
	{
		*saved_errno = errno;
		return errno == ENOENT ? LEAF_KEYFILE_MISSING : LEAF_KEYFILE_OPEN;
	}
	if (fstat(fd, &st) < 0)
	{
		*saved_errno = errno;
		close(fd);
		return LEAF_KEYFILE_OPEN;
	}
	if (!S_ISREG(st.st_mode))
		status = LEAF_KEYFILE_NOT_REGULAR;
	else if (st.st_uid != geteuid())
		status = LEAF_KEYFILE_OWNER;
	else if (st.st_mode & (S_IRWXG | S_IRWXO))
		status = LEAF_KEYFILE_MODE;
	else
	{
		/* one byte more than the longest valid content, to tell it apart */
		while (len < (int) sizeof(buf))
		{
			ssize_t		r = read(fd, buf + len, sizeof(buf) - len);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
			{
				*saved_errno = errno;
				status = LEAF_KEYFILE_OPEN;
				break;
			}
			if (r == 0)
				break;
			len += r;
		}
	}
	close(fd);

	if (status == LEAF_KEYFILE_OK)
	{
		if (len == (int) sizeof(buf))
			*nchars = (int) Min(st.st_size, INT_MAX);	/* too long anyway */
		else if (len > 0 && buf[len - 1] == '\n')
			len--;
		if (len < (int) sizeof(buf))
			*nchars = len;
		if (len != 32 && len != 48 && len != 64)
			status = LEAF_KEYFILE_LENGTH;
		else if (!leaf_hex_decode(buf, len, key))
			status = LEAF_KEYFILE_NOT_HEX;
		else
			*keylen = len / 2;
	}
	explicit_bzero(buf, sizeof(buf));
	return status;
}

/*
 * Raise the error of a key file that cannot be used.  Neither the file's
 * content nor, for other roles than superusers, its path is shown; the
 * server log gets the path.
 */
static void
leaf_key_file_error(LeafKeyFileStatus status, int saved_errno, int nchars)
{
	const char *path = leaf_public_id_key_file;
	bool		show_path = superuser();

	errno = saved_errno;
	switch (status)
	{
		case LEAF_KEYFILE_MISSING:
			ereport(ERROR,
					(errcode(ERRCODE_LEAF_PUBLIC_ID_KEY_INVALID),
					 errmsg("public ID key file does not exist"),
					 show_path ? errdetail("The file is \"%s\".", path) : 0,
					 errdetail_log("The file is \"%s\".", path),
					 errhint("Check \"leaf.public_id_key_file\".")));
			break;
		case LEAF_KEYFILE_OPEN:
			ereport(ERROR,
					(errcode(ERRCODE_LEAF_PUBLIC_ID_KEY_INVALID),
					 errmsg("could not read public ID key file: %m"),
					 show_path ? errdetail("The file is \"%s\".", path) : 0,
					 errdetail_log("The file is \"%s\".", path)));
			break;
		case LEAF_KEYFILE_NOT_REGULAR:
			ereport(ERROR,
					(errcode(ERRCODE_LEAF_PUBLIC_ID_KEY_INVALID),
					 errmsg("public ID key file is not a regular file"),
					 show_path ? errdetail("The file is \"%s\".", path) : 0,
					 errdetail_log("The file is \"%s\".", path)));
			break;
		case LEAF_KEYFILE_OWNER:
			ereport(ERROR,
					(errcode(ERRCODE_LEAF_PUBLIC_ID_KEY_INVALID),
					 errmsg("public ID key file is not owned by the database system user"),
					 show_path ? errdetail("The file is \"%s\".", path) : 0,
					 errdetail_log("The file is \"%s\".", path),
					 errhint("The file must be owned by the operating system user that runs the server.")));
			break;
		case LEAF_KEYFILE_MODE:
			ereport(ERROR,
					(errcode(ERRCODE_LEAF_PUBLIC_ID_KEY_INVALID),
					 errmsg("public ID key file has group or world access"),
					 show_path ? errdetail("The file is \"%s\".", path) : 0,
					 errdetail_log("The file is \"%s\".", path),
					 errhint("Set its mode to u=rw (0600) or less.")));
			break;
		case LEAF_KEYFILE_LENGTH:
			ereport(ERROR,
					(errcode(ERRCODE_LEAF_PUBLIC_ID_KEY_INVALID),
					 errmsg("public ID key file does not hold a key of a valid length"),
					 show_path ?
					 errdetail("The file is \"%s\". It holds %d characters before an optional newline.",
							   path, nchars) :
					 errdetail("It holds %d characters before an optional newline.", nchars),
					 errdetail_log("The file is \"%s\". It holds %d characters before an optional newline.",
								   path, nchars),
					 errhint("A key is 32, 48 or 64 hex digits (AES-128, -192, -256).")));
			break;
		case LEAF_KEYFILE_NOT_HEX:
			ereport(ERROR,
					(errcode(ERRCODE_LEAF_PUBLIC_ID_KEY_INVALID),
					 errmsg("public ID key file holds a character that is not a hex digit"),
					 show_path ? errdetail("The file is \"%s\".", path) : 0,
					 errdetail_log("The file is \"%s\".", path),
					 errhint("A key is 32, 48 or 64 hex digits (AES-128, -192, -256), with an optional newline.")));
			break;
		case LEAF_KEYFILE_OK:
			break;
	}
}

/*
 * (Re)read the key file after a reload or at the first call.  The AES
 * context is rebuilt only if the key changed.  A file that cannot be used
 * drops the key in force (calls fail rather than go on with a key the
 * configuration no longer names) and is read again at the next call.
 */
static void
leaf_public_id_load_key(void)
{
	unsigned char newkey[32];
	int			newlen = 0;
	int			saved_errno = 0;
	int			nchars = 0;
	LeafKeyFileStatus status;

	if (!pid_exit_registered)
	{
		on_proc_exit(leaf_public_id_exit, (Datum) 0);
		pid_exit_registered = true;
	}

	if (leaf_public_id_key_file == NULL || leaf_public_id_key_file[0] == '\0')
	{
		leaf_public_id_forget_key();
		pid_stale = false;
		return;
	}

	status = leaf_read_key_file(leaf_public_id_key_file, newkey, &newlen,
								&saved_errno, &nchars);
	if (status != LEAF_KEYFILE_OK)
	{
		OPENSSL_cleanse(newkey, sizeof(newkey));
		leaf_public_id_forget_key();
		leaf_key_file_error(status, saved_errno, nchars);
	}

	if (pid_ctx == NULL || newlen != pid_keylen ||
		CRYPTO_memcmp(newkey, pid_key, newlen) != 0)
	{
		leaf_public_id_forget_key();
		pid_ctx = leaf_aes_new(newkey, newlen);
		if (pid_ctx == NULL)
		{
			OPENSSL_cleanse(newkey, sizeof(newkey));
			leaf_aes_error();
		}
		memcpy(pid_key, newkey, newlen);
		pid_keylen = newlen;
		elog(DEBUG1, "leaf loaded the public ID key (AES-%d)", 8 * newlen);
	}
	OPENSSL_cleanse(newkey, sizeof(newkey));
	pid_stale = false;
}

/* The AES context of the key in force; an error if there is none. */
static EVP_CIPHER_CTX *
leaf_public_id_ctx(void)
{
	if (unlikely(pid_stale))
		leaf_public_id_load_key();
	if (unlikely(pid_ctx == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_PUBLIC_ID_NO_KEY),
				 errmsg("no key is configured for public IDs"),
				 errhint("Set \"leaf.public_id_key_file\" to a file holding 32, 48 or 64 hex digits, "
						 "owned by the server's user with mode 0600, and reload the configuration.")));
	return pid_ctx;
}

/* ------------------------------------------------------ SQL functions */

/* The public ID of x, or (decrypt) the ID of the public ID x. */
static int64
leaf_public_id_apply(int64 x, text *tweak, bool decrypt)
{
	const char *t = VARDATA_ANY(tweak);
	int			tlen = VARSIZE_ANY_EXHDR(tweak);
	const char *t8;
	EVP_CIPHER_CTX *ctx;
	const LeafPidTweak *tw;

	leaf_require_preload();
	if (x < 0)
	{
		if (decrypt)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("public ID " INT64_FORMAT " is negative", x),
					 errdetail("Public IDs map the bigints from 0 to 9223372036854775807 onto themselves.")));
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("ID " INT64_FORMAT " is negative", x),
				 errdetail("Public IDs map the bigints from 0 to 9223372036854775807 onto themselves.")));
	}

	/* the tweak is the UTF-8 bytes of the text, whatever the encoding */
	t8 = pg_server_to_any(t, tlen, PG_UTF8);
	if (t8 != t)
		tlen = strlen(t8);
	if (tlen > LEAF_FF1_MAXTLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tweak of public IDs is too long"),
				 errdetail("It has %d bytes in UTF-8; the limit is %d.", tlen, LEAF_FF1_MAXTLEN)));

	ctx = leaf_public_id_ctx();
	tw = leaf_pid_tweak(ctx, t8, tlen);
	return (int64) leaf_ff1_id(ctx, tw, (uint64) x, decrypt);
}

Datum
leaf_public_id(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(leaf_public_id_apply(PG_GETARG_INT64(0),
										 PG_GETARG_TEXT_PP(1), false));
}

Datum
leaf_private_id(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(leaf_public_id_apply(PG_GETARG_INT64(0),
										 PG_GETARG_TEXT_PP(1), true));
}

/* The public ID in base 62 (0-9, A-Z, a-z), always 11 characters. */
Datum
leaf_public_id_text(PG_FUNCTION_ARGS)
{
	uint64		pid = (uint64) leaf_public_id_apply(PG_GETARG_INT64(0),
													PG_GETARG_TEXT_PP(1), false);
	char		buf[LEAF_PID_TEXT_LEN];

	for (int i = LEAF_PID_TEXT_LEN - 1; i >= 0; i--)
	{
		buf[i] = leaf_b62_digits[pid % 62];
		pid /= 62;
	}
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf, LEAF_PID_TEXT_LEN));
}

static int
leaf_b62_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'Z')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 36;
	return -1;
}

Datum
leaf_private_id_text(PG_FUNCTION_ARGS)
{
	text	   *s = PG_GETARG_TEXT_PP(0);
	const char *p = VARDATA_ANY(s);
	int			len = VARSIZE_ANY_EXHDR(s);
	uint64		v = 0;
	const char *problem = NULL;

	if (len != LEAF_PID_TEXT_LEN)
		problem = "A public ID is 11 characters long.";
	for (int i = 0; i < len && problem == NULL; i++)
	{
		int			dv = leaf_b62_value(p[i]);

		if (dv < 0)
			problem = "A public ID is made of the characters 0-9, A-Z and a-z.";
		else if (v > (uint64) (PG_INT64_MAX - dv) / 62)
			problem = "It is above the largest public ID.";
		else
			v = v * 62 + dv;
	}
	if (problem != NULL)
	{
		if (len <= 64)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid public ID: \"%s\"", text_to_cstring(s)),
					 errdetail("%s", problem)));
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid public ID of %d bytes", len),
					 errdetail("%s", problem)));
	}
	PG_RETURN_INT64(leaf_public_id_apply((int64) v, PG_GETARG_TEXT_PP(1), true));
}

/*
 * leaf_ff1_test(radix int, key_hex text, tweak_hex text, numerals text,
 * decrypt bool) RETURNS text
 *
 * FF1 of any radix up to 36 (numerals 0-9 then a-z) under a key given in
 * hex, for the tests: no extension script creates it.  It never sees the
 * key of leaf.public_id_key_file.
 */
Datum
leaf_ff1_test(PG_FUNCTION_ARGS)
{
	int32		radix = PG_GETARG_INT32(0);
	char	   *keyhex = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *tweakhex = text_to_cstring(PG_GETARG_TEXT_PP(2));
	char	   *numerals = text_to_cstring(PG_GETARG_TEXT_PP(3));
	bool		decrypt = PG_GETARG_BOOL(4);
	int			klen = strlen(keyhex);
	int			tlen = strlen(tweakhex);
	int			n = strlen(numerals);
	unsigned char key[32];
	unsigned char tweak[LEAF_FF1_MAXTLEN];
	uint16		x[LEAF_FF1_MAXLEN];
	uint16		y[LEAF_FF1_MAXLEN];
	double		domain;
	char	   *result;

	if (radix < 2 || radix > 36)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("radix must be between 2 and 36")));
	if ((klen != 32 && klen != 48 && klen != 64) ||
		!leaf_hex_decode(keyhex, klen, key))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key must be 32, 48 or 64 hex digits")));
	if (tlen > 2 * LEAF_FF1_MAXTLEN || !leaf_hex_decode(tweakhex, tlen, tweak))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tweak must be at most %d bytes in hex", LEAF_FF1_MAXTLEN)));
	if (n < 2 || n > LEAF_FF1_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("numeral string must have 2 to %d numerals", LEAF_FF1_MAXLEN)));
	domain = pow((double) radix, (double) n);
	if (domain < LEAF_FF1_MINDOMAIN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("FF1 domain too small: radix^n must be at least %d", LEAF_FF1_MINDOMAIN)));
	for (int i = 0; i < n; i++)
	{
		int			c = numerals[i];
		int			dv = (c >= '0' && c <= '9') ? c - '0' :
			(c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;

		if (dv >= radix)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%c\" is not a numeral of radix %d", c, radix)));
		x[i] = (uint16) dv;
	}

	if (test_ctx == NULL || test_keylen != klen / 2 ||
		memcmp(test_key, key, klen / 2) != 0)
	{
		if (!pid_exit_registered)
		{
			on_proc_exit(leaf_public_id_exit, (Datum) 0);
			pid_exit_registered = true;
		}
		if (test_ctx != NULL)
			EVP_CIPHER_CTX_free(test_ctx);
		test_ctx = leaf_aes_new(key, klen / 2);
		if (test_ctx == NULL)
			leaf_aes_error();
		memcpy(test_key, key, klen / 2);
		test_keylen = klen / 2;
	}

	leaf_ff1_digits(test_ctx, radix, tweak, tlen / 2, x, n, decrypt, y);

	result = palloc(n + 1);
	for (int i = 0; i < n; i++)
		result[i] = y[i] < 10 ? '0' + y[i] : 'a' + y[i] - 10;
	result[n] = '\0';
	PG_RETURN_TEXT_P(cstring_to_text(result));
}
