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
 * The permutation itself is in leaf_ff1.c, which has no PostgreSQL
 * header so that the test program test/ff1_vectors.c checks the same
 * code against NIST's sample vectors (through a general FF1 that exists
 * only in that program).  This file holds the key, a cache of the tweaks'
 * chained blocks and the SQL functions.
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
#include "common/leaf_common.h"
#include "common/leaf_errcodes.h"
#include "public_id/leaf_ff1.h"

/* Length of a public ID in base 62: 62^11 > 2^63 > 62^10. */
#define LEAF_PUBID_TEXT_LEN		11

/* Tweaks whose chained blocks a backend keeps. */
#define LEAF_PUBID_TWEAKS		4

/* the setting */
static char *leaf_public_id_key_file = NULL;

/*
 * Per-backend key state.  pubid_ctx is NULL when no key is configured (or
 * it could not be read); pubid_key keeps the key in force, only to tell
 * whether the file still holds the same one after a reload.
 */
static EVP_CIPHER_CTX *pubid_ctx = NULL;
static unsigned char pubid_key[32];
static int	pubid_keylen = 0;
static bool pubid_stale = true;	/* read the key file at the next call */
static bool pubid_exit_registered = false;

/* The chained blocks of the last tweaks used under the key in force. */
static LeafFF1Tweak pubid_tweaks[LEAF_PUBID_TWEAKS];
static int	pubid_tweak_next = 0;

static const char leaf_b62_digits[] =
"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

PG_FUNCTION_INFO_V1(leaf_public_id);
PG_FUNCTION_INFO_V1(leaf_private_id);
PG_FUNCTION_INFO_V1(leaf_public_id_text);
PG_FUNCTION_INFO_V1(leaf_private_id_text);


/* ---------------------------------------------------------------- AES */

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

static void
leaf_aes_failed(void)
{
	ERR_clear_error();
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("AES encryption failed")));
}

/*
 * The chained blocks of a tweak under the key in force: from the cache,
 * or computed into the oldest entry.
 */
static const LeafFF1Tweak *
leaf_pubid_tweak(EVP_CIPHER_CTX *ctx, const char *tweak, int tlen)
{
	LeafFF1Tweak *e;

	for (int i = 0; i < LEAF_PUBID_TWEAKS; i++)
	{
		e = &pubid_tweaks[i];
		if (e->valid && e->tlen == tlen && memcmp(e->tweak, tweak, tlen) == 0)
			return e;
	}

	e = &pubid_tweaks[pubid_tweak_next];
	pubid_tweak_next = (pubid_tweak_next + 1) % LEAF_PUBID_TWEAKS;
	if (!leaf_ff1_63_tweak(ctx, tweak, tlen, e))
		leaf_aes_failed();
	return e;
}

/* ------------------------------------------------------------ the key */

static void
leaf_public_id_key_file_assign(const char *newval, void *extra)
{
	/* applied at the next call, in the backend's own time */
	pubid_stale = true;
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
	if (pubid_ctx != NULL)
	{
		/* frees and wipes the key schedule */
		EVP_CIPHER_CTX_free(pubid_ctx);
		pubid_ctx = NULL;
	}
	OPENSSL_cleanse(pubid_key, sizeof(pubid_key));
	pubid_keylen = 0;
	OPENSSL_cleanse(pubid_tweaks, sizeof(pubid_tweaks));
	pubid_tweak_next = 0;
}

static void
leaf_public_id_exit(int code, Datum arg)
{
	leaf_public_id_forget_key();
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

	if (!pubid_exit_registered)
	{
		on_proc_exit(leaf_public_id_exit, (Datum) 0);
		pubid_exit_registered = true;
	}

	if (leaf_public_id_key_file == NULL || leaf_public_id_key_file[0] == '\0')
	{
		leaf_public_id_forget_key();
		pubid_stale = false;
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

	if (pubid_ctx == NULL || newlen != pubid_keylen ||
		CRYPTO_memcmp(newkey, pubid_key, newlen) != 0)
	{
		leaf_public_id_forget_key();
		pubid_ctx = leaf_ff1_aes_new(newkey, newlen);
		if (pubid_ctx == NULL)
		{
			OPENSSL_cleanse(newkey, sizeof(newkey));
			leaf_aes_error();
		}
		memcpy(pubid_key, newkey, newlen);
		pubid_keylen = newlen;
		elog(DEBUG1, "leaf loaded the public ID key (AES-%d)", 8 * newlen);
	}
	OPENSSL_cleanse(newkey, sizeof(newkey));
	pubid_stale = false;
}

/* The AES context of the key in force; an error if there is none. */
static EVP_CIPHER_CTX *
leaf_public_id_ctx(void)
{
	if (unlikely(pubid_stale))
		leaf_public_id_load_key();
	if (unlikely(pubid_ctx == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_PUBLIC_ID_NO_KEY),
				 errmsg("no key is configured for public IDs"),
				 errhint("Set \"leaf.public_id_key_file\" to a file holding 32, 48 or 64 hex digits, "
						 "owned by the server's user with mode 0600, and reload the configuration.")));
	return pubid_ctx;
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
	const LeafFF1Tweak *tw;
	uint64_t	out;

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
	tw = leaf_pubid_tweak(ctx, t8, tlen);
	if (!leaf_ff1_63(ctx, tw, (uint64_t) x, decrypt, &out))
		leaf_aes_failed();
	return (int64) out;
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
	uint64		pubid = (uint64) leaf_public_id_apply(PG_GETARG_INT64(0),
													  PG_GETARG_TEXT_PP(1), false);
	char		buf[LEAF_PUBID_TEXT_LEN];

	for (int i = LEAF_PUBID_TEXT_LEN - 1; i >= 0; i--)
	{
		buf[i] = leaf_b62_digits[pubid % 62];
		pubid /= 62;
	}
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf, LEAF_PUBID_TEXT_LEN));
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

	if (len != LEAF_PUBID_TEXT_LEN)
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
