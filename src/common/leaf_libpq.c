/*-------------------------------------------------------------------------
 *
 * leaf_libpq.c
 *	  leaf's one libpq layer: every connection that leaf makes to another
 *	  server (a fleet's allocation database, the leases of worker IDs,
 *	  the publisher of leaf_alloc_cutover()) is made, used and closed
 *	  here.
 *
 * Nothing here blocks in libpq.  A connection is started with
 * PQconnectStartParams() and driven with PQconnectPoll(); a statement is
 * sent with PQsendQueryParams() and PQflush(), and its result read with
 * PQconsumeInput() and PQisBusy().  In between, the process waits on its
 * latch and the socket (WaitLatchOrSocket, under the caller's wait
 * event), until the caller's deadline: a server that stalls, or a
 * network that drops packets, costs the caller its deadline, never a
 * process stuck in a system call.  A connect_timeout in the connection
 * string is not applied by libpq to such a connection; the deadline is
 * what bounds it.  (The name lookup of a host is the one step that libpq
 * still does in a blocking call.)
 *
 * Interrupts are handled at each wake-up of the latch, as the process
 * would anywhere else: CHECK_FOR_INTERRUPTS() lets a backend's cancel
 * (pg_cancel_backend, statement_timeout) or termination raise its error
 * at once.  Before it propagates, the connection is closed: whatever was
 * sent and not read, and any transaction open there, goes with it, and
 * the server rolls that transaction back.  A background worker, whose
 * loop must not raise errors, names in stop() what makes it give up (a
 * shutdown request); the call then fails as on its deadline.
 *
 * Each connection's socket is counted with AcquireExternalFD(), as
 * postgres_fdw and dblink count theirs, so that the file descriptors the
 * server keeps for its own files are not taken; with none left, the
 * connection is refused with a reason instead of being made.
 *
 * No call raises an error of its own: a failure returns false or NULL,
 * with its kind in LeafPq.failure and libpq's message, or a short text,
 * in the caller's buffer, and the connection closed.  Each caller turns
 * that into its own message, or into an ereport with its own SQLSTATE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

#include "common/leaf_libpq.h"

/* The monotonic clock, in ms, which deadlines are counted on. */
int64
leaf_pq_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Close the connection, if any, and give its file descriptor back. */
void
leaf_pq_finish(LeafPq *pq)
{
	if (pq->conn != NULL)
		PQfinish(pq->conn);
	pq->conn = NULL;
	if (pq->fd_held)
		ReleaseExternalFD();
	pq->fd_held = false;
}

/* Copy msg into buf without its final newlines. */
static void
leaf_pq_copy_chomped(const char *msg, char *buf, size_t len)
{
	size_t		n;

	strlcpy(buf, msg, len);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
}

/*
 * Record a failure of kind and its reason (text, or libpq's message when
 * text is NULL), and close the connection.  Returns false.
 */
static bool
leaf_pq_fail(LeafPq *pq, LeafPqFailure kind, const char *text,
			 char *reason, size_t reasonlen)
{
	if (text == NULL)
		text = pq->conn != NULL ? PQerrorMessage(pq->conn) : "no connection";
	leaf_pq_copy_chomped(text, reason, reasonlen);
	pq->failure = kind;
	leaf_pq_finish(pq);
	return false;
}

/*
 * Handle the interrupts that the latch woke us for.  An error they raise
 * (a backend's cancel or termination) closes the connection first: it
 * may be in the middle of a statement, which nobody will read the end
 * of.
 */
