/*-------------------------------------------------------------------------
 *
 * leaf_ff1.h
 *	  FF1 (NIST SP 800-38G) with AES, radix 2 over 63 numerals: the
 *	  permutation behind public IDs.
 *
 * Plain C and OpenSSL, with no PostgreSQL header, so that the test
 * program test/ff1_vectors.c builds and checks the very code leaf.so
 * runs.  Nothing here raises an error: a function that can fail returns
 * false, and the caller reports it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_FF1_H
#define LEAF_FF1_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/evp.h>

/* FF1 rounds (fixed by the spec). */
#define LEAF_FF1_ROUNDS			10

/* Longest tweak, in bytes: FF1's maxTlen, which the implementation picks. */
#define LEAF_FF1_MAXTLEN		256

/* Public IDs: 63 numerals of radix 2, u = 31, v = 32. */
#define LEAF_FF1_63_U			31
#define LEAF_FF1_63_N			63

/*
 * The part of FF1's PRF input that depends only on the key and the tweak:
 * P || Q is P, then the blocks of Q made of the tweak and zeros, then a
 * last block holding the end of the tweak, zeros, the round number and
 * NUM(B).  "chain" is the CBC-MAC state after every block but that last
 * one; "last" is the last block with round number and NUM(B) zero.
 */
typedef struct LeafFF1Tweak
{
	bool		valid;
	int			tlen;
	unsigned char tweak[LEAF_FF1_MAXTLEN];
	unsigned char chain[16];
	unsigned char last[16];
} LeafFF1Tweak;

/* AES-ECB without padding for a 16-, 24- or 32-byte key; NULL on failure. */
extern EVP_CIPHER_CTX *leaf_ff1_aes_new(const unsigned char *key, int keylen);

/* CIPH_K: out = AES(in), one block. */
extern bool leaf_ff1_aes_block(EVP_CIPHER_CTX *ctx, unsigned char *out,
							   const unsigned char *in);

/* The CBC-MAC chain of PRF: y = CIPH(y xor block), for each block. */
extern bool leaf_ff1_prf_blocks(EVP_CIPHER_CTX *ctx, unsigned char *y,
								const unsigned char *blocks, int nblocks);

/* P = [1]^1 || [2]^1 || [1]^1 || [radix]^3 || [10]^1 || [u mod 256]^1 || [n]^4 || [t]^4 */
extern void leaf_ff1_p(unsigned char *p, uint32_t radix, int u, int n, int t);

/* (-x) mod 16, for x >= 0 */
static inline int
leaf_ff1_pad16(int x)
{
	return (16 - x % 16) % 16;
}

/* The blocks of P || Q of one tweak (tlen <= LEAF_FF1_MAXTLEN) into *tw. */
extern bool leaf_ff1_63_tweak(EVP_CIPHER_CTX *ctx, const char *tweak, int tlen,
							  LeafFF1Tweak *tw);

/* FF1.Encrypt (or FF1.Decrypt) of the 63 bits of x < 2^63 into *out. */
extern bool leaf_ff1_63(EVP_CIPHER_CTX *ctx, const LeafFF1Tweak *tw,
						uint64_t x, bool decrypt, uint64_t *out);

#endif							/* LEAF_FF1_H */
