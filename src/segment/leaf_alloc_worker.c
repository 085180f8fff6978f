/*-------------------------------------------------------------------------
 *
 * leaf_alloc_worker.c
 *	  The allocator: a background worker per database that loads segments.
 *
 * A backend that needs the worker of its database and finds none starts
 * it as a dynamic background worker (leaf_alloc_slots.c keeps a slot per
 * database).  The worker connects to that database and loops: it loads
 * the segments callers asked for from the source in use, this database's
 * leaf_alloc (leaf_alloc_local.c) or another server's (fleet mode,
 * leaf_alloc_remote.c), each in a transaction of its own that is
 * committed before the segment is published in shared memory (with
 * synchronous_commit at least "on", whatever the setting; a commit that
 * is not flushed, or not confirmed by the synchronous standbys because
 * its wait was cancelled, is never published), and now and then frees
 * the slots of tags that were deleted from leaf_alloc.  When the
 * extension is dropped, the worker frees the database's slots and exits.
 * When it starts, it first asks for the first segments of the tags that
 * the warm start's file lists for its database (leaf_warm_start.c), and
 * exits at once if a lock on leaf_alloc held that up, with nothing to
 * load.
 *
 * A failed load is recorded in the tag's slot.  Failures that retrying
 * cannot mend (tag deleted, bigint range used up, max_id moved back) end
 * the callers' wait at once; others are retried after a pause while the
 * callers wait up to leaf.wait_timeout.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/ps_status.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "segment/leaf_alloc.h"
#include "segment/leaf_alloc_slots.h"
#include "common/leaf_compat.h"
#include "common/leaf_copy.h"
#include "common/leaf_errcodes.h"
#include "segment/leaf_segment.h"
#include "segment/leaf_segment_shmem.h"
#include "segment/leaf_warm_start.h"

/* How long to wait before retrying a load that failed. */
#define LEAF_RETRY_MS			500

/* Loads picked up in one pass over the slots. */
#define LEAF_JOBS_PER_PASS		64

/*
 * lock_timeout of the worker's transactions, in ms.  A caller holding the
 * row of a tag in leaf_alloc (an UPDATE not committed yet) must not stall
 * the loads of every other tag of the database, which the worker does one
 * after the other: the load fails after this long and is retried after
 * LEAF_RETRY_MS, while its callers wait up to leaf.wait_timeout (5 s by
 * default): the retries still wait out a lock released within that.
 */
#define LEAF_LOAD_LOCK_TIMEOUT_MS	"1000"

/*
 * lock_timeout of the warm start's transactions, in ms.  A database whose
 * leaf_alloc is locked (LOCK TABLE in a prepared transaction survives a
 * restart) gives up its warm start after this one wait, and its
 * allocator exits: it takes the place of no other database's warm start
 * for longer (see leaf_warm_start.c).
 */
#define LEAF_WARM_LOCK_TIMEOUT_MS	"200"

static Oid	leaf_worker_dboid = InvalidOid;

/* Name of that database, for log lines (the worker ends on a rename). */
static char leaf_worker_dbname[NAMEDATALEN];

/*
 * leaf.preload_percent; leaf.preload_floor and leaf.alloc_idle_timeout,
 * in ms
 */
static int	leaf_preload_percent = 10;
static int	leaf_preload_floor_ms = 250;
static int	leaf_alloc_idle_timeout_ms = 60 * 1000;

