/*-------------------------------------------------------------------------
 *
 * leaf_alloc_remote.c
 *	  Fleet mode: allocator workers draw segments from the leaf_alloc of
 *	  another server, named by leaf.alloc_conninfo.
 *
 * Every shard's allocator connects (libpq, one connection per worker,
 * kept open) to the allocation database and moves the tag's max_id up
 * there with one autocommit UPDATE ... RETURNING, which records the load
 * in leaf_segment_log there in the same statement.  The row lock orders
 * the shards, so each segment goes to exactly one of them, and it ends
 * with that statement on the server: a shard that stops in the middle of
 * a load never holds the row for the others.  A segment is used only
 * after its commit reported success; a commit whose outcome is unknown
 * (connection lost) leaves a gap, never a repeat.
 *
 * With several hosts and target_session_attrs=read-write in the
 * connection string, a failed connection is simply opened again and
 * libpq finds the new primary.  Synchronous replication is what makes
 * that safe: see README.  The load itself sets synchronous_commit = on
 * for its transaction, whatever the allocation server's settings.
 *
 * Every libpq call is non-blocking and waits on the worker's latch and
 * the socket (leaf_libpq.c), under a deadline of leaf.alloc_timeout per
 * load, and the socket is counted among the worker's files: a hung
 * server, a lost network or a synchronous standby that never answers
 * costs a gap in the IDs and a retry, never a stuck worker.  A commit that
 * comes back with a warning (a cancelled wait for synchronous
 * replication) is not trusted either.
 *
 * Each database records which allocation database it draws from, and
 * refuses another one until a superuser confirms the change
 * (leaf_alloc_source.c).
 *
 * Only this file talks to the allocation database of the segments (the
 * leases of worker IDs are leaf_sf_db.c's), through leaf_libpq.c.
 * Passwords never reach the log: messages are scrubbed of the password
 * of leaf.alloc_conninfo, and of whatever libpq quotes from a connection
 * string it cannot parse.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/postmaster.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "common/leaf_common.h"
#include "segment/leaf_alloc.h"
#include "segment/leaf_alloc_source.h"
#include "common/leaf_errcodes.h"
#include "common/leaf_libpq.h"

/* leaf.alloc_conninfo and leaf.alloc_timeout (in ms) */
static char *leaf_alloc_conninfo = NULL;
static int	leaf_alloc_timeout_ms = 10 * 1000;
#ifdef LEAF_TEST_HOOKS
static int	leaf_test_tags_pause_ms = 0;
#endif

/*
 * The session settings of the connection to the allocation server.  A
 * load is one short statement on one row of leaf_alloc, which the
 * session never leaves a transaction open after.
 *
 * LEAF_REMOTE_STATEMENT_TIMEOUT: a statement the worker stopped waiting
 * for (after leaf.alloc_timeout, 10 s by default) must not go on holding
 * its row against the loads of the other shards; the server ends it
 * after as long.
 * LEAF_REMOTE_LOCK_TIMEOUT: another shard's load holds the row of a tag
 * for a moment; a row held longer (a stalled shard, an open transaction
 * of an administrator) fails the load with a lock timeout, its reason,
 * well before leaf.alloc_timeout, and the load is retried.
 * LEAF_REMOTE_IDLE_IN_XACT_TIMEOUT: a worker that stalled or vanished
 * inside a transaction releases its row locks after as long as a
 * statement may run.
 */
#define LEAF_REMOTE_STATEMENT_TIMEOUT	"10s"
#define LEAF_REMOTE_LOCK_TIMEOUT		"2s"
#define LEAF_REMOTE_IDLE_IN_XACT_TIMEOUT "10s"

/*
 * The connection's own defaults, which leaf.alloc_conninfo may override.
 *
 * LEAF_REMOTE_CONNECT_TIMEOUT (s): libpq ignores connect_timeout for a
 * connection made with PQconnectPoll, as this one is; leaf_remote_open
 * bounds the connection by leaf.alloc_timeout instead.  The value, half
 * of that setting's default, is what a blocking connection with the same
 * string would wait.
 * LEAF_REMOTE_KEEPALIVES_*: a connection idle between loads whose server
 * vanished without closing it (power loss, a partition) is found dead
 * after about 10 + 3 * 3 = 19 s, and the next load connects again at
 * once, instead of waiting on the dead socket until leaf.alloc_timeout.
 * LEAF_REMOTE_TCP_USER_TIMEOUT (ms): a request sent to such a server
 * fails when it has not been acknowledged after leaf.alloc_timeout's
 * default (10 s), instead of after the kernel's retransmission timeout,
 * many minutes (see docs/fleet.md).
 */
#define LEAF_REMOTE_CONNECT_TIMEOUT		"5"
#define LEAF_REMOTE_KEEPALIVES_IDLE		"10"
#define LEAF_REMOTE_KEEPALIVES_INTERVAL	"3"
#define LEAF_REMOTE_KEEPALIVES_COUNT	"3"
#define LEAF_REMOTE_TCP_USER_TIMEOUT	"10000"

/*
 * The connection (leaf_libpq.c): its deadline is that of the load under
 * way, its waits are PG_WAIT_EXTENSION, and it gives up when a database
 * command asks the worker to exit.
 */
