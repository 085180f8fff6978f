/*-------------------------------------------------------------------------
 *
 * leaf_alloc_remote.c
 *	  Fleet mode: allocator workers draw segments from the leaf_alloc of
 *	  another server, named by leaf.alloc_conninfo.
 *
 * Every shard's allocator connects (libpq, one connection per worker,
 * kept open) to the allocation database and moves the tag's max_id up
 * there with one autocommit UPDATE ... RETURNING.  The row lock orders
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
 * the socket, under a deadline of leaf.alloc_timeout per load: a hung
 * server, a lost network or a synchronous standby that never answers
 * costs a gap in the IDs and a retry, never a stuck worker.  A commit that
 * comes back with a warning (a cancelled wait for synchronous
 * replication) is not trusted either.
 *
 * Each database records which allocation database it draws from (see
 * leaf_source_check_txn) and refuses another one until a superuser
 * confirms the change.
 *
 * Only this file talks libpq.  Passwords never reach the log: messages
 * are scrubbed of the password of leaf.alloc_conninfo, and of whatever
 * libpq quotes from a connection string it cannot parse.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "leaf_snowflake.h"

static PGconn *leaf_conn = NULL;
static char *leaf_conn_info = NULL; /* conninfo leaf_conn was opened with */
static char leaf_qual_table[2 * NAMEDATALEN + 16];	/* "schema".leaf_alloc */
static TimestampTz leaf_deadline;	/* of the load under way */
static bool leaf_got_warning;	/* the server sent a WARNING */

/*
 * Which allocation database segments come from.  A streaming replica
 * keeps its primary's system identifier, and its databases and
 * extensions keep their OIDs, so a failover does not change this.
 */
typedef struct LeafSourceIdent
{
	bool		remote;			/* false: this database's own leaf_alloc */
	int64		sysid;			/* remote: pg_control_system() */
	Oid			dboid;			/* database holding leaf_alloc */
	Oid			extoid;			/* the leaf extension there */
	uint32		timeline;		/* its timeline now, 0 if unknown (not
								 * part of the identity) */
	char		address[LEAF_SOURCE_LEN];	/* host:port/dbname, for people */
} LeafSourceIdent;

static LeafSourceIdent leaf_remote_ident;	/* of leaf_conn */

/* the last source found to be the recorded one, for this extension */
static LeafSourceIdent leaf_checked_ident;
static Oid	leaf_checked_extoid = InvalidOid;
static bool leaf_checked = false;
static bool leaf_refused = false;	/* the last check refused the source */
static bool leaf_refused_timeline = false;	/* ... for its new timeline */
static bool leaf_checked_tl = false;	/* the check saw the timeline column */
static TimestampTz leaf_checked_at = 0; /* when the check last ran */

/* A comparison of a source with the recorded one. */
typedef struct LeafSourceCheck
{
	const LeafSourceIdent *cur; /* the source to be used */
	bool		write;			/* record it, as current or pending */
	Oid			extoid;			/* out: this database's leaf extension */
	bool		recorded;		/* out: a source was recorded */
	bool		same;			/* out: and it is cur (or none was) */
	bool		promoted;		/* out: the same, but on a timeline that
								 * is not confirmed */
	bool		have_tl;		/* out: leaf_alloc_source has a timeline
								 * column (release 1.1) */
	bool		fill_dboid;		/* out: the local source is recorded
								 * without its database (before 1.2) */
	bool		copied;			/* out: the local source is recorded for
								 * another database: this one is a copy */
	char		detail[LEAF_ERRMSG_LEN];	/* out: if not the same, or
											 * promoted */
} LeafSourceCheck;

static bool leaf_same_source(const LeafSourceIdent *a, const LeafSourceIdent *b);
static void leaf_source_check_txn(LeafSourceCheck *c);
static bool leaf_source_check(const LeafSourceIdent *cur,
							  const LeafLoadJob *job, LeafLoadResult *res);
static void leaf_remote_abort(PGresult *res);

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
 * Wait until the connection's socket is ready for the given events, the
 * deadline passes (false) or an interrupt arrives (it is handled).
 */
static bool
leaf_remote_wait(int events)
{
	long		remaining;
	int			rc;

	remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
												leaf_deadline);
	if (remaining <= 0)
		return false;
	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | events,
						   PQsocket(leaf_conn), remaining, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		/* a database command asked the worker to exit: give up, as on timeout */
		if (leaf_alloc_worker_stopping())
			return false;
	}
	return true;
}