static void
leaf_pq_interrupts(LeafPq *pq)
{
	PG_TRY();
	{
		CHECK_FOR_INTERRUPTS();
	}
	PG_CATCH();
	{
		leaf_pq_finish(pq);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * Wait until the socket is ready for events, or the latch is set.
 * Returns false, the connection closed, when the deadline has passed or
 * the caller's stop() says to give up.
 */
static bool
leaf_pq_wait(LeafPq *pq, int events, char *reason, size_t reasonlen)
{
	int			flags = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | events;
	long		timeout = -1;
	int			rc;

	if (pq->stop != NULL && pq->stop())
		return leaf_pq_fail(pq, LEAF_PQ_STOPPED, "interrupted", reason, reasonlen);
	if (pq->deadline_ms != 0)
	{
		int64		left = pq->deadline_ms - leaf_pq_mono_ms();

		if (left <= 0)
			return leaf_pq_fail(pq, LEAF_PQ_TIMEOUT, "timeout expired",
								reason, reasonlen);
		timeout = (long) left;
		flags |= WL_TIMEOUT;
	}
	rc = WaitLatchOrSocket(MyLatch, flags, PQsocket(pq->conn), timeout,
						   pq->wait_event != 0 ? pq->wait_event : PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		pq->latch_seen = true;
		leaf_pq_interrupts(pq);
		if (pq->stop != NULL && pq->stop())
			return leaf_pq_fail(pq, LEAF_PQ_STOPPED, "interrupted", reason, reasonlen);
	}
	return true;
}

/*
 * Open a connection with PQconnectStartParams(keywords, values), dbname
 * expanded, in place of any the struct holds, and wait until it is made.
 * Returns false, with the reason, if there is no file descriptor left
 * for it, it failed, the deadline passed or the caller gave up.  The
 * connection is left non-blocking, as the other calls need it.
 */
bool
leaf_pq_connect(LeafPq *pq, const char *const *keywords,
				const char *const *values, char *reason, size_t reasonlen)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;

	leaf_pq_finish(pq);
	pq->failure = LEAF_PQ_OK;
	if (!AcquireExternalFD())
		return leaf_pq_fail(pq, LEAF_PQ_NO_FD,
							"there are too many open files in this server process (raise \"max_files_per_process\" or the limit of open files, ulimit -n)",
							reason, reasonlen);
	pq->fd_held = true;
	pq->conn = PQconnectStartParams(keywords, values, 1);
	if (pq->conn == NULL)
		return leaf_pq_fail(pq, LEAF_PQ_BROKEN, "out of memory",
							reason, reasonlen);
	if (PQstatus(pq->conn) == CONNECTION_BAD)
		return leaf_pq_fail(pq, LEAF_PQ_BROKEN, NULL, reason, reasonlen);
	while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED)
	{
		if (!leaf_pq_wait(pq, st == PGRES_POLLING_READING ?
						  WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE,
						  reason, reasonlen))
			return false;
		st = PQconnectPoll(pq->conn);
	}
	if (PQstatus(pq->conn) != CONNECTION_OK ||
		PQsetnonblocking(pq->conn, 1) != 0)
		return leaf_pq_fail(pq, LEAF_PQ_BROKEN, NULL, reason, reasonlen);
	return true;
}

/*
 * Run one statement (with parameters in text, or none) and return its
 * last result, which the caller checks and clears.  Returns NULL, with
 * the reason and the connection closed, if it could not be sent or read:
 * the connection broke, the deadline passed or the caller gave up.
 */
PGresult *
leaf_pq_exec(LeafPq *pq, const char *sql, int nparams,
			 const char *const *params, char *reason, size_t reasonlen)
{
	PGresult   *last = NULL;
	int			rc;

	pq->failure = LEAF_PQ_OK;
	if (pq->conn == NULL)
	{
		leaf_pq_fail(pq, LEAF_PQ_BROKEN, NULL, reason, reasonlen);
		return NULL;
	}
	if (!PQsendQueryParams(pq->conn, sql, nparams, NULL, params,
						   NULL, NULL, 0))
		goto broken;
	while ((rc = PQflush(pq->conn)) != 0)
	{
		if (rc < 0)
			goto broken;
		if (!leaf_pq_wait(pq, WL_SOCKET_WRITEABLE | WL_SOCKET_READABLE,
						  reason, reasonlen))
			goto failed;
		if (!PQconsumeInput(pq->conn))
			goto broken;
	}
	for (;;)
	{
		PGresult   *r;

		while (PQisBusy(pq->conn))
		{
			if (!leaf_pq_wait(pq, WL_SOCKET_READABLE, reason, reasonlen))
				goto failed;
			if (!PQconsumeInput(pq->conn))
				goto broken;
		}
		r = PQgetResult(pq->conn);
		if (r == NULL)
			break;
		PQclear(last);
		last = r;
	}
	return last;

broken:
	leaf_pq_fail(pq, LEAF_PQ_BROKEN, NULL, reason, reasonlen);
failed:
	PQclear(last);
	return NULL;
}

