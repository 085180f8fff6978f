/*-------------------------------------------------------------------------
 *
 * leaf_sf_db.c
 *	  Snowflake worker IDs held as leases in the allocation database
 *	  (leaf.worker_id_source = 'database').
 *
 * The snowflake worker of each node connects (libpq, one connection,
 * kept open) to the database that leaf.alloc_conninfo names, where leaf
 * 1.5 or later is installed, and holds its worker ID as a row of
 * leaf_worker_lease there: the holder (its data directory's identity and
 * its address), the layout, the high-water mark and the end of the lease
 * on that database's clock.  The rules are those of ZooKeeper's forever
 * nodes with recycling on (leaf_zk_assign.c):
 *
 *	- one row per worker ID, so one holder.  A holder draws a random
 *	  token each time it takes a row, and its renewals name the token: a
 *	  copy of its data directory, which has the same identity, is another
 *	  holder;
 *	- a node takes back the row its data directory holds once that row's
 *	  lease has ended (at once after a clean stop, which ends it); else
 *	  the lowest worker ID without a row; else the worker ID of a holder
 *	  whose lease ended more than leaf.max_clock_drift_ms ago (on the
 *	  database's clock), keeping its mark.  A worker ID taken from no
 *	  row, from another holder, or from a run of this data directory that
 *	  the state file does not name (the row's token is not the file's: a
 *	  copy ran with it, or the row came back from a backup) is "fresh":
 *	  the worker serves with it only past its mark and past the longest
 *	  lease an earlier holder could still use, leaf_sf_margin_ms() on a
 *	  clock up to twice leaf.max_clock_drift_ms from ours (each clock was
 *	  within it of the database's).  A holder serves no timestamp past
 *	  the mark its row holds, so a row that is there bounds what its
 *	  holders used; the wait is for a row that is not (deleted, truncated,
 *	  lost with a failover or a restore);
 *	- a worker ID set by hand (leaf.worker_id) is claimed as a row of its
 *	  own, refused while another data directory holds it, and never taken
 *	  over;
 *	- every heartbeat raises the mark and extends the lease in one
 *	  UPDATE, and the worker extends the generator's lease only to a mark
 *	  the row holds, and to no later than the lease in the database could
 *	  last, counted on this node's monotonic clock from the moment the
 *	  renewal was sent;
 *	- with leaf.worker_id_lease = 'bound', the row is bound to its holder:
 *	  its lease still says whether the holder runs (for a copy of its
 *	  data directory, and for its own next start), but no other node
 *	  takes it over when it ends; only once it is given up, or, if
 *	  leaf.worker_id_reclaim_after was set when it was taken, once that
 *	  long and leaf.max_clock_drift_ms have passed since its last renewal
 *	  on the database's clock.  The holder serves while the database is
 *	  unreachable: for good, or until the reclaim window less the drift
 *	  has passed on its monotonic clock since the renewal was sent, so
 *	  that every timestamp it used is below the first a taker may use;
 *	- every request measures this node's clock against the database's
 *	  clock_timestamp(): a difference of leaf.max_clock_drift_ms or more,
 *	  counting half the round trip as unknown, is refused;
 *	- every request asks the database which copy it is (the view
 *	  leaf_copy_identity, leaf_copy.c), and leaf_worker_lease_timeline
 *	  records each copy the leases were used in (cluster, timeline, data
 *	  directory, database): in a copy not recorded (a promotion, a
 *	  restore, pg_upgrade, a cut-over, which may have lost rows or set
 *	  them back) no worker ID goes to a holder until the longest lease of
 *	  the former copy has passed, unless leaf.alloc_failover =
 *	  'synchronous' says a promoted server had every commit; a copy
 *	  beside its original (a clone, a template) is refused until
 *	  leaf_worker_lease_confirm().  Holders go on renewing their rows,
 *	  which raises their marks there again; a holder whose row was lost
 *	  stops;
 *	- no worker ID is taken or renewed where logical replication writes
 *	  leaf's tables, or has since the last cut-over, nor in a table of
 *	  worker IDs that leaf_alloc_cutover() moved to a subscriber.
 *
 * The steps are functions of leaf in the allocation database
 * (src/leaf--1.4--1.5.sql): leaf_worker_lease_take(), _renew(),
 * _release() and _give_up(), each one statement and one transaction, with
 * this node's settings as arguments; the checks of the copy and of the
 * fleet are theirs too.  Only what needs this node's clock is done here:
 * each request first reads the database's clock (the view
 * leaf_copy_identity) and compares it with ours.
 *
 * Every statement names built-ins by pg_catalog and leaf's objects by the
 * extension's schema, found when the connection is made, and the
 * connection pins search_path in its options.  Every libpq call is
 * non-blocking and waits on the worker's latch and the socket, under a
 * deadline, with the socket counted among the worker's files
 * (leaf_libpq.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"
#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "common/leaf_copy.h"
#include "common/leaf_libpq.h"
#include "snowflake/leaf_sf_db.h"
#include "snowflake/leaf_sf_layout.h"
#include "snowflake/leaf_sf_state.h"

/* how long a connection, or an acquisition, may take */
#define LEAF_SF_DB_CONNECT_MS	5000
/* the release of a lease at a clean stop, which the stop waits for */
#define LEAF_SF_DB_RELEASE_MS	4000

