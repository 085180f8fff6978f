/*-------------------------------------------------------------------------
 *
 * leaf_alloc_remote.c
 *	  Fleet mode: allocator workers draw segments from the leaf_alloc of
 *	  another server, named by leaf.alloc_conninfo.
 *
 * Every shard's allocator connects (libpq, one connection per worker,
 * kept open) to the allocation database and runs the same steps as a
 * local load there: lock the tag's row, move max_id up, commit.  The row
 * lock orders the shards, so each segment goes to exactly one of them.
 * A segment is used only after its COMMIT reported success; a COMMIT
 * whose outcome is unknown (connection lost) leaves a gap, never a
 * repeat.
 *
 * With several hosts and target_session_attrs=read-write in the
 * connection string, a failed connection is simply opened again and
 * libpq finds the new primary.  Synchronous replication is what makes
 * that safe: see README.
 *
 * Every libpq call is non-blocking and waits on the worker's latch and
 * the socket, under a deadline of leaf.alloc_timeout per load: a hung
 * server, a lost network or a synchronous standby that never answers
 * costs a gap in the IDs and a retry, never a stuck worker.  A COMMIT that
 * comes back with a warning (a cancelled wait for synchronous
 * replication) is not trusted either.
 *
 * Only this file talks libpq.  Passwords never reach the log: errors
 * report libpq's message, which does not include them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-fe.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "leaf.h"

static PGconn *leaf_conn = NULL;
static char *leaf_conn_info = NULL; /* conninfo leaf_conn was opened with */
static char leaf_qual_table[2 * NAMEDATALEN + 16];	/* "schema".leaf_alloc */
static TimestampTz leaf_deadline;	/* of the load under way */
static bool leaf_got_warning;	/* the server sent a WARNING */

/* Remember warnings: one during COMMIT means "maybe not replicated". */
static void
leaf_notice_receiver(void *arg, const PGresult *res)
{
	const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);

	if (sev != NULL && strcmp(sev, "WARNING") == 0)
		leaf_got_warning = true;
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
 * Make sure there is a working connection; returns false with the reason
 * in errbuf.
 */
static bool
leaf_remote_connect(char *errbuf, size_t errlen)
{
	/* defaults that the connection string may override */
	const char *keywords[] = {"connect_timeout", "application_name",
		"keepalives_idle", "keepalives_interval", "keepalives_count",
	"tcp_user_timeout", "dbname", NULL};
	const char *values[] = {"5", "leaf allocator", "10", "3", "3",
	"10000", leaf_alloc_conninfo, NULL};
	PGresult   *res;

	if (leaf_conn != NULL && PQstatus(leaf_conn) == CONNECTION_OK &&
		leaf_conn_info != NULL && strcmp(leaf_conn_info, leaf_alloc_conninfo) == 0)
		return true;

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
	 * A segment must be durable on the allocation database (and its
	 * synchronous standbys) before it is used.
	 */
	if (!leaf_remote_command("SET statement_timeout = '10s'",
							 errbuf, errlen) ||
		!leaf_remote_command("SET lock_timeout = '2s'", errbuf, errlen) ||
		!leaf_remote_command("SET idle_in_transaction_session_timeout = '60s'",
							 errbuf, errlen))
	{
		leaf_remote_disconnect();
		return false;
	}
	res = leaf_remote_exec("SELECT current_setting('synchronous_commit')",
						   0, NULL, errbuf, errlen);
	if (res == NULL)
		return false;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		(strcmp(PQgetvalue(res, 0, 0), "off") == 0 ||
		 strcmp(PQgetvalue(res, 0, 0), "local") == 0))
	{
		PQclear(res);
		if (!leaf_remote_command("SET synchronous_commit = on", errbuf, errlen))
		{
			leaf_remote_disconnect();
			return false;
		}
	}
	else
		PQclear(res);

	res = leaf_remote_exec("SELECT pg_catalog.quote_ident(n.nspname) "
						   "FROM pg_catalog.pg_extension e "
						   "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
						   "WHERE e.extname = 'leaf'",
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
	PQclear(res);
	return true;
}