static LeafPq leaf_remote_pq = {.stop = leaf_alloc_stopping};
static char *leaf_conn_info = NULL; /* conninfo leaf_remote_pq was opened
									 * with */
static char leaf_qual_table[2 * NAMEDATALEN + 16];	/* "schema".leaf_alloc */
static char leaf_qual_log[2 * NAMEDATALEN + 24];	/* "schema".leaf_segment_log */
static bool leaf_remote_log_ok;	/* the connection may write that */
static bool leaf_got_warning;	/* the server sent a WARNING */

static LeafCopyIdent leaf_remote_ident;	/* of leaf_remote_pq */

static void leaf_remote_abort(PGresult *res);

/* Define the settings of fleet mode. */
void
leaf_alloc_remote_init_settings(void)
{
	DefineCustomStringVariable("leaf.alloc_conninfo",
							   "Sets the connection string of the database whose leaf_alloc serves segments.",
							   "Empty means the leaf_alloc of the caller's own database.",
							   &leaf_alloc_conninfo,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.alloc_timeout",
							"Sets how long an allocator worker waits for the allocation database in one load.",
							"Past it, the connection is closed, the load is retried and its segment, "
							"if it was committed after all, is never used.",
							&leaf_alloc_timeout_ms,
							10 * 1000, 100, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

#ifdef LEAF_TEST_HOOKS
	DefineCustomIntVariable("leaf.test_tags_pause_ms",
							"Makes the allocation database sleep this long before each read of its list of tags (for tests only).",
							NULL,
							&leaf_test_tags_pause_ms,
							0, 0, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
#endif
}

/*
 * Are segments drawn from another server (leaf.alloc_conninfo is set)?
 * The one place that decides between the local and the remote source.
 */
bool
leaf_remote_enabled(void)
{
	return leaf_alloc_conninfo != NULL && leaf_alloc_conninfo[0] != '\0';
}

/* Remember warnings: one during COMMIT means "maybe not replicated". */
static void
leaf_notice_receiver(void *arg, const PGresult *res)
{
	const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);

	if (sev != NULL && strcmp(sev, "WARNING") == 0)
		leaf_got_warning = true;
}

/*
 * Replace every occurrence of secret in buf by "********".
 */
static void
leaf_replace_all(char *buf, size_t len, const char *secret)
{
	StringInfoData out;
	const char *p = buf;
	const char *hit;
	size_t		n = strlen(secret);

	if (n == 0 || strstr(buf, secret) == NULL)
		return;
	initStringInfo(&out);
	while ((hit = strstr(p, secret)) != NULL)
	{
		appendBinaryStringInfo(&out, p, hit - p);
		appendStringInfoString(&out, "********");
		p = hit + n;
	}
	appendStringInfoString(&out, p);
	strlcpy(buf, out.data, len);
	pfree(out.data);
}

/*
 * Mask every double-quoted piece of buf that is not a connection keyword
 * or a single punctuation character such as "=": what libpq quotes from a
 * connection string it could not parse may be a piece of the password.
 */
static void
leaf_mask_quoted(char *buf, size_t len)
{
	StringInfoData out;
	PQconninfoOption *defs = PQconndefaults();
	const char *p = buf;
	const char *open;
	const char *close;

	initStringInfo(&out);
	while ((open = strchr(p, '"')) != NULL &&
		   (close = strchr(open + 1, '"')) != NULL)
	{
		int			n = close - open - 1;
		bool		keep = (n == 1 && !isalnum((unsigned char) open[1]));
		PQconninfoOption *o;

		for (o = defs; !keep && o != NULL && o->keyword != NULL; o++)
			keep = (strlen(o->keyword) == n &&
					strncmp(o->keyword, open + 1, n) == 0);
		appendBinaryStringInfo(&out, p, open - p + 1);
		if (keep)
			appendBinaryStringInfo(&out, open + 1, n);
		else
			appendStringInfoString(&out, "********");
		appendStringInfoChar(&out, '"');
		p = close + 1;
	}
	appendStringInfoString(&out, p);
	strlcpy(buf, out.data, len);
	pfree(out.data);
	if (defs != NULL)
		PQconninfoFree(defs);
}

/*
 * Make sure that a message about the allocation database, which is
 * stored for leaf_segments and waiting callers and written to the log,
 * does not contain the password of leaf.alloc_conninfo, not even a piece
 * of it quoted by libpq.
 */
static void
leaf_remote_scrub(char *buf, size_t len)
{
	PQconninfoOption *opts;
	char	   *err = NULL;

	if (buf[0] == '\0' || leaf_alloc_conninfo == NULL ||
		leaf_alloc_conninfo[0] == '\0')
		return;
	opts = PQconninfoParse(leaf_alloc_conninfo, &err);
	if (opts != NULL)
	{
		PQconninfoOption *o;

		for (o = opts; o->keyword != NULL; o++)
			if (strcmp(o->keyword, "password") == 0 && o->val != NULL)
				leaf_replace_all(buf, len, o->val);
		PQconninfoFree(opts);
	}
	else
	{
		if (err != NULL)
			PQfreemem(err);
		leaf_mask_quoted(buf, len);
	}
}

/*
 * Was the worker's latch set, and reset, while it waited for the
 * allocation database since the last call?  Then a caller's request for
 * a load may be waiting, and the main loop goes round again instead of
 * sleeping.
 */
bool
leaf_remote_woken(void)
{
	bool		seen = leaf_remote_pq.latch_seen;

	leaf_remote_pq.latch_seen = false;
	return seen;
}

void
leaf_remote_disconnect(void)
{
	leaf_pq_finish(&leaf_remote_pq);
	if (leaf_conn_info != NULL)
		pfree(leaf_conn_info);
	leaf_conn_info = NULL;
}

/*
 * Run one statement and return its last result, or NULL (with the reason
 * in errbuf, and the connection closed) if the deadline passed or the
 * connection broke.
 */
static PGresult *
leaf_remote_exec(const char *sql, int nparams, const char *const *params,
				 char *errbuf, size_t errlen)
{
	PGresult   *res = leaf_pq_exec(&leaf_remote_pq, sql, nparams, params,
								   errbuf, errlen);

	if (res != NULL)
		return res;
	if (leaf_remote_pq.failure == LEAF_PQ_TIMEOUT)
		snprintf(errbuf, errlen,
				 "allocation database did not answer within \"leaf.alloc_timeout\" (%d ms)",
				 leaf_alloc_timeout_ms);
	else
		leaf_pq_prefix("allocation database", errbuf, errlen);
	leaf_remote_disconnect();
	return NULL;
}

static bool
leaf_remote_command(const char *sql, char *errbuf, size_t errlen)
{
	PGresult   *res = leaf_remote_exec(sql, 0, NULL, errbuf, errlen);
	bool		ok;

	if (res == NULL)
		return false;
	ok = (PQresultStatus(res) == PGRES_COMMAND_OK ||
		  PQresultStatus(res) == PGRES_TUPLES_OK);
	if (!ok)
		leaf_pq_error(&leaf_remote_pq, "allocation database", res, errbuf, errlen);
	PQclear(res);
	return ok;
}

/*
 * The application_name of this shard's session on the allocation server,
 * so that pg_stat_activity there says which shard it is: "leaf shard "
 * and cluster_name, else leaf.node_address, else the host name and port.
 */
static void
leaf_shard_appname(char *buf, size_t len)
{
	char		host[256];

	if (cluster_name != NULL && cluster_name[0] != '\0')
		snprintf(buf, len, "leaf shard %s", cluster_name);
	else if (leaf_sf_node_address != NULL && leaf_sf_node_address[0] != '\0')
		snprintf(buf, len, "leaf shard %s", leaf_sf_node_address);
	else
	{
		if (gethostname(host, sizeof(host)) != 0)
			strlcpy(host, "localhost", sizeof(host));
		host[sizeof(host) - 1] = '\0';
		snprintf(buf, len, "leaf shard %s:%d", host, PostPortNumber);
	}
}

/*
 * Is the remote leaf_alloc still of the shape the allocator reads (see
 * leaf_alloc_shape.c)?  Asked once a connection; on a mismatch the
 * connection is closed, so the next load asks again.
 */
static bool leaf_remote_shape_bad = false;	/* the last check failed */

static bool
leaf_remote_shape_ok(char *errbuf, size_t errlen)
{
	char		sql[sizeof(leaf_qual_table) + 512];
	PGresult   *res;
	bool		ok = true;
	int			i;

	snprintf(sql, sizeof(sql),
			 "SELECT v.n, a.atttypid, a.attnotnull, c.relpersistence "
			 "FROM (VALUES %s) AS v(n) "
			 "CROSS JOIN pg_catalog.pg_class c "
			 "LEFT JOIN pg_catalog.pg_attribute a "
			 "ON a.attrelid OPERATOR(pg_catalog.=) c.oid "
			 "AND a.attname OPERATOR(pg_catalog.=) v.n::pg_catalog.name "
			 "AND NOT a.attisdropped "
			 "WHERE c.oid OPERATOR(pg_catalog.=) '%s'::pg_catalog.regclass",
			 leaf_alloc_column_values(), leaf_qual_table);
	res = leaf_remote_exec(sql, 0, NULL, errbuf, errlen);
	if (res == NULL)
		return false;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) == 0)
	{
		leaf_pq_error(&leaf_remote_pq, "allocation database", res, errbuf, errlen);
		ok = false;
	}
	for (i = 0; ok && i < PQntuples(res); i++)
	{
		char		persistence = PQgetvalue(res, i, 3)[0];
		bool		found = !PQgetisnull(res, i, 1);

		if (!leaf_alloc_persistence_ok(persistence, errbuf, errlen) ||
			!leaf_alloc_column_ok(PQgetvalue(res, i, 0), found,
								  found ? (Oid) strtoul(PQgetvalue(res, i, 1), NULL, 10) : InvalidOid,
								  found && PQgetvalue(res, i, 2)[0] == 't',
								  errbuf, errlen))
		{
			/* a failed query is retried like a connection; this is not */
			leaf_remote_shape_bad = true;
			ok = false;
		}
	}
	PQclear(res);
	if (!ok)
		leaf_remote_disconnect();
	return ok;
}