static bool leaf_sf_db_stop(void);

/*
 * The connection (leaf_libpq.c): its waits are LeafSnowflakeDatabase, its
 * deadline leaf_sf_deadline, and it gives up when the worker is asked to
 * shut down.
 */
static LeafPq leaf_sf_pq = {.stop = leaf_sf_db_stop};
static char *leaf_sf_conn_info = NULL;	/* leaf.alloc_conninfo it was made
										 * with */
static char leaf_sf_lease_table[2 * NAMEDATALEN + 32];	/* schema-qualified */
static char leaf_sf_identity_view[2 * NAMEDATALEN + 32];
static int64 leaf_sf_deadline;	/* monotonic ms of the request under way */

/* the database's clock, in ms since 1970, in SQL */
#define LEAF_SF_DB_NOW_SQL \
	"(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) " \
	"OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8"

static const char *
leaf_sf_db_conninfo(void)
{
	const char *ci = GetConfigOption("leaf.alloc_conninfo", true, false);

	return ci != NULL ? ci : "";
}

/*
 * What keeps leaf.worker_id_source from working as configured, or NULL.
 * Called by the worker at start.
 */
const char *
leaf_sf_db_config_problem(void)
{
	bool		zk = leaf_sf_zk_hosts != NULL && leaf_sf_zk_hosts[0] != '\0';

	switch (leaf_sf_id_source)
	{
		case LEAF_SF_SOURCE_DATABASE:
			if (leaf_sf_db_conninfo()[0] == '\0')
				return "\"leaf.worker_id_source\" is 'database', but \"leaf.alloc_conninfo\" is not set";
			if (zk)
				return "\"leaf.worker_id_source\" is 'database', but \"leaf.zk_hosts\" is set too: worker IDs come from one source";
			if (leaf_sf_lease_mode == LEAF_SF_LEASE_BOUND &&
				leaf_sf_reclaim_after_ms > 0 &&
				leaf_sf_reclaim_after_ms <= leaf_sf_earlier_holder_ms())
				return "\"leaf.worker_id_reclaim_after\" is shorter than a lease and twice \"leaf.max_clock_drift_ms\" (2 heartbeats, 1 s and twice the drift): a node with \"leaf.worker_id_lease\" = 'bound' would stop serving between two renewals; set it longer, or to 0 to reclaim no worker ID";
			break;
		case LEAF_SF_SOURCE_ZOOKEEPER:
			if (!zk)
				return "\"leaf.worker_id_source\" is 'zookeeper', but \"leaf.zk_hosts\" is not set";
			break;
		case LEAF_SF_SOURCE_SETTING:
			if (leaf_sf_worker_id == -1)
				return "\"leaf.worker_id_source\" is 'setting', but \"leaf.worker_id\" is not set";
			break;
		default:
			break;
	}
	return NULL;
}

/* The monotonic clock, in ms: not moved by steps of the wall clock. */
int64
leaf_sf_mono_ms(void)
{
	/* the clock of leaf_libpq.c's deadlines, which leaf_sf_deadline is */
	return leaf_pq_mono_ms();
}

/*
 * Is the worker asked to shut down?  Then a request gives up, except the
 * release of the lease at the stop itself, which its own short deadline
 * bounds.
 */
static bool leaf_sf_releasing = false;

static bool
leaf_sf_db_stop(void)
{
	return ShutdownRequestPending && !leaf_sf_releasing;
}

void
leaf_sf_db_disconnect(void)
{
	leaf_pq_finish(&leaf_sf_pq);
	if (leaf_sf_conn_info != NULL)
		pfree(leaf_sf_conn_info);
	leaf_sf_conn_info = NULL;
}

/* One line of libpq's last error, after what. */
static void
leaf_sf_db_error(const char *what, PGresult *res, char *buf, size_t len)
{
	leaf_pq_error(&leaf_sf_pq, what, res, buf, len);
}

/* Wait as the worker's requests to the database do, until leaf_sf_deadline. */
static void
leaf_sf_db_prepare(void)
{
	static uint32 wait_event = 0;

	if (wait_event == 0)
		wait_event = WaitEventExtensionNew("LeafSnowflakeDatabase");
	leaf_sf_pq.wait_event = wait_event;
	leaf_sf_pq.deadline_ms = leaf_sf_deadline;
}

/* Run one statement; its last result, or NULL (connection closed). */
static PGresult *
leaf_sf_db_exec(const char *sql, int nparams, const char *const *params,
				char *reason, size_t reasonlen)
{
	PGresult   *res;

	leaf_sf_db_prepare();
	res = leaf_pq_exec(&leaf_sf_pq, sql, nparams, params, reason, reasonlen);
	if (res != NULL)
		return res;
	if (leaf_sf_pq.failure == LEAF_PQ_TIMEOUT)
		snprintf(reason, reasonlen, "the allocation database did not answer in time");
	else
		leaf_pq_prefix("allocation database", reason, reasonlen);
	leaf_sf_db_disconnect();
	return NULL;
}