/* Define the settings of the worker. */
void
leaf_alloc_worker_init_settings(void)
{
	DefineCustomIntVariable("leaf.preload_percent",
							"Sets how much of a segment is used before the next one is loaded.",
							NULL,
							&leaf_preload_percent,
							10, 0, 100,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.preload_floor",
							"Sets the least time a refill is given before the current segment runs out.",
							"The next segment is asked for when the IDs left would last less at the tag's rate, or less than twice its longest recent refill, and at the latest when the segment comes into use. 0 leaves only the refill times.",
							&leaf_preload_floor_ms,
							250, 0, 60 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.alloc_idle_timeout",
							"Sets how long an allocator worker with nothing to load stays before it exits.",
							"The next load asked for in its database starts it again. 0 keeps allocators running.",
							&leaf_alloc_idle_timeout_ms,
							60 * 1000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/*
 * A database command (DROP DATABASE and the like, see leaf_ddl.c) asks
 * the worker to exit by setting stop_requested in its slot, then sending
 * SIGTERM (leaf_stop_alloc_worker).  Such a stop is routine: the worker
 * ends what it is doing and exits with a LOG line, instead of the FATAL
 * "terminating background worker ... due to administrator command" of
 * die(), which other SIGTERMs (pg_terminate_backend, shutdown) still get.
 */
static void
leaf_worker_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	/* a signal handler takes no lock: see leaf_alloc_slot_stop_requested */
	if (leaf_alloc_slot_stop_requested())
	{
		/* ends a load's transaction too (see leaf_alloc_request_stop) */
		leaf_alloc_request_stop();
		SetLatch(MyLatch);
	}
	else
		die(LEAF_SIGNAL_ARGS);

	errno = save_errno;
}

static void
leaf_worker_stop(void)
{
	ereport(LOG,
			(errmsg("leaf allocator exiting to let a command on database \"%s\" proceed",
					leaf_worker_dbname),
			 errdetail("The next call of leaf_segment_nextval there starts it again.")));
	proc_exit(0);
}

/*
 * Process interrupts between loads.  A query cancel (pg_cancel_backend,
 * or a lock_timeout that fired just as a load ended) has nothing to
 * cancel outside a load's transaction; left to CHECK_FOR_INTERRUPTS, its
 * ERROR would find no handler there and end the worker with FATAL.
 */
static void
leaf_worker_interrupts(void)
{
	QueryCancelPending = false;
	CHECK_FOR_INTERRUPTS();
}

/*
 * The source of segments, as leaf.alloc_conninfo says now (a reload may
 * change it between two loads).
 */
static const LeafAllocSource *
leaf_source(void)
{
	return leaf_remote_enabled() ? &leaf_remote_source : &leaf_local_source;
}

/*
 * Log a failed load.  While the same failure repeats (an allocation
 * database that is down, retried every LEAF_RETRY_MS), it is logged once
 * a minute; leaf_segments always shows the latest.
 */
static void
leaf_log_failure(const LeafLoadJob *job, const LeafLoadResult *res)
{
	static char last_msg[LEAF_ERRMSG_LEN];
	static TimestampTz last_logged = 0;
	static int	suppressed = 0;
	TimestampTz now;

	if (res->status != LEAF_LOAD_FAILED && res->status != LEAF_LOAD_FINAL)
		return;
	if (leaf_alloc_stopping())
		return;					/* cut short on purpose */
	now = GetCurrentTimestamp();
	if (strcmp(last_msg, res->msg) == 0 &&
		!TimestampDifferenceExceeds(last_logged, now, 60 * 1000))
	{
		suppressed++;
		return;
	}
	ereport(LOG,
			(errmsg("leaf allocator could not load a segment for biz_tag \"%s\"",
					job->tag),
			 errdetail_internal("%s", res->msg),
			 suppressed > 0 ?
			 errhint("The same failure happened %d more times since it was last logged.",
					 suppressed) : 0));
	strlcpy(last_msg, res->msg, sizeof(last_msg));
	last_logged = now;
	suppressed = 0;
}

/*
 * Tell leaf_segments where this worker's segments come from.
 */
static void
leaf_report_source(void)
{
	char		source[LEAF_SOURCE_LEN];

	leaf_source()->describe(source, sizeof(source));
	leaf_alloc_slot_report_source(source);
}

/*
 * Do one load in a transaction of its own.  Whatever happens, the
 * outcome is in *res and the transaction is over.
 */
static void
leaf_load(const LeafLoadJob *job, LeafLoadResult *res)
{
	memset(res, 0, sizeof(*res));
	res->status = LEAF_LOAD_FAILED;

	leaf_source()->load(job, res);

	/* a remote leaf_alloc of the wrong shape, as the connection found */
	if (res->status == LEAF_LOAD_FINAL &&
		res->sqlstate == ERRCODE_LEAF_ALLOC_SHAPE &&
		res->refusal.message[0] == '\0')
		leaf_alloc_shape_refuse(job->tag, res);

	/*
	 * A database command that stopped the worker cut the load short, as a
	 * query cancel or a timeout would have: the callers who wait for it,
	 * and leaf_segments, are told what happened instead.
	 */
	if (res->status == LEAF_LOAD_FAILED && leaf_alloc_stopping())
	{
		char		command[NAMEDATALEN];

		leaf_alloc_slot_stop_command(command, sizeof(command));
		snprintf(res->msg, sizeof(res->msg),
				 "the allocator was stopped to let %s on database \"%s\" proceed",
				 command[0] != '\0' ? command : "a command",
				 leaf_worker_dbname);
	}
	leaf_report_source();
	leaf_log_failure(job, res);
}

/*
 * Publish the outcome of a load in the tag's slot.
 */
static void
leaf_publish(const LeafLoadJob *job, const LeafLoadResult *res)
{
	char		source[LEAF_SOURCE_LEN];

	leaf_source()->describe(source, sizeof(source));
	leaf_publish_load(job, res, source, leaf_preload_percent,
					  leaf_preload_floor_ms, LEAF_RETRY_MS);
}

/*
 * An allocator with nothing to load for leaf.alloc_idle_timeout gives its
 * background worker process back, so that idle databases do not use up
 * max_worker_processes; the next load asked for starts a new one
 * (leaf_wake_worker).  The cached segments stay in shared memory and are
 * served meanwhile.  The worker slot is given up after a last look for
 * loads asked for, under the lock of the registry (see
 * leaf_alloc_slot_give_up): a caller that asks later finds no worker, and
 * launches one.
 */
static bool
leaf_worker_loads_wanted(void)
{
	return leaf_loads_wanted(leaf_worker_dboid);
}

/* when this worker last had a load to do (or one due for a retry) */
static TimestampTz leaf_last_busy = 0;

/*
 * Do the load of job, its outcome into *res; or, once the allocation
 * database failed to connect in this pass, take that failure (*unreachable,
 * which points at the copy kept in *failed_conn) for this load too.
 */
static void
leaf_load_job(const LeafLoadJob *job, LeafLoadResult *res,
			  LeafLoadResult *failed_conn, LeafLoadResult **unreachable)
{
	if (*unreachable != NULL)
	{
		/* the allocation database just failed us: do not wait again */
		*res = **unreachable;
	}
	else
	{
		leaf_load(job, res);
		if (res->status == LEAF_LOAD_FAILED &&
			res->sqlstate == ERRCODE_CONNECTION_FAILURE)
		{
			*failed_conn = *res;
			*unreachable = failed_conn;
		}
	}
}

/*
 * Act on the outcome of job's load: free the slot if the extension is
 * gone, else publish the outcome in it.  Either wakes the callers waiting
 * for it.
 */
static void
leaf_finish_job(const LeafLoadJob *job, LeafLoadResult *res)
{
	if (res->status == LEAF_LOAD_EXT_GONE)
		leaf_free_slot(job->slotno, job->generation);
	else if (res->status == LEAF_LOAD_TAG_GONE)
	{
		/* waiting callers see a final "does not exist" */
		res->status = LEAF_LOAD_FINAL;
		res->sqlstate = ERRCODE_LEAF_UNKNOWN_TAG;
		snprintf(res->msg, sizeof(res->msg),
				 "biz_tag \"%s\" is not in leaf_alloc", job->tag);
		leaf_publish(job, res);

		/*
		 * The slot is freed at the next refresh of the tag list, not now: a
		 * caller that inserted the row in a transaction of its own that has
		 * not committed yet would only create the slot again, and again.
		 */
	}
	else
		leaf_publish(job, res);
}

/*
 * Do the loads callers asked for.  Returns the time in ms until a failed
 * load is due for a retry, or -1.
 */
static long
leaf_do_loads(void)
{
	LeafLoadJob *jobs;
	long		next_retry = -1;

	jobs = palloc(sizeof(LeafLoadJob) * LEAF_JOBS_PER_PASS);
	for (;;)
	{
		int			njobs;
		int			i;
		TimestampTz now = GetCurrentTimestamp();
		LeafLoadResult failed_conn;
		LeafLoadResult *unreachable = NULL;

		next_retry = -1;
		njobs = leaf_collect_loads(leaf_worker_dboid, now, jobs,
								   LEAF_JOBS_PER_PASS, &next_retry);
		if (njobs == 0)
			break;
		leaf_last_busy = now;

		for (i = 0; i < njobs; i++)
		{
			LeafLoadResult res;

			leaf_worker_interrupts();
			if (leaf_alloc_stopping())
				leaf_worker_stop();
			leaf_load_job(&jobs[i], &res, &failed_conn, &unreachable);
			leaf_finish_job(&jobs[i], &res);
		}
	}
	pfree(jobs);
	if (next_retry >= 0)
		leaf_last_busy = GetCurrentTimestamp();	/* a retry is due */
	return next_retry;
}

/*
 * Free the slots of tags deleted from leaf_alloc (in a transaction).
 * Sets *ext_exists to false if the extension is gone from this database.
 */
static void
leaf_refresh_tags_txn(void *arg)
{
	bool	   *ext_exists = (bool *) arg;
	Oid			extoid;
	Oid			nsp;

	nsp = leaf_extension_namespace(&extoid);
	if (!OidIsValid(extoid))
		*ext_exists = false;
	else
	{
		const LeafAllocSource *src = leaf_source();
		HASHCTL		ctl;
		HTAB	   *tags;
		char		err[LEAF_ERRMSG_LEN];
		bool		have_tags;

		/* slots of a dropped and re-created extension */
		leaf_free_slots(leaf_worker_dboid, extoid);

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = LEAF_TAG_MAXLEN + 1;
		ctl.entrysize = LEAF_TAG_MAXLEN + 1;
		ctl.hcxt = CurrentMemoryContext;
		tags = hash_create("leaf tags", 64, &ctl,
						   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);

		/* keep every slot while the list cannot be read */
		have_tags = src->tags(nsp, tags, err, sizeof(err));
		if (src->remote)
			leaf_report_source();	/* reading it may have connected */
		if (!have_tags)
			ereport(LOG,
					(errmsg("leaf allocator could not check biz_tags"),
					 errdetail_internal("%s", err)));

		leaf_free_stale_slots(leaf_worker_dboid, have_tags ? tags : NULL);
	}
}

/*
 * Free the slots of tags deleted from leaf_alloc.  Returns false if the
 * extension is gone from this database.
 */
static bool
leaf_refresh_tags(void)
{
	bool		ext_exists = true;
	int			sqlstate;
	char		err[LEAF_ERRMSG_LEN];

	if (!leaf_in_transaction(leaf_refresh_tags_txn, &ext_exists,
							 "leaf: checking biz_tags",
							 &sqlstate, err, sizeof(err)))
	{
		if (leaf_alloc_stopping())
			leaf_worker_stop();
		ereport(LOG,
				(errmsg("leaf allocator could not check biz_tags"),
				 errdetail_internal("%s", err)));
		ext_exists = true;
	}
	return ext_exists;
}

/*
 * Name the database in log lines and in
 * pg_stat_activity.application_name; and in the process title, where
 * the registering backend could not put it into bgw_name.
 */
static void
leaf_worker_name_database(void)
{
	StartTransactionCommand();
	{
		char	   *name = get_database_name(leaf_worker_dboid);

		if (name != NULL)
			strlcpy(leaf_worker_dbname, name, sizeof(leaf_worker_dbname));
		else
			snprintf(leaf_worker_dbname, sizeof(leaf_worker_dbname), "%u",
					 leaf_worker_dboid);
	}
	CommitTransactionCommand();
	{
		char		appname[NAMEDATALEN];

		snprintf(appname, sizeof(appname), "leaf allocator %s", leaf_worker_dbname);
		pgstat_report_appname(appname);
	}
	if (strstr(MyBgworkerEntry->bgw_name, "with OID") != NULL)
		set_ps_display(leaf_worker_dbname);
}

/*
 * Count this worker in the share of allocators of its database's owner,
 * or exit as its launch would have been refused (the warm start's
 * launches cannot tell the owner).
 */
static void
leaf_worker_claim_owner(void)
{
	bool		ok;

	StartTransactionCommand();
	ok = leaf_alloc_slot_claim_owner();
	CommitTransactionCommand();
	if (ok)
		return;
	ereport(LOG,
			(errmsg("leaf allocator exiting for database \"%s\": the databases of its owner have their share of allocators",
					leaf_worker_dbname),
			 errhint("\"leaf.max_databases_per_owner\" sets that share.")));
	proc_exit(0);
}

/*
 * Set the worker's session up for loads, whatever the settings of the
 * database and the server.
 */
static void
leaf_worker_settings(void)
{
	/*
	 * A caller holding a row of leaf_alloc must not stall the worker.
	 * (synchronous_commit is forced for each load: see leaf_alloc_local.c.)
	 */
	SetConfigOption("lock_timeout", LEAF_LOAD_LOCK_TIMEOUT_MS, PGC_SUSET,
					PGC_S_OVERRIDE);

	/*
	 * Loads write in the worker's own transactions, never in a caller's:
	 * a database (or role) with default_transaction_read_only still gets
	 * IDs, as callers in read-only transactions always have.
	 */
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET,
					PGC_S_OVERRIDE);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("idle_in_transaction_session_timeout", "0", PGC_SUSET,
					PGC_S_OVERRIDE);

	/*
	 * A load reads leaf_alloc_source again once it holds its row of
	 * leaf_alloc, with a snapshot taken after the lock
	 * (leaf_local_source_still_ok): that needs READ COMMITTED, whatever
	 * the database's default_transaction_isolation says.
	 */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * Free the slots of tags deleted from leaf_alloc if that is due
 * (*next_refresh), and set the time it is due next.  Exits if the
 * extension is gone from this database.
 */
static void
leaf_worker_refresh(TimestampTz *next_refresh)
{
	TimestampTz now;

	now = GetCurrentTimestamp();
	if (now >= *next_refresh)
	{
		if (!leaf_refresh_tags())
		{
			leaf_free_slots(leaf_worker_dboid, InvalidOid);
			ereport(LOG,
					(errmsg("leaf allocator exiting: extension \"leaf\" is no longer installed in database \"%s\"",
							leaf_worker_dbname)));
			proc_exit(0);
		}
		*next_refresh = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													leaf_tag_refresh_ms);
	}
}