/*
 * Open a new connection to leaf.alloc_conninfo, non-blocking, in place of
 * any old one.  Returns false, with the reason in errbuf, if that failed.
 */
static bool
leaf_remote_open(char *errbuf, size_t errlen)
{
	char		appname[NAMEDATALEN];

	/* defaults that the connection string may override */
	const char *keywords[] = {"connect_timeout", "application_name",
		"keepalives_idle", "keepalives_interval", "keepalives_count",
	"tcp_user_timeout", "dbname", NULL};
	const char *values[] = {LEAF_REMOTE_CONNECT_TIMEOUT, appname,
		LEAF_REMOTE_KEEPALIVES_IDLE, LEAF_REMOTE_KEEPALIVES_INTERVAL,
		LEAF_REMOTE_KEEPALIVES_COUNT, LEAF_REMOTE_TCP_USER_TIMEOUT,
	leaf_alloc_conninfo, NULL};

	leaf_shard_appname(appname, sizeof(appname));

	leaf_remote_disconnect();
	if (!leaf_pq_connect(&leaf_remote_pq, keywords, values, errbuf, errlen))
	{
		if (leaf_remote_pq.failure == LEAF_PQ_TIMEOUT)
			snprintf(errbuf, errlen,
					 "could not connect to the allocation database within \"leaf.alloc_timeout\" (%d ms)",
					 leaf_alloc_timeout_ms);
		else
			leaf_pq_prefix("could not connect to the allocation database",
						   errbuf, errlen);
		return false;
	}
	PQsetNoticeReceiver(leaf_remote_pq.conn, leaf_notice_receiver, NULL);
	leaf_conn_info = MemoryContextStrdup(TopMemoryContext, leaf_alloc_conninfo);
	return true;
}

