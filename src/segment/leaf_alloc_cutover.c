/*-------------------------------------------------------------------------
 *
 * leaf_alloc_cutover.c
 *	  leaf_alloc_cutover(): a logical replica takes its publisher's
 *	  counters over, and serves (see leaf_alloc_replica.c for why it does
 *	  not before).
 *
 * leaf_alloc_cutover() connects to the publisher, locks every row of its
 * leaf_alloc (waiting for loads under way there), reads the counters and
 * the marks of retired tags, and records this database as the owner of
 * them in the publisher's leaf_alloc_source, all in one transaction.  A
 * publisher's load reads leaf_alloc_source again once its row is locked
 * (leaf_local_source_still_ok), so it loads nothing above what was read:
 * it may hand out what it holds in memory, which lies below.  Then this
 * database's counters are raised to at least the publisher's, the
 * segments this database holds are dropped, and it serves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "segment/leaf_alloc.h"
#include "segment/leaf_alloc_replica.h"
#include "segment/leaf_alloc_source.h"
#include "common/leaf_copy.h"
#include "common/leaf_errcodes.h"
#include "common/leaf_libpq.h"
#include "segment/leaf_segment.h"

PG_FUNCTION_INFO_V1(leaf_alloc_cutover);

/*
 * The connection to the publisher, made by a superuser who waits for the
 * answer of leaf_alloc_cutover(), through leaf_libpq.c: this backend's
 * cancel (pg_cancel_backend, statement_timeout) and termination end the
 * wait at once, and close the connection, which rolls the fence's
 * transaction back on the publisher.
 *
 * LEAF_CUTOVER_CONNECT_MS (for all of the connection string's hosts): a
 * publisher that does not answer fails the cut-over with an error that
 * says so, rather than leaving the caller waiting for the kernel's TCP
 * timeout.
 * LEAF_CUTOVER_LOCK_TIMEOUT: the lock of the publisher's leaf_alloc waits
 * for the loads under way there, which hold a row for a moment; a lock
 * held much longer (an open transaction of an administrator) fails the
 * cut-over, which may be called again, rather than holding up every load
 * of the publisher behind the waiting lock.
 * LEAF_CUTOVER_STATEMENT_TIMEOUT: twice the lock's wait, so that a lock
 * wait fails first, with its own reason; any other statement that stalls
 * (a publisher that stops answering) is cancelled, and the transaction,
 * with the fence, rolled back.
 */
#define LEAF_CUTOVER_CONNECT_MS			10000
#define LEAF_CUTOVER_STATEMENT_TIMEOUT	"60s"
#define LEAF_CUTOVER_LOCK_TIMEOUT		"30s"

/* the connection to the publisher, open only in leaf_cutover_fence() */
static LeafPq leaf_cutover_pq;

/* One counter of the publisher. */
typedef struct LeafCutoverTag
{
	char	   *tag;
	int64		max_id;
	int32		step;			/* 0 for a retired tag */
	char	   *description;
} LeafCutoverTag;

/* The publisher's counters, as read by leaf_cutover_fence(). */
typedef struct LeafCutoverPublisher
{
	char	   *address;		/* host:port/dbname, for people */
	int			ntags;
	LeafCutoverTag *tags;		/* leaf_alloc, then leaf_alloc_retired */
} LeafCutoverPublisher;

/*
 * Run sql on the publisher; its result if it succeeded, else the error.
 * A cancel or a termination of this backend while it waits raises its
 * own error, the connection closed (leaf_libpq.c).
 */
static PGresult *
leaf_cutover_exec(LeafPq *pq, const char *sql, int nparams,
				  const char *const *params, ExecStatusType want)
{
	char		reason[LEAF_ERRMSG_LEN];
	PGresult   *res = leaf_pq_exec(pq, sql, nparams, params,
								   reason, sizeof(reason));

	if (res == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("could not fence the publisher's leaf: %s", reason)));
	if (PQresultStatus(res) != want)
	{
		char	   *msg = pstrdup(PQresultErrorMessage(res));

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("could not fence the publisher's leaf: %s",
						pchomp(msg[0] ? msg : PQerrorMessage(pq->conn)))));
	}
	return res;
}

/*
 * The owner of the publisher's leaf schema must be one to trust with the
 * statements the cut-over runs there (leaf_pq_leaf_schema()).
 */