/*
 * Run a statement that must succeed; false (connection closed, reason
 * set) if it did not.  *res gets the result if res is not NULL.
 */
static bool
leaf_sf_db_run(const char *sql, int nparams, const char *const *params,
			   PGresult **res, char *reason, size_t reasonlen)
{
	PGresult   *r = leaf_sf_db_exec(sql, nparams, params, reason, reasonlen);

	if (r == NULL)
		return false;
	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
		PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		leaf_sf_db_error("allocation database", r, reason, reasonlen);
		PQclear(r);
		leaf_sf_db_disconnect();
		return false;
	}
	if (res != NULL)
		*res = r;
	else
		PQclear(r);
	return true;
}

/*
 * Open the connection, in place of any, until leaf_sf_deadline.  The
 * connection string's own "options" are replaced: the session's
 * search_path is pinned, and every commit waits for synchronous
 * replication where there is any.
 */
static bool
leaf_sf_db_open(const LeafSfNode *node, char *reason, size_t reasonlen)
{
	char		appname[NAMEDATALEN];
	const char *keywords[] = {"connect_timeout", "application_name",
		"keepalives_idle", "keepalives_interval", "keepalives_count",
	"tcp_user_timeout", "dbname", "options", NULL};
	const char *values[] = {"5", appname, "10", "3", "3", "10000",
		leaf_sf_db_conninfo(),
		"-c search_path=pg_catalog,pg_temp -c synchronous_commit=on "
		"-c statement_timeout=10s -c lock_timeout=2s "
	"-c idle_in_transaction_session_timeout=10s", NULL};

	leaf_sf_db_disconnect();
	leaf_sf_conn_info = MemoryContextStrdup(TopMemoryContext,
											leaf_sf_db_conninfo());
	snprintf(appname, sizeof(appname), "leaf snowflake %s", node->addr);
	leaf_sf_db_prepare();
	if (leaf_pq_connect(&leaf_sf_pq, keywords, values, reason, reasonlen))
		return true;
	if (leaf_sf_pq.failure == LEAF_PQ_TIMEOUT)
		snprintf(reason, reasonlen, "could not connect to the allocation database in time");
	else
		leaf_pq_prefix("could not connect to the allocation database",
					   reason, reasonlen);
	leaf_sf_db_disconnect();
	return false;
}

/*
 * Before every request: where leaf's schema is now, and that its owner is
 * to be trusted with what the requests run (leaf_pq_leaf_schema()).  The
 * names of the lease functions and of the copy identity follow a rename
 * by that owner.
 *
 * On a connection kept from an earlier request, the check is the first
 * statement of this one: it waits until this request's deadline, not the
 * earlier one's that the connection still carries, which has passed.
 */
static bool
leaf_sf_db_schema(char *reason, size_t reasonlen)
{
	char		nsp[2 * NAMEDATALEN + 3];
	Oid			extoid;

	leaf_sf_db_prepare();
	if (!leaf_pq_leaf_schema(&leaf_sf_pq, nsp, sizeof(nsp), &extoid,
							 reason, reasonlen))
	{
		leaf_pq_prefix("allocation database", reason, reasonlen);
		leaf_sf_db_disconnect();
		return false;
	}
	snprintf(leaf_sf_lease_table, sizeof(leaf_sf_lease_table),
			 "%s.leaf_worker_lease", nsp);
	snprintf(leaf_sf_identity_view, sizeof(leaf_sf_identity_view),
			 "%s.leaf_copy_identity", nsp);
	return true;
}

/*
 * Make sure there is a connection, with the schema of leaf's tables
 * known.
 */
static bool
leaf_sf_db_connect(const LeafSfNode *node, char *reason, size_t reasonlen)
{
	PGresult   *res;

	/* a reloaded leaf.alloc_conninfo (a new primary) counts at once */
	if (leaf_sf_pq.conn != NULL && PQstatus(leaf_sf_pq.conn) == CONNECTION_OK &&
		PQtransactionStatus(leaf_sf_pq.conn) == PQTRANS_IDLE &&
		leaf_sf_conn_info != NULL &&
		strcmp(leaf_sf_conn_info, leaf_sf_db_conninfo()) == 0)
		return leaf_sf_db_schema(reason, reasonlen);
	if (!leaf_sf_db_open(node, reason, reasonlen))
		return false;

	if (!leaf_sf_db_run("SELECT pg_catalog.quote_ident(n.nspname), "
						"pg_catalog.to_regclass(pg_catalog.quote_ident(n.nspname) "
						"OPERATOR(pg_catalog.||) '.leaf_worker_lease') IS NOT NULL, "
						"pg_catalog.pg_is_in_recovery() "
						"FROM pg_catalog.pg_extension e "
						"JOIN pg_catalog.pg_namespace n "
						"ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
						"WHERE e.extname OPERATOR(pg_catalog.=) 'leaf'",
						0, NULL, &res, reason, reasonlen))
		return false;
	if (PQntuples(res) == 1 && PQgetvalue(res, 0, 2)[0] == 't')
	{
		snprintf(reason, reasonlen,
				 "the allocation database is in recovery (a standby): leases are kept on the primary, which \"leaf.alloc_conninfo\" should name (for example with several hosts and target_session_attrs=read-write)");
		PQclear(res);
		leaf_sf_db_disconnect();
		return false;
	}
	if (PQntuples(res) != 1 || PQgetvalue(res, 0, 1)[0] != 't')
	{
		snprintf(reason, reasonlen,
				 PQntuples(res) != 1 ?
				 "extension \"leaf\" is not installed in the allocation database" :
				 "extension \"leaf\" in the allocation database is older than 1.5, which holds worker IDs: update it there (ALTER EXTENSION leaf UPDATE)");
		PQclear(res);
		leaf_sf_db_disconnect();
		return false;
	}
	PQclear(res);
	return leaf_sf_db_schema(reason, reasonlen);
}