/*
 * Set up the new connection's session.  A load is a single statement,
 * which sets synchronous_commit itself; the session is set to "on" as
 * well, whatever the server says.  The session never stays in a
 * transaction between statements.  Returns false, with the reason in
 * errbuf and the connection closed, if that failed.
 */
static bool
leaf_remote_session(char *errbuf, size_t errlen)
{
	if (!leaf_remote_command("SET synchronous_commit = on", errbuf, errlen) ||
		!leaf_remote_command("SET statement_timeout = '"
							 LEAF_REMOTE_STATEMENT_TIMEOUT "'", errbuf, errlen) ||
		!leaf_remote_command("SET lock_timeout = '"
							 LEAF_REMOTE_LOCK_TIMEOUT "'", errbuf, errlen) ||
		!leaf_remote_command("SET idle_in_transaction_session_timeout = '"
							 LEAF_REMOTE_IDLE_IN_XACT_TIMEOUT "'",
							 errbuf, errlen))
	{
		leaf_remote_disconnect();
		return false;
	}
	return true;
}

/*
 * Find out, on the new connection, which allocation database this is
 * (where leaf_alloc is, leaf_remote_schema() says): the server's system
 * identifier (kept by streaming replicas, so a failover is not a
 * change), the database and the extension.  Returns false, with the
 * reason in errbuf and the connection closed, if that failed.
 */
static bool
leaf_remote_identify(char *errbuf, size_t errlen)
{
	PGresult   *res;

	res = leaf_remote_exec("SELECT c.system_identifier, d.oid, e.oid, "
						   "CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL "
						   "ELSE " LEAF_COPY_TIMELINE_HEX_SQL " END "
						   "FROM pg_catalog.pg_extension e "
						   "JOIN pg_catalog.pg_database d "
						   "ON d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database() "
						   "CROSS JOIN pg_catalog.pg_control_system() c "
						   "WHERE e.extname OPERATOR(pg_catalog.=) 'leaf'",
						   0, NULL, errbuf, errlen);
	if (res == NULL)
		return false;
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		leaf_pq_error(&leaf_remote_pq, "allocation database", res, errbuf, errlen);
		PQclear(res);
		leaf_remote_disconnect();
		return false;
	}
	if (PQntuples(res) != 1)
	{
		snprintf(errbuf, errlen,
				 "extension \"leaf\" is not installed in the allocation database");
		PQclear(res);
		leaf_remote_disconnect();
		return false;
	}
	memset(&leaf_remote_ident, 0, sizeof(leaf_remote_ident));
	leaf_remote_ident.remote = true;
	leaf_remote_ident.sysid = strtoi64(PQgetvalue(res, 0, 0), NULL, 10);
	leaf_remote_ident.dboid = (Oid) strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	leaf_remote_ident.extoid = (Oid) strtoul(PQgetvalue(res, 0, 2), NULL, 10);
	/* the timeline part of the name of the WAL file being written */
	if (!PQgetisnull(res, 0, 3))
		leaf_remote_ident.timeline = (uint32) strtoul(PQgetvalue(res, 0, 3), NULL, 16);
	snprintf(leaf_remote_ident.address, sizeof(leaf_remote_ident.address),
			 "%s:%s/%s", PQhost(leaf_remote_pq.conn), PQport(leaf_remote_pq.conn), PQdb(leaf_remote_pq.conn));
	PQclear(res);
	return true;
}

/*
 * Before every request: where leaf_alloc is now, and that the owner of
 * its schema is to be trusted with what the requests run
 * (leaf_pq_leaf_schema()).  A rename of the schema by that owner is
 * followed; an extension created anew is another allocation database,
 * which only a new connection's identity tells (*same false, the
 * connection closed).
 */