static void
leaf_cutover_trust_publisher(LeafPq *pq)
{
	char		nsp[2 * NAMEDATALEN + 3];
	char		reason[LEAF_ERRMSG_LEN];
	Oid			extoid;

	if (leaf_pq_leaf_schema(pq, nsp, sizeof(nsp), &extoid,
							reason, sizeof(reason)))
		return;
	if (pq->failure != LEAF_PQ_OK)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("could not fence the publisher's leaf: %s", reason)));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("the publisher's leaf is in a schema that an untrusted role controls"),
			 errdetail("%s.", reason),
			 errhint("Have a superuser own the publisher's database, or leaf's schema there (ALTER SCHEMA ... OWNER TO ...).")));
}

/*
 * The publisher's extension: its schema, checked to be 1.4 or later, and
 * neither this database nor in fleet mode.
 */
static char *
leaf_cutover_publisher_schema(LeafPq *pq, uint64 sysid, char **pubsys,
							  char **pubdb)
{
	PGresult   *res;
	char	   *nsp;
	int			major = 0;
	int			minor = 0;

	res = leaf_cutover_exec(pq,
							"SELECT n.nspname, e.extversion, "
							"(SELECT c.system_identifier FROM pg_catalog.pg_control_system() c), "
							"(SELECT d.oid FROM pg_catalog.pg_database d "
							" WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()), "
							"COALESCE(pg_catalog.current_setting('leaf.alloc_conninfo', true), '') "
							"FROM pg_catalog.pg_extension e "
							"JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
							"WHERE e.extname OPERATOR(pg_catalog.=) 'leaf'",
							0, NULL, PGRES_TUPLES_OK);
	if (PQntuples(res) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the publisher's database has no leaf extension"),
				 errhint("Name the database whose leaf handed out IDs with publisher => 'conninfo'.")));
	nsp = pstrdup(PQgetvalue(res, 0, 0));
	if (sscanf(PQgetvalue(res, 0, 1), "%d.%d", &major, &minor) != 2 ||
		major < 1 || (major == 1 && minor < 4))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the publisher's leaf is at version %s, which cannot be fenced",
						PQgetvalue(res, 0, 1)),
				 errhint("Run ALTER EXTENSION leaf UPDATE in the publisher's database first.")));
	if (strtou64(PQgetvalue(res, 0, 2), NULL, 10) == sysid &&
		(Oid) strtoul(PQgetvalue(res, 0, 3), NULL, 10) == MyDatabaseId)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the publisher is this database")));
	*pubsys = pstrdup(PQgetvalue(res, 0, 2));
	*pubdb = pstrdup(PQgetvalue(res, 0, 3));
	if (PQgetvalue(res, 0, 4)[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the publisher draws its segments from a fleet's allocation database"),
				 errhint("Set \"leaf.alloc_conninfo\" here as on the publisher: the counters are in the allocation database.")));
	PQclear(res);
	leaf_cutover_trust_publisher(pq);
	return nsp;
}

/*
 * Refuse a publisher whose counters another database took over already
 * (its current source is neither itself nor this database): the two
 * would go on from the same counters.
 */
static void
leaf_cutover_not_moved(LeafPq *pq, const char *nsp, const char *pubsys,
					   const char *pubdb, uint64 sysid)
{
	PGresult   *res;
	const char *params[4];

	params[0] = pubsys;
	params[1] = pubdb;
	params[2] = psprintf(UINT64_FORMAT, sysid);
	params[3] = psprintf("%u", MyDatabaseId);
	res = leaf_cutover_exec(pq,
							psprintf("SELECT description FROM %s.leaf_alloc_source "
									 "WHERE state OPERATOR(pg_catalog.=) 'current' "
									 "AND kind OPERATOR(pg_catalog.=) 'local' "
									 "AND (system_identifier, database_oid) "
									 "NOT IN (($1::pg_catalog.int8, $2::pg_catalog.oid), "
									 "($3::pg_catalog.int8, $4::pg_catalog.oid))", nsp),
							4, params, PGRES_TUPLES_OK);
	if (PQntuples(res) > 0)
	{
		char	   *desc = pstrdup(PQgetvalue(res, 0, 0));

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the publisher's counters belong to another database"),
				 errdetail("Its leaf_alloc_source records: %s.", desc),
				 errhint("Take the counters over from the database that holds them now.")));
	}
	PQclear(res);
}

/*
 * What this database holds of a publisher's worker-ID leases: whether the
 * subscription holds one of the tables of worker IDs, the fleet_id of its
 * table (NULL if none), which a copy shares with the publisher's, and the
 * tokens of its leases, which a copied row shares with the publisher's
 * (each holder draws its own at random): a subscription dropped, or a
 * publication of the leases without the fleet, leaves those.
 */