bool
leaf_remote_enabled(void)
{
	return leaf_alloc_conninfo != NULL && leaf_alloc_conninfo[0] != '\0';
}

void
leaf_remote_disconnect(void)
{
	if (leaf_conn != NULL)
		PQfinish(leaf_conn);
	leaf_conn = NULL;
	if (leaf_conn_info != NULL)
		pfree(leaf_conn_info);
	leaf_conn_info = NULL;
}

/* Copy libpq's last error, one line, into buf. */
static void
leaf_remote_error(const char *what, PGresult *res, char *buf, size_t len)
{
	const char *msg;
	char	   *nl;

	msg = res ? PQresultErrorMessage(res) : NULL;
	if (msg == NULL || msg[0] == '\0')
		msg = leaf_conn ? PQerrorMessage(leaf_conn) : "no connection";
	snprintf(buf, len, "%s: %s", what, msg);
	/* keep the first line: libpq adds detail lines and a newline */
	nl = strchr(buf, '\n');
	if (nl != NULL)
		*nl = '\0';
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
	PGresult   *last = NULL;
	int			rc;

	if (!PQsendQueryParams(leaf_conn, sql, nparams, NULL, params,
						   NULL, NULL, 0))
		goto broken;
	while ((rc = PQflush(leaf_conn)) != 0)
	{
		if (rc < 0 || !leaf_remote_wait(WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE))
			goto broken;
		if (!PQconsumeInput(leaf_conn))
			goto broken;
	}
	for (;;)
	{
		PGresult   *r;

		while (PQisBusy(leaf_conn))
		{
			if (!leaf_remote_wait(WL_SOCKET_READABLE) ||
				!PQconsumeInput(leaf_conn))
				goto broken;
		}
		r = PQgetResult(leaf_conn);
		if (r == NULL)
			break;
		PQclear(last);
		last = r;
	}
	return last;

broken:
	PQclear(last);
	if (GetCurrentTimestamp() >= leaf_deadline)
		snprintf(errbuf, errlen,
				 "allocation database did not answer within leaf.alloc_timeout (%d ms)",
				 leaf_alloc_timeout_ms);
	else
		leaf_remote_error("allocation database", NULL, errbuf, errlen);
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
		leaf_remote_error("allocation database", res, errbuf, errlen);
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
		leaf_remote_error("allocation database", res, errbuf, errlen);
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
 * Make sure there is a working connection; returns false with the reason
 * in errbuf.
 */
static bool
leaf_remote_connect(char *errbuf, size_t errlen)
{
	char		appname[NAMEDATALEN];

	/* defaults that the connection string may override */
	const char *keywords[] = {"connect_timeout", "application_name",
		"keepalives_idle", "keepalives_interval", "keepalives_count",
	"tcp_user_timeout", "dbname", NULL};
	const char *values[] = {"5", appname, "10", "3", "3",
	"10000", leaf_alloc_conninfo, NULL};
	PGresult   *res;

	if (leaf_conn != NULL && PQstatus(leaf_conn) == CONNECTION_OK &&
		leaf_conn_info != NULL && strcmp(leaf_conn_info, leaf_alloc_conninfo) == 0)
		return true;

	leaf_shard_appname(appname, sizeof(appname));

	leaf_remote_disconnect();
	leaf_conn = PQconnectStartParams(keywords, values, 1);
	if (leaf_conn == NULL)
	{
		snprintf(errbuf, errlen, "could not connect to the allocation database: out of memory");
		return false;
	}
	if (PQstatus(leaf_conn) != CONNECTION_BAD)
	{
		PostgresPollingStatusType st = PGRES_POLLING_WRITING;

		while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED)
		{
			if (!leaf_remote_wait(st == PGRES_POLLING_READING ?
								  WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE))
			{
				snprintf(errbuf, errlen,
						 "could not connect to the allocation database within leaf.alloc_timeout (%d ms)",
						 leaf_alloc_timeout_ms);
				leaf_remote_disconnect();
				return false;
			}
			st = PQconnectPoll(leaf_conn);
		}
	}
	if (PQstatus(leaf_conn) != CONNECTION_OK)
	{
		leaf_remote_error("could not connect to the allocation database",
						  NULL, errbuf, errlen);
		leaf_remote_disconnect();
		return false;
	}
	if (PQsetnonblocking(leaf_conn, 1) != 0)
	{
		leaf_remote_error("allocation database", NULL, errbuf, errlen);
		leaf_remote_disconnect();
		return false;
	}
	PQsetNoticeReceiver(leaf_conn, leaf_notice_receiver, NULL);
	leaf_conn_info = MemoryContextStrdup(TopMemoryContext, leaf_alloc_conninfo);

	/*
	 * A load is a single statement, which sets synchronous_commit itself;
	 * the session is set to "on" as well, whatever the server says.  The
	 * session never stays in a transaction between statements.
	 */
	if (!leaf_remote_command("SET synchronous_commit = on", errbuf, errlen) ||
		!leaf_remote_command("SET statement_timeout = '10s'", errbuf, errlen) ||
		!leaf_remote_command("SET lock_timeout = '2s'", errbuf, errlen) ||
		!leaf_remote_command("SET idle_in_transaction_session_timeout = '10s'",
							 errbuf, errlen))
	{
		leaf_remote_disconnect();
		return false;
	}

	/*
	 * Where leaf_alloc is, and which allocation database this is: the
	 * server's system identifier (kept by streaming replicas, so a
	 * failover is not a change), the database and the extension.
	 */
	res = leaf_remote_exec("SELECT pg_catalog.quote_ident(n.nspname), "
						   "c.system_identifier, d.oid, e.oid, "
						   "CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL "
						   "ELSE pg_catalog.substr(pg_catalog.pg_walfile_name("
						   "pg_catalog.pg_current_wal_insert_lsn()), 1, 8) END "
						   "FROM pg_catalog.pg_extension e "
						   "JOIN pg_catalog.pg_namespace n "
						   "ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
						   "JOIN pg_catalog.pg_database d "
						   "ON d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database() "
						   "CROSS JOIN pg_catalog.pg_control_system() c "
						   "WHERE e.extname OPERATOR(pg_catalog.=) 'leaf'",
						   0, NULL, errbuf, errlen);
	if (res == NULL)
		return false;
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		leaf_remote_error("allocation database", res, errbuf, errlen);
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
	snprintf(leaf_qual_table, sizeof(leaf_qual_table), "%s.leaf_alloc",
			 PQgetvalue(res, 0, 0));
	memset(&leaf_remote_ident, 0, sizeof(leaf_remote_ident));
	leaf_remote_ident.remote = true;
	leaf_remote_ident.sysid = strtoi64(PQgetvalue(res, 0, 1), NULL, 10);
	leaf_remote_ident.dboid = (Oid) strtoul(PQgetvalue(res, 0, 2), NULL, 10);
	leaf_remote_ident.extoid = (Oid) strtoul(PQgetvalue(res, 0, 3), NULL, 10);
	/* the timeline part of the name of the WAL file being written */
	if (!PQgetisnull(res, 0, 4))
		leaf_remote_ident.timeline = (uint32) strtoul(PQgetvalue(res, 0, 4), NULL, 16);
	snprintf(leaf_remote_ident.address, sizeof(leaf_remote_ident.address),
			 "%s:%s/%s", PQhost(leaf_conn), PQport(leaf_conn), PQdb(leaf_conn));
	PQclear(res);
	return leaf_remote_shape_ok(errbuf, errlen);
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

	if (leaf_conn == NULL)
		return;
	if (PQstatus(leaf_conn) != CONNECTION_OK ||
		(sqlstate != NULL && (strcmp(sqlstate, "25006") == 0 ||
							  strncmp(sqlstate, "57P", 3) == 0 ||
							  strncmp(sqlstate, "08", 2) == 0 ||
							  strcmp(sqlstate, "42P01") == 0 ||
							  strcmp(sqlstate, "3F000") == 0)))
	{
		leaf_remote_disconnect();
		return;
	}
	if (PQtransactionStatus(leaf_conn) != PQTRANS_IDLE)
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
static int
leaf_remote_take(const LeafLoadJob *job, int32 row_step,
				 const LeafLoadResult *plan, LeafLoadResult *res)
{
	char		sql[sizeof(leaf_qual_table) + 640];
	const char *params[4];
	char		stepbuf[16];
	char		prevbuf[32];
	char		sizebuf[32];
	PGresult   *r;
	int64		new_max;

	snprintf(sql, sizeof(sql),
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
	snprintf(stepbuf, sizeof(stepbuf), "%d", row_step);
	snprintf(prevbuf, sizeof(prevbuf), INT64_FORMAT, job->db_max_id);
	snprintf(sizebuf, sizeof(sizebuf), INT64_FORMAT, plan->size);
	params[0] = job->tag;
	params[1] = stepbuf;
	params[2] = prevbuf;
	params[3] = sizebuf;

	/*
	 * The segment may be used only once the statement's commit is known
	 * to have succeeded, with no warning: a warning means, for one, that
	 * the wait for the synchronous standby was cancelled, so the
	 * allocation might not survive a failover.
	 */
	leaf_got_warning = false;
	r = leaf_remote_exec(sql, 4, params, res->msg, sizeof(res->msg));
	if (r == NULL)
		return -1;				/* outcome unknown: a gap, never a repeat */
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		leaf_remote_error("allocation database", r, res->msg, sizeof(res->msg));
		leaf_remote_abort(r);
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
			 PQhost(leaf_conn), PQport(leaf_conn));
	return 1;
}

static void
leaf_remote_load_once(const LeafLoadJob *job, LeafLoadResult *res)
{
	char		sql[sizeof(leaf_qual_table) + 160];
	const char *params[1];
	LeafLoadResult plan;
	PGresult   *r;
	int64		max_id;
	int32		row_step;

	leaf_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												leaf_alloc_timeout_ms);
	res->status = LEAF_LOAD_FAILED;
	res->sqlstate = ERRCODE_CONNECTION_FAILURE;
	leaf_remote_shape_bad = false;
	if (!leaf_remote_connect(res->msg, sizeof(res->msg)))
	{
		if (leaf_remote_shape_bad)
		{
			res->status = LEAF_LOAD_FINAL;
			res->sqlstate = ERRCODE_LEAF_ALLOC_SHAPE;
		}
		return;
	}

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

	/*
	 * Usually the row's step is the one seen at the last load: plan with
	 * it, and the load is one statement.
	 */
	memset(&plan, 0, sizeof(plan));
	if (job->min_step > 0 &&
		leaf_plan_segment(job, job->db_max_id == PG_INT64_MIN ? 0 : job->db_max_id,
						  job->min_step, &plan))
	{
		switch (leaf_remote_take(job, job->min_step, &plan, res))
		{
			case 1:
				return;
			case -1:
				return;
			default:
				break;
		}
	}

	/* first load, or the row is not as last seen: read it (no lock) */
	snprintf(sql, sizeof(sql),
			 "SELECT a.max_id, a.step FROM %s AS a "
			 "WHERE a.biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar",
			 leaf_qual_table);
	params[0] = job->tag;
	r = leaf_remote_exec(sql, 1, params, res->msg, sizeof(res->msg));
	if (r == NULL)
		return;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		leaf_remote_error("allocation database", r, res->msg, sizeof(res->msg));
		leaf_remote_abort(r);
		PQclear(r);
		return;
	}
	if (PQntuples(r) == 0)
	{
		PQclear(r);
		res->status = LEAF_LOAD_TAG_GONE;
		return;
	}
	max_id = strtoi64(PQgetvalue(r, 0, 0), NULL, 10);
	row_step = (int32) strtol(PQgetvalue(r, 0, 1), NULL, 10);
	PQclear(r);

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
void
leaf_remote_load(const LeafLoadJob *job, LeafLoadResult *res)
{
	leaf_remote_load_once(job, res);
	if (res->status == LEAF_LOAD_FAILED && leaf_conn == NULL)
		res->sqlstate = ERRCODE_CONNECTION_FAILURE;
	leaf_remote_scrub(res->msg, sizeof(res->msg));
}