static bool
leaf_remote_schema(bool *same, char *errbuf, size_t errlen)
{
	char		nsp[2 * NAMEDATALEN + 3];
	Oid			extoid;

	*same = true;
	if (!leaf_pq_leaf_schema(&leaf_remote_pq, nsp, sizeof(nsp), &extoid,
							 errbuf, errlen))
	{
		leaf_pq_prefix("allocation database", errbuf, errlen);
		leaf_remote_disconnect();
		return false;
	}
	if (extoid != leaf_remote_ident.extoid)
	{
		*same = false;
		leaf_remote_disconnect();
		return true;
	}
	snprintf(leaf_qual_table, sizeof(leaf_qual_table), "%s.leaf_alloc", nsp);
	snprintf(leaf_qual_log, sizeof(leaf_qual_log), "%s.leaf_segment_log", nsp);
	return true;
}

/*
 * May the new connection record its loads in the allocation database's
 * leaf_segment_log?  Not if that is still at 1.4, or if the role the
 * shards connect as was not granted what the record needs (docs/fleet.md):
 * the loads go on without the record, and the log says why once a
 * connection.
 */
static void
leaf_remote_log_check(void)
{
	const char *params[1] = {leaf_qual_log};
	char		err[LEAF_ERRMSG_LEN];
	PGresult   *res;

	leaf_remote_log_ok = false;
	res = leaf_remote_exec("SELECT c IS NOT NULL "
						   "AND pg_catalog.has_table_privilege(c, 'SELECT') "
						   "AND pg_catalog.has_table_privilege(c, 'INSERT') "
						   "AND pg_catalog.has_table_privilege(c, 'DELETE') "
						   "FROM pg_catalog.to_regclass($1::pg_catalog.text) c",
						   1, params, err, sizeof(err));
	if (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK &&
		PQntuples(res) == 1)
		leaf_remote_log_ok = (PQgetvalue(res, 0, 0)[0] == 't');
	PQclear(res);
	if (!leaf_remote_log_ok && leaf_segment_log_retention_s > 0)
		ereport(LOG,
				(errmsg("leaf allocator: the allocation database's leaf_segment_log is missing or not writable; segment loads are not recorded"),
				 errhint("Update leaf there to 1.5, and grant SELECT, INSERT, DELETE on leaf_segment_log to the role the shards connect as.")));
}

/*
 * Make sure there is a working connection; returns false with the reason
 * in errbuf.
 */
static bool
leaf_remote_connect(char *errbuf, size_t errlen)
{
	bool		same;

	if (leaf_remote_pq.conn != NULL && PQstatus(leaf_remote_pq.conn) == CONNECTION_OK &&
		leaf_conn_info != NULL && strcmp(leaf_conn_info, leaf_alloc_conninfo) == 0)
	{
		if (!leaf_remote_schema(&same, errbuf, errlen))
			return false;
		if (same)
			return true;
	}

	if (!leaf_remote_open(errbuf, errlen))
		return false;
	if (!leaf_remote_session(errbuf, errlen))
		return false;
	if (!leaf_remote_identify(errbuf, errlen))
		return false;
	if (!leaf_remote_schema(&same, errbuf, errlen))
		return false;
	if (!same)
	{
		snprintf(errbuf, errlen, "allocation database: extension \"leaf\" was created anew while connecting");
		return false;
	}
	if (!leaf_remote_shape_ok(errbuf, errlen))
		return false;
	leaf_remote_log_check();
	return true;
}

/*
 * End a failed remote transaction.  A connection that is broken, or that
 * reached a server which is not (or no longer) a primary, is closed so
 * that the next attempt looks for the primary again.  So is one that no
 * longer finds leaf_alloc where it was when the connection was opened
 * (the extension was dropped, or created again in another schema): the
 * next connection looks up the schema, and the allocation database's
 * identity, again.
 */
static void
leaf_remote_abort(PGresult *res)
{
	const char *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	if (leaf_remote_pq.conn == NULL)
		return;
	if (PQstatus(leaf_remote_pq.conn) != CONNECTION_OK ||
		(sqlstate != NULL && (strcmp(sqlstate, "25006") == 0 ||
							  strncmp(sqlstate, "57P", 3) == 0 ||
							  strncmp(sqlstate, "08", 2) == 0 ||
							  strcmp(sqlstate, "42P01") == 0 ||
							  strcmp(sqlstate, "3F000") == 0)))
	{
		leaf_remote_disconnect();
		return;
	}
	if (PQtransactionStatus(leaf_remote_pq.conn) != PQTRANS_IDLE)
	{
		char		err[LEAF_ERRMSG_LEN];
		PGresult   *r = leaf_remote_exec("ROLLBACK", 0, NULL, err, sizeof(err));

		PQclear(r);
	}
}

/*
 * Take a segment planned in *plan for a row whose step is row_step, with
 * one autocommit UPDATE ... RETURNING.  Returns 1 when the segment is
 * ours (in *res), 0 when no row matched (the row has gone or changed),
 * -1 on failure (reason in *res).
 *
 * The row lock that the UPDATE takes is released when the statement
 * commits on the allocation database, whatever becomes of this shard
 * afterwards.  A shard that stops, or is cut off, in the middle of a load
 * therefore holds up the other shards for one statement at most; all it
 * can lose is the segment it never receives, a gap.
 *
 * The statement sets synchronous_commit = on for its own transaction, so
 * its commit waits for the WAL flush (and for the synchronous standbys)
 * whatever the server's configuration, a reload, a role or database
 * setting, or a pooler that hands us another session.
 */