/*
 * Give the worker process back after leaf.alloc_idle_timeout with nothing
 * to load (see leaf_worker_loads_wanted): exits then.  Otherwise returns
 * timeout, the time to wait for, cut down to the time left until then.
 */
static long
leaf_worker_idle(long timeout)
{
	long		idle_left;
	TimestampTz now;

	now = GetCurrentTimestamp();
	idle_left = leaf_alloc_idle_timeout_ms -
		TimestampDifferenceMilliseconds(leaf_last_busy, now);
	/* a database whose every tag is refused holds no allocator */
	if (idle_left > 0 && leaf_loads_refused(leaf_worker_dboid))
		idle_left = 0;
	if (idle_left <= 0 && leaf_alloc_slot_give_up(leaf_worker_loads_wanted))
	{
		ereport(DEBUG1,
				(errmsg("leaf allocator exiting for database \"%s\": nothing to load for %d ms, or every biz_tag refused",
						leaf_worker_dbname, leaf_alloc_idle_timeout_ms)));
		proc_exit(0);
	}
	if (idle_left > 0 && idle_left < timeout)
		timeout = idle_left;
	return timeout;
}

/*
 * The warm start: the first segments of the tags the file lists for this
 * database are asked for before any caller does.  Each database's
 * allocator does its own, so a lock in one database holds up no other.
 * One that found leaf_alloc locked, with nothing asked for, gives its
 * slot back at once, before it says it is done: the leader then gives
 * its place to the next database, and the first call starts it again.
 */