/* ---------- which allocation database: recorded, checked, confirmed ---------- */

/*
 * Each database that uses segment mode records, in its leaf_alloc_source
 * table, the allocation database it draws segments from (state
 * 'current'), in a committed transaction before the first segment from it
 * is used.  A load from any other source is refused (LF006), and the
 * source is written there as 'pending', until a superuser runs
 * leaf_alloc_source_confirm(), which makes the pending source current.
 *
 * The reason: a shard remembers the max_id of the tags it has used (and
 * refuses one that moved backwards, LF005), but not of those it has not
 * used yet, and another allocation database, or the local leaf_alloc, may
 * hold lower values for them.
 */

static bool
leaf_same_source(const LeafSourceIdent *a, const LeafSourceIdent *b)
{
	if (a->remote != b->remote)
		return false;
	/* local: the same database (1.1 recorded none: taken as the same) */
	if (!a->remote)
		return !OidIsValid(a->dboid) || !OidIsValid(b->dboid) ||
			a->dboid == b->dboid;
	return a->sysid == b->sysid && a->dboid == b->dboid &&
		a->extoid == b->extoid;
}

static void
leaf_describe_source(const LeafSourceIdent *id, char *buf, size_t len)
{
	if (!id->remote)
		snprintf(buf, len, "the local leaf_alloc (database %u)", id->dboid);
	else
		snprintf(buf, len, "%s (system " INT64_FORMAT ", database %u, extension %u)",
				 id->address, id->sysid, id->dboid, id->extoid);
}

