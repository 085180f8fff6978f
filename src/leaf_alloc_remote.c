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
 * Only this file talks libpq.  Passwords never reach the log: errors
 * report libpq's message, which does not include them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq-fe.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "leaf.h"

static PGconn *leaf_conn = NULL;
static char *leaf_conn_info = NULL; /* conninfo leaf_conn was opened with */
static char leaf_qual_table[2 * NAMEDATALEN + 16];	/* "schema".leaf_alloc */

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

static bool
leaf_remote_command(const char *sql, char *errbuf, size_t errlen)
{
	PGresult   *res = PQexec(leaf_conn, sql);
	bool		ok = (PQresultStatus(res) == PGRES_COMMAND_OK ||
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
	"dbname", NULL};
	const char *values[] = {"5", "leaf allocator", "10", "3", "3",
	leaf_alloc_conninfo, NULL};
	PGresult   *res;

	if (leaf_conn != NULL && PQstatus(leaf_conn) == CONNECTION_OK &&
		leaf_conn_info != NULL && strcmp(leaf_conn_info, leaf_alloc_conninfo) == 0)
		return true;

	leaf_remote_disconnect();
	leaf_conn = PQconnectdbParams(keywords, values, 1);
	if (leaf_conn == NULL || PQstatus(leaf_conn) != CONNECTION_OK)
	{
		leaf_remote_error("could not connect to the allocation database",
						  NULL, errbuf, errlen);
		leaf_remote_disconnect();
		return false;
	}
	leaf_conn_info = MemoryContextStrdup(TopMemoryContext, leaf_alloc_conninfo);

	/*
	 * A segment must be durable on the allocation database (and its
	 * synchronous standbys) before it is used.
	 */
	if (!leaf_remote_command("SET statement_timeout = '10s'; "
							 "SET lock_timeout = '2s'; "
							 "SET idle_in_transaction_session_timeout = '60s'",
							 errbuf, errlen))
	{
		leaf_remote_disconnect();
		return false;
	}
	res = PQexec(leaf_conn, "SELECT current_setting('synchronous_commit')");
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

	res = PQexec(leaf_conn,
				 "SELECT pg_catalog.quote_ident(n.nspname) "
				 "FROM pg_catalog.pg_extension e "
				 "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
				 "WHERE e.extname = 'leaf'");
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
		PGresult   *r = PQexec(leaf_conn, "ROLLBACK");

		PQclear(r);
	}
}

void
leaf_remote_load(const LeafLoadJob *job, LeafLoadResult *res)
{
	char		sql[sizeof(leaf_qual_table) + 128];
	const char *params[2];
	char		maxbuf[32];
	PGresult   *r = NULL;
	int64		max_id;
	int32		row_step;

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
	r = PQexecParams(leaf_conn, sql, 1, NULL, params, NULL, NULL, 0);
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
	r = NULL;

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
	r = PQexecParams(leaf_conn, sql, 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK ||
		strcmp(PQcmdTuples(r), "1") != 0)
		goto fail;
	PQclear(r);

	/* the segment may be used only once this COMMIT is known to succeed */
	r = PQexec(leaf_conn, "COMMIT");
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		goto fail;
	PQclear(r);
	res->status = LEAF_LOAD_OK;
	return;

fail:
	leaf_remote_error("allocation database", r, res->msg, sizeof(res->msg));
	res->status = LEAF_LOAD_FAILED;
	res->sqlstate = ERRCODE_LEAF_ALLOC_FAILED;
	leaf_remote_abort(r);
	PQclear(r);
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

	if (!leaf_remote_connect(errbuf, errlen))
		return false;
	snprintf(sql, sizeof(sql), "SELECT biz_tag FROM %s", leaf_qual_table);
	r = PQexec(leaf_conn, sql);
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