static void
leaf_worker_warm_start(void)
{
	bool		locked;

	SetConfigOption("lock_timeout", LEAF_WARM_LOCK_TIMEOUT_MS, PGC_SUSET,
					PGC_S_OVERRIDE);
	locked = leaf_warm_start_database(leaf_worker_dboid, leaf_worker_dbname);
	SetConfigOption("lock_timeout", LEAF_LOAD_LOCK_TIMEOUT_MS, PGC_SUSET,
					PGC_S_OVERRIDE);
	if (locked && leaf_alloc_slot_give_up(leaf_worker_loads_wanted))
	{
		ereport(LOG,
				(errmsg("leaf allocator exiting for database \"%s\": its warm start found leaf_alloc locked",
						leaf_worker_dbname),
				 errdetail("The next call of leaf_segment_nextval there starts it again.")));
		proc_exit(0);
	}
	leaf_alloc_slot_warmed();
}

void
leaf_alloc_worker_main(Datum main_arg)
{
	TimestampTz next_refresh;
	uint32		wait_event;

	leaf_worker_dboid = DatumGetObjectId(main_arg);

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, leaf_worker_sigterm);
	BackgroundWorkerUnblockSignals();

	/* take this database's worker slot */
	if (!leaf_alloc_slot_attach(leaf_worker_dboid))
	{
		/* another worker serves this database, or there is no room */
		proc_exit(0);
	}

	/*
	 * A database that stopped allowing connections (ALTER DATABASE ...
	 * ALLOW_CONNECTIONS false) may still have sessions that take IDs: they
	 * are served like any other.
	 */
	BackgroundWorkerInitializeConnectionByOid(leaf_worker_dboid, InvalidOid,
											  BGWORKER_BYPASS_ALLOWCONN);
	/* its loads are its own, never logical replication (leaf_copy.c) */
	leaf_copy_own_writes();

	leaf_worker_name_database();
	leaf_alloc_set_loader(leaf_worker_dbname);
	leaf_worker_claim_owner();
	leaf_worker_settings();

	ereport(LOG,
			(errmsg("leaf allocator started for database \"%s\"",
					leaf_worker_dbname)));
	leaf_report_source();

	leaf_worker_warm_start();

	/* what pg_stat_activity shows while the allocator waits for work */
	wait_event = WaitEventExtensionNew("LeafAllocatorMain");

	next_refresh = 0;
	leaf_last_busy = GetCurrentTimestamp();
	for (;;)
	{
		long		timeout;

		ResetLatch(MyLatch);
		leaf_worker_interrupts();
		if (leaf_alloc_stopping())
			leaf_worker_stop();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		timeout = leaf_do_loads();

		leaf_worker_refresh(&next_refresh);
		if (timeout < 0 || timeout > leaf_tag_refresh_ms)
			timeout = leaf_tag_refresh_ms;

		if (leaf_alloc_idle_timeout_ms > 0 ||
			leaf_loads_refused(leaf_worker_dboid))
			timeout = leaf_worker_idle(timeout);

		/*
		 * A caller that asked for a load while the allocation database was
		 * answering (a load of another tag, the list of tags) set the latch
		 * the remote call then reset: look again now.  Sleeping here would
		 * leave it waiting until its own wait times out and asks again.
		 */
		if (leaf_remote_woken())
			continue;

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, wait_event);
	}
}
