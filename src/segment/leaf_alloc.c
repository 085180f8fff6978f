/*-------------------------------------------------------------------------
 *
 * leaf_alloc.c
 *	  What the allocator's sources of segments share: the policy that
 *	  sizes a segment, the transaction a load runs in, and the settings
 *	  that more than one part of the allocator reads.
 *
 * Segments come from this database's own leaf_alloc (leaf_alloc_local.c)
 * or, in fleet mode, from another server's (leaf_alloc_remote.c, which
 * says which one is in use); the allocator worker (leaf_alloc_worker.c)
 * drives both.  Whichever reads the row of a tag, leaf_plan_segment()
 * decides the next segment: the dynamic step, the end of the bigint
 * range, a max_id that moved back.
 * leaf_in_transaction() runs a piece of the worker's work in a
 * transaction of its own, keeps its errors from ending the worker, and
 * times its commit.
 * leaf_report_refusal() raises, in a backend, the error of a refusal as
 * the check that decided it composed it.  leaf_load_log_begin() says
 * whether, and how, a source records its load in leaf_segment_log.
 *
 * When a database command asks the worker to exit (leaf_ddl.c), its
 * SIGTERM handler calls leaf_alloc_request_stop(): a load's transaction
 * is cancelled, and waits in the middle of a remote load give up.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xlog.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/datetime.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "leaf.h"
#include "common/leaf_copy.h"
#include "segment/leaf_alloc.h"
#include "common/leaf_errcodes.h"

/* Leaf's cap on the dynamic step. */
#define LEAF_MAX_DYNAMIC_STEP	1000000

/* leaf.segment_duration, in ms: read by the dynamic step below */
static int	leaf_segment_duration_ms = 15 * 60 * 1000;

/*
 * leaf.tag_refresh_interval, in ms.  The worker looks for deleted tags
 * this often, and the source check (leaf_alloc_source.c) checks a source
 * it has checked already again after as long.  Both depend on this file
 * already; defined in the worker, the setting would make the source
 * check, which the worker's sources call, depend on the worker in turn.
 */
int			leaf_tag_refresh_ms = 10 * 1000;

/*
 * leaf.segment_log_retention, in s: how long leaf_segment_log keeps the
 * rows of a load (0: no row is written).  Both sources write the rows.
 */
int			leaf_segment_log_retention_s = 30 * 24 * 3600;

/*
 * How long the commit of the last transaction of leaf_in_transaction()
 * took, in microseconds: a local load reports it as the commit of its
 * refill (the WAL flush, the wait for synchronous standbys).
 */
int64		leaf_last_commit_us = 0;

/* who loads, in leaf_segment_log: "system identifier.inode/database" */
static char leaf_loader_name[LEAF_LOADER_LEN] = "";

/*
 * A database command asked the worker to exit (set in its SIGTERM
 * handler); and the worker is in leaf_in_transaction(), where that
 * cancels the transaction.
 */
static volatile sig_atomic_t leaf_alloc_stop_pending = false;
static volatile sig_atomic_t leaf_alloc_in_xact = false;

