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
 * Every statement names built-ins by pg_catalog and leaf's tables by the
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
static char leaf_sf_tl_table[2 * NAMEDATALEN + 32];
static char leaf_sf_fleet_table[2 * NAMEDATALEN + 32];
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

/* Is the worker asked to shut down?  Then a request gives up. */
static bool
leaf_sf_db_stop(void)
{
	return ShutdownRequestPending;
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
		return true;
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
	snprintf(leaf_sf_lease_table, sizeof(leaf_sf_lease_table),
			 "%s.leaf_worker_lease", PQgetvalue(res, 0, 0));
	snprintf(leaf_sf_fleet_table, sizeof(leaf_sf_fleet_table),
			 "%s.leaf_worker_lease_fleet", PQgetvalue(res, 0, 0));
	snprintf(leaf_sf_tl_table, sizeof(leaf_sf_tl_table),
			 "%s.leaf_worker_lease_timeline", PQgetvalue(res, 0, 0));
	snprintf(leaf_sf_identity_view, sizeof(leaf_sf_identity_view),
			 "%s.leaf_copy_identity", PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

/* Roll back a transaction that is not to be committed. */
static void
leaf_sf_db_abort(void)
{
	char		ignored[LEAF_SF_REASON_LEN];

	if (leaf_sf_pq.conn != NULL)
		(void) leaf_sf_db_run("ROLLBACK", 0, NULL, NULL, ignored, sizeof(ignored));
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
 * Record a copy of the allocation database first seen (another cluster,
 * timeline, data directory or database), in a statement of its own (committed
 * whatever the acquisition does), so that the wait counts from the first
 * time any node saw it.
 */
static bool
leaf_sf_db_record_copy(const LeafSfDbWhere *where, bool synchronous,
					   char *reason, size_t reasonlen)
{
	char		sql[512];
	char		p_sys[32];
	char		p_tl[32];
	char		p_dir[32];
	char		p_db[16];
	const char *params[5];

	snprintf(p_sys, sizeof(p_sys), INT64_FORMAT, where->sysid);
	snprintf(p_tl, sizeof(p_tl), INT64_FORMAT, where->timeline);
	snprintf(p_dir, sizeof(p_dir), INT64_FORMAT, where->datadir);
	snprintf(p_db, sizeof(p_db), "%u", where->dboid);
	params[0] = p_sys;
	params[1] = p_tl;
	params[2] = p_dir;
	params[3] = synchronous ? "true" : "false";
	params[4] = p_db;
	snprintf(sql, sizeof(sql),
			 "INSERT INTO %s (system_identifier, timeline, data_directory, "
			 "database_oid, seen_at, synchronous) VALUES ($1::pg_catalog.int8, "
			 "$2::pg_catalog.int8, $3::pg_catalog.int8, $5::pg_catalog.oid, "
			 "pg_catalog.clock_timestamp(), $4::pg_catalog.bool) "
			 "ON CONFLICT DO NOTHING",
			 leaf_sf_tl_table);
	return leaf_sf_db_run(sql, 5, params, NULL, reason, reasonlen);
}

/*
 * What leaf_worker_lease_timeline knows of the copy a request reached:
 * whether it is recorded (and then when it was first seen, and whether
 * as synchronous), whether it is another copy of a recorded one beside it
 * (the same cluster and timeline in another data directory, or another
 * database of the same cluster), the latest timeline recorded of the
 * cluster, and whether anything is recorded, or leased, at all.
 */
typedef struct LeafSfDbKnown
{
	bool		recorded;
	int64		seen_ms;
	bool		synchronous;
	int64		other_dir;		/* the data directory of the same cluster,
								 * timeline and database, if another */
	Oid			other_db;		/* another database of the same cluster,
								 * where this one is not recorded */
	int64		last_timeline;	/* of this cluster, 0 if none */
	bool		any;
	bool		leases;
} LeafSfDbKnown;

/* Compare one row of leaf_worker_lease_timeline of this cluster. */
static void
leaf_sf_db_known_row(const LeafSfDbWhere *where, PGresult *res, int i,
					 LeafSfDbKnown *known, bool *this_db)
{
	int64		tl = strtoi64(PQgetvalue(res, i, 0), NULL, 10);
	int64		dir = strtoi64(PQgetvalue(res, i, 1), NULL, 10);
	Oid			db = (Oid) strtoul(PQgetvalue(res, i, 4), NULL, 10);

	known->last_timeline = Max(known->last_timeline, tl);
	if (db != where->dboid)
	{
		known->other_db = db;
		return;
	}
	*this_db = true;
	if (tl != where->timeline)
		return;
	/* an unknown data directory (0) is any */
	if (dir == where->datadir || dir == 0 || where->datadir == 0)
	{
		known->recorded = true;
		known->seen_ms = strtoi64(PQgetvalue(res, i, 2), NULL, 10);
		known->synchronous = PQgetvalue(res, i, 3)[0] == 't';
	}
	else
		known->other_dir = dir;
}

static bool
leaf_sf_db_known(const LeafSfDbWhere *where, LeafSfDbKnown *known,
				 char *reason, size_t reasonlen)
{
	char		sql[1024];
	char		p_sys[32];
	const char *params[1];
	PGresult   *res;
	bool		this_db = false;

	memset(known, 0, sizeof(*known));
	snprintf(p_sys, sizeof(p_sys), INT64_FORMAT, where->sysid);
	params[0] = p_sys;
	snprintf(sql, sizeof(sql),
			 "SELECT t.timeline, t.data_directory, "
			 "(pg_catalog.date_part('epoch', t.seen_at) "
			 "OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8, t.synchronous, "
			 "t.database_oid, EXISTS (SELECT FROM %s), EXISTS (SELECT FROM %s) "
			 "FROM (SELECT NULL) AS d LEFT JOIN %s AS t "
			 "ON t.system_identifier OPERATOR(pg_catalog.=) $1::pg_catalog.int8",
			 leaf_sf_tl_table, leaf_sf_lease_table, leaf_sf_tl_table);
	if (!leaf_sf_db_run(sql, 1, params, &res, reason, reasonlen))
		return false;
	known->any = PQgetvalue(res, 0, 5)[0] == 't';
	known->leases = PQgetvalue(res, 0, 6)[0] == 't';
	for (int i = 0; i < PQntuples(res) && !PQgetisnull(res, i, 0); i++)
		leaf_sf_db_known_row(where, res, i, known, &this_db);
	PQclear(res);
	/* another database is a copy only where this one was never recorded */
	if (this_db)
		known->other_db = InvalidOid;
	return true;
}

/*
 * May a worker ID be taken in this copy of the allocation database now?
 *
 * leaf_worker_lease_timeline records each copy the leases were used in:
 * the cluster, the timeline, the data directory and the database.  One not recorded
 * when others are is a move that may have lost rows, or set them back:
 *
 *	- the same cluster and timeline in another data directory is a clone
 *	  started as a primary, or a file-system copy restored, and another
 *	  database of the same cluster is a copy made with CREATE DATABASE
 *	  ... TEMPLATE: its original may be serving the same leases.  Refused
 *	  until a superuser records it with leaf_worker_lease_confirm();
 *	- a later timeline of the same cluster is a promotion, held back
 *	  unless leaf.alloc_failover = 'synchronous' says it had every commit;
 *	- any other (another cluster, as after pg_upgrade or a cut-over, or an
 *	  earlier timeline, a restore) is held back.
 *
 * Held back means: no worker ID goes to a holder, not even its own row,
 * until the longest lease of an earlier holder has passed since the copy
 * was first seen.  Nor within it after the server started, if it holds
 * leases: a restore that keeps all three (a file-system snapshot put back
 * in place) may have set rows back, and any restore starts the server.
 */
static LeafSfDbResult
leaf_sf_db_copy_check(const LeafSfDbWhere *where, char *reason,
					  size_t reasonlen)
{
	LeafSfDbKnown known;
	int64		hold;
	const char *failover = GetConfigOption("leaf.alloc_failover", true, false);

	if (!leaf_sf_db_known(where, &known, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	if (known.leases &&
		where->db_ms <= where->started_ms + leaf_sf_earlier_holder_ms())
	{
		snprintf(reason, reasonlen,
				 "the allocation database's server started " INT64_FORMAT " ms ago and holds leases, which a restore may have set back: no worker ID is taken for " INT64_FORMAT " ms more",
				 where->db_ms - where->started_ms,
				 where->started_ms + leaf_sf_earlier_holder_ms() - where->db_ms + 1);
		return LEAF_SF_DB_WAIT;
	}
	if (!known.recorded && (known.other_dir != 0 || OidIsValid(known.other_db)))
	{
		snprintf(reason, reasonlen,
				 "the allocation database (database %u of system " INT64_FORMAT ", timeline " INT64_FORMAT ") is a copy of the one the leases were recorded in, %s, whose original may serve the same worker IDs; no worker ID is taken there until a superuser, once the original serves no more, runs SELECT leaf_worker_lease_confirm() in it (docs/copies.md)",
				 where->dboid, where->sysid, where->timeline,
				 known.other_dir != 0 ?
				 "in another data directory: a clone started as a primary, or a file-system copy restored" :
				 "as another database of the same cluster: CREATE DATABASE ... TEMPLATE");
		return LEAF_SF_DB_FAIL;
	}
	if (!known.recorded)
	{
		/* the first copy needs no wait, nor does a synchronous promotion */
		if (!known.any)
			known.synchronous = !known.leases;
		else
			known.synchronous = known.last_timeline > 0 &&
				where->timeline > known.last_timeline &&
				failover != NULL && strcmp(failover, "synchronous") == 0;
		if (!leaf_sf_db_record_copy(where, known.synchronous, reason, reasonlen))
			return LEAF_SF_DB_RETRY;
		known.seen_ms = where->db_ms;
		if (known.any)
			ereport(LOG,
					(errmsg("the allocation database is on timeline " INT64_FORMAT " of system " INT64_FORMAT " now, which no lease was taken on before",
							where->timeline, where->sysid),
					 known.last_timeline > 0 ?
					 errdetail("The leases were last recorded on timeline " INT64_FORMAT " of this system.", known.last_timeline) :
					 errdetail("The leases were recorded in another cluster: pg_upgrade, a restore or a logical replica's cut-over."),
					 known.synchronous ?
					 errhint("\"leaf.alloc_failover\" is \"synchronous\": the leases of the former timeline are taken to be kept.") :
					 errhint("Leases written before may be lost or set back: no worker ID is taken for " INT64_FORMAT " ms.",
							 leaf_sf_earlier_holder_ms())));
	}
	if (known.synchronous)
		return LEAF_SF_DB_OK;
	hold = known.seen_ms + leaf_sf_earlier_holder_ms();
	if (where->db_ms <= hold)
	{
		snprintf(reason, reasonlen,
				 "the allocation database moved to timeline " INT64_FORMAT " of system " INT64_FORMAT " (a promotion, a restore or pg_upgrade, not confirmed as synchronous by \"leaf.alloc_failover\"), and leases written before may be lost: no worker ID is taken for " INT64_FORMAT " ms more",
				 where->timeline, where->sysid, hold - where->db_ms + 1);
		return LEAF_SF_DB_WAIT;
	}
	return LEAF_SF_DB_OK;
}

/*
 * Check this node against the row of leaf_worker_lease_fleet: the table of
 * worker IDs is the one the state file names (file_fleet, 0 for none), and
 * the fleet's heartbeat, clock drift and epoch are this node's.  The first
 * two bound the wait of a new holder (a holder whose row is gone serves
 * until its own lease ends, on its own clock); the epoch, what a timestamp
 * means (a holder whose row is gone used timestamps of its epoch).
 * Settings not recorded (a new table, or cleared by an operator to change
 * them) are recorded by a renewal (renewing: every running node had the
 * recorded ones), or by a taking once no lease is live: a holder with
 * other settings may run until then.  Returns LEAF_SF_DB_OK with
 * *fleet_id set, or the failure with reason.
 */
static LeafSfDbResult
leaf_sf_db_fleet_check(int64 file_fleet, bool renewing, int64 *fleet_id,
					   char *reason, size_t reasonlen)
{
	char		sql[1024];
	char		p_hb[16];
	char		p_drift[16];
	char		p_epoch[32];
	const char *params[3];
	PGresult   *res;
	int64		id;
	int			hb;
	int			drift;
	int64		epoch;

	snprintf(sql, sizeof(sql),
			 "SELECT fleet_id, heartbeat_ms, max_clock_drift_ms, epoch_ms, "
			 "moved_to FROM %s",
			 leaf_sf_fleet_table);
	if (!leaf_sf_db_run(sql, 0, NULL, &res, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	if (PQntuples(res) != 1)
	{
		/* the first node: a new table of worker IDs gets its identity */
		PQclear(res);
		snprintf(sql, sizeof(sql),
				 "INSERT INTO %s (fleet_id) VALUES ((pg_catalog.random() "
				 "OPERATOR(pg_catalog.*) 9e18)::pg_catalog.int8 OPERATOR(pg_catalog.+) 1) "
				 "ON CONFLICT (one) DO NOTHING",
				 leaf_sf_fleet_table);
		if (!leaf_sf_db_run(sql, 0, NULL, NULL, reason, reasonlen))
			return LEAF_SF_DB_RETRY;
		return leaf_sf_db_fleet_check(file_fleet, renewing, fleet_id, reason,
									  reasonlen);
	}
	id = strtoi64(PQgetvalue(res, 0, 0), NULL, 10);
	if (file_fleet != 0 && file_fleet != id)
	{
		PQclear(res);
		snprintf(reason, reasonlen,
				 "the table of worker IDs in the allocation database (fleet " INT64_FORMAT ") is not the one this node held its worker ID in (fleet " INT64_FORMAT ", as \"%s\" says): another database, or one restored from a dump; the nodes of a fleet share one, and a node moves to another only as docs/snowflake.md says (\"Moving a fleet\")",
				 id, file_fleet, LEAF_SF_STATE_FILE);
		return LEAF_SF_DB_FAIL;
	}
	if (!PQgetisnull(res, 0, 4))
	{
		/* leaf_alloc_cutover() fenced this table: its subscriber holds it */
		snprintf(reason, reasonlen,
				 "the fleet's worker IDs moved from this allocation database to %s with leaf_alloc_cutover(): no worker ID is taken or renewed here; \"leaf.alloc_conninfo\" should name the new one",
				 PQgetvalue(res, 0, 4));
		PQclear(res);
		return LEAF_SF_DB_FAIL;
	}
	if (PQgetisnull(res, 0, 1) || PQgetisnull(res, 0, 2) || PQgetisnull(res, 0, 3))
	{
		bool		live = false;

		PQclear(res);
		/* is any lease live?  Asked only here, not at every renewal */
		if (!renewing)
		{
			snprintf(sql, sizeof(sql),
					 "SELECT EXISTS (SELECT FROM %s AS l, %s AS f "
					 "WHERE l.expires_at OPERATOR(pg_catalog.+) "
					 "(COALESCE(f.max_clock_drift_ms, 0)::pg_catalog.float8 "
					 "OPERATOR(pg_catalog.*) '1 ms'::pg_catalog.interval) "
					 "OPERATOR(pg_catalog.>=) pg_catalog.clock_timestamp())",
					 leaf_sf_lease_table, leaf_sf_fleet_table);
			if (!leaf_sf_db_run(sql, 0, NULL, &res, reason, reasonlen))
				return LEAF_SF_DB_RETRY;
			live = PQgetvalue(res, 0, 0)[0] == 't';
			PQclear(res);
		}
		if (live)
		{
			snprintf(reason, reasonlen,
					 "the fleet's heartbeat, clock drift and epoch are not recorded in leaf_worker_lease_fleet, and leases are live: their holders record theirs at their next renewal");
			return LEAF_SF_DB_WAIT;
		}
		snprintf(p_hb, sizeof(p_hb), "%d", leaf_sf_heartbeat_ms);
		snprintf(p_drift, sizeof(p_drift), "%d", Max(leaf_sf_max_clock_drift_ms, 0));
		snprintf(p_epoch, sizeof(p_epoch), INT64_FORMAT, leaf_sf_epoch_ms);
		params[0] = p_hb;
		params[1] = p_drift;
		params[2] = p_epoch;
		snprintf(sql, sizeof(sql),
				 "UPDATE %s SET heartbeat_ms = $1::pg_catalog.int4, "
				 "max_clock_drift_ms = $2::pg_catalog.int4, epoch_ms = $3::pg_catalog.int8 "
				 "WHERE heartbeat_ms IS NULL OR max_clock_drift_ms IS NULL OR epoch_ms IS NULL "
				 "RETURNING heartbeat_ms, max_clock_drift_ms, epoch_ms",
				 leaf_sf_fleet_table);
		if (!leaf_sf_db_run(sql, 3, params, &res, reason, reasonlen))
			return LEAF_SF_DB_RETRY;
		if (PQntuples(res) == 1)
		{
			PQclear(res);
			*fleet_id = id;
			ereport(LOG,
					(errmsg("leaf snowflake worker recorded \"leaf.heartbeat_interval\" %d ms, \"leaf.max_clock_drift_ms\" %d ms and \"leaf.snowflake_epoch\" " INT64_FORMAT " as the fleet's, in leaf_worker_lease_fleet",
							leaf_sf_heartbeat_ms, Max(leaf_sf_max_clock_drift_ms, 0),
							leaf_sf_epoch_ms)));
			return LEAF_SF_DB_OK;
		}
		PQclear(res);
		/* recorded meanwhile by another node: compare with those */
		return leaf_sf_db_fleet_check(file_fleet, false, fleet_id, reason,
									  reasonlen);
	}
	hb = atoi(PQgetvalue(res, 0, 1));
	drift = atoi(PQgetvalue(res, 0, 2));
	epoch = strtoi64(PQgetvalue(res, 0, 3), NULL, 10);
	PQclear(res);
	if (hb != leaf_sf_heartbeat_ms || drift != Max(leaf_sf_max_clock_drift_ms, 0))
	{
		snprintf(reason, reasonlen,
				 "\"leaf.heartbeat_interval\" is %d ms and \"leaf.max_clock_drift_ms\" %d ms here, but the fleet's table of worker IDs records %d ms and %d ms (leaf_worker_lease_fleet): every node of a fleet uses the same, as they bound how long a holder whose row is gone may still serve",
				 leaf_sf_heartbeat_ms, Max(leaf_sf_max_clock_drift_ms, 0), hb, drift);
		return LEAF_SF_DB_FAIL;
	}
	if (epoch != leaf_sf_epoch_ms)
	{
		snprintf(reason, reasonlen,
				 "\"leaf.snowflake_epoch\" is " INT64_FORMAT " here, but the fleet's table of worker IDs records " INT64_FORMAT " (leaf_worker_lease_fleet): the nodes of a fleet share an epoch, as a timestamp of one means another instant under another",
				 leaf_sf_epoch_ms, epoch);
		return LEAF_SF_DB_FAIL;
	}
	*fleet_id = id;
	return LEAF_SF_DB_OK;
}

/*
 * Take a worker ID: want_wid if set by hand, else the row this data
 * directory holds, the lowest free worker ID, or the worker ID of a
 * holder whose lease has ended.  floor_hint is a mark to record at least
 * (the highest this node knows of); file_token is the token the state
 * file names for the row this data directory took last, or 0.  On
 * LEAF_SF_DB_OK the lease is filled in; otherwise reason says why.
 */
LeafSfDbResult
leaf_sf_db_acquire(const LeafSfNode *node, int want_wid, int64 floor_hint,
				   int64 file_token, int64 file_fleet, LeafSfDbLease *lease,
				   char *reason, size_t reasonlen)
{
	char		sql[2048];
	char		layout[64];
	char		p_wid[16];
	char		p_max[16];
	char		p_drift[32];
	char		p_hwm[32];
	char		p_lease[32];
	char		p_tl[32];
	char		p_hand[8];
	char		p_token[32];
	char		p_epoch[32];
	const char *params[10];
	int64		token;
	PGresult   *res;
	LeafSfDbWhere where;
	int64		mono0 = leaf_sf_mono_ms();
	int			wid = -1;
	int64		row_hwm = 0;
	bool		own = false;
	bool		known = false;
	int64		fleet_id = 0;
	int64		row_epoch;
	LeafSfDbResult fleet_result;
	bool		exists = false;
	LeafSfDbResult tl_result;
	char		tl_reason[LEAF_SF_REASON_LEN];

	reason[0] = '\0';
	leaf_sf_deadline = mono0 + LEAF_SF_DB_CONNECT_MS;
	if (!leaf_sf_db_connect(node, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	leaf_sf_layout_format(&leaf_sf_layout, layout, sizeof(layout));

	/* a new token for every taking, positive and never 0 */
	do
	{
		if (!pg_strong_random(&token, sizeof(token)))
		{
			snprintf(reason, reasonlen, "could not generate a random lease token");
			return LEAF_SF_DB_FAIL;
		}
		token &= PG_INT64_MAX;
	} while (token == 0);

	/* which copy of the database this is, and the clock */
	tl_result = leaf_sf_db_where(lease, &where, reason, reasonlen);
	if (tl_result != LEAF_SF_DB_OK)
		return tl_result;
	tl_result = leaf_sf_db_copy_check(&where, tl_reason, sizeof(tl_reason));
	if (tl_result == LEAF_SF_DB_RETRY || tl_result == LEAF_SF_DB_FAIL)
	{
		strlcpy(reason, tl_reason, reasonlen);
		return tl_result;
	}

	/* one acquisition at a time (renewals, which take row locks, go on) */
	snprintf(sql, sizeof(sql), "LOCK TABLE %s IN SHARE UPDATE EXCLUSIVE MODE",
			 leaf_sf_lease_table);
	if (!leaf_sf_db_run("BEGIN", 0, NULL, NULL, reason, reasonlen) ||
		!leaf_sf_db_run(sql, 0, NULL, NULL, reason, reasonlen))
		return LEAF_SF_DB_RETRY;

	/* the fleet's table, and its settings */
	fleet_result = leaf_sf_db_fleet_check(file_fleet, false, &fleet_id,
										  reason, reasonlen);
	if (fleet_result != LEAF_SF_DB_OK)
	{
		if (fleet_result != LEAF_SF_DB_RETRY)
			leaf_sf_db_abort();
		return fleet_result;
	}

	/* never mix layouts among the holders of one table */
	params[0] = layout;
	snprintf(sql, sizeof(sql),
			 "SELECT layout, worker_id, holder_address FROM %s "
			 "WHERE layout OPERATOR(pg_catalog.<>) $1 LIMIT 1",
			 leaf_sf_lease_table);
	if (!leaf_sf_db_run(sql, 1, params, &res, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	if (PQntuples(res) > 0)
	{
		snprintf(reason, reasonlen,
				 "\"leaf.snowflake_layout\" is %s, but worker ID %s in the allocation database is held under layout %s (by %s): the nodes of one table of worker IDs share a layout",
				 layout, PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 0),
				 PQgetvalue(res, 0, 2));
		PQclear(res);
		leaf_sf_db_abort();
		return LEAF_SF_DB_FAIL;
	}
	PQclear(res);

	/* our own row: a hand-set worker ID's, or the one we were given */
	snprintf(p_wid, sizeof(p_wid), "%d", want_wid);
	params[0] = node->identity;
	params[1] = p_wid;
	snprintf(sql, sizeof(sql),
			 "SELECT worker_id, hwm_ms, holder_identity OPERATOR(pg_catalog.=) $1, "
			 "holder_address, hand_set, holder_token, "
			 "expires_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp(), "
			 "(pg_catalog.date_part('epoch', expires_at OPERATOR(pg_catalog.-) "
			 "pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8, "
			 "epoch_ms "
			 "FROM %s "
			 "WHERE CASE WHEN $2::pg_catalog.int4 OPERATOR(pg_catalog.>=) 0 "
			 "THEN worker_id OPERATOR(pg_catalog.=) $2::pg_catalog.int4 "
			 "ELSE holder_identity OPERATOR(pg_catalog.=) $1 AND NOT hand_set END "
			 "ORDER BY worker_id LIMIT 1 FOR UPDATE",
			 leaf_sf_lease_table);
	if (!leaf_sf_db_run(sql, 2, params, &res, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	if (PQntuples(res) > 0)
	{
		exists = true;
		own = PQgetvalue(res, 0, 2)[0] == 't';
		wid = atoi(PQgetvalue(res, 0, 0));
		row_hwm = strtoi64(PQgetvalue(res, 0, 1), NULL, 10);
		row_epoch = strtoi64(PQgetvalue(res, 0, 8), NULL, 10);
		/* IDs under a later epoch carry the same timestamp lower */
		if (leaf_sf_epoch_ms > row_epoch)
			row_hwm += leaf_sf_epoch_ms - row_epoch;
		if (!own)
		{
			/* only a hand-set worker ID can be held by another */
			snprintf(reason, reasonlen,
					 "\"leaf.worker_id\" is %d, but %s holds worker ID %d in the allocation database%s; to move it, stop that node for good and delete its row of leaf_worker_lease there",
					 want_wid, PQgetvalue(res, 0, 3), want_wid,
					 PQgetvalue(res, 0, 4)[0] == 't' ? " (set by hand as well)" : "");
			PQclear(res);
			leaf_sf_db_abort();
			return LEAF_SF_DB_FAIL;
		}
		if (PQgetvalue(res, 0, 6)[0] != 't')
		{
			/*
			 * Our identity, but not our lease: a copy of this data
			 * directory that runs (a volume clone keeps the inode), or
			 * this node before a stop that did not end its lease.  A
			 * holder stops serving before its lease ends, and serves
			 * nothing past the row's mark.
			 */
			snprintf(reason, reasonlen,
					 "worker ID %d is held in the allocation database by a node with this data directory's identity (%s, address %s) whose lease ends in %s ms: a copy of this data directory that is running, or this node before a stop that did not end its lease; waiting for the lease to end",
					 wid, node->identity, PQgetvalue(res, 0, 3),
					 PQgetvalue(res, 0, 7));
			PQclear(res);
			leaf_sf_db_abort();
			return LEAF_SF_DB_WAIT;
		}
		/* the run that the state file names, or another one */
		known = file_token != 0 &&
			strtoi64(PQgetvalue(res, 0, 5), NULL, 10) == file_token;
	}
	PQclear(res);

	/* no row of ours: the lowest free worker ID, or one past its lease */
	if (!exists && want_wid < 0)
	{
		snprintf(p_max, sizeof(p_max), "%d", leaf_sf_max_worker_id());
		snprintf(p_drift, sizeof(p_drift), "%d", Max(leaf_sf_max_clock_drift_ms, 0));
		params[0] = p_max;
		params[1] = p_drift;
		snprintf(sql, sizeof(sql),
				 "SELECT g, NULL::pg_catalog.int8, NULL::pg_catalog.int8 "
				 "FROM pg_catalog.generate_series(0, $1::pg_catalog.int4) AS g "
				 "WHERE NOT EXISTS (SELECT FROM %s AS l "
				 "WHERE l.worker_id OPERATOR(pg_catalog.=) g) "
				 "ORDER BY g LIMIT 1",
				 leaf_sf_lease_table);
		if (!leaf_sf_db_run(sql, 1, params, &res, reason, reasonlen))
			return LEAF_SF_DB_RETRY;
		if (PQntuples(res) == 0)
		{
			PQclear(res);
			snprintf(sql, sizeof(sql),
					 "SELECT worker_id, hwm_ms, epoch_ms FROM %s "
					 "WHERE NOT hand_set "
					 "AND worker_id OPERATOR(pg_catalog.<=) $1::pg_catalog.int4 "
					 "AND (expires_at OPERATOR(pg_catalog.+) ($2::pg_catalog.float8 "
					 "OPERATOR(pg_catalog.*) '1 ms'::pg_catalog.interval)) "
					 "OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp() "
					 "AND hwm_ms OPERATOR(pg_catalog.<) " LEAF_SF_DB_NOW_SQL " "
					 "ORDER BY expires_at LIMIT 1 FOR UPDATE SKIP LOCKED",
					 leaf_sf_lease_table);
			if (!leaf_sf_db_run(sql, 2, params, &res, reason, reasonlen))
				return LEAF_SF_DB_RETRY;
		}
		if (PQntuples(res) == 0)
		{
			snprintf(reason, reasonlen,
					 "every worker ID from 0 to %d is held in the allocation database, and none has a lease that ended and a mark that has passed: waiting for one",
					 leaf_sf_max_worker_id());
			PQclear(res);
			leaf_sf_db_abort();
			return LEAF_SF_DB_WAIT;
		}
		wid = atoi(PQgetvalue(res, 0, 0));
		exists = !PQgetisnull(res, 0, 1);
		if (exists)
		{
			row_hwm = strtoi64(PQgetvalue(res, 0, 1), NULL, 10);
			row_epoch = strtoi64(PQgetvalue(res, 0, 2), NULL, 10);
			if (leaf_sf_epoch_ms > row_epoch)
				row_hwm += leaf_sf_epoch_ms - row_epoch;
		}
		PQclear(res);
	}
	else if (!exists)
		wid = want_wid;

	/*
	 * Not within the longest lease of a lost timeline or of a restore, not
	 * even our own row: an earlier holder whose row was lost or set back
	 * may still serve with it.
	 */
	if (tl_result != LEAF_SF_DB_OK)
	{
		strlcpy(reason, tl_reason, reasonlen);
		leaf_sf_db_abort();
		return tl_result;
	}

	snprintf(p_wid, sizeof(p_wid), "%d", wid);
	snprintf(p_hwm, sizeof(p_hwm), INT64_FORMAT, Max(Max(row_hwm, floor_hint), 1));
	snprintf(p_lease, sizeof(p_lease), INT64_FORMAT, leaf_sf_margin_ms());
	snprintf(p_tl, sizeof(p_tl), INT64_FORMAT, where.timeline);
	strlcpy(p_hand, want_wid >= 0 ? "true" : "false", sizeof(p_hand));
	snprintf(p_token, sizeof(p_token), INT64_FORMAT, token);
	params[0] = p_wid;
	params[1] = node->identity;
	params[2] = node->addr;
	params[3] = p_hand;
	params[4] = layout;
	params[5] = p_hwm;
	params[6] = p_lease;
	params[7] = p_tl;
	params[8] = p_token;
	snprintf(p_epoch, sizeof(p_epoch), INT64_FORMAT, leaf_sf_epoch_ms);
	params[9] = p_epoch;
	/* the mark in our epoch's terms (row_hwm is converted) */
	snprintf(sql, sizeof(sql),
			 "INSERT INTO %s AS l (worker_id, holder_identity, holder_address, "
			 "holder_token, hand_set, layout, epoch_ms, hwm_ms, expires_at, renewed_at, "
			 "held_since, timeline) "
			 "VALUES ($1::pg_catalog.int4, $2, $3, $9::pg_catalog.int8, "
			 "$4::pg_catalog.bool, $5, $10::pg_catalog.int8, "
			 "$6::pg_catalog.int8, pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) "
			 "($7::pg_catalog.float8 OPERATOR(pg_catalog.*) '1 ms'::pg_catalog.interval), "
			 "pg_catalog.clock_timestamp(), pg_catalog.clock_timestamp(), $8::pg_catalog.int8) "
			 "ON CONFLICT (worker_id) DO UPDATE SET "
			 "holder_identity = excluded.holder_identity, "
			 "holder_address = excluded.holder_address, "
			 "holder_token = excluded.holder_token, "
			 "hand_set = excluded.hand_set, layout = excluded.layout, "
			 "epoch_ms = excluded.epoch_ms, hwm_ms = excluded.hwm_ms, "
			 "expires_at = excluded.expires_at, renewed_at = excluded.renewed_at, "
			 "held_since = CASE WHEN l.holder_identity OPERATOR(pg_catalog.=) "
			 "excluded.holder_identity THEN l.held_since ELSE excluded.held_since END, "
			 "timeline = excluded.timeline "
			 "RETURNING hwm_ms",
			 leaf_sf_lease_table);
	if (!leaf_sf_db_run(sql, 10, params, &res, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	lease->db_hwm = strtoi64(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (!leaf_sf_db_run("COMMIT", 0, NULL, NULL, reason, reasonlen))
		return LEAF_SF_DB_RETRY;

	if (exists && !own)
		ereport(LOG,
				(errmsg("leaf snowflake worker took over worker ID %d, whose lease in the allocation database had ended, above its mark " INT64_FORMAT,
						wid, row_hwm)));
	else if (exists && !known)
		ereport(LOG,
				(errmsg("leaf snowflake worker took back worker ID %d, whose row in the allocation database has this data directory's identity but not the lease that \"%s\" names",
						wid, LEAF_SF_STATE_FILE),
				 errdetail("A copy of this data directory may have held it, or the row came back from a backup: the worker waits out the longest lease an earlier holder could still use.")));
	lease->held = true;
	lease->token = token;
	lease->fleet_id = fleet_id;
	lease->worker_id = wid;
	lease->fresh = !known;
	lease->row_hwm = row_hwm;
	lease->until_mono = mono0 + leaf_sf_margin_ms();
	return LEAF_SF_DB_OK;
}

/*
 * Renew our lease and record mark hwm.  On LEAF_SF_DB_OK the row holds
 * hwm and the lease lasts until lease->until_mono; LEAF_SF_DB_LOST if the
 * row is no longer ours.
 */
LeafSfDbResult
leaf_sf_db_renew(const LeafSfNode *node, LeafSfDbLease *lease, int64 hwm,
				 char *reason, size_t reasonlen)
{
	char		sql[1024];
	char		p_wid[16];
	char		p_hwm[32];
	char		p_lease[32];
	char		p_token[32];
	const char *params[5];
	PGresult   *res;
	int64		mono0 = leaf_sf_mono_ms();
	LeafSfDbWhere where;
	int64		fleet_id;
	LeafSfDbResult r;

	reason[0] = '\0';
	leaf_sf_deadline = mono0 + Max(Min(leaf_sf_heartbeat_ms, LEAF_SF_DB_CONNECT_MS), 500);
	if (!leaf_sf_db_connect(node, reason, reasonlen))
		return LEAF_SF_DB_RETRY;

	/*
	 * The same table of worker IDs (leaf.alloc_conninfo may have been
	 * reloaded), the fleet's settings (ours may have been), and the
	 * clock, before the mark is recorded: a mark of a clock that stepped
	 * away must not be used.
	 */
	r = leaf_sf_db_fleet_check(lease->fleet_id, true, &fleet_id, reason,
							   reasonlen);
	if (r != LEAF_SF_DB_OK)
		return r;
	r = leaf_sf_db_where(lease, &where, reason, reasonlen);
	if (r == LEAF_SF_DB_FAIL && where.replicated)
	{
		/* not ours to renew: the taking says why, in the node's status */
		lease->held = false;
		return LEAF_SF_DB_LOST;
	}
	if (r != LEAF_SF_DB_OK)
		return r;

	snprintf(p_wid, sizeof(p_wid), "%d", lease->worker_id);
	snprintf(p_hwm, sizeof(p_hwm), INT64_FORMAT, hwm);
	snprintf(p_lease, sizeof(p_lease), INT64_FORMAT, leaf_sf_margin_ms());
	params[0] = p_wid;
	params[1] = node->identity;
	params[2] = p_hwm;
	params[3] = p_lease;
	snprintf(p_token, sizeof(p_token), INT64_FORMAT, lease->token);
	params[4] = p_token;
	snprintf(sql, sizeof(sql),
			 "UPDATE %s SET hwm_ms = pg_catalog.int8larger(hwm_ms, $3::pg_catalog.int8), "
			 "expires_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) "
			 "($4::pg_catalog.float8 OPERATOR(pg_catalog.*) '1 ms'::pg_catalog.interval), "
			 "renewed_at = pg_catalog.clock_timestamp(), "
			 "timeline = " LEAF_COPY_TIMELINE_SQL " "
			 "WHERE worker_id OPERATOR(pg_catalog.=) $1::pg_catalog.int4 "
			 "AND holder_identity OPERATOR(pg_catalog.=) $2 "
			 "AND holder_token OPERATOR(pg_catalog.=) $5::pg_catalog.int8 "
			 "AND NOT EXISTS (SELECT FROM %s AS f WHERE f.moved_to IS NOT NULL) "
			 "RETURNING hwm_ms",
			 leaf_sf_lease_table, leaf_sf_fleet_table);
	if (!leaf_sf_db_run(sql, 5, params, &res, reason, reasonlen))
		return LEAF_SF_DB_RETRY;
	if (PQntuples(res) != 1)
	{
		PQclear(res);
		lease->held = false;
		snprintf(reason, reasonlen,
				 "the allocation database no longer holds worker ID %d for this node (its row was deleted, taken over, or lost with a failover)",
				 lease->worker_id);
		return LEAF_SF_DB_LOST;
	}
	lease->db_hwm = strtoi64(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	lease->until_mono = mono0 + leaf_sf_margin_ms();
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
	char		sql[1024];
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
	params[2] = p_hwm;
	params[3] = p_token;
	snprintf(sql, sizeof(sql),
			 "UPDATE %s SET hwm_ms = pg_catalog.int8larger(hwm_ms, $3::pg_catalog.int8), "
			 "expires_at = pg_catalog.clock_timestamp()%s "
			 "WHERE worker_id OPERATOR(pg_catalog.=) $1::pg_catalog.int4 "
			 "AND holder_identity OPERATOR(pg_catalog.=) $2 "
			 "AND holder_token OPERATOR(pg_catalog.=) $4::pg_catalog.int8 "
			 "RETURNING worker_id",
			 leaf_sf_lease_table,
			 give_up ? ", holder_identity = 'given up by ' OPERATOR(pg_catalog.||) holder_identity" : "");
	if (!leaf_sf_db_run(sql, 4, params, &res, reason, reasonlen))
		return false;
	ours = PQntuples(res) == 1;
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
 * A failure only makes that start wait for the lease to end.
 */
void
leaf_sf_db_release(const LeafSfNode *node, LeafSfDbLease *lease, int64 hwm)
{
	char		reason[LEAF_SF_REASON_LEN];

	(void) leaf_sf_db_end_lease(node, lease, hwm, false, 1000,
								reason, sizeof(reason));
}

/* leaf_snowflake_new_worker_id(): give our row up, with mark hwm. */
bool
leaf_sf_db_give_up(const LeafSfNode *node, LeafSfDbLease *lease, int64 hwm,
				   char *reason, size_t reasonlen)
{
	return leaf_sf_db_end_lease(node, lease, hwm, true,
								LEAF_SF_DB_CONNECT_MS, reason, reasonlen);
}