typedef struct LeafCutoverLeases
{
	bool		tables;			/* this database has tables of worker IDs */
	bool		subscribed;
	char	   *fleet;
	char	   *tokens;			/* the holder_token of each row of its
								 * leaf_worker_lease, as an int8[]
								 * literal, NULL if none */
} LeafCutoverLeases;

/* Read here for subscription subname (SPI connected). */
static void
leaf_cutover_local_leases(const char *subname, Oid nspoid, const char *nsp,
						  LeafCutoverLeases *here)
{
	Oid			argtypes[5] = {OIDOID, TEXTOID, OIDOID, OIDOID, OIDOID};
	Datum		values[5];

	memset(here, 0, sizeof(*here));
	values[2] = ObjectIdGetDatum(leaf_extension_relid(nspoid, "leaf_worker_lease"));
	values[3] = ObjectIdGetDatum(leaf_extension_relid(nspoid, "leaf_worker_lease_fleet"));
	values[4] = ObjectIdGetDatum(leaf_extension_relid(nspoid, "leaf_worker_lease_timeline"));
	if (!OidIsValid(DatumGetObjectId(values[3])))
		return;					/* before 1.5: none of leaf's */
	here->tables = true;
	if (SPI_execute(psprintf("SELECT fleet_id FROM %s.leaf_worker_lease_fleet", nsp),
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_worker_lease_fleet");
	if (SPI_processed == 1)
		here->fleet = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (SPI_execute(psprintf("SELECT pg_catalog.array_agg(holder_token)::pg_catalog.text "
							 "FROM %s.leaf_worker_lease", nsp),
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_worker_lease");
	here->tokens = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	values[0] = ObjectIdGetDatum(MyDatabaseId);
	values[1] = CStringGetTextDatum(subname);
	if (SPI_execute_with_args("SELECT FROM pg_catalog.pg_subscription s "
							  "JOIN pg_catalog.pg_subscription_rel r "
							  "ON r.srsubid OPERATOR(pg_catalog.=) s.oid "
							  "WHERE s.subdbid OPERATOR(pg_catalog.=) $1 "
							  "AND s.subname OPERATOR(pg_catalog.=) $2::pg_catalog.name "
							  "AND r.srrelid OPERATOR(pg_catalog.=) ANY (ARRAY[$3, $4, $5])",
							  5, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_subscription_rel");
	here->subscribed = SPI_processed > 0;
}

/*
 * Fence the publisher's worker-ID leases (1.5 and later), in the fence's
 * transaction, if this database holds a copy of them (here): refuse
 * while a node may still serve with one (its lease has not passed on the
 * publisher's clock), then mark the fleet as moved, so that no node takes
 * or renews a worker ID there again.  EXCLUSIVE waits for the takings and
 * renewals under way, and holds up the later ones until the mark is
 * committed: then they read it.  The subscriber's copy of the leases, and
 * the wait for a new cluster there (leaf_sf_db.c), which covers the clocks
 * of the former holders, take it from here.
 */
static void
leaf_cutover_fence_leases(LeafPq *pq, const char *nsp, const char *moved,
						  const LeafCutoverLeases *here)
{
	PGresult   *res;
	const char *params[1];
	bool		copied;

	if (!here->tables)
		return;
	res = leaf_cutover_exec(pq,
							psprintf("SELECT pg_catalog.to_regclass(%s) IS NOT NULL",
									 quote_literal_cstr(psprintf("%s.leaf_worker_lease_fleet", nsp))),
							0, NULL, PGRES_TUPLES_OK);
	copied = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	if (!copied)
		return;					/* the publisher is older than 1.5 */
	params[0] = here->tokens ? here->tokens : "{}";
	res = leaf_cutover_exec(pq,
							psprintf("SELECT (SELECT f.fleet_id FROM %s.leaf_worker_lease_fleet AS f), "
									 "EXISTS (SELECT FROM %s.leaf_worker_lease AS l "
									 "WHERE l.holder_token OPERATOR(pg_catalog.=) "
									 "ANY ($1::pg_catalog.int8[]))",
									 nsp, nsp),
							1, params, PGRES_TUPLES_OK);
	/* a copy of the publisher's leases: by the subscription, fleet or rows */
	copied = here->subscribed ||
		(here->fleet != NULL && !PQgetisnull(res, 0, 0) &&
		 strcmp(here->fleet, PQgetvalue(res, 0, 0)) == 0) ||
		PQgetvalue(res, 0, 1)[0] == 't';
	PQclear(res);
	if (!copied)
		return;
	PQclear(leaf_cutover_exec(pq, psprintf("LOCK TABLE %s.leaf_worker_lease, %s.leaf_worker_lease_fleet IN EXCLUSIVE MODE", nsp, nsp),
							  0, NULL, PGRES_COMMAND_OK));
	res = leaf_cutover_exec(pq,
							psprintf("SELECT pg_catalog.count(*), pg_catalog.string_agg("
									 "l.worker_id OPERATOR(pg_catalog.||) ' (' OPERATOR(pg_catalog.||) "
									 "l.holder_address OPERATOR(pg_catalog.||) ')', ', ' ORDER BY l.worker_id) "
									 "FROM %s.leaf_worker_lease AS l "
									 "WHERE l.expires_at OPERATOR(pg_catalog.>=) pg_catalog.clock_timestamp()",
									 nsp),
							0, NULL, PGRES_TUPLES_OK);
	if (strcmp(PQgetvalue(res, 0, 0), "0") != 0)
	{
		char	   *held = pstrdup(PQgetvalue(res, 0, 1));

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake nodes hold worker IDs in the publisher's allocation database"),
				 errdetail("Worker IDs with a lease that has not passed: %s.", held),
				 errhint("Stop those nodes (a clean stop ends a lease at once), let this database catch up, then call leaf_alloc_cutover() again; point them at this database afterwards.")));
	}
	PQclear(res);
	params[0] = moved;
	PQclear(leaf_cutover_exec(pq,
							  psprintf("INSERT INTO %s.leaf_worker_lease_fleet AS f (fleet_id, moved_to) "
									   "VALUES ((pg_catalog.random() OPERATOR(pg_catalog.*) 9e18)::pg_catalog.int8 "
									   "OPERATOR(pg_catalog.+) 1, $1) "
									   "ON CONFLICT (one) DO UPDATE SET moved_to = excluded.moved_to",
									   nsp),
							  1, params, PGRES_COMMAND_OK));
}

/* Read the rows of res (biz_tag, max_id, step, description) into pub. */
static void
leaf_cutover_read(PGresult *res, LeafCutoverPublisher *pub)
{
	int			i;
	int			n = PQntuples(res);

	pub->tags = pub->tags ?
		repalloc(pub->tags, sizeof(LeafCutoverTag) * (pub->ntags + n + 1)) :
		palloc(sizeof(LeafCutoverTag) * (n + 1));
	for (i = 0; i < n; i++)
	{
		LeafCutoverTag *t = &pub->tags[pub->ntags++];

		t->tag = pstrdup(PQgetvalue(res, i, 0));
		t->max_id = strtoi64(PQgetvalue(res, i, 1), NULL, 10);
		t->step = PQgetisnull(res, i, 2) ? 0 : atoi(PQgetvalue(res, i, 2));
		t->description = PQgetisnull(res, i, 3) ? NULL :
			pstrdup(PQgetvalue(res, i, 3));
	}
}

/*
 * The session of the fence on the publisher, one statement each (they
 * are sent with the extended protocol, which takes one at a time).
 */
static const char *const leaf_cutover_session[] = {
	"SET search_path = pg_catalog, pg_temp",
	"SET statement_timeout = '" LEAF_CUTOVER_STATEMENT_TIMEOUT "'",
	"SET lock_timeout = '" LEAF_CUTOVER_LOCK_TIMEOUT "'",
	"SET synchronous_commit = on",
	"BEGIN ISOLATION LEVEL READ COMMITTED",
};

/*
 * Connect to the publisher, within LEAF_CUTOVER_CONNECT_MS; then the
 * statements wait as long as the publisher's statement_timeout, or this
 * backend's cancel, lets them.
 */
static void
leaf_cutover_connect(LeafPq *pq, const char *conninfo)
{
	const char *keys[] = {"dbname", "application_name", NULL};
	const char *vals[] = {conninfo, "leaf_alloc_cutover", NULL};
	char		reason[LEAF_ERRMSG_LEN];

	pq->deadline_ms = leaf_pq_mono_ms() + LEAF_CUTOVER_CONNECT_MS;
	if (!leaf_pq_connect(pq, keys, vals, reason, sizeof(reason)))
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to the publisher: %s", reason),
				 errhint("If the publisher is gone for good, call leaf_alloc_cutover() with publisher => '' and raise_by => more IDs than it can have handed out beyond what reached this database.")));
	pq->deadline_ms = 0;
}

/*
 * In one transaction on the publisher: lock its leaf_alloc, read its
 * counters into pub, fence its leases (here: what this database holds of
 * them) and record this database as the owner of its counters; commit.
 */
static void
leaf_cutover_fence_publisher(LeafPq *pq, const LeafCutoverLeases *here,
							 LeafCutoverPublisher *pub)
{
	uint64		sysid = GetSystemIdentifier();
	char	   *nsp;
	char	   *pubsys;
	char	   *pubdb;
	char	   *q;
	const char *params[3];
	PGresult   *res;
	int			i;

	/* the fence is durable before anything here relies on it */
	for (i = 0; i < lengthof(leaf_cutover_session); i++)
		PQclear(leaf_cutover_exec(pq, leaf_cutover_session[i], 0, NULL,
								  PGRES_COMMAND_OK));
	nsp = pstrdup(quote_identifier(leaf_cutover_publisher_schema(pq, sysid,
															 &pubsys, &pubdb)));

	/*
	 * EXCLUSIVE waits for the loads under way there (they hold their row
	 * FOR UPDATE) and holds up the later ones, of new tags too, until the
	 * fence is committed: then they read it
	 */
	PQclear(leaf_cutover_exec(pq, psprintf("LOCK TABLE %s.leaf_alloc IN EXCLUSIVE MODE", nsp),
							  0, NULL, PGRES_COMMAND_OK));
	leaf_cutover_not_moved(pq, nsp, pubsys, pubdb, sysid);
	q = psprintf("SELECT biz_tag::pg_catalog.text, max_id, step, description "
				 "FROM %s.leaf_alloc ORDER BY 1", nsp);
	res = leaf_cutover_exec(pq, q, 0, NULL, PGRES_TUPLES_OK);
	leaf_cutover_read(res, pub);
	PQclear(res);
	q = psprintf("SELECT biz_tag::pg_catalog.text, max_id, NULL, NULL "
				 "FROM %s.leaf_alloc_retired", nsp);
	res = leaf_cutover_exec(pq, q, 0, NULL, PGRES_TUPLES_OK);
	leaf_cutover_read(res, pub);
	PQclear(res);

	params[0] = psprintf(UINT64_FORMAT, sysid);
	params[1] = psprintf("%u", MyDatabaseId);
	params[2] = psprintf(LEAF_SOURCE_MOVED "database \"%s\" (%u) of system " UINT64_FORMAT " took these counters over with leaf_alloc_cutover() at %s; they lie below its own now",
						 get_database_name(MyDatabaseId), MyDatabaseId,
						 sysid, timestamptz_to_str(GetCurrentTimestamp()));
	leaf_cutover_fence_leases(pq, nsp,
							  psprintf("database \"%s\" (%u) of system " UINT64_FORMAT,
									   get_database_name(MyDatabaseId),
									   MyDatabaseId, sysid), here);
	PQclear(leaf_cutover_exec(pq, psprintf("DELETE FROM %s.leaf_alloc_source", nsp),
							  0, NULL, PGRES_COMMAND_OK));
	q = psprintf("INSERT INTO %s.leaf_alloc_source "
				 "(state, kind, system_identifier, database_oid, description) "
				 "VALUES ('current', 'local', $1, $2, $3)", nsp);
	PQclear(leaf_cutover_exec(pq, q, 3, params, PGRES_COMMAND_OK));
	PQclear(leaf_cutover_exec(pq, "COMMIT", 0, NULL, PGRES_COMMAND_OK));
}

/*
 * Fence the publisher's leaf and read its counters (see the header), in
 * one transaction there.  The connection is closed on the way out, error
 * or not.
 */
static void
leaf_cutover_fence(const char *conninfo, const LeafCutoverLeases *here,
				   LeafCutoverPublisher *pub)
{
	LeafPq	   *pq = &leaf_cutover_pq;

	PG_TRY();
	{
		leaf_cutover_connect(pq, conninfo);
		pub->address = psprintf("%s:%s/%s", PQhost(pq->conn),
								PQport(pq->conn), PQdb(pq->conn));
		leaf_cutover_fence_publisher(pq, here, pub);
	}
	PG_FINALLY();
	{
		leaf_pq_finish(pq);
	}
	PG_END_TRY();
}

/*
 * The origin in leaf_alloc_replicated of a subscription that was dropped:
 * named as that table shows it, or by the subscription's name where only
 * one subscription of that name wrote leaf_alloc.
 */
static char *
leaf_cutover_dropped_origin(const char *subname, const char *nsp)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	StringInfoData all;
	uint64		i;

	values[0] = CStringGetTextDatum(subname);
	if (SPI_execute_with_args(psprintf("SELECT origin FROM %s.leaf_alloc_replicated "
									   "WHERE origin OPERATOR(pg_catalog.=) $1 "
									   "OR pg_catalog.starts_with(origin, 'subscription ' "
									   "OPERATOR(pg_catalog.||) $1 OPERATOR(pg_catalog.||) ' (') "
									   "ORDER BY 1", nsp),
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_alloc_replicated");
	if (SPI_processed == 0)
		return pstrdup(subname);
	if (SPI_processed == 1)
		return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	initStringInfo(&all);
	for (i = 0; i < SPI_processed; i++)
		appendStringInfo(&all, "%s%s", i > 0 ? "; " : "",
						 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("more than one subscription named \"%s\" wrote leaf_alloc", subname),
			 errdetail("leaf_alloc_replicated records: %s.", all.data),
			 errhint("Cut over from each publisher, naming the origin as leaf_alloc_replicated shows it.")));
	return NULL;				/* keep compiler quiet */
}

/*
 * This database's subscription subname, its connection into *conninfo;
 * refuses an enabled one, and any other enabled subscription that holds
 * leaf's tables.  Returns whether it exists.
 */
static bool
leaf_cutover_subscription(const char *subname, Oid extoid, const char *nsp,
						  char **conninfo, char **origin)
{
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2];
	bool		found;
	char		detail[LEAF_ERRMSG_LEN];

	values[0] = ObjectIdGetDatum(MyDatabaseId);
	values[1] = CStringGetTextDatum(subname);
	if (SPI_execute_with_args("SELECT s.subenabled, s.subconninfo, s.oid "
							  "FROM pg_catalog.pg_subscription s "
							  "WHERE s.subdbid OPERATOR(pg_catalog.=) $1 "
							  "AND s.subname OPERATOR(pg_catalog.=) $2::pg_catalog.name",
							  2, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_subscription");
	found = (SPI_processed > 0);
	if (found)
	{
		if (strcmp(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), "t") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("subscription \"%s\" is enabled", subname),
					 errdetail("Its apply would go on writing the publisher's counters into leaf_alloc."),
					 errhint("Once the publisher hands out no more IDs and this database has caught up, run ALTER SUBSCRIPTION %s DISABLE, then leaf_alloc_cutover() again.",
							 quote_identifier(subname))));
		if (*conninfo == NULL)
			*conninfo = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		/* as the trigger names it: this subscription, not an older one */
		*origin = psprintf("subscription %s (%s)", subname,
						   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3));
	}
	else
		*origin = leaf_cutover_dropped_origin(subname, nsp);
	if (leaf_copy_subscribed(extoid, detail, sizeof(detail)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("another subscription replicates leaf's tables into this database"),
				 errdetail_internal("%s", detail),
				 errhint("Disable it, or take leaf's tables out of its publications, first.")));
	return found;
}