/*
 * The statement of a load: the UPDATE of leaf_alloc, and with a log, in
 * the same statement (one round trip, one transaction), the row of
 * leaf_segment_log that records it and the pruning of the loader's rows
 * of the tag older than the retention, below the segment it may still
 * serve (as leaf_alloc_local.c does, with first_id + 0 for the same
 * reason).  $1 to $4 are the tag, step, max_id
 * last seen and size; $5 to $8 the log's.
 */
static void
leaf_remote_take_sql(char *sql, size_t len, bool log)
{
	char		update[sizeof(leaf_qual_table) + 640];

	snprintf(update, sizeof(update),
			 "UPDATE %s AS a "
			 "SET max_id = (a.max_id OPERATOR(pg_catalog.+) $4::pg_catalog.int8) "
			 "WHERE a.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar "
			 "AND a.step OPERATOR(pg_catalog.=) $2::pg_catalog.int4 "
			 "AND a.max_id OPERATOR(pg_catalog.>=) $3::pg_catalog.int8 "
			 "AND a.max_id OPERATOR(pg_catalog.<=) "
			 "(9223372036854775807::pg_catalog.int8 OPERATOR(pg_catalog.-) $4::pg_catalog.int8) "
			 "AND pg_catalog.set_config('synchronous_commit', 'on', true) IS NOT NULL "
			 "RETURNING a.max_id",
			 leaf_qual_table);
	if (!log)
	{
		strlcpy(sql, update, len);
		return;
	}
	snprintf(sql, len,
			 "WITH u AS (%s), "
			 "l AS (INSERT INTO %s (biz_tag, first_id, last_id, loaded_at, "
			 "loaded_by, serving_first_id) "
			 "SELECT $1::pg_catalog.varchar, "
			 "u.max_id OPERATOR(pg_catalog.-) $4::pg_catalog.int8, "
			 "u.max_id OPERATOR(pg_catalog.-) 1::pg_catalog.int8, "
			 "$5::pg_catalog.timestamptz, $6::pg_catalog.text, $7::pg_catalog.int8 "
			 "FROM u ON CONFLICT DO NOTHING), "
			 "p AS (DELETE FROM %s AS d USING u "
			 "WHERE d.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar "
			 "AND d.loaded_by OPERATOR(pg_catalog.=) $6::pg_catalog.text "
			 "AND d.loaded_at OPERATOR(pg_catalog.<) $8::pg_catalog.timestamptz "
			 "AND (d.first_id OPERATOR(pg_catalog.+) 0::pg_catalog.int8) "
			 "OPERATOR(pg_catalog.<) COALESCE($7::pg_catalog.int8, "
			 "u.max_id OPERATOR(pg_catalog.-) $4::pg_catalog.int8)) "
			 "SELECT u.max_id FROM u",
			 update, leaf_qual_log, leaf_qual_log);
}

static int
leaf_remote_take(const LeafLoadJob *job, int32 row_step,
				 const LeafLoadResult *plan, LeafLoadResult *res)
{
	char		sql[2 * sizeof(leaf_qual_log) + sizeof(leaf_qual_table) + 1600];
	const char *params[8];
	char		stepbuf[16];
	char		prevbuf[32];
	char		sizebuf[32];
	char		servingbuf[32];
	char		atbuf[64];
	char		prunebuf[64];
	LeafLoadLog log;
	bool		logged;
	PGresult   *r;
	int64		new_max;

	logged = leaf_remote_log_ok && leaf_load_log_begin(&log);
	leaf_remote_take_sql(sql, sizeof(sql), logged);
	snprintf(stepbuf, sizeof(stepbuf), "%d", row_step);
	snprintf(prevbuf, sizeof(prevbuf), INT64_FORMAT, job->db_max_id);
	snprintf(sizebuf, sizeof(sizebuf), INT64_FORMAT, plan->size);
	params[0] = job->tag;
	params[1] = stepbuf;
	params[2] = prevbuf;
	params[3] = sizebuf;
	if (logged)
	{
		leaf_timestamp_iso(log.loaded_at, atbuf, sizeof(atbuf));
		leaf_timestamp_iso(log.prune_before, prunebuf, sizeof(prunebuf));
		snprintf(servingbuf, sizeof(servingbuf), INT64_FORMAT, job->serving_first);
		params[4] = atbuf;
		params[5] = log.loaded_by;
		params[6] = job->serving ? servingbuf : NULL;
		params[7] = prunebuf;
	}

	/*
	 * The segment may be used only once the statement's commit is known
	 * to have succeeded, with no warning: a warning means, for one, that
	 * the wait for the synchronous standby was cancelled, so the
	 * allocation might not survive a failover.
	 */
	leaf_got_warning = false;
	r = leaf_remote_exec(sql, logged ? 8 : 4, params, res->msg, sizeof(res->msg));
	if (r == NULL)
		return -1;				/* outcome unknown: a gap, never a repeat */
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		leaf_pq_error(&leaf_remote_pq, "allocation database", r, res->msg, sizeof(res->msg));
		leaf_remote_abort(r);
		/* the record's grants were revoked: the retry loads without it */
		if (logged && leaf_remote_pq.conn != NULL)
			leaf_remote_log_check();
		PQclear(r);
		return -1;
	}
	if (PQntuples(r) == 0)
	{
		PQclear(r);
		return 0;
	}
	new_max = strtoi64(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	if (leaf_got_warning)
	{
		snprintf(res->msg, sizeof(res->msg),
				 "allocation database warned during the commit of a load (was the wait for a synchronous standby cancelled?); the segment was not used");
		return -1;
	}
	res->status = LEAF_LOAD_OK;
	res->start = new_max - plan->size;
	res->size = plan->size;
	res->step = plan->step;
	res->min_step = row_step;
	res->db_max_id = new_max;
	/* a primary's timeline stays the same while it runs */
	res->timeline = leaf_remote_ident.timeline;
	snprintf(res->server, sizeof(res->server), "%s:%s",
			 PQhost(leaf_remote_pq.conn), PQport(leaf_remote_pq.conn));
	return 1;
}