/*
 * Compare cur with the recorded source, in the current transaction.  With
 * c->write, also record cur if nothing is recorded yet, or record it as
 * the pending source if it differs.  A database without the extension
 * (c->extoid invalid) is left alone.
 *
 * The same source on another timeline than the recorded one was promoted
 * or restored since segments were last loaded from it, and may have lost
 * the last of them (asynchronous replication, an older backup).  With
 * leaf.alloc_failover = 'confirm' that is refused like a change of source
 * (c->promoted, and cur with its timeline is written as pending); with
 * 'synchronous' the new timeline is recorded and loads go on.  Before
 * ALTER EXTENSION leaf UPDATE to 1.1 the table has no timeline column and
 * timelines are not checked.
 */
static void
leaf_source_check_txn(LeafSourceCheck *c)
{
	Oid			nsp;
	Oid			relid;
	char	   *tbl;
	uint64		i;
	bool		have_tl;
	bool		have_pending = false;
	bool		pending_same = false;
	bool		want_pending;
	bool		tl_changed;
	bool		restarted;
	uint32		rec_timeline = 0;
	uint32		pend_timeline = 0;	/* of a pending row for cur's source */
	char		recorded_desc[LEAF_ERRMSG_LEN];
	char		cur_desc[LEAF_ERRMSG_LEN];

	c->recorded = false;
	c->same = true;
	c->promoted = false;
	c->detail[0] = '\0';
	nsp = leaf_extension_namespace(&c->extoid);
	if (!OidIsValid(c->extoid))
		return;
	leaf_describe_source(c->cur, cur_desc, sizeof(cur_desc));
	relid = get_relname_relid("leaf_alloc_source", nsp);
	have_tl = OidIsValid(relid) &&
		get_attnum(relid, "timeline") != InvalidAttrNumber;
	c->have_tl = have_tl;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	tbl = psprintf("%s.leaf_alloc_source",
				   quote_identifier(get_namespace_name(nsp)));
	if (SPI_execute(psprintf("SELECT state OPERATOR(pg_catalog.=) 'current', "
							 "kind OPERATOR(pg_catalog.=) 'remote', "
							 "system_identifier, database_oid, extension_oid, "
							 "description, %s FROM %s",
							 have_tl ? "timeline" : "NULL::pg_catalog.int8", tbl),
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_alloc_source");
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		LeafSourceIdent rec;
		bool		isnull;
		bool		current;
		char	   *d;
		Datum		tl;

		memset(&rec, 0, sizeof(rec));
		current = DatumGetBool(SPI_getbinval(tup, desc, 1, &isnull));
		rec.remote = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull));
		if (rec.remote)
		{
			rec.sysid = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
			if (isnull)
				continue;
			rec.dboid = DatumGetObjectId(SPI_getbinval(tup, desc, 4, &isnull));
			rec.extoid = DatumGetObjectId(SPI_getbinval(tup, desc, 5, &isnull));
		}
		else
		{
			/* the database the counters belong to; NULL before 1.2 */
			rec.dboid = DatumGetObjectId(SPI_getbinval(tup, desc, 4, &isnull));
			if (isnull)
				rec.dboid = InvalidOid;
		}
		tl = SPI_getbinval(tup, desc, 7, &isnull);
		if (!isnull)
			rec.timeline = (uint32) DatumGetInt64(tl);
		if (current)
		{
			c->recorded = true;
			c->same = leaf_same_source(&rec, c->cur);
			c->fill_dboid = !rec.remote && !OidIsValid(rec.dboid) &&
				!c->cur->remote;
			c->copied = !rec.remote && !c->cur->remote && !c->same;
			rec_timeline = rec.timeline;
			d = SPI_getvalue(tup, desc, 6);
			strlcpy(recorded_desc, d ? d : "?", sizeof(recorded_desc));
		}
		else
		{
			have_pending = true;
			pending_same = leaf_same_source(&rec, c->cur) &&
				(!have_tl || rec.timeline == c->cur->timeline);
			if (leaf_same_source(&rec, c->cur))
				pend_timeline = rec.timeline;
		}
	}

	/*
	 * A promotion or an archive recovery only ever raises the timeline.
	 * A lower one means that the server's WAL history began again, which
	 * pg_upgrade does: the new cluster starts on timeline 1 with the old
	 * cluster's relation files, so the local leaf_alloc is the one the
	 * segments were loaded from, on the timeline recorded.  That is taken
	 * without a confirmation, unless a change was waiting for one: the old
	 * cluster had refused its own new timeline (or another source), and
	 * its pending row still says so.  For the same reason a pending
	 * timeline above the current one stays refused even where the
	 * current row's timeline matches (an upgraded cluster on timeline 1
	 * whose confirmed row is of timeline 1).  Not seen: an old cluster
	 * promoted or restored that loaded nothing since, as on timeline 1.
	 */
	tl_changed = c->recorded && c->same && have_tl && rec_timeline != 0 &&
		c->cur->timeline != 0 && rec_timeline != c->cur->timeline;
	restarted = tl_changed && !c->cur->remote &&
		c->cur->timeline < rec_timeline && !have_pending;

	if (c->copied)
		snprintf(c->detail, sizeof(c->detail),
				 "The counters in leaf_alloc are those of %s, and this is database %u: a copy (CREATE DATABASE ... TEMPLATE, or a restored dump) would hand out the IDs of the original again.",
				 recorded_desc, c->cur->dboid);
	else if (c->recorded && !c->same)
		snprintf(c->detail, sizeof(c->detail),
				 "Segments came from %s; leaf.alloc_conninfo now leads to %s.",
				 recorded_desc, cur_desc);
	else if (c->recorded && have_tl && !c->cur->remote &&
			 pend_timeline != 0 && c->cur->timeline != 0 &&
			 c->cur->timeline < pend_timeline)
	{
		c->promoted = true;
		/* the pending row is the evidence: kept as it is */
		pending_same = true;
		snprintf(c->detail, sizeof(c->detail),
				 "allocation database was promoted or restored (timeline %u -> %u); segments are not loaded until confirmed",
				 pend_timeline, c->cur->timeline);
	}
	else if (tl_changed && !restarted &&
			 leaf_alloc_failover != LEAF_FAILOVER_SYNCHRONOUS)
	{
		c->promoted = true;
		snprintf(c->detail, sizeof(c->detail),
				 "allocation database was promoted or restored (timeline %u -> %u); segments are not loaded until confirmed",
				 rec_timeline, c->cur->timeline);
	}

	want_pending = (!c->same || c->promoted);
	if (c->write && c->recorded && c->fill_dboid)
	{
		Oid			argtype = OIDOID;
		Datum		value = ObjectIdGetDatum(c->cur->dboid);

		if (SPI_execute_with_args(psprintf("UPDATE %s SET database_oid = $1 "
										   "WHERE state OPERATOR(pg_catalog.=) 'current'", tbl),
								  1, &argtype, &value, NULL,
								  false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not update leaf_alloc_source");
	}
	if (c->write &&
		(!c->recorded || (want_pending && !pending_same) ||
		 (!want_pending && have_pending) ||
		 (!want_pending && have_tl && c->cur->timeline != 0 &&
		  rec_timeline != c->cur->timeline)))
	{
		Oid			argtypes[7] = {TEXTOID, TEXTOID, INT8OID, OIDOID, OIDOID, TEXTOID, INT8OID};
		Datum		values[7];
		char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

		/* durable before any segment from this source is used */
		(void) set_config_option("synchronous_commit", "on", PGC_SUSET,
								 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0,
								 false);
		if (SPI_execute(psprintf("DELETE FROM %s WHERE state OPERATOR(pg_catalog.=) 'pending'",
								 tbl), false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not update leaf_alloc_source");
		if (!c->recorded || want_pending)
		{
			values[0] = CStringGetTextDatum(c->recorded ? "pending" : "current");
			values[1] = CStringGetTextDatum(c->cur->remote ? "remote" : "local");
			values[2] = Int64GetDatum(c->cur->sysid);
			values[3] = ObjectIdGetDatum(c->cur->dboid);
			values[4] = ObjectIdGetDatum(c->cur->extoid);
			values[5] = CStringGetTextDatum(cur_desc);
			values[6] = Int64GetDatum((int64) c->cur->timeline);
			if (!c->cur->remote)
				nulls[2] = nulls[4] = 'n';
			if (c->cur->timeline == 0)
				nulls[6] = 'n';
			if (SPI_execute_with_args(psprintf("INSERT INTO %s (state, kind, system_identifier, "
											   "database_oid, extension_oid, description%s) "
											   "VALUES ($1, $2, $3, $4, $5, $6%s)", tbl,
											   have_tl ? ", timeline" : "",
											   have_tl ? ", $7" : ""),
									  have_tl ? 7 : 6, argtypes, values, nulls,
									  false, 0) != SPI_OK_INSERT)
				elog(ERROR, "could not update leaf_alloc_source");
		}
		else if (have_tl && c->cur->timeline != 0 &&
				 rec_timeline != c->cur->timeline)
		{
			/* 1.0 recorded no timeline; or leaf.alloc_failover = synchronous */
			values[0] = Int64GetDatum((int64) c->cur->timeline);
			if (SPI_execute_with_args(psprintf("UPDATE %s SET timeline = $1, recorded_at = pg_catalog.now() "
											   "WHERE state OPERATOR(pg_catalog.=) 'current'", tbl),
									  1, &argtypes[6], values, NULL,
									  false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "could not update leaf_alloc_source");
			if (restarted)
				ereport(LOG,
						(errmsg("leaf allocator took timeline %u of %s for database \"%s\", where segments were last loaded on timeline %u",
								c->cur->timeline, cur_desc,
								get_database_name(MyDatabaseId), rec_timeline),
						 errdetail("A lower timeline comes from no promotion or recovery: the server's WAL history began again, as pg_upgrade does, and leaf_alloc is the one segments were loaded from.")));
			else if (rec_timeline != 0)
				ereport(LOG,
						(errmsg("leaf allocator accepted timeline %u of %s for database \"%s\", where segments were last loaded on timeline %u",
								c->cur->timeline, cur_desc,
								get_database_name(MyDatabaseId), rec_timeline),
						 errdetail("\"leaf.alloc_failover\" is \"synchronous\": the promoted server is taken to have every allocation its former primary acknowledged.")));
		}
		if (!c->recorded)
			ereport(LOG,
					(errmsg("leaf allocator recorded %s as the source of segments for database \"%s\"",
							cur_desc, get_database_name(MyDatabaseId))));
	}
	SPI_finish();
}

static void
leaf_source_check_fn(void *arg)
{
	leaf_source_check_txn((LeafSourceCheck *) arg);
}

/*
 * leaf_source_check_txn() in a transaction of its own.  Returns false,
 * with the error in *res, if that failed.
 */
static bool
leaf_source_run(LeafSourceCheck *c, LeafLoadResult *res)
{
	char		msg[LEAF_ERRMSG_LEN];

	if (leaf_in_transaction(leaf_source_check_fn, c,
							"leaf: checking the source of segments",
							&res->sqlstate, msg, sizeof(msg)))
		return true;
	snprintf(res->msg, sizeof(res->msg),
			 "could not check the source of segments: %s", msg);
	return false;
}

/*
 * May segments for job come from cur?  Returns true if cur is the
 * recorded source (recording it first if there is none) on a timeline
 * that may be used; otherwise fills *res with the failure: LF006 for
 * another source, LF007 for an unconfirmed new timeline.
 */
static bool
leaf_source_check(const LeafSourceIdent *cur, const LeafLoadJob *job,
				  LeafLoadResult *res)
{
	LeafSourceCheck c;

	/*
	 * Checked already.  Before ALTER EXTENSION leaf UPDATE to 1.1 there is
	 * no timeline to record; check again now and then, so that it is
	 * recorded soon after the update.
	 */
	if (leaf_checked && leaf_checked_extoid == job->extoid &&
		leaf_same_source(&leaf_checked_ident, cur) &&
		leaf_checked_ident.timeline == cur->timeline &&
		(leaf_checked_tl ||
		 !TimestampDifferenceExceeds(leaf_checked_at, GetCurrentTimestamp(),
									 leaf_tag_refresh_ms)))
		return true;

	memset(&c, 0, sizeof(c));
	c.cur = cur;
	c.write = true;
	if (!leaf_source_run(&c, res))
	{
		res->status = LEAF_LOAD_FAILED;
		return false;
	}
	if (c.extoid != job->extoid)
	{
		res->status = LEAF_LOAD_EXT_GONE;
		return false;
	}
	if (!c.same || c.promoted)
	{
		leaf_checked = false;
		leaf_refused = true;
		leaf_refused_timeline = c.same;
		res->status = LEAF_LOAD_FINAL;
		res->sqlstate = c.same ? ERRCODE_LEAF_ALLOC_PROMOTED :
			ERRCODE_LEAF_ALLOC_SOURCE_CHANGED;
		strlcpy(res->msg, c.detail, sizeof(res->msg));
		return false;
	}
	leaf_checked_ident = *cur;
	leaf_checked_extoid = c.extoid;
	leaf_checked = true;
	leaf_checked_tl = c.have_tl;
	leaf_checked_at = GetCurrentTimestamp();
	leaf_refused = false;
	leaf_refused_timeline = false;
	return true;
}

/*
 * Before a load from this database's own leaf_alloc: the same check, on
 * this server's timeline.
 */
bool
leaf_local_source_check(const LeafLoadJob *job, LeafLoadResult *res)
{
	LeafSourceIdent local;

	/* a connection left from fleet mode is of no more use */
	if (leaf_conn != NULL)
		leaf_remote_disconnect();

	memset(&local, 0, sizeof(local));
	local.remote = false;
	local.dboid = MyDatabaseId;
	local.timeline = GetWALInsertionTimeLine();
	return leaf_source_check(&local, job, res);
}

/*
 * Raise the error of a refused change of allocation database, for a
 * caller waiting for a segment of tag; detail comes from the allocator.
 */
void
leaf_report_source_changed(const char *tag, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_LEAF_ALLOC_SOURCE_CHANGED),
			 errmsg("refusing to draw segments of biz_tag \"%s\" from another allocation database",
					tag),
			 superuser() ?
			 errdetail_internal("%s", detail) :
			 errdetail("This database drew its segments from another allocation database before."),
			 errhint("Once every max_id in the new leaf_alloc lies above every ID handed out before, a superuser confirms the change with SELECT leaf_alloc_source_confirm(); the table leaf_alloc_source shows both.")));
}

/*
 * Raise the error of a load refused because the allocation database is on
 * a timeline that is not confirmed; msg comes from the allocator.
 */
void
leaf_report_promoted(const char *tag, const char *msg)
{
	ereport(ERROR,
			(errcode(ERRCODE_LEAF_ALLOC_PROMOTED),
			 errmsg_internal("%s", msg),
			 errdetail("biz_tag \"%s\" has no segment left, and the last allocations before the promotion or restore may be missing from leaf_alloc.",
					   tag),
			 errhint("Once every max_id in leaf_alloc lies above every ID handed out before, a superuser confirms with SELECT leaf_alloc_source_confirm(); see \"leaf.alloc_failover\".")));
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

	leaf_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												leaf_alloc_timeout_ms);
	if (!leaf_remote_connect(errbuf, errlen))
		return false;

	/*
	 * The tags of an allocation database that is not (yet) confirmed do
	 * not decide which slots to free.  This runs in the caller's
	 * transaction, so it only reads what is recorded.
	 */
	if (!leaf_checked || !leaf_same_source(&leaf_checked_ident, &leaf_remote_ident) ||
		leaf_checked_ident.timeline != leaf_remote_ident.timeline)
	{
		LeafSourceCheck c;

		memset(&c, 0, sizeof(c));
		c.cur = &leaf_remote_ident;
		leaf_source_check_txn(&c);
		if (c.recorded && !c.same)
		{
			snprintf(errbuf, errlen,
					 "the allocation database changed and the change is not confirmed: %s",
					 c.detail);
			return false;
		}
		if (c.promoted)
		{
			snprintf(errbuf, errlen, "%s", c.detail);
			return false;
		}
	}

	snprintf(sql, sizeof(sql), "SELECT biz_tag FROM %s", leaf_qual_table);
	r = leaf_remote_exec(sql, 0, NULL, errbuf, errlen);
	if (r == NULL)
		return false;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		leaf_remote_error("allocation database", r, errbuf, errlen);
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
 * The list of tags, with any error scrubbed of secrets.
 */
bool
leaf_remote_tags(HTAB *tags, char *errbuf, size_t errlen)
{
	bool		ok = leaf_remote_tags_read(tags, errbuf, errlen);

	if (!ok)
		leaf_remote_scrub(errbuf, errlen);
	return ok;
}

/*
 * Describe where segments come from: "local", or host:port/dbname of the
 * current connection (never the password), or the fact that there is
 * none; and whether a change of source waits for confirmation.
 */
void
leaf_remote_source(char *buf, size_t len)
{
	const char *refused = !leaf_refused ? "" :
		leaf_refused_timeline ? " (new timeline not confirmed)" :
		" (change not confirmed)";

	if (!leaf_remote_enabled())
		snprintf(buf, len, "local%s", refused);
	else if (leaf_conn != NULL && PQstatus(leaf_conn) == CONNECTION_OK)
		snprintf(buf, len, "remote %s%s", leaf_remote_ident.address, refused);
	else
		snprintf(buf, len, "remote (not connected)");
}
