/*-------------------------------------------------------------------------
 *
 * leaf_alloc_local.c
 *	  The local source of segments: the leaf_alloc of the database the
 *	  allocator worker serves.
 *
 * A load moves the tag's max_id up with SPI, in a transaction of its own
 * that commits with synchronous_commit at least "on", whatever the
 * setting.  Its segment is used only once the commit is flushed and, when
 * synchronous replication is in effect, confirmed by the synchronous
 * standbys: a commit whose wait for them was cancelled committed locally
 * all the same, and might be lost in a failover.  Before each load, the
 * recorded source of segments is checked (leaf_alloc_source.c): a copy
 * of the database, or the same database on a new timeline, is refused.
 * The same transaction records the load in leaf_segment_log.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"

#include "segment/leaf_alloc.h"
#include "segment/leaf_alloc_replica.h"
#include "segment/leaf_alloc_source.h"
#include "common/leaf_errcodes.h"

/*
 * The two statements of a local load, planned once and kept for the life
 * of the worker (the plan cache replans them after DDL).  They are built
 * again if the extension moves to another schema.
 */
static SPIPlanPtr leaf_select_plan = NULL;
static SPIPlanPtr leaf_exists_plan = NULL;
static SPIPlanPtr leaf_update_plan = NULL;
static Oid	leaf_plans_nsp = InvalidOid;

static void
leaf_prepare_plans(Oid nsp)
{
	Oid			argtypes[2] = {TEXTOID, INT8OID};
	const char *qual = quote_identifier(get_namespace_name(nsp));
	SPIPlanPtr	sel;
	SPIPlanPtr	exists;
	SPIPlanPtr	upd;

	if (leaf_select_plan != NULL && leaf_plans_nsp == nsp)
		return;

	/*
	 * SKIP LOCKED: a row that a caller's transaction holds must not hold up
	 * the loads of the other tags behind it (the tag is retried later).
	 */
	sel = SPI_prepare(psprintf("SELECT max_id, step FROM %s.leaf_alloc "
							   "WHERE biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar "
							   "FOR UPDATE SKIP LOCKED", qual), 1, argtypes);
	exists = SPI_prepare(psprintf("SELECT 1 FROM %s.leaf_alloc "
								  "WHERE biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar",
								  qual), 1, argtypes);
	upd = SPI_prepare(psprintf("UPDATE %s.leaf_alloc SET max_id = $2 "
							   "WHERE biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar",
							   qual), 2, argtypes);
	if (sel == NULL || exists == NULL || upd == NULL)
		elog(ERROR, "could not prepare the statements of a load: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(sel) != 0 || SPI_keepplan(exists) != 0 ||
		SPI_keepplan(upd) != 0)
		elog(ERROR, "could not keep the statements of a load");

	if (leaf_select_plan != NULL)
		SPI_freeplan(leaf_select_plan);
	if (leaf_exists_plan != NULL)
		SPI_freeplan(leaf_exists_plan);
	if (leaf_update_plan != NULL)
		SPI_freeplan(leaf_update_plan);
	leaf_select_plan = sel;
	leaf_exists_plan = exists;
	leaf_update_plan = upd;
	leaf_plans_nsp = nsp;
}

/*
 * The statement that records a local load in leaf_segment_log and prunes
 * the loader's older rows (see leaf_local_log_load), planned once like the
 * others.
 */
static SPIPlanPtr leaf_log_plan = NULL;
static Oid	leaf_log_plan_nsp = InvalidOid;