/* Define the settings that more than one part of the allocator reads. */
void
leaf_alloc_init_settings(void)
{
	DefineCustomIntVariable("leaf.segment_duration",
							"Sets the target lifetime of a segment for the dynamic step.",
							"A segment used up faster doubles the next step; one lasting "
							"twice as long halves it.",
							&leaf_segment_duration_ms,
							15 * 60 * 1000, 1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.tag_refresh_interval",
							"Sets how often allocator workers look for biz_tags deleted from leaf_alloc.",
							NULL,
							&leaf_tag_refresh_ms,
							10 * 1000, 100, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.segment_log_retention",
							"Sets how long leaf_segment_log keeps the record of a segment load.",
							"0 turns the record off.",
							&leaf_segment_log_retention_s,
							30 * 24 * 3600, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

/*
 * Name the loader of this allocator's segments in leaf_segment_log: the
 * cluster's system identifier, the inode of its data directory and the
 * database.  The windows of leaf_segment_issued() follow one loader's
 * loads, so two servers that hand out IDs side by side must not share a
 * name: a physical standby or a clone of the data directory has its
 * primary's system identifier, but a data directory of its own.  None of
 * it is secret, and none changes while the server runs.
 */
void
leaf_alloc_set_loader(const char *dbname)
{
	snprintf(leaf_loader_name, sizeof(leaf_loader_name),
			 UINT64_FORMAT "." UINT64_FORMAT "/%s", GetSystemIdentifier(),
			 leaf_copy_data_directory(), dbname);
}

/*
 * Before a load: is it to be recorded in leaf_segment_log?  If so, *log
 * says when it began and which rows it prunes.  Taken before the load's
 * statement, loaded_at is no later than the commit after which its IDs
 * are handed out, and no earlier than the moment the load was asked for.
 */
bool
leaf_load_log_begin(LeafLoadLog *log)
{
	if (leaf_segment_log_retention_s <= 0 || leaf_loader_name[0] == '\0')
		return false;
	log->loaded_at = GetCurrentTimestamp();
	log->prune_before = log->loaded_at -
		(TimestampTz) leaf_segment_log_retention_s * USECS_PER_SEC;
	strlcpy(log->loaded_by, leaf_loader_name, sizeof(log->loaded_by));
	return true;
}

/*
 * ts in ISO 8601, in UTC, whatever DateStyle and TimeZone are here, so
 * that another server reads it as the same instant.
 */
void
leaf_timestamp_iso(TimestampTz ts, char *buf, size_t len)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		elog(ERROR, "timestamp out of range");
	snprintf(buf, len, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00",
			 tm.tm_year, tm.tm_mon, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec, (int) fsec);
}

/*
 * Returns the namespace of the leaf extension in the current database,
 * and its OID in *extoid; InvalidOid for both if it is not there.
 */
Oid
leaf_extension_namespace(Oid *extoid)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	*extoid = InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname,
				BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("leaf"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true,
							  NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		Form_pg_extension ext = (Form_pg_extension) GETSTRUCT(tup);

		*extoid = ext->oid;
		nsp = ext->extnamespace;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	return nsp;
}

/*
 * The relation relname of leaf's schema nsp, if it is one of leaf's own:
 * InvalidOid when there is none, or when it is not a member of the
 * extension "leaf" (in a database still at an older version, whoever may
 * create in the schema may have made one of that name, and leaf's
 * processes read and write these tables as a superuser).
 */
Oid
leaf_extension_relid(Oid nsp, const char *relname)
{
	Oid			relid = get_relname_relid(relname, nsp);
	Oid			extoid;

	if (!OidIsValid(relid))
		return InvalidOid;
	extoid = getExtensionOfObject(RelationRelationId, relid);
	if (!OidIsValid(extoid) || get_extension_oid("leaf", true) != extoid)
		return InvalidOid;
	return relid;
}

/*
 * In the allocator worker's SIGTERM handler, when a database command
 * asked it to exit: so it takes no lock and only sets flags.
 */
void
leaf_alloc_request_stop(void)
{
	leaf_alloc_stop_pending = true;

	/*
	 * A load's transaction may be waiting (a row lock, the synchronous
	 * standbys): cancel it as a query cancel would.  Its segment is then
	 * not used.  Outside a transaction, a cancel has nothing to end, and
	 * its ERROR would be FATAL.
	 */
	if (leaf_alloc_in_xact)
	{
		QueryCancelPending = true;
		InterruptPending = true;
	}
}

/*
 * Has a database command asked this worker to exit?  Waits in the middle
 * of a load (fleet mode) give up when it has.
 */
bool
leaf_alloc_stopping(void)
{
	return leaf_alloc_stop_pending;
}

/*
 * The step of the next load, as Leaf computes it: the table's step for
 * the first two loads and whenever the table's step was changed; after
 * that, doubled if the last segment lasted less than
 * leaf.segment_duration (up to LEAF_MAX_DYNAMIC_STEP), halved if it
 * lasted twice as long or more, never below the table's step.
 */
static int64
leaf_dynamic_step(const LeafLoadJob *job, int32 row_step, TimestampTz now)
{
	int64		step;
	int64		lasted_ms;

	if (job->nloads < 2 || row_step != job->min_step)
		return row_step;

	step = job->step;
	lasted_ms = (now - job->last_load) / 1000;
	if (lasted_ms < leaf_segment_duration_ms)
	{
		if (step * 2 <= LEAF_MAX_DYNAMIC_STEP)
			step *= 2;
	}
	else if (lasted_ms >= 2 * (int64) leaf_segment_duration_ms)
	{
		if (step / 2 >= row_step)
			step /= 2;
	}
	return Max(step, row_step);
}

/*
 * Given the row of a tag (max_id and step, read under a row lock), decide
 * the next segment.  Returns false, with a final failure in *res, when no
 * segment may be taken; otherwise res->start and res->size say what to
 * take and max_id must be set to res->db_max_id.
 */
bool
leaf_plan_segment(const LeafLoadJob *job, int64 max_id, int32 row_step,
				  LeafLoadResult *res)
{
	int64		size;

	res->min_step = row_step;
	if (row_step <= 0)
	{
		res->status = LEAF_LOAD_FINAL;
		res->sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
		snprintf(res->msg, sizeof(res->msg),
				 "step of biz_tag \"%s\" is %d, but it must be positive",
				 job->tag, row_step);
		return false;
	}
	if (job->db_max_id != PG_INT64_MIN && max_id < job->db_max_id)
	{
		res->status = LEAF_LOAD_FINAL;
		res->sqlstate = ERRCODE_LEAF_MAX_ID_BACKWARDS;
		snprintf(res->msg, sizeof(res->msg),
				 "max_id of biz_tag \"%s\" moved backwards from " INT64_FORMAT
				 " to " INT64_FORMAT "; was the tag deleted and added again?",
				 job->tag, job->db_max_id, max_id);
		return false;
	}

	res->step = leaf_dynamic_step(job, row_step, GetCurrentTimestamp());
	size = Max(res->step, job->want);

	/*
	 * Near the end of the bigint range the dynamic step may be more than
	 * is left: the last segment is what is left, down to the table's step
	 * (or what the caller asked for).
	 */
	if (max_id >= 0 && max_id > PG_INT64_MAX - size &&
		PG_INT64_MAX - max_id >= Max(row_step, job->want))
		size = PG_INT64_MAX - max_id;
	if (max_id > PG_INT64_MAX - size)
	{
		res->status = LEAF_LOAD_FINAL;
		res->sqlstate = ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED;
		snprintf(res->msg, sizeof(res->msg),
				 "biz_tag \"%s\" has run out of IDs: max_id " INT64_FORMAT
				 " plus a step of " INT64_FORMAT " is past the bigint range",
				 job->tag, max_id, size);
		return false;
	}
	res->status = LEAF_LOAD_OK;
	res->start = max_id;
	res->size = size;
	res->db_max_id = max_id + size;
	return true;
}

/*
 * Run fn(arg) in a transaction of its own, with SPI connected and a
 * snapshot set.  Returns true once the transaction has committed;
 * otherwise it has been rolled back, and the error's SQLSTATE and message
 * are in *sqlstate and errbuf.  An error never leaves this function, so a
 * failure does not end the worker.
 */
bool
leaf_in_transaction(void (*fn) (void *arg), void *arg, const char *activity,
					int *sqlstate, char *errbuf, size_t errlen)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = false;
	TimestampTz commit_start;

	leaf_alloc_in_xact = true;
	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, activity);

		fn(arg);

		SPI_finish();
		PopActiveSnapshot();
		commit_start = GetCurrentTimestamp();
		CommitTransactionCommand();
		leaf_last_commit_us = GetCurrentTimestamp() - commit_start;
		pgstat_report_stat(false);
		pgstat_report_activity(STATE_IDLE, NULL);
		ok = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		pgstat_report_activity(STATE_IDLE, NULL);

		*sqlstate = edata->sqlerrcode;
		strlcpy(errbuf, edata->message ? edata->message : "unknown error",
				errlen);
		FreeErrorData(edata);
	}
	PG_END_TRY();

	/* a cancel meant for this transaction must not outlive it */
	leaf_alloc_in_xact = false;
	if (leaf_alloc_stop_pending)
		QueryCancelPending = false;

	return ok;
}

/*
 * Raise the error of a refused load (or of a backend's own refusal), as
 * the check that refused composed it (LeafRefusal).
 */
void
leaf_report_refusal(int sqlstate, const LeafRefusal *refusal)
{
	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("%s", refusal->message),
			 refusal->detail_public[0] != '\0' && !superuser() ?
			 errdetail("%s", refusal->detail_public) :
			 errdetail_internal("%s", refusal->detail),
			 refusal->hint[0] != '\0' ? errhint("%s", refusal->hint) : 0));
}
