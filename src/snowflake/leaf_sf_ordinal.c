/*-------------------------------------------------------------------------
 *
 * leaf_sf_ordinal.c
 *	  Worker IDs from a Kubernetes StatefulSet's pod ordinal:
 *	  leaf.worker_id_from and leaf.worker_id_offset, read once at start-up.
 *
 * A StatefulSet names its pods NAME-0, NAME-1, ...; the name is the pod's
 * host name, and a chart can pass it (or the ordinal alone) in an
 * environment variable.  With leaf.worker_id_from = 'hostname' or
 * 'env:VARIABLE', the postmaster takes the digits after the last hyphen
 * (or a value that is only digits), adds leaf.worker_id_offset, and sets
 * leaf.worker_id to the sum before any process starts: from there on the
 * worker ID is a hand-set one in every respect, taken by the worker's
 * source of hand-set worker IDs (leaf_sf_source_setting.c: claimed in
 * ZooKeeper when leaf.zk_hosts is set, its marks kept in the state file),
 * which also waits out an earlier holder of an ordinal this data
 * directory did not serve with last.  Each
 * StatefulSet of a fleet gets its own range with the offset.
 *
 * A value that holds no ordinal does not stop the server, which serves
 * segments and data too: the snowflake worker reports why it does not
 * serve (leaf_sf_ordinal_problem) and takes no worker ID from anywhere
 * else.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <unistd.h>

#include "utils/guc.h"

#include "snowflake/leaf_snowflake.h"

static char *leaf_sf_worker_id_from = NULL;
static int	leaf_sf_worker_id_offset = 0;

/* why leaf.worker_id_from gave no worker ID, or NULL */
static char leaf_sf_ordinal_problem_buf[LEAF_SF_REASON_LEN];
const char *leaf_sf_ordinal_problem = NULL;

static bool
leaf_sf_check_worker_id_from(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;
	const char *p;

	if (v[0] == '\0' || strcmp(v, "hostname") == 0)
		return true;
	if (strncmp(v, "env:", 4) == 0)
	{
		p = v + 4;
		if (isalpha((unsigned char) *p) || *p == '_')
		{
			while (isalnum((unsigned char) *p) || *p == '_')
				p++;
			if (*p == '\0')
				return true;
		}
	}
	GUC_check_errdetail("\"leaf.worker_id_from\" must be empty, 'hostname' or 'env:' followed by the name of an environment variable.");
	return false;
}

void
leaf_sf_ordinal_define_settings(void)
{
	DefineCustomStringVariable("leaf.worker_id_from",
							   "Takes the snowflake worker ID from a StatefulSet pod's ordinal: 'hostname', or 'env:VARIABLE'.",
							   "The ordinal is the number after the last hyphen of the value (or the value, if it is a number); leaf.worker_id_offset is added, and leaf.worker_id set to the sum.",
							   &leaf_sf_worker_id_from,
							   "",
							   PGC_POSTMASTER,
							   0,
							   leaf_sf_check_worker_id_from, NULL, NULL);

	DefineCustomIntVariable("leaf.worker_id_offset",
							"Sets what is added to the pod ordinal of leaf.worker_id_from to make the worker ID.",
							NULL,
							&leaf_sf_worker_id_offset,
							0, 0, 65535,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
}

/* Is leaf.worker_id_from set (the worker ID comes from a pod ordinal)? */
bool
leaf_sf_ordinal_configured(void)
{
	return leaf_sf_worker_id_from[0] != '\0';
}

/* Say why no worker ID came from the ordinal. */
static void
leaf_sf_ordinal_refuse(const char *fmt,...) pg_attribute_printf(1, 2);

static void
leaf_sf_ordinal_refuse(const char *fmt,...)
{
	va_list		args;

	va_start(args, fmt);
	vsnprintf(leaf_sf_ordinal_problem_buf, sizeof(leaf_sf_ordinal_problem_buf),
			  fmt, args);
	va_end(args);
	leaf_sf_ordinal_problem = leaf_sf_ordinal_problem_buf;
}

/*
 * The ordinal in value: the digits after its last hyphen, or all of it if
 * it is only digits; -1 if there is none (or it is too large).
 */
static long
leaf_sf_ordinal_parse(const char *value)
{
	const char *end = value + strlen(value);
	const char *p = end;

	while (p > value && isdigit((unsigned char) p[-1]))
		p--;
	if (p == end || end - p > 6 || (p > value && p[-1] != '-'))
		return -1;
	return strtol(p, NULL, 10);
}

/*
 * Set leaf.worker_id from the ordinal, at start-up in the postmaster, so
 * that every process reads the same worker ID.  worker_id is the value of
 * leaf.worker_id given at server start, which the caller defines.
 */
void
leaf_sf_ordinal_resolve(int worker_id)
{
	char		host[256];
	const char *value;
	const char *what;
	long		ordinal;
	char		buf[32];

	if (leaf_sf_worker_id_from[0] == '\0')
		return;
	if (worker_id != -1)
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"leaf.worker_id\" and \"leaf.worker_id_from\" are both set"),
				 errdetail("leaf does not start with a setting it would ignore."),
				 errhint("Remove one of them, then start the server again.")));

	if (strcmp(leaf_sf_worker_id_from, "hostname") == 0)
	{
		what = "the host name";
		if (gethostname(host, sizeof(host)) != 0)
		{
			leaf_sf_ordinal_refuse("\"leaf.worker_id_from\" is 'hostname', but the host name could not be read: %m");
			return;
		}
		host[sizeof(host) - 1] = '\0';
		value = host;
	}
	else
	{
		what = "the environment variable";
		value = getenv(leaf_sf_worker_id_from + 4);
		if (value == NULL)
		{
			leaf_sf_ordinal_refuse("\"leaf.worker_id_from\" is '%s', but the server was started without the environment variable %s: set it in the server's environment (in a StatefulSet, from the pod's name or its label apps.kubernetes.io/pod-index)",
								   leaf_sf_worker_id_from,
								   leaf_sf_worker_id_from + 4);
			return;
		}
	}

	ordinal = leaf_sf_ordinal_parse(value);
	if (ordinal < 0)
	{
		leaf_sf_ordinal_refuse("\"leaf.worker_id_from\" is '%s', but %s is \"%s\", which ends in no ordinal: a StatefulSet's pod is named NAME-N",
							   leaf_sf_worker_id_from, what, value);
		return;
	}
	snprintf(buf, sizeof(buf), "%ld", ordinal + leaf_sf_worker_id_offset);
	SetConfigOption("leaf.worker_id", buf, PGC_POSTMASTER, PGC_S_OVERRIDE);
	ereport(LOG,
			(errmsg("leaf snowflake worker ID %s comes from %s \"%s\" (ordinal %ld, \"leaf.worker_id_offset\" %d)",
					buf, what, value, ordinal, leaf_sf_worker_id_offset)));
}