static void
leaf_prepare_log_plan(Oid nsp)
{
	Oid			argtypes[7] = {TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID,
	TEXTOID, INT8OID, TIMESTAMPTZOID};
	const char *qual = quote_identifier(get_namespace_name(nsp));
	SPIPlanPtr	plan;

	if (leaf_log_plan != NULL && leaf_log_plan_nsp == nsp)
		return;

	/*
	 * first_id + 0: a generic plan would otherwise scan every row of the
	 * tag through the primary key, instead of the loader's old rows only
	 * through leaf_segment_log_loader.
	 */
	plan = SPI_prepare(psprintf("WITH p AS (DELETE FROM %s.leaf_segment_log "
								"WHERE biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar "
								"AND loaded_by OPERATOR(pg_catalog.=) $5 "
								"AND loaded_at OPERATOR(pg_catalog.<) $7 "
								"AND (first_id OPERATOR(pg_catalog.+) 0::pg_catalog.int8) "
								"OPERATOR(pg_catalog.<) COALESCE($6, $2)) "
								"INSERT INTO %s.leaf_segment_log (biz_tag, first_id, "
								"last_id, loaded_at, loaded_by, serving_first_id) "
								"VALUES ($1::pg_catalog.varchar, $2, $3, $4, $5, $6) "
								"ON CONFLICT DO NOTHING", qual, qual),
					   7, argtypes);
	if (plan == NULL)
		elog(ERROR, "could not prepare the record of a load: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "could not keep the record of a load");
	if (leaf_log_plan != NULL)
		SPI_freeplan(leaf_log_plan);
	leaf_log_plan = plan;
	leaf_log_plan_nsp = nsp;
}

/*
 * Record the segment just taken (res) in leaf_segment_log, in the load's
 * transaction, so that the row exists if and only if the load committed;
 * and prune the rows of this loader and tag older than the retention,
 * except the segment the loader may still serve (job->serving_first) and
 * those after it.  A database still at 1.4 has no leaf_segment_log of
 * leaf's (a table of that name there is someone else's).
 */
static void
leaf_local_log_load(Oid nsp, const LeafLoadJob *job, const LeafLoadResult *res,
					const LeafLoadLog *log)
{
	Datum		args[7];
	char		nulls[7] = "       ";

	if (!OidIsValid(leaf_extension_relid(nsp, "leaf_segment_log")))
		return;
	leaf_prepare_log_plan(nsp);
	args[0] = CStringGetTextDatum(job->tag);
	args[1] = Int64GetDatum(res->start);
	args[2] = Int64GetDatum(res->start + res->size - 1);
	args[3] = TimestampTzGetDatum(log->loaded_at);
	args[4] = CStringGetTextDatum(log->loaded_by);
	args[5] = Int64GetDatum(job->serving_first);
	if (!job->serving)
		nulls[5] = 'n';
	args[6] = TimestampTzGetDatum(log->prune_before);
	if (SPI_execute_plan(leaf_log_plan, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the load in leaf_segment_log");
}

/*
 * The synchronous replication wait mode the last local load committed
 * with, read inside its transaction (SET LOCAL below ends with it).
 */
static int	leaf_commit_wait_mode = SYNC_REP_WAIT_FLUSH;

/*
 * Before a load from this database's own leaf_alloc: the same check, on
 * this server's timeline.
 */
static bool
leaf_local_source_check(const LeafLoadJob *job, LeafLoadResult *res)
{
	LeafCopyIdent local;

	leaf_copy_here(&local);
	return leaf_source_check(&local, job, res);
}

/*
 * In a local load's transaction (SPI connected), once the tag's row of
 * leaf_alloc is locked: is the recorded source still this database of
 * this cluster?  leaf_source_check() is not repeated for every load; this
 * reads the current row again, with a snapshot taken after the lock, so
 * that a database fenced by leaf_alloc_cutover() (which locks every row
 * of leaf_alloc, then records the database that took its counters over)
 * loads nothing after the counters it read.  Returns false, with the
 * refusal LF006 of a load of tag in *res, if the source is another one now; the next load checks it in
 * full, and records it as pending.
 */
static bool
leaf_local_source_still_ok(Oid nsp, const char *tag, LeafLoadResult *res)
{
	LeafCopyIdent local;
	LeafCopyIdent rec;
	bool		current;
	bool		strict;
	char	   *desc;

	if (SPI_execute(psprintf("SELECT state OPERATOR(pg_catalog.=) 'current', "
							 "kind OPERATOR(pg_catalog.=) 'remote', "
							 "system_identifier, database_oid, NULL::pg_catalog.oid, "
							 "description, NULL::pg_catalog.int8 "
							 "FROM %s.leaf_alloc_source "
							 "WHERE state OPERATOR(pg_catalog.=) 'current'",
							 quote_identifier(get_namespace_name(nsp))),
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_alloc_source");
	if (SPI_processed == 0)
		return true;			/* recorded by the next full check */
	if (!leaf_source_parse_row(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
							   &rec, &current))
		return true;			/* a remote row without its system: skipped */

	leaf_copy_here(&local);
	/* a database at 1.4 records the cluster of a local source */
	strict = leaf_source_has_dir(get_relname_relid("leaf_alloc_source", nsp));
	if (!rec.remote && leaf_same_source(&rec, &local) &&
		(rec.sysid != 0 || !strict))
		return true;

	leaf_source_forget();
	desc = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6);
	if (leaf_source_moved(desc) != NULL)
		snprintf(res->msg, sizeof(res->msg),
				 "The counters in leaf_alloc were taken over by another database (%s).",
				 leaf_source_moved(desc));
	else
		snprintf(res->msg, sizeof(res->msg),
				 "leaf_alloc_source records %s as the owner of the counters in leaf_alloc, and this is database %u of system " UINT64_FORMAT ".",
				 desc ? desc : "another source", local.dboid, (uint64) local.sysid);
	leaf_source_refuse_changed(tag,
							   leaf_source_moved(desc) != NULL ? LEAF_SOURCE_TAKEN_OVER :
							   rec.remote ? LEAF_SOURCE_OTHER : LEAF_SOURCE_COPY,
							   res);
	return false;
}

/*
 * Move leaf_alloc.max_id up for one tag in the local database.  Runs
 * inside the caller's transaction; errors are thrown.
 */
static void
leaf_local_raise_max_id(const LeafLoadJob *job, LeafLoadResult *res)
{
	Oid			extoid;
	Oid			nsp;
	Datum		args[2];
	bool		isnull;
	int64		max_id;
	int32		row_step;
	LeafLoadLog log;
	bool		logged = leaf_load_log_begin(&log);

	/*
	 * A segment must be durable, and on the synchronous standbys if there
	 * are any, before any of its IDs is handed out.  So every load commits
	 * with synchronous_commit at least "on", as if by SET LOCAL, whatever
	 * the setting is now (a reload may have changed it since the last
	 * load).  leaf_commit_confirmed() checks the outcome after the commit.
	 */
	if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		(void) set_config_option("synchronous_commit", "on",
								 PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
	leaf_commit_wait_mode = (synchronous_commit == SYNCHRONOUS_COMMIT_REMOTE_APPLY) ?
		SYNC_REP_WAIT_APPLY : SYNC_REP_WAIT_FLUSH;

	nsp = leaf_extension_namespace(&extoid);
	if (!OidIsValid(extoid) || extoid != job->extoid)
	{
		res->status = LEAF_LOAD_EXT_GONE;
		return;
	}
	/* never read a column as a type it no longer has */
	if (!leaf_alloc_shape_ok(nsp, res->msg, sizeof(res->msg)))
	{
		leaf_alloc_shape_refuse(job->tag, res);
		return;
	}
	leaf_prepare_plans(nsp);

	args[0] = CStringGetTextDatum(job->tag);
	if (SPI_execute_plan(leaf_select_plan, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_alloc");
	if (SPI_processed == 0)
	{
		/* gone, or locked by another transaction? */
		if (SPI_execute_plan(leaf_exists_plan, args, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read leaf_alloc");
		if (SPI_processed == 0)
		{
			res->status = LEAF_LOAD_TAG_GONE;
			return;
		}
		res->status = LEAF_LOAD_FAILED;
		res->sqlstate = ERRCODE_LOCK_NOT_AVAILABLE;
		snprintf(res->msg, sizeof(res->msg),
				 "the row of biz_tag \"%s\" in leaf_alloc is locked by another transaction",
				 job->tag);
		return;
	}
	/* the plan was made for the columns checked above; make sure */
	if (SPI_gettypeid(SPI_tuptable->tupdesc, 1) != INT8OID ||
		SPI_gettypeid(SPI_tuptable->tupdesc, 2) != INT4OID)
		elog(ERROR, "leaf_alloc.max_id or leaf_alloc.step changed type during a load");
	max_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		elog(ERROR, "leaf_alloc.max_id of biz_tag \"%s\" is NULL", job->tag);
	row_step = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 2, &isnull));
	if (isnull)
		elog(ERROR, "leaf_alloc.step of biz_tag \"%s\" is NULL", job->tag);

	/*
	 * With the row locked: the counters must still be this database's own
	 * (leaf_alloc_cutover() fences a publisher), and not written by
	 * logical replication.
	 */
	if (!leaf_local_source_still_ok(nsp, job->tag, res) ||
		!leaf_replica_check(nsp, extoid, job->tag, res))
		return;

	if (!leaf_plan_segment(job, max_id, row_step, res))
		return;

	args[1] = Int64GetDatum(res->db_max_id);
	if (SPI_execute_plan(leaf_update_plan, args, NULL, false, 0) != SPI_OK_UPDATE ||
		SPI_processed != 1)
		elog(ERROR, "could not update leaf_alloc");
	if (logged)
		leaf_local_log_load(nsp, job, res, &log);
}

/*
 * After a local load has committed: is its commit record flushed here and,
 * when synchronous replication is in effect, confirmed by the synchronous
 * standbys?  A commit whose wait for the standbys was cancelled (query
 * cancel, terminate, or a worker stopped by a DDL command) has committed
 * locally all the same, with only a WARNING; its segment might be lost in
 * a failover, so it must not be used.  Returns false, with the reason in
 * res, in that case.
 */
static bool
leaf_commit_confirmed(const LeafLoadJob *job, LeafLoadResult *res)
{
	XLogRecPtr	lsn = XactLastCommitEnd;
	XLogRecPtr	confirmed = InvalidXLogRecPtr;
	bool		sync_defined;

	if (XLogRecPtrIsInvalid(lsn))
		return true;			/* nothing was written */

	/* durable here, even if the commit somehow did not wait for it */
	if (GetFlushRecPtr(NULL) < lsn)
		XLogFlush(lsn);

	if (max_wal_senders == 0 || WalSndCtl == NULL)
		return true;
	LWLockAcquire(SyncRepLock, LW_SHARED);
#ifdef SYNC_STANDBY_DEFINED
	/* 15.14 and later: as SyncRepWaitForLSN decides whether to wait */
	if (WalSndCtl->sync_standbys_status & SYNC_STANDBY_INIT)
		sync_defined = (WalSndCtl->sync_standbys_status & SYNC_STANDBY_DEFINED) != 0;
	else
		sync_defined = (SyncRepStandbyNames != NULL &&
						SyncRepStandbyNames[0] != '\0');
#else
	sync_defined = WalSndCtl->sync_standbys_defined;
#endif
	if (sync_defined)
		confirmed = WalSndCtl->lsn[leaf_commit_wait_mode];
	LWLockRelease(SyncRepLock);

	/*
	 * Core releases every waiter when synchronous_standby_names is
	 * emptied, and then sync_standbys_defined is false: no standby is
	 * synchronous, and the local flush is all that is promised.
	 */
	if (!sync_defined || confirmed >= lsn)
		return true;

	res->status = LEAF_LOAD_FAILED;
	res->sqlstate = ERRCODE_LEAF_ALLOC_FAILED;
	snprintf(res->msg, sizeof(res->msg),
			 "segment of biz_tag \"%s\" below " INT64_FORMAT " was committed"
			 " but not confirmed by the synchronous standbys (the wait was"
			 " cancelled); it is not used",
			 job->tag, res->db_max_id);
	return false;
}

typedef struct LeafLocalLoad
{
	const LeafLoadJob *job;
	LeafLoadResult *res;
} LeafLocalLoad;

static void
leaf_local_load_txn(void *arg)
{
	LeafLocalLoad *l = (LeafLocalLoad *) arg;

	leaf_local_raise_max_id(l->job, l->res);
}

/*
 * A local source refused as a copy may be a logical replica, whose
 * counters the publisher's leaf_alloc_source came with: say that instead
 * (LF012), since confirming the copy would not let it serve.
 */
static void
leaf_replica_txn(void *arg)
{
	LeafLocalLoad *l = (LeafLocalLoad *) arg;
	Oid			extoid;
	Oid			nsp = leaf_extension_namespace(&extoid);

	if (OidIsValid(extoid))
		(void) leaf_replica_check(nsp, extoid, l->job->tag, l->res);
}

/*
 * Load one segment from this database's leaf_alloc, in a transaction of
 * its own.
 */
static void
leaf_local_load(const LeafLoadJob *job, LeafLoadResult *res)
{
	LeafLocalLoad l = {job, res};

	/* a connection left from fleet mode is of no more use */
	leaf_remote_disconnect();

	if (!leaf_local_source_check(job, res))
	{
		LeafLoadResult replica = *res;
		LeafLocalLoad r = {job, &replica};

		if (res->sqlstate == ERRCODE_LEAF_ALLOC_SOURCE_CHANGED &&
			leaf_in_transaction(leaf_replica_txn, &r,
								"leaf: checking for logical replication",
								&replica.sqlstate, replica.msg, sizeof(replica.msg)) &&
			replica.sqlstate == ERRCODE_LEAF_ALLOC_REPLICATED)
			*res = replica;
		return;
	}
	if (!leaf_in_transaction(leaf_local_load_txn, &l,
							 "leaf: loading a segment",
							 &res->sqlstate, res->msg, sizeof(res->msg)))
	{
		res->status = LEAF_LOAD_FAILED;
		return;
	}
	/* the commit's WAL flush and synchronous standbys, for leaf_segments */
	res->commit_us = Max(leaf_last_commit_us, 0);
	if (res->status == LEAF_LOAD_OK && leaf_commit_confirmed(job, res))
	{
		/* a primary's timeline stays the same while it runs */
		res->timeline = GetWALInsertionTimeLine();
		strlcpy(res->server, "local", sizeof(res->server));
	}
}

/*
 * Put every tag of this database's leaf_alloc (in schema nsp) into tags.
 * Errors are thrown.
 */
static bool
leaf_local_tags(Oid nsp, HTAB *tags, char *errbuf, size_t errlen)
{
	char	   *sql;
	uint64		i;

	sql = psprintf("SELECT biz_tag::pg_catalog.text FROM %s.leaf_alloc",
				   quote_identifier(get_namespace_name(nsp)));
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_alloc");
	for (i = 0; i < SPI_processed; i++)
	{
		char	   *t = SPI_getvalue(SPI_tuptable->vals[i],
									 SPI_tuptable->tupdesc, 1);

		if (t != NULL && strlen(t) <= LEAF_TAG_MAXLEN)
			(void) hash_search(tags, t, HASH_ENTER, NULL);
	}
	return true;
}

/*
 * Describe where segments come from: "local", and whether a change of
 * source (a copy of the database) or a new timeline waits for
 * confirmation.
 */
static void
leaf_local_describe(char *buf, size_t len)
{
	snprintf(buf, len, "local%s", leaf_source_refusal());
}

const LeafAllocSource leaf_local_source = {
	.load = leaf_local_load,
	.tags = leaf_local_tags,
	.describe = leaf_local_describe,
	.remote = false,
};