/*
 * Compare our clock with the database's.  t0 and t1 are our clock before
 * and after the statement that read the database's; false, with the
 * reason, if they differ by leaf.max_clock_drift_ms or more.
 */
static bool
leaf_sf_db_clock_ok(LeafSfDbLease *lease, int64 t0, int64 t1, int64 db_ms,
					char *reason, size_t reasonlen)
{
	int64		offset = (t0 + t1) / 2 - db_ms;
	int64		unknown = (t1 - t0 + 1) / 2;	/* where in the round trip
												 * the database read its
												 * clock */
	int64		limit = leaf_sf_max_clock_drift_ms;

	lease->clock_offset_ms = offset;
	/* 0 turns the check off, as for the peers' clocks in ZooKeeper */
	if (leaf_sf_max_clock_drift_ms > 0 &&
		(offset + unknown >= limit || -offset + unknown >= limit))
	{
		snprintf(reason, reasonlen,
				 "this node's clock differs from the allocation database's by " INT64_FORMAT " ms, give or take " INT64_FORMAT " ms of the round trip, and \"leaf.max_clock_drift_ms\" is %d",
				 offset, unknown, leaf_sf_max_clock_drift_ms);
		return false;
	}
	return true;
}

/*
 * Which copy of the allocation database a request reached, as the view
 * leaf_copy_identity says there (leaf_copy.c), and the database's clock.
 */
typedef struct LeafSfDbWhere
{
	int64		sysid;			/* its cluster */
	int64		datadir;		/* the inode of its data directory, 0 if
								 * unknown */
	int64		timeline;
	Oid			dboid;			/* the database */
	int64		started_ms;		/* when its server started */
	int64		db_ms;			/* its clock */
	bool		replicated;		/* refused: logical replication writes it */
} LeafSfDbWhere;

/*
 * Ask the allocation database which copy it is, and compare our clock
 * with its.  Refused (LEAF_SF_DB_FAIL) if the clocks differ too much, or
 * if logical replication writes leaf's tables there (or has, since the
 * last cut-over): the leases there are a publisher's, whose nodes go on
 * holding the same worker IDs.
 */