/*
 * Connect for a load, or put the failure into *res: a connection failure,
 * or a final one if the remote leaf_alloc is not of the shape the
 * allocator reads.
 */
static bool
leaf_remote_load_connect(LeafLoadResult *res)
{
	leaf_remote_shape_bad = false;
	if (!leaf_remote_connect(res->msg, sizeof(res->msg)))
	{
		if (leaf_remote_shape_bad)
		{
			res->status = LEAF_LOAD_FINAL;
			res->sqlstate = ERRCODE_LEAF_ALLOC_SHAPE;
		}
		return false;
	}
	return true;
}

/*
 * Usually the row's step is the one seen at the last load: plan with it,
 * and the load is one statement.  Returns true if that settled the load
 * (the segment, or the failure, is in *res); false if the row is to be
 * read first (first load, or the row is not as last seen).
 */
static bool
leaf_remote_take_as_seen(const LeafLoadJob *job, LeafLoadResult *res)
{
	LeafLoadResult plan;

	memset(&plan, 0, sizeof(plan));
	if (job->min_step > 0 &&
		leaf_plan_segment(job, job->db_max_id == PG_INT64_MIN ? 0 : job->db_max_id,
						  job->min_step, &plan))
	{
		switch (leaf_remote_take(job, job->min_step, &plan, res))
		{
			case 1:
				return true;
			case -1:
				return true;
			default:
				break;
		}
	}
	return false;
}

/*
 * Read the row of job's tag (no lock): its max_id and step.  Returns
 * false, with the failure in *res, if it could not be read or is gone.
 */
static bool
leaf_remote_read_row(const LeafLoadJob *job, LeafLoadResult *res,
					 int64 *max_id, int32 *row_step)
{
	char		sql[sizeof(leaf_qual_table) + 160];
	const char *params[1];
	PGresult   *r;

	snprintf(sql, sizeof(sql),
			 "SELECT a.max_id, a.step FROM %s AS a "
			 "WHERE a.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar",
			 leaf_qual_table);
	params[0] = job->tag;
	r = leaf_remote_exec(sql, 1, params, res->msg, sizeof(res->msg));
	if (r == NULL)
		return false;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		leaf_pq_error(&leaf_remote_pq, "allocation database", r, res->msg, sizeof(res->msg));
		leaf_remote_abort(r);
		PQclear(r);
		return false;
	}
	if (PQntuples(r) == 0)
	{
		PQclear(r);
		res->status = LEAF_LOAD_TAG_GONE;
		return false;
	}
	*max_id = strtoi64(PQgetvalue(r, 0, 0), NULL, 10);
	*row_step = (int32) strtol(PQgetvalue(r, 0, 1), NULL, 10);
	PQclear(r);
	return true;
}

static void
leaf_remote_load_once(const LeafLoadJob *job, LeafLoadResult *res)
{
	LeafLoadResult plan;
	int64		max_id;
	int32		row_step;

	leaf_remote_pq.deadline_ms = leaf_pq_mono_ms() + leaf_alloc_timeout_ms;
	res->status = LEAF_LOAD_FAILED;
	res->sqlstate = ERRCODE_CONNECTION_FAILURE;
	if (!leaf_remote_load_connect(res))
		return;

	/*
	 * A server in recovery has no timeline of its own yet; if it were
	 * promoted while this connection stays open, loads would go on without
	 * the check of its new timeline.  (target_session_attrs=read-write
	 * never picks one.)
	 */
	res->sqlstate = ERRCODE_LEAF_ALLOC_FAILED;
	if (leaf_remote_ident.timeline == 0)
	{
		snprintf(res->msg, sizeof(res->msg),
				 "allocation database %s is in recovery",
				 leaf_remote_ident.address);
		leaf_remote_disconnect();
		return;
	}

	/* is this still the allocation database that we drew from? */
	if (!leaf_source_check(&leaf_remote_ident, job, res))
		return;

	if (leaf_remote_take_as_seen(job, res))
		return;

	/* first load, or the row is not as last seen: read it (no lock) */
	if (!leaf_remote_read_row(job, res, &max_id, &row_step))
		return;

	/* a final failure: bad step, max_id moved backwards, range used up */
	memset(&plan, 0, sizeof(plan));
	if (!leaf_plan_segment(job, max_id, row_step, &plan))
	{
		res->status = plan.status;
		res->sqlstate = plan.sqlstate;
		strlcpy(res->msg, plan.msg, sizeof(res->msg));
		return;
	}
	if (leaf_remote_take(job, row_step, &plan, res) == 0)
	{
		/* changed again in between: the next attempt reads it anew */
		res->status = LEAF_LOAD_FAILED;
		res->sqlstate = ERRCODE_LEAF_ALLOC_FAILED;
		snprintf(res->msg, sizeof(res->msg),
				 "the row of biz_tag \"%s\" changed during the load", job->tag);
	}
}