/*
 * Raise this database's counter of tag to at least max_id, plus raise_by
 * (creating the tag with step if it has none), or mark a retired tag.
 * Emits a row of the result, with publisher_max_id unless negative.
 */
static void
leaf_cutover_raise(const char *nsp, const LeafCutoverTag *t, int64 raise_by,
				   int64 publisher_max_id, ReturnSetInfo *rsinfo)
{
	Oid			argtypes[4] = {TEXTOID, INT8OID, INT4OID, TEXTOID};
	Datum		args[4];
	char		argnulls[4] = {' ', ' ', ' ', ' '};
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	bool		isnull;
	int64		before = 0;
	int64		raised;
	bool		have = false;

	args[0] = CStringGetTextDatum(t->tag);
	if (SPI_execute_with_args(psprintf("SELECT max_id FROM %s.leaf_alloc "
									   "WHERE biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar FOR UPDATE",
									   nsp),
							  1, argtypes, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_alloc");
	if (SPI_processed > 0)
	{
		have = true;
		before = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
	}
	if (pg_add_s64_overflow(Max(before, t->max_id), raise_by, &raised))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("max_id of biz_tag \"%s\" raised by " INT64_FORMAT " is out of range for bigint",
						t->tag, raise_by)));
	args[1] = Int64GetDatum(raised);
	args[2] = Int32GetDatum(t->step);
	args[3] = t->description ? CStringGetTextDatum(t->description) : (Datum) 0;
	argnulls[3] = t->description ? ' ' : 'n';

	if (t->step == 0)
	{
		/* a tag the publisher retired: one inserted here starts above it */
		if (SPI_execute_with_args(psprintf("INSERT INTO %s.leaf_alloc_retired AS r (biz_tag, max_id) "
										   "VALUES ($1, $2) ON CONFLICT (biz_tag) DO UPDATE "
										   "SET max_id = GREATEST(r.max_id, excluded.max_id), "
										   "retired_at = pg_catalog.now()", nsp),
								  2, argtypes, args, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not update leaf_alloc_retired");
		return;
	}
	if (!have)
	{
		if (SPI_execute_with_args(psprintf("INSERT INTO %s.leaf_alloc (biz_tag, max_id, step, description) "
										   "VALUES ($1, $2, $3, $4) RETURNING max_id", nsp),
								  4, argtypes, args, argnulls, false, 0) != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not insert into leaf_alloc");
	}
	else if (SPI_execute_with_args(psprintf("UPDATE %s.leaf_alloc SET max_id = $2 "
											"WHERE biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar "
											"RETURNING max_id", nsp),
								   2, argtypes, args, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not update leaf_alloc");

	values[0] = CStringGetTextDatum(t->tag);
	values[1] = Int64GetDatum(before);
	nulls[1] = !have;
	values[2] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	values[3] = Int64GetDatum(publisher_max_id);
	nulls[3] = (publisher_max_id < 0);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * This database owns its counters now: leaf_alloc_source records it, the
 * replication that wrote leaf_alloc is forgotten, and the segments held
 * in shared memory are dropped.
 */
static void
leaf_cutover_record(const char *nsp, const char *origin, const char *from,
					const LeafCutoverLeases *here)
{
	Oid			argtypes[6] = {INT8OID, OIDOID, TEXTOID, TEXTOID, INT8OID, INT8OID};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	LeafCopyIdent local;

	/* all of what the allocator records, which may not check again */
	leaf_copy_here(&local);
	args[0] = Int64GetDatum(local.sysid);
	args[1] = ObjectIdGetDatum(local.dboid);
	args[2] = CStringGetTextDatum(psprintf("the local leaf_alloc (database %u of system " UINT64_FORMAT "), taken over from %s",
										   local.dboid, (uint64) local.sysid, from));
	args[3] = CStringGetTextDatum(origin);
	args[4] = Int64GetDatum((int64) local.timeline);
	args[5] = Int64GetDatum((int64) local.datadir);
	if (local.datadir == 0)
		nulls[5] = 'n';
	if (SPI_execute(psprintf("DELETE FROM %s.leaf_alloc_source", nsp),
					false, 0) != SPI_OK_DELETE ||
		SPI_execute_with_args(psprintf("INSERT INTO %s.leaf_alloc_source "
									   "(state, kind, system_identifier, database_oid, description, "
									   "timeline, data_directory) "
									   "VALUES ('current', 'local', $1, $2, $3, $5, $6)", nsp),
							  6, argtypes, args, nulls, false, 0) != SPI_OK_INSERT ||
		SPI_execute_with_args(psprintf("DELETE FROM %s.leaf_alloc_replicated "
									   "WHERE origin OPERATOR(pg_catalog.=) $4", nsp),
							  6, argtypes, args, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not record the cut-over");
	/* a fleet moved away from here and back (switching back) is here again */
	if (here->tables &&
		SPI_execute(psprintf("UPDATE %s.leaf_worker_lease_fleet SET moved_to = NULL "
							 "WHERE moved_to IS NOT NULL", nsp),
					false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the cut-over");
	leaf_discard_database_segments(MyDatabaseId);
}

/*
 * The arguments of leaf_alloc_cutover(), checked, with what the caller
 * may do: the subscription's name, the publisher's connection string
 * (NULL: the subscription's; "": none, the publisher is gone for good)
 * and raise_by.
 */
static void
leaf_cutover_args(FunctionCallInfo fcinfo, char **subname, char **conninfo,
				  int64 *raise_by)
{
	*raise_by = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT64(2);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("subscription must not be NULL")));
	*subname = text_to_cstring(PG_GETARG_TEXT_PP(0));
	*conninfo = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	/* publisher => '': the publisher is gone for good, nothing to fence */
	if (*conninfo != NULL && (*conninfo)[0] == '\0' && *raise_by == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a cut-over without a publisher needs raise_by"),
				 errhint("Raise every counter by more IDs than the publisher can have handed out beyond what reached this database.")));
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to take over the counters of a publisher"),
				 errdetail("Only superusers may call leaf_alloc_cutover().")));
	if (*raise_by < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("raise_by must not be negative")));
	if (leaf_remote_enabled())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("leaf_alloc_cutover() is for a database's own leaf_alloc"),
				 errdetail("\"leaf.alloc_conninfo\" is set: segments come from a fleet's allocation database.")));
}

/*
 * Raise the tags that only this database has (not in pub) by raise_by
 * (SPI connected).
 */
static void
leaf_cutover_raise_own(const char *nsp, const LeafCutoverPublisher *pub,
					   int64 raise_by, ReturnSetInfo *rsinfo)
{
	uint64		nown;
	LeafCutoverTag *own;
	uint64		j;
	int			i;

	if (SPI_execute(psprintf("SELECT biz_tag::pg_catalog.text, max_id FROM %s.leaf_alloc ORDER BY 1",
							 nsp), false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_alloc");
	nown = SPI_processed;
	own = palloc0(sizeof(LeafCutoverTag) * (nown + 1));

	/* read first: the raises run statements of their own */
	for (j = 0; j < nown; j++)
	{
		bool		isnull;

		own[j].tag = SPI_getvalue(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 1);
		own[j].max_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[j],
													SPI_tuptable->tupdesc, 2, &isnull));
		own[j].step = 1;		/* not used: the tag exists */
	}
	for (j = 0; j < nown; j++)
	{
		bool		known = false;

		for (i = 0; i < pub->ntags && !known; i++)
			known = (pub->tags[i].step != 0 && strcmp(pub->tags[i].tag, own[j].tag) == 0);
		if (!known)
			leaf_cutover_raise(nsp, &own[j], raise_by, -1, rsinfo);
	}
}

/*
 * leaf_alloc_cutover(subscription, publisher, raise_by): see the header
 * and docs/copies.md.
 */
Datum
leaf_alloc_cutover(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *subname;
	char	   *conninfo;
	int64		raise_by;
	Oid			extoid;
	Oid			nspoid;
	char	   *nsp;
	LeafCutoverPublisher pub;
	LeafCutoverLeases here;
	char	   *origin;
	bool		no_publisher;
	int			guc_level;
	int			i;

	leaf_cutover_args(fcinfo, &subname, &conninfo, &raise_by);
	no_publisher = (conninfo != NULL && conninfo[0] == '\0');
	nspoid = leaf_extension_namespace(&extoid);
	if (!OidIsValid(extoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"leaf\" is not installed in this database")));
	nsp = pstrdup(quote_identifier(get_namespace_name(nspoid)));
	InitMaterializedSRF(fcinfo, 0);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!leaf_cutover_subscription(subname, extoid, nsp, &conninfo, &origin) &&
		conninfo == NULL)
	{
		char		detail[LEAF_ERRMSG_LEN];

		if (raise_by == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("subscription \"%s\" does not exist", subname),
					 leaf_copy_replicated(nspoid, detail, sizeof(detail)) ?
					 errdetail_internal("%s", detail) : 0,
					 errhint("Name the publisher with publisher => 'conninfo'; if it is gone for good, use publisher => '' and raise every counter with raise_by => more IDs than it can have handed out beyond what reached this database.")));
	}

	memset(&pub, 0, sizeof(pub));
	if (no_publisher)
		conninfo = NULL;
	leaf_cutover_local_leases(subname, nspoid, nsp, &here);
	if (conninfo != NULL)
		leaf_cutover_fence(conninfo, &here, &pub);
	else
		ereport(WARNING,
				(errmsg("the publisher is not fenced"),
				 errdetail("Every counter is raised by " INT64_FORMAT "; the publisher must hand out no more IDs.",
						   raise_by)));

	/*
	 * the publisher's tags, then the ones only this database has: writes
	 * of leaf's, not an apply, whatever role the caller's session has
	 */
	guc_level = leaf_copy_own_writes_begin();
	for (i = 0; i < pub.ntags; i++)
		leaf_cutover_raise(nsp, &pub.tags[i], raise_by,
						   pub.tags[i].max_id, rsinfo);
	leaf_cutover_raise_own(nsp, &pub, raise_by, rsinfo);
	leaf_cutover_record(nsp, origin,
						pub.address ? psprintf("%s (subscription %s)", pub.address, subname) :
						psprintf("subscription %s, raised by " INT64_FORMAT, subname, raise_by),
						&here);
	AtEOXact_GUC(true, guc_level);
	SPI_finish();
	ereport(LOG,
			(errmsg("leaf took over the counters of database \"%s\" from %s",
					get_database_name(MyDatabaseId),
					pub.address ? pub.address : "a publisher that was not reached")));
	return (Datum) 0;
}