/* Put "what: msg" into buf, cut at the end of the first line of msg. */
static void
leaf_pq_format(const char *what, const char *msg, char *buf, size_t len)
{
	char	   *nl;

	snprintf(buf, len, "%s: %s", what, msg);
	nl = strchr(buf, '\n');
	if (nl != NULL)
		*nl = '\0';
}

/*
 * One line of the error of res, or else of the connection, after what,
 * into buf: for a statement that failed, before the connection is closed.
 */
void
leaf_pq_error(const LeafPq *pq, const char *what, const PGresult *res,
			  char *buf, size_t len)
{
	const char *msg = res ? PQresultErrorMessage(res) : NULL;

	if (msg == NULL || msg[0] == '\0')
		msg = pq->conn ? PQerrorMessage(pq->conn) : "no connection";
	leaf_pq_format(what, msg, buf, len);
}

/*
 * Turn the reason that a failed call left in buf into "what: reason",
 * one line.
 */
void
leaf_pq_prefix(const char *what, char *buf, size_t len)
{
	char	   *msg = pstrdup(buf);

	leaf_pq_format(what, msg, buf, len);
	pfree(msg);
}

/*
 * leaf's schema on the other server, quoted for a statement, into schema;
 * asked before every request, so that what the statements name is always
 * where leaf is now.
 *
 * Every statement leaf sends there names leaf's objects by that schema's
 * name, so whoever may rename the schema, or drop it and make another of
 * the same name, decides what those statements run, as the role leaf
 * connects as.  Only a superuser, or that role itself, may own it, then;
 * a schema owned by pg_database_owner (as public is) is the database
 * owner's.  Returns false, with the reason, if leaf is not installed
 * there or its schema has any other owner; else *extoid is the
 * extension's OID, which tells a rename from a new extension.
 */
bool
leaf_pq_leaf_schema(LeafPq *pq, char *schema, size_t schemalen, Oid *extoid,
					char *reason, size_t reasonlen)
{
	PGresult   *res;
	bool		ok = false;

	res = leaf_pq_exec(pq,
					   "SELECT pg_catalog.quote_ident(n.nspname), o.rolname, "
					   "o.rolsuper OR o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, e.oid "
					   "FROM pg_catalog.pg_extension e "
					   "JOIN pg_catalog.pg_namespace n "
					   "ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
					   "JOIN pg_catalog.pg_roles o ON o.oid OPERATOR(pg_catalog.=) "
					   "CASE WHEN n.nspowner OPERATOR(pg_catalog.=) "
					   "'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid "
					   "THEN (SELECT d.datdba FROM pg_catalog.pg_database d "
					   "WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) "
					   "ELSE n.nspowner END "
					   "WHERE e.extname OPERATOR(pg_catalog.=) 'leaf'",
					   0, NULL, reason, reasonlen);
	if (res == NULL)
		return false;
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		leaf_pq_error(pq, "could not find leaf's schema", res, reason, reasonlen);
	else if (PQntuples(res) != 1)
		snprintf(reason, reasonlen, "extension \"leaf\" is not installed in the database");
	else if (PQgetvalue(res, 0, 2)[0] != 't')
		snprintf(reason, reasonlen,
				 "leaf's schema %s belongs to role \"%s\", which is neither a superuser nor the role leaf connects as, so that role could choose what leaf's statements run (give the schema, or the database if the schema is owned by pg_database_owner, to a superuser)",
				 PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
	else
	{
		strlcpy(schema, PQgetvalue(res, 0, 0), schemalen);
		*extoid = (Oid) strtoul(PQgetvalue(res, 0, 3), NULL, 10);
		ok = true;
	}
	PQclear(res);
	return ok;
}
