/*-------------------------------------------------------------------------
 *
 * leaf_ff1.c
 *	  FF1 of NIST SP 800-38G with AES, radix 2 over 63 numerals: the
 *	  permutation of public IDs (leaf_public_id.c holds the key and the
 *	  SQL functions).
 *
 * The numeral string is the ID's 63 bits, most significant first:
 * A = the top 31 bits, B = the low 32.  With radix 2, u = 31 and v = 32,
 * every number fits in 64 bits: b = 4 bytes for NUM(B), d = 8 bytes of
 * S, so NUM(S) is the first 8 bytes of R, and (NUM(A) + y) mod 2^m is a
 * masked 64-bit sum.  With the blocks of P and of the tweak chained once
 * per tweak (leaf_ff1_63_tweak), each round costs one AES block.
 *
 * This file includes no PostgreSQL header: test/ff1_vectors.c links it
 * beside a general FF1 written for the tests alone, runs NIST's sample
 * vectors through that one, and checks that this one agrees with it.
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "public_id/leaf_ff1.h"

EVP_CIPHER_CTX *
leaf_ff1_aes_new(const unsigned char *key, int keylen)
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

bool
leaf_ff1_aes_block(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in)
{
	int			outl;

	return EVP_EncryptUpdate(ctx, out, &outl, in, 16) == 1 && outl == 16;
}

bool
leaf_ff1_prf_blocks(EVP_CIPHER_CTX *ctx, unsigned char *y,
					const unsigned char *blocks, int nblocks)
{
	for (int j = 0; j < nblocks; j++)
	{
		for (int k = 0; k < 16; k++)
			y[k] ^= blocks[16 * j + k];
		if (!leaf_ff1_aes_block(ctx, y, y))
			return false;
	}
	return true;
}

void
leaf_ff1_p(unsigned char *p, uint32_t radix, int u, int n, int t)
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

/*
 * The blocks of P || Q that do not change from round to round, for one
 * tweak.  With radix 2, u = 31, v = 32: b = 4, so Q = T || [0]^((-t-5)
 * mod 16) || [i]^1 || [NUM(B)]^4, whose last block holds the round number
 * in byte 11 and NUM(B) in bytes 12-15; every earlier block is tweak and
 * zeros.
 */
bool
leaf_ff1_63_tweak(EVP_CIPHER_CTX *ctx, const char *tweak, int tlen,
				  LeafFF1Tweak *tw)
{
	unsigned char P[16];
	unsigned char Q[LEAF_FF1_MAXTLEN + 16 + 5];
	int			qlen;

	tw->valid = false;
	if (tlen < 0 || tlen > LEAF_FF1_MAXTLEN)
		return false;

	leaf_ff1_p(P, 2, LEAF_FF1_63_U, LEAF_FF1_63_N, tlen);
	qlen = tlen + leaf_ff1_pad16(tlen + 5) + 5;
	memset(Q, 0, qlen);
	memcpy(Q, tweak, tlen);

	memset(tw->chain, 0, 16);
	if (!leaf_ff1_prf_blocks(ctx, tw->chain, P, 1) ||
		!leaf_ff1_prf_blocks(ctx, tw->chain, Q, qlen / 16 - 1))
		return false;
	memcpy(tw->last, Q + qlen - 16, 16);
	memcpy(tw->tweak, tweak, tlen);
	tw->tlen = tlen;
	tw->valid = true;
	return true;
}

bool
leaf_ff1_63(EVP_CIPHER_CTX *ctx, const LeafFF1Tweak *tw, uint64_t x,
			bool decrypt, uint64_t *out)
{
	uint64_t	a = x >> 32;
	uint64_t	b = x & UINT64_C(0xffffffff);

	if (!tw->valid || x >= (UINT64_C(1) << LEAF_FF1_63_N))
		return false;
	for (int k = 0; k < LEAF_FF1_ROUNDS; k++)
	{
		int			i = decrypt ? LEAF_FF1_ROUNDS - 1 - k : k;
		uint64_t	mask = (i % 2 == 0) ? UINT64_C(0x7fffffff) : UINT64_C(0xffffffff);
		uint64_t	in = decrypt ? a : b;
		uint64_t	y;
		unsigned char blk[16];

		memcpy(blk, tw->last, 16);
		blk[11] = (unsigned char) i;
		blk[12] = (in >> 24) & 0xff;
		blk[13] = (in >> 16) & 0xff;
		blk[14] = (in >> 8) & 0xff;
		blk[15] = in & 0xff;
		for (int j = 0; j < 16; j++)
			blk[j] ^= tw->chain[j];
		if (!leaf_ff1_aes_block(ctx, blk, blk))
			return false;

		y = 0;
		for (int j = 0; j < 8; j++)
			y = (y << 8) | blk[j];

		if (!decrypt)
		{
			uint64_t	c = (a + y) & mask;

			a = b;
			b = c;
		}
		else
		{
			uint64_t	c = (b - y) & mask;

			b = a;
			a = c;
		}
	}
	*out = (a << 32) | b;
	return true;
}