/*
 * Load one segment from the allocation database.  A failure that cost
 * the connection is reported as ERRCODE_CONNECTION_FAILURE, so that the
 * worker does not try the other tags of the same pass (and wait again).
 */
static void
leaf_remote_load(const LeafLoadJob *job, LeafLoadResult *res)
{
	pgstat_report_activity(STATE_RUNNING, "leaf: loading a remote segment");
	/* not in a transaction: a cancel would be FATAL (leaf_worker_interrupts) */
	HOLD_CANCEL_INTERRUPTS();
	leaf_remote_load_once(job, res);
	res->commit_us = -1;		/* the commit is part of its statement */
	if (res->status == LEAF_LOAD_FAILED && leaf_remote_pq.conn == NULL)
		res->sqlstate = ERRCODE_CONNECTION_FAILURE;
	leaf_remote_scrub(res->msg, sizeof(res->msg));
	RESUME_CANCEL_INTERRUPTS();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Put every tag of the remote leaf_alloc into tags.  Returns false, with
 * the reason in errbuf, when the list could not be read.
 */
static bool
leaf_remote_tags_read(HTAB *tags, char *errbuf, size_t errlen)
{
	char		sql[sizeof(leaf_qual_table) + 64];
	PGresult   *r;
	int			i;

	leaf_remote_pq.deadline_ms = leaf_pq_mono_ms() + leaf_alloc_timeout_ms;
	if (!leaf_remote_connect(errbuf, errlen))
		return false;

	/*
	 * The tags of an allocation database that is not (yet) confirmed do
	 * not decide which slots to free.
	 */
	if (!leaf_source_recorded_ok(&leaf_remote_ident, errbuf, errlen))
		return false;

#ifdef LEAF_TEST_HOOKS
	/* a slow answer, waited for as any other (callers' requests come in) */
	if (leaf_test_tags_pause_ms > 0)
	{
		char		secs[32];
		const char *param = secs;

		snprintf(secs, sizeof(secs), "%.3f", leaf_test_tags_pause_ms / 1000.0);
		ereport(LOG, (errmsg("leaf allocator reads the list of tags after a pause of %d ms",
							 leaf_test_tags_pause_ms)));
		r = leaf_remote_exec("SELECT pg_catalog.pg_sleep($1::pg_catalog.float8)",
							 1, &param, errbuf, errlen);
		if (r == NULL)
			return false;
		PQclear(r);
		ereport(LOG, (errmsg("leaf allocator's pause before the list of tags ended")));
	}
#endif
	snprintf(sql, sizeof(sql), "SELECT biz_tag FROM %s", leaf_qual_table);
	r = leaf_remote_exec(sql, 0, NULL, errbuf, errlen);
	if (r == NULL)
		return false;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		leaf_pq_error(&leaf_remote_pq, "allocation database", r, errbuf, errlen);
		leaf_remote_abort(r);
		PQclear(r);
		return false;
	}
	for (i = 0; i < PQntuples(r); i++)
	{
		const char *t = PQgetvalue(r, i, 0);

		if (strlen(t) <= LEAF_TAG_MAXLEN)
			(void) hash_search(tags, t, HASH_ENTER, NULL);
	}
	PQclear(r);
	return true;
}

/*
 * The list of tags, with any error scrubbed of secrets.  (nsp, leaf's
 * schema in this database, is for the local source.)
 */
static bool
leaf_remote_tags(Oid nsp, HTAB *tags, char *errbuf, size_t errlen)
{
	bool		ok = leaf_remote_tags_read(tags, errbuf, errlen);

	if (!ok)
		leaf_remote_scrub(errbuf, errlen);
	return ok;
}

/*
 * Describe where segments come from: host:port/dbname of the current
 * connection (never the password), or the fact that there is none; and
 * whether a change of source waits for confirmation.
 */
static void
leaf_remote_describe(char *buf, size_t len)
{
	if (leaf_remote_pq.conn != NULL && PQstatus(leaf_remote_pq.conn) == CONNECTION_OK)
		snprintf(buf, len, "remote %s%s", leaf_remote_ident.address,
				 leaf_source_refusal());
	else
		snprintf(buf, len, "remote (not connected)");
}

const LeafAllocSource leaf_remote_source = {
	.load = leaf_remote_load,
	.tags = leaf_remote_tags,
	.describe = leaf_remote_describe,
	.remote = true,
};