static LeafSfDbResult
leaf_sf_db_where(LeafSfDbLease *lease, LeafSfDbWhere *where, char *reason,
				 size_t reasonlen)
{
	char		sql[2 * NAMEDATALEN + 160];
	PGresult   *res;
	int64		t0;
	int64		t1;

	where->replicated = false;
	snprintf(sql, sizeof(sql),
			 "SELECT system_identifier, data_directory, timeline, started_ms, "
			 "now_ms, replicated, database_oid FROM %s", leaf_sf_identity_view);
	t0 = leaf_sf_clock_ms();
	if (!leaf_sf_db_run(sql, 0, NULL, &res, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	t1 = leaf_sf_clock_ms();
	where->sysid = strtoi64(PQgetvalue(res, 0, 0), NULL, 10);
	where->datadir = strtoi64(PQgetvalue(res, 0, 1), NULL, 10);
	where->timeline = strtoi64(PQgetvalue(res, 0, 2), NULL, 10);
	where->started_ms = strtoi64(PQgetvalue(res, 0, 3), NULL, 10);
	where->db_ms = strtoi64(PQgetvalue(res, 0, 4), NULL, 10);
	where->dboid = (Oid) strtoul(PQgetvalue(res, 0, 6), NULL, 10);
	where->replicated = !PQgetisnull(res, 0, 5);
	if (where->replicated)
	{
		snprintf(reason, reasonlen,
				 "the allocation database is written by logical replication, and its leases are a publisher's, whose nodes hold the same worker IDs: no worker ID is taken or renewed there until leaf_alloc_cutover() takes the fleet over (docs/copies.md). %s",
				 PQgetvalue(res, 0, 5));
		PQclear(res);
		return LEAF_SF_DB_FAIL;
	}
	PQclear(res);
	if (!leaf_sf_db_clock_ok(lease, t0, t1, where->db_ms, reason, reasonlen))
		return LEAF_SF_DB_FAIL;
	return LEAF_SF_DB_OK;
}

/*
 * The functions of the protocol (src/leaf--1.4--1.5.sql) are named after
 * the table of leases, in its schema: leaf_worker_lease_take() and so on.
 * Every argument is given its exact type, so that no overload that the
 * owner of the schema makes can take the call's place.
 */
#define LEAF_SF_DB_CALL_LEN		(sizeof(leaf_sf_lease_table) + 1024)

/* A result of a function of the protocol, as a LeafSfDbResult. */
static LeafSfDbResult
leaf_sf_db_outcome(const char *result)
{
	if (strcmp(result, "ok") == 0)
		return LEAF_SF_DB_OK;
	if (strcmp(result, "wait") == 0)
		return LEAF_SF_DB_WAIT;
	if (strcmp(result, "lost") == 0)
		return LEAF_SF_DB_LOST;
	return LEAF_SF_DB_FAIL;
}

/* A new token for every taking, positive and never 0. */
static bool
leaf_sf_db_new_token(int64 *token, char *reason, size_t reasonlen)
{
	do
	{
		if (!pg_strong_random(token, sizeof(*token)))
		{
			snprintf(reason, reasonlen, "could not generate a random lease token");
			return false;
		}
		*token &= PG_INT64_MAX;
	} while (*token == 0);
	return true;
}

/*
 * What leaf_worker_lease_take() recorded on its way, for this node's log:
 * a copy of the allocation database not seen before (columns 8 to 10),
 * and the fleet's settings (column 11).
 */
static void
leaf_sf_db_log_records(const LeafSfDbWhere *where, PGresult *res)
{
	bool		synchronous = PQgetvalue(res, 0, 10)[0] == 't';
	int64		last_timeline = strtoi64(PQgetvalue(res, 0, 9), NULL, 10);

	if (PQgetvalue(res, 0, 8)[0] == 't')
		ereport(LOG,
				(errmsg("the allocation database is on timeline " INT64_FORMAT " of system " INT64_FORMAT " now, which no lease was taken on before",
						where->timeline, where->sysid),
				 last_timeline > 0 ?
				 errdetail("The leases were last recorded on timeline " INT64_FORMAT " of this system.", last_timeline) :
				 errdetail("The leases were recorded in another cluster: pg_upgrade, a restore or a logical replica's cut-over."),
				 synchronous ?
				 errhint("\"leaf.alloc_failover\" is \"synchronous\": the leases of the former timeline are taken to be kept.") :
				 errhint("Leases written before may be lost or set back: no worker ID is taken for " INT64_FORMAT " ms.",
						 leaf_sf_earlier_holder_ms())));
	if (PQgetvalue(res, 0, 11)[0] == 't')
		ereport(LOG,
				(errmsg("leaf snowflake worker recorded \"leaf.heartbeat_interval\" %d ms, \"leaf.max_clock_drift_ms\" %d ms and \"leaf.snowflake_epoch\" " INT64_FORMAT " as the fleet's, in leaf_worker_lease_fleet",
						leaf_sf_heartbeat_ms, Max(leaf_sf_max_clock_drift_ms, 0),
						leaf_sf_epoch_ms)));
}

/*
 * Until when (monotonic ms) a lease confirmed by a request sent at mono0
 * may be used: the lease in the database, which ends leaf_sf_margin_ms()
 * after the request was made; or, bound, for good, or until the reclaim
 * window less the drift: a taker takes the row only once the window and
 * the drift have passed since the renewal on the database's clock, and our
 * clock is within the drift of it, so every timestamp we use is below the
 * window's end and every one of the taker's above it.
 */
static int64
leaf_sf_db_until(const LeafSfDbLease *lease, int64 mono0)
{
	if (!lease->bound)
		return mono0 + leaf_sf_margin_ms();
	if (lease->reclaim_ms <= 0)
		return PG_INT64_MAX;
	return mono0 + lease->reclaim_ms - Max(leaf_sf_max_clock_drift_ms, 0);
}

/*
 * The lease that leaf_worker_lease_take() gave this node, from its result:
 * log how it was taken, and fill in *lease.
 */
static void
leaf_sf_db_took(PGresult *res, int64 token, int64 mono0, LeafSfDbLease *lease)
{
	int			wid = atoi(PQgetvalue(res, 0, 2));
	const char *taken_from = PQgetvalue(res, 0, 5);
	bool		fresh = PQgetvalue(res, 0, 4)[0] == 't';
	int64		row_hwm = strtoi64(PQgetvalue(res, 0, 6), NULL, 10);

	if (strcmp(taken_from, "other") == 0)
		ereport(LOG,
				(errmsg("leaf snowflake worker took over worker ID %d, whose lease in the allocation database had ended, above its mark " INT64_FORMAT,
						wid, row_hwm)));
	else if (strcmp(taken_from, "self") == 0 && fresh)
		ereport(LOG,
				(errmsg("leaf snowflake worker took back worker ID %d, whose row in the allocation database has this data directory's identity but not the lease that \"%s\" names",
						wid, LEAF_SF_STATE_FILE),
				 errdetail("A copy of this data directory may have held it, or the row came back from a backup: the worker waits out the longest lease an earlier holder could still use.")));
	lease->held = true;
	lease->token = token;
	lease->fleet_id = strtoi64(PQgetvalue(res, 0, 3), NULL, 10);
	lease->worker_id = wid;
	lease->fresh = fresh;
	lease->row_hwm = row_hwm;
	lease->db_hwm = strtoi64(PQgetvalue(res, 0, 7), NULL, 10);
	lease->bound = leaf_sf_lease_mode == LEAF_SF_LEASE_BOUND;
	lease->reclaim_ms = lease->bound ? leaf_sf_reclaim_after_ms : 0;
	lease->until_mono = leaf_sf_db_until(lease, mono0);
}

/*
 * Take a worker ID with leaf_worker_lease_take(), which checks the copy
 * of the database, the fleet and the layout, and takes the row, in one
 * transaction.
 */
static LeafSfDbResult
leaf_sf_db_take(const LeafSfNode *node, int want_wid, int64 floor_hint,
				int64 file_token, int64 file_fleet, int64 token,
				const LeafSfDbWhere *where, int64 mono0,
				LeafSfDbLease *lease, char *reason, size_t reasonlen)
{
	char		sql[LEAF_SF_DB_CALL_LEN];
	char		layout[64];
	char		p[12][32];
	const char *params[17];
	const char *failover = GetConfigOption("leaf.alloc_failover", true, false);
	PGresult   *res;
	LeafSfDbResult r;

	leaf_sf_layout_format(&leaf_sf_layout, layout, sizeof(layout));
	snprintf(p[0], sizeof(p[0]), "%d", want_wid);
	snprintf(p[1], sizeof(p[1]), INT64_FORMAT, floor_hint);
	snprintf(p[2], sizeof(p[2]), INT64_FORMAT, file_token);
	snprintf(p[3], sizeof(p[3]), INT64_FORMAT, file_fleet);
	snprintf(p[4], sizeof(p[4]), INT64_FORMAT, token);
	snprintf(p[5], sizeof(p[5]), "%d", leaf_sf_max_worker_id());
	snprintf(p[6], sizeof(p[6]), "%d", leaf_sf_heartbeat_ms);
	snprintf(p[7], sizeof(p[7]), "%d", Max(leaf_sf_max_clock_drift_ms, 0));
	snprintf(p[8], sizeof(p[8]), INT64_FORMAT, leaf_sf_epoch_ms);
	snprintf(p[9], sizeof(p[9]), INT64_FORMAT, leaf_sf_margin_ms());
	snprintf(p[10], sizeof(p[10]), INT64_FORMAT, leaf_sf_earlier_holder_ms());
	params[0] = node->identity;
	params[1] = node->addr;
	for (int i = 0; i < 5; i++)
		params[2 + i] = p[i];
	params[7] = layout;
	for (int i = 5; i < 11; i++)
		params[3 + i] = p[i];
	params[14] = failover != NULL && strcmp(failover, "synchronous") == 0 ?
		"true" : "false";
	params[15] = leaf_sf_lease_mode == LEAF_SF_LEASE_BOUND ? "true" : "false";
	snprintf(p[11], sizeof(p[11]), "%d", leaf_sf_reclaim_after_ms);
	params[16] = p[11];
	snprintf(sql, sizeof(sql),
			 "SELECT result, reason, worker_id, fleet_id, fresh, taken_from, "
			 "earlier_hwm_ms, recorded_hwm_ms, new_copy, last_timeline, "
			 "copy_synchronous, fleet_recorded "
			 "FROM %s_take($1::pg_catalog.text, $2::pg_catalog.text, "
			 "$3::pg_catalog.int4, $4::pg_catalog.int8, $5::pg_catalog.int8, "
			 "$6::pg_catalog.int8, $7::pg_catalog.int8, $8::pg_catalog.text, "
			 "$9::pg_catalog.int4, $10::pg_catalog.int4, $11::pg_catalog.int4, "
			 "$12::pg_catalog.int8, $13::pg_catalog.int8, $14::pg_catalog.int8, "
			 "$15::pg_catalog.bool, $16::pg_catalog.bool, $17::pg_catalog.int8)",
			 leaf_sf_lease_table);
	if (!leaf_sf_db_run(sql, 17, params, &res, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	leaf_sf_db_log_records(where, res);
	r = leaf_sf_db_outcome(PQgetvalue(res, 0, 0));
	if (r == LEAF_SF_DB_OK)
		leaf_sf_db_took(res, token, mono0, lease);
	else
		strlcpy(reason, PQgetvalue(res, 0, 1), reasonlen);
	PQclear(res);
	return r;
}

/*
 * Take a worker ID: want_wid if set by hand, else the row this data
 * directory holds, the lowest free worker ID, or the worker ID of a
 * holder whose lease has ended.  floor_hint is a mark to record at least
 * (the highest this node knows of); file_token is the token the state
 * file names for the row this data directory took last, or 0.  On
 * LEAF_SF_DB_OK the lease is filled in; otherwise reason says why.
 *
 * Our clock is compared with the database's first (leaf_sf_db_where), as
 * only we can; leaf_worker_lease_take() decides the rest.
 */
LeafSfDbResult
leaf_sf_db_acquire(const LeafSfNode *node, int want_wid, int64 floor_hint,
				   int64 file_token, int64 file_fleet, LeafSfDbLease *lease,
				   char *reason, size_t reasonlen)
{
	int64		mono0 = leaf_sf_mono_ms();
	int64		token;
	LeafSfDbWhere where;
	LeafSfDbResult r;

	reason[0] = '\0';
	leaf_sf_deadline = mono0 + LEAF_SF_DB_CONNECT_MS;
	if (!leaf_sf_db_connect(node, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	if (!leaf_sf_db_new_token(&token, reason, reasonlen))
		return LEAF_SF_DB_FAIL;

	/* which copy of the database this is, and the clock */
	r = leaf_sf_db_where(lease, &where, reason, reasonlen);
	if (r != LEAF_SF_DB_OK)
		return r;
	return leaf_sf_db_take(node, want_wid, floor_hint, file_token, file_fleet,
						   token, &where, mono0, lease, reason, reasonlen);
}

/*
 * The settings of this node as parameters of the fleet's check: p holds
 * the fleet, heartbeat, drift and epoch, params[first..first+3] point at
 * them.
 */
static void
leaf_sf_db_fleet_params(const LeafSfDbLease *lease, char p[4][32],
						const char **params, int first)
{
	snprintf(p[0], sizeof(p[0]), INT64_FORMAT, lease->fleet_id);
	snprintf(p[1], sizeof(p[1]), "%d", leaf_sf_heartbeat_ms);
	snprintf(p[2], sizeof(p[2]), "%d", Max(leaf_sf_max_clock_drift_ms, 0));
	snprintf(p[3], sizeof(p[3]), INT64_FORMAT, leaf_sf_epoch_ms);
	for (int i = 0; i < 4; i++)
		params[first + i] = p[i];
}

/*
 * A renewal in a database that logical replication writes: the lease is
 * not ours to renew (LEAF_SF_DB_LOST, the taking says why in the node's
 * status), unless the fleet's check refuses first, as it comes first at
 * every renewal.  The reason of the replication is in reason already.
 */
static LeafSfDbResult
leaf_sf_db_renew_replicated(LeafSfDbLease *lease, char *reason,
							size_t reasonlen)
{
	char		sql[LEAF_SF_DB_CALL_LEN];
	char		p[4][32];
	const char *params[4];
	PGresult   *res;
	char		why[LEAF_SF_REASON_LEN];
	LeafSfDbResult r;

	leaf_sf_db_fleet_params(lease, p, params, 0);
	snprintf(sql, sizeof(sql),
			 "SELECT result, reason FROM %s_fleet_check($1::pg_catalog.int8, true, "
			 "$2::pg_catalog.int4, $3::pg_catalog.int4, $4::pg_catalog.int8)",
			 leaf_sf_lease_table);
	if (!leaf_sf_db_run(sql, 4, params, &res, why, sizeof(why)))
	{
		strlcpy(reason, why, reasonlen);
		return LEAF_SF_DB_RETRY;
	}
	r = leaf_sf_db_outcome(PQgetvalue(res, 0, 0));
	if (r != LEAF_SF_DB_OK)
		strlcpy(reason, PQgetvalue(res, 0, 1), reasonlen);
	PQclear(res);
	if (r != LEAF_SF_DB_OK)
		return r;
	lease->held = false;
	return LEAF_SF_DB_LOST;
}

/*
 * Renew our lease and record mark hwm.  On LEAF_SF_DB_OK the row holds
 * hwm and the lease lasts until lease->until_mono; LEAF_SF_DB_LOST if the
 * row is no longer ours.
 *
 * The clock first, before the mark is recorded: a mark of a clock that
 * stepped away must not be used.  leaf_worker_lease_renew() then checks
 * that the table of worker IDs is the same (leaf.alloc_conninfo may have
 * been reloaded) and the fleet's settings ours (ours may have been), and
 * renews, in one transaction.
 */
LeafSfDbResult
leaf_sf_db_renew(const LeafSfNode *node, LeafSfDbLease *lease, int64 hwm,
				 char *reason, size_t reasonlen)
{
	char		sql[LEAF_SF_DB_CALL_LEN];
	char		p[5][32];
	char		fp[4][32];
	const char *params[9];
	PGresult   *res;
	int64		mono0 = leaf_sf_mono_ms();
	LeafSfDbWhere where;
	LeafSfDbResult r;

	reason[0] = '\0';
	leaf_sf_deadline = mono0 + Max(Min(leaf_sf_heartbeat_ms, LEAF_SF_DB_CONNECT_MS), 500);
	if (!leaf_sf_db_connect(node, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	r = leaf_sf_db_where(lease, &where, reason, reasonlen);
	if (r == LEAF_SF_DB_FAIL && where.replicated)
		return leaf_sf_db_renew_replicated(lease, reason, reasonlen);
	if (r != LEAF_SF_DB_OK)
		return r;

	snprintf(p[0], sizeof(p[0]), "%d", lease->worker_id);
	snprintf(p[1], sizeof(p[1]), INT64_FORMAT, lease->token);
	snprintf(p[2], sizeof(p[2]), INT64_FORMAT, hwm);
	snprintf(p[3], sizeof(p[3]), INT64_FORMAT, leaf_sf_margin_ms());
	params[0] = p[0];
	params[1] = node->identity;
	params[2] = p[1];
	params[3] = p[2];
	params[4] = p[3];
	leaf_sf_db_fleet_params(lease, fp, params, 5);
	snprintf(sql, sizeof(sql),
			 "SELECT result, reason, recorded_hwm_ms "
			 "FROM %s_renew($1::pg_catalog.int4, $2::pg_catalog.text, "
			 "$3::pg_catalog.int8, $4::pg_catalog.int8, $5::pg_catalog.int8, "
			 "$6::pg_catalog.int8, $7::pg_catalog.int4, $8::pg_catalog.int4, "
			 "$9::pg_catalog.int8)",
			 leaf_sf_lease_table);
	if (!leaf_sf_db_run(sql, 9, params, &res, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	r = leaf_sf_db_outcome(PQgetvalue(res, 0, 0));
	if (r != LEAF_SF_DB_OK)
	{
		strlcpy(reason, PQgetvalue(res, 0, 1), reasonlen);
		PQclear(res);
		if (r == LEAF_SF_DB_LOST)
			lease->held = false;
		return r;
	}
	lease->db_hwm = strtoi64(PQgetvalue(res, 0, 2), NULL, 10);
	PQclear(res);
	lease->until_mono = leaf_sf_db_until(lease, mono0);
	return LEAF_SF_DB_OK;
}

/*
 * End our lease now, recording mark hwm: at a clean stop (the row stays
 * ours, for this data directory to take back at once), or given up
 * (give_up: its holder becomes no data directory's, so that no node takes
 * it back as its own, and it is taken over once its mark has passed).
 * Returns false, with the reason, if the database did not confirm it; the
 * update may still have been made, which a renewal then finds.
 */
static bool
leaf_sf_db_end_lease(const LeafSfNode *node, LeafSfDbLease *lease,
					 int64 hwm, bool give_up, int64 timeout_ms,
					 char *reason, size_t reasonlen)
{
	char		sql[LEAF_SF_DB_CALL_LEN];
	char		p_wid[16];
	char		p_hwm[32];
	char		p_token[32];
	const char *params[4];
	PGresult   *res;
	bool		ours;

	reason[0] = '\0';
	if (!lease->held)
	{
		snprintf(reason, reasonlen, "no worker ID is held in the allocation database");
		return false;
	}
	leaf_sf_deadline = leaf_sf_mono_ms() + timeout_ms;
	if (!leaf_sf_db_connect(node, reason, reasonlen))
		return false;
	snprintf(p_wid, sizeof(p_wid), "%d", lease->worker_id);
	snprintf(p_hwm, sizeof(p_hwm), INT64_FORMAT, hwm);
	snprintf(p_token, sizeof(p_token), INT64_FORMAT, lease->token);
	params[0] = p_wid;
	params[1] = node->identity;
	params[2] = p_token;
	params[3] = p_hwm;
	snprintf(sql, sizeof(sql),
			 "SELECT %s_%s($1::pg_catalog.int4, $2::pg_catalog.text, "
			 "$3::pg_catalog.int8, $4::pg_catalog.int8)",
			 leaf_sf_lease_table, give_up ? "give_up" : "release");
	if (!leaf_sf_db_run(sql, 4, params, &res, reason, reasonlen))
		return false;
	ours = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	lease->held = false;
	if (!ours)
		snprintf(reason, reasonlen,
				 "the allocation database no longer holds worker ID %d for this node",
				 lease->worker_id);
	return ours;
}

/*
 * At a clean stop, once the generator serves no more: end the lease, so
 * that this data directory takes the row back at once at its next start.
 * A failure only makes that start wait for the lease to end.  Returns
 * whether the row was ours and is released (a bound row stays ours).
 */
bool
leaf_sf_db_release(const LeafSfNode *node, LeafSfDbLease *lease, int64 hwm)
{
	char		reason[LEAF_SF_REASON_LEN];
	bool		released;

	/*
	 * The stop is why we are here: a renewal it interrupted closed the
	 * connection, and the release opens a new one (else it runs on the
	 * one kept from the last request).  It has a few seconds:
	 * a connection, the check of leaf's schema and the release, which a
	 * loaded allocation database may take more than a second to answer,
	 * and the stop waits for them.
	 */
	leaf_sf_releasing = true;
	released = leaf_sf_db_end_lease(node, lease, hwm, false,
									LEAF_SF_DB_RELEASE_MS,
									reason, sizeof(reason));
	if (released)
		ereport(LOG,
				(errmsg("leaf snowflake worker released worker ID %d in the allocation database, with mark " INT64_FORMAT,
						lease->worker_id, hwm)));
	else
		ereport(LOG,
				(errmsg("leaf snowflake worker could not release worker ID %d in the allocation database: %s",
						lease->worker_id, reason),
				 errdetail("The lease ends there by itself; until it has, the next start of this node waits to take the row back.")));
	leaf_sf_releasing = false;
	return released;
}

/* leaf_snowflake_new_worker_id(): give our row up, with mark hwm. */
bool
leaf_sf_db_give_up(const LeafSfNode *node, LeafSfDbLease *lease, int64 hwm,
				   char *reason, size_t reasonlen)
{
	return leaf_sf_db_end_lease(node, lease, hwm, true,
								LEAF_SF_DB_CONNECT_MS, reason, reasonlen);
}