/*
 * End a failed remote transaction.  A connection that is broken, or that
 * reached a server which is not (or no longer) a primary, is closed so
 * that the next attempt looks for the primary again.
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
							  strncmp(sqlstate, "08", 2) == 0)))
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

static void
leaf_remote_load_once(const LeafLoadJob *job, LeafLoadResult *res)
{
	char		sql[sizeof(leaf_qual_table) + 128];
	const char *params[2];
	char		maxbuf[32];
	PGresult   *r;
	int64		max_id;
	int32		row_step;

	leaf_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												leaf_alloc_timeout_ms);
	res->status = LEAF_LOAD_FAILED;
	res->sqlstate = ERRCODE_CONNECTION_FAILURE;
	if (!leaf_remote_connect(res->msg, sizeof(res->msg)))
		return;

	res->sqlstate = ERRCODE_LEAF_ALLOC_FAILED;
	if (!leaf_remote_command("BEGIN", res->msg, sizeof(res->msg)))
	{
		leaf_remote_abort(NULL);
		return;
	}

	snprintf(sql, sizeof(sql),
			 "SELECT max_id, step FROM %s WHERE biz_tag = $1::pg_catalog.varchar "
			 "FOR UPDATE", leaf_qual_table);
	params[0] = job->tag;
	r = leaf_remote_exec(sql, 1, params, res->msg, sizeof(res->msg));
	if (r == NULL)
		return;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail;
	if (PQntuples(r) == 0)
	{
		PQclear(r);
		leaf_remote_abort(NULL);
		res->status = LEAF_LOAD_TAG_GONE;
		return;
	}
	max_id = strtoi64(PQgetvalue(r, 0, 0), NULL, 10);
	row_step = (int32) strtol(PQgetvalue(r, 0, 1), NULL, 10);
	PQclear(r);

	if (!leaf_plan_segment(job, max_id, row_step, res))
	{
		leaf_remote_abort(NULL);
		return;
	}

	snprintf(sql, sizeof(sql),
			 "UPDATE %s SET max_id = $2::pg_catalog.int8 "
			 "WHERE biz_tag = $1::pg_catalog.varchar", leaf_qual_table);
	snprintf(maxbuf, sizeof(maxbuf), INT64_FORMAT, res->db_max_id);
	params[1] = maxbuf;
	r = leaf_remote_exec(sql, 2, params, res->msg, sizeof(res->msg));
	if (r == NULL)
		goto lost;
	if (PQresultStatus(r) != PGRES_COMMAND_OK ||
		strcmp(PQcmdTuples(r), "1") != 0)
		goto fail;
	PQclear(r);

	/*
	 * The segment may be used only once this COMMIT is known to have
	 * succeeded, with no warning: a warning here means the wait for the
	 * synchronous standby was cancelled, so the allocation might not
	 * survive a failover.
	 */
	leaf_got_warning = false;
	r = leaf_remote_exec("COMMIT", 0, NULL, res->msg, sizeof(res->msg));
	if (r == NULL)
		goto lost;
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		goto fail;
	PQclear(r);
	if (leaf_got_warning)
	{
		snprintf(res->msg, sizeof(res->msg),
				 "allocation database warned during COMMIT (was the wait for a synchronous standby cancelled?); the segment was not used");
		return;
	}
	res->status = LEAF_LOAD_OK;
	return;

lost:
	/* the outcome is unknown: the segment is dropped, leaving a gap */
	res->status = LEAF_LOAD_FAILED;
	res->sqlstate = ERRCODE_LEAF_ALLOC_FAILED;
	return;

fail:
	leaf_remote_error("allocation database", r, res->msg, sizeof(res->msg));
	res->status = LEAF_LOAD_FAILED;
	res->sqlstate = ERRCODE_LEAF_ALLOC_FAILED;
	leaf_remote_abort(r);
	PQclear(r);
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
}

/*
 * Put every tag of the remote leaf_alloc into tags.  Returns false, with
 * the reason in errbuf, when the list could not be read.
 */
bool
leaf_remote_tags(HTAB *tags, char *errbuf, size_t errlen)
{
	char		sql[sizeof(leaf_qual_table) + 64];
	PGresult   *r;
	int			i;

	leaf_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												leaf_alloc_timeout_ms);
	if (!leaf_remote_connect(errbuf, errlen))
		return false;
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
 * Describe where segments come from: host:port/dbname of the current
 * connection (never the password), or the fact that there is none.
 */
void
leaf_remote_source(char *buf, size_t len)
{
	if (leaf_conn != NULL && PQstatus(leaf_conn) == CONNECTION_OK)
		snprintf(buf, len, "remote %s:%s/%s", PQhost(leaf_conn),
				 PQport(leaf_conn), PQdb(leaf_conn));
	else
		snprintf(buf, len, "remote (not connected)");
}
