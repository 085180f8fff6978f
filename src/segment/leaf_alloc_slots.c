/*-------------------------------------------------------------------------
 *
 * leaf_alloc_slots.c
 *	  The registry of allocator workers: one slot per database that has
 *	  (or is starting) an allocator, in shared memory.
 *
 * A backend that needs a segment wakes the allocator of its database
 * (leaf_wake_worker), and launches one when there is none: launching
 * claims a slot for the database, and the worker, once it runs, attaches
 * to that slot with its pid and latch.  A launch that has not come up
 * within LEAF_LAUNCH_TIMEOUT_MS (the worker could not start, or exited
 * before it attached) is taken for lost: the next wake launches another,
 * and a database command no longer waits for it.  A database command that
 * needs the database to itself (leaf_ddl.c) asks the worker to stop
 * (leaf_stop_alloc_worker); a worker gives its slot back when it exits,
 * or when it has had nothing to load for leaf.alloc_idle_timeout.
 *
 * This file is the only one that touches the slots.  Their locking:
 *	- LeafAllocSlots->lock, an LWLock, protects the search for a
 *	  database's slot: dboid is written only under the exclusive lock, so
 *	  the shared lock is enough to find a slot and to know it stays that
 *	  database's while the lock is held.
 *	- LeafAllocSlots->mutex, a spinlock, protects the other fields.
 *	  pid, latch and started are written only holding both the exclusive
 *	  lock and the mutex, and so may be read holding either;
 *	  stop_requested, stop_command, source and warmed are written under
 *	  the shared lock and the mutex, and read under the mutex.  (The worker's signal handler reads
 *	  its own stop_requested with no lock: it was set before the kill()
 *	  that raised the signal.)
 * Latches are copied under the mutex and set after it is released.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "segment/leaf_alloc.h"
#include "segment/leaf_alloc_slots.h"

/* A launch that has not come up in this time is taken for lost. */
#define LEAF_LAUNCH_TIMEOUT_MS	(10 * 1000)

/*
 * How long leaf_stop_alloc_worker waits for a worker to go, and how often
 * it looks.  Nothing wakes the waiting backend when the worker gives its
 * slot back, so it looks again every LEAF_STOP_POLL_MS, short beside the
 * database command (DROP DATABASE, ALTER DATABASE, ...) it holds up; a
 * worker still there after LEAF_STOP_WAIT_MS is left, and the command
 * goes on.
 */
#define LEAF_STOP_WAIT_MS		(5 * 1000)
#define LEAF_STOP_POLL_MS		10

/* Room for the name of a database command, as "ALTER DATABASE". */
#define LEAF_COMMAND_LEN		32

/* One allocator worker, serving one database (locks: see above). */
typedef struct LeafWorkerSlot
{
	Oid			dboid;			/* lock: database served, InvalidOid if
								 * free */
	Oid			owner;			/* lock: its owner, whose share the slot
								 * counts in; InvalidOid for a superuser,
								 * or an owner not known at the launch */
	pid_t		pid;			/* lock and mutex: 0 while starting */
	Latch	   *latch;			/* lock and mutex: the worker's latch, NULL
								 * while starting */
	TimestampTz started;		/* lock and mutex: when the slot was claimed */
	bool		stop_requested; /* mutex: a database command asked the
								 * worker to exit */
	char		stop_command[LEAF_COMMAND_LEN]; /* mutex: that command */
	char		source[LEAF_SOURCE_LEN];	/* mutex: where segments come
											 * from, as the worker says */
	bool		warmed;			/* mutex: the worker has asked for the
								 * tags the warm start lists for it */
} LeafWorkerSlot;

typedef struct LeafAllocSlots
{
	LWLock	   *lock;			/* protects the search for a slot (dboid) */
	slock_t		mutex;			/* protects the slots' other fields */
	LeafWorkerSlot workers[FLEXIBLE_ARRAY_MEMBER];	/* leaf_max_databases */
} LeafAllocSlots;

static LeafAllocSlots *leaf_slots = NULL;

static void leaf_slot_release(void);

/* A copy of what a slot says about its worker. */
typedef struct LeafWorkerView
{
	pid_t		pid;
	Latch	   *latch;
	TimestampTz started;
} LeafWorkerView;

/*
 * In an allocator worker: the database it serves, and its slot once it
 * has attached (read by its SIGTERM handler).
 */
static Oid	leaf_my_dboid = InvalidOid;
static volatile LeafWorkerSlot *leaf_my_slot = NULL;

/* leaf.max_databases: the number of slots; leaf.max_databases_per_owner */
static int	leaf_max_databases = 8;
static int	leaf_max_databases_per_owner = -1;

/* Define the setting that sizes the registry. */
void
leaf_alloc_slots_init_settings(void)
{
	DefineCustomIntVariable("leaf.max_databases",
							"Sets the number of databases that can use segment mode at once.",
							"Each such database has its own allocator worker, "
							"which takes a slot of max_worker_processes.",
							&leaf_max_databases,
							8, 1, 128,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.max_databases_per_owner",
							"Sets the number of databases of one owner that can use segment mode at once.",
							"-1 means half of leaf.max_databases (at least one); 0 means all of them.  "
							"Databases owned by superusers count for no owner.",
							&leaf_max_databases_per_owner,
							-1, -1, 128,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
}

static Size
leaf_alloc_slots_shmem_size(void)
{
	return add_size(offsetof(LeafAllocSlots, workers),
					mul_size(leaf_max_databases, sizeof(LeafWorkerSlot)));
}

void
leaf_alloc_slots_shmem_request(void)
{
	RequestAddinShmemSpace(leaf_alloc_slots_shmem_size());
	RequestNamedLWLockTranche("leaf allocators", 1);
}

/*
 * Called with AddinShmemInitLock held.
 */
void
leaf_alloc_slots_shmem_startup(void)
{
	bool		found;
	Size		size = leaf_alloc_slots_shmem_size();

	leaf_slots = ShmemInitStruct("leaf allocator slots", size, &found);
	if (!found)
	{
		memset(leaf_slots, 0, size);
		leaf_slots->lock = &(GetNamedLWLockTranche("leaf allocators"))->lock;
		SpinLockInit(&leaf_slots->mutex);
	}
}

/* leaf.max_databases: how many allocators may run at once. */
int
leaf_alloc_slots_max(void)
{
	return leaf_max_databases;
}

/* Is the registry in shared memory (leaf loaded at server start)? */
bool
leaf_alloc_slots_ready(void)
{
	return leaf_slots != NULL;
}

/*
 * The slot of a database, or NULL; InvalidOid finds a free slot.  Caller
 * holds the lock.
 */
static LeafWorkerSlot *
leaf_slot_find(Oid dboid)
{
	int			i;

	Assert(LWLockHeldByMe(leaf_slots->lock));
	for (i = 0; i < leaf_max_databases; i++)
		if (leaf_slots->workers[i].dboid == dboid)
			return &leaf_slots->workers[i];
	return NULL;
}

/* Copy what a slot says about its worker.  Caller holds the lock. */
static void
leaf_slot_copy(LeafWorkerSlot *w, LeafWorkerView *view)
{
	Assert(LWLockHeldByMe(leaf_slots->lock));
	SpinLockAcquire(&leaf_slots->mutex);
	view->pid = w->pid;
	view->latch = w->latch;
	view->started = w->started;
	SpinLockRelease(&leaf_slots->mutex);
}

/*
 * Copy what the slot of a database says about its worker.  Returns false
 * (and a view of no worker) if the database has no slot.
 */
static bool
leaf_slot_lookup(Oid dboid, LeafWorkerView *view)
{
	LeafWorkerSlot *w;

	memset(view, 0, sizeof(*view));
	LWLockAcquire(leaf_slots->lock, LW_SHARED);
	w = leaf_slot_find(dboid);
	if (w != NULL)
		leaf_slot_copy(w, view);
	LWLockRelease(leaf_slots->lock);
	return w != NULL;
}

/*
 * Is a slot held by a launch that has not come up within
 * LEAF_LAUNCH_TIMEOUT_MS?  The next launch replaces it.
 */
static bool
leaf_launch_lost(const LeafWorkerView *view)
{
	return view->pid == 0 &&
		TimestampDifferenceExceeds(view->started, GetCurrentTimestamp(),
								   LEAF_LAUNCH_TIMEOUT_MS);
}

/*
 * The owner of a database whose allocators and tag slots count in that
 * owner's shares (here and in leaf_tag_share.c): pg_database.datdba, or
 * InvalidOid for a superuser, or when it cannot be read (outside a
 * transaction).
 */
Oid
leaf_alloc_share_owner(Oid dboid)
{
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	if (!IsTransactionState())
		return InvalidOid;
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	if (HeapTupleIsValid(tup))
	{
		owner = ((Form_pg_database) GETSTRUCT(tup))->datdba;
		ReleaseSysCache(tup);
	}
	if (OidIsValid(owner) && superuser_arg(owner))
		owner = InvalidOid;
	return owner;
}

/*
 * The share of allocators of one owner's databases: -1 if none applies
 * (a superuser's databases, or no limit).  Else the limit, with *n the
 * slots of owner's databases but skip, and *nfree the free ones.  Caller
 * holds the lock.
 */
static int
leaf_slot_owner_count(Oid owner, const LeafWorkerSlot *skip, int *n, int *nfree)
{
	int			limit = leaf_max_databases_per_owner;
	int			i;

	Assert(LWLockHeldByMe(leaf_slots->lock));
	if (limit < 0)
		limit = Max(leaf_max_databases / 2, 1);
	if (!OidIsValid(owner) || limit == 0 || limit >= leaf_max_databases)
		return -1;
	*n = *nfree = 0;
	for (i = 0; i < leaf_max_databases; i++)
	{
		const LeafWorkerSlot *w = &leaf_slots->workers[i];

		if (!OidIsValid(w->dboid))
			(*nfree)++;
		else if (w != skip && w->owner == owner)
			(*n)++;
	}
	return limit;
}

/*
 * Refuse, the lock released, a launch for a database whose owner's other
 * databases hold leaf.max_databases_per_owner allocators already, so that
 * one role's databases (copies of its own, say) never take them all; and
 * keep the last free allocator for the databases of an owner that has
 * none, so that roles acting together leave one to another owner unless
 * every allocator is a different owner's.  Superusers' databases (owner
 * InvalidOid) are held to neither.  Caller holds the exclusive lock.
 */
static void
leaf_slot_check_owner(Oid owner)
{
	int			n;
	int			nfree;
	int			limit = leaf_slot_owner_count(owner, NULL, &n, &nfree);

	Assert(LWLockHeldByMeInMode(leaf_slots->lock, LW_EXCLUSIVE));
	if (limit < 0 || (n < limit && (n == 0 || nfree > 1)))
		return;
	LWLockRelease(leaf_slots->lock);
	if (n >= limit)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("too many databases of this database's owner use leaf segment mode"),
				 errdetail("The databases of one owner may have %d allocator workers at once, of %d.",
						   limit, leaf_max_databases),
				 errhint("Increase \"leaf.max_databases_per_owner\", or wait until an allocator of that owner's other databases exits (\"leaf.alloc_idle_timeout\").")));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("too many databases use leaf segment mode"),
			 errdetail("The last free allocator worker of %d is kept for the databases of an owner that has none, and this database's owner has %d.",
					   leaf_max_databases, n),
			 errhint("Wait until an allocator of that owner's other databases exits (\"leaf.alloc_idle_timeout\"), or increase \"leaf.max_databases\".")));
}

/*
 * In an allocator worker, in a transaction once connected: count it in
 * the share of its database's owner, if its launch did not (the warm
 * start launches outside a transaction, where the owner is not known).
 * Returns false, the slot given back, if the owner's other databases held
 * their share already (or this took the last free allocator while they
 * held one), as a launch would have been refused.
 */
bool
leaf_alloc_slot_claim_owner(void)
{
	Oid			owner = leaf_alloc_share_owner(leaf_my_dboid);
	LeafWorkerSlot *w;
	bool		ok = true;

	LWLockAcquire(leaf_slots->lock, LW_EXCLUSIVE);
	w = leaf_slot_find(leaf_my_dboid);
	if (w != NULL && w->pid == MyProcPid && !OidIsValid(w->owner))
	{
		int			n;
		int			nfree;
		int			limit = leaf_slot_owner_count(owner, w, &n, &nfree);

		ok = limit < 0 || (n < limit && (n == 0 || nfree > 0));
		if (ok)
			w->owner = owner;
		else
			leaf_slot_release();
	}
	LWLockRelease(leaf_slots->lock);
	return ok;
}

/*
 * Claim the slot of a database and start its worker, unless it has one
 * (or one is starting).
 */
static void
leaf_launch_alloc_worker(Oid dboid)
{
	BackgroundWorker worker;
	LeafWorkerSlot *w;
	bool		ok;
	char	   *dbname;
	Oid			owner = leaf_alloc_share_owner(dboid);

	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(leaf_slots->lock, LW_EXCLUSIVE);
	w = leaf_slot_find(dboid);
	if (w != NULL)
	{
		LeafWorkerView view;

		leaf_slot_copy(w, &view);
		if (!leaf_launch_lost(&view))
		{
			LWLockRelease(leaf_slots->lock);
			return;
		}
	}
	else
	{
		leaf_slot_check_owner(owner);
		w = leaf_slot_find(InvalidOid);
	}
	if (w == NULL)
	{
		LWLockRelease(leaf_slots->lock);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("too many databases use leaf segment mode"),
				 errdetail("Each database has an allocator worker of its own, and %d are running.",
						   leaf_max_databases),
				 errhint("Increase \"leaf.max_databases\" and restart the server.")));
	}
	SpinLockAcquire(&leaf_slots->mutex);
	w->dboid = dboid;
	w->owner = owner;
	w->pid = 0;
	w->latch = NULL;
	w->started = now;
	w->stop_requested = false;
	w->stop_command[0] = '\0';
	w->warmed = false;
	SpinLockRelease(&leaf_slots->mutex);
	LWLockRelease(leaf_slots->lock);

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "leaf");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "leaf_alloc_worker_main");
	/* the process title: the caller is in a transaction of that database */
	dbname = IsTransactionState() ? get_database_name(dboid) : NULL;
	if (dbname != NULL)
		snprintf(worker.bgw_name, BGW_MAXLEN,
				 "leaf allocator for database \"%s\"", dbname);
	else
		snprintf(worker.bgw_name, BGW_MAXLEN,
				 "leaf allocator for database with OID %u", dboid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "leaf allocator");
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	worker.bgw_notify_pid = 0;

	ok = RegisterDynamicBackgroundWorker(&worker, NULL);
	if (!ok)
	{
		LWLockAcquire(leaf_slots->lock, LW_EXCLUSIVE);
		if (w->dboid == dboid && w->pid == 0)
			w->dboid = InvalidOid;
		LWLockRelease(leaf_slots->lock);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start the leaf allocator worker"),
				 errhint("Consider increasing configuration parameter \"max_worker_processes\".")));
	}
}

/*
 * Wake the allocator worker of a database, if it runs; launch none.
 */
void
leaf_wake_running_worker(Oid dboid)
{
	LeafWorkerView view;

	(void) leaf_slot_lookup(dboid, &view);
	if (view.latch != NULL)
		SetLatch(view.latch);
}

/*
 * Wake the allocator worker of a database, starting it if there is none.
 */
void
leaf_wake_worker(Oid dboid)
{
	LeafWorkerView view;
	bool		launch;

	launch = !leaf_slot_lookup(dboid, &view);

	/* a worker that never came up is replaced after a while */
	if (!launch && leaf_launch_lost(&view))
		launch = true;

	if (view.latch != NULL)
		SetLatch(view.latch);
	else if (launch)
		leaf_launch_alloc_worker(dboid);
}

/*
 * Ask the worker of a database to exit for command, if it still has the
 * given pid.
 */
static void
leaf_request_stop(Oid dboid, pid_t pid, const char *command)
{
	LeafWorkerSlot *w;

	LWLockAcquire(leaf_slots->lock, LW_SHARED);
	w = leaf_slot_find(dboid);
	if (w != NULL)
	{
		SpinLockAcquire(&leaf_slots->mutex);
		if (w->pid == pid)
		{
			w->stop_requested = true;
			strlcpy(w->stop_command, command, sizeof(w->stop_command));
		}
		SpinLockRelease(&leaf_slots->mutex);
	}
	LWLockRelease(leaf_slots->lock);
}

/*
 * Stop the allocator worker of a database for command (a database
 * command, as "DROP DATABASE", which the worker names to callers whose
 * load it cut short), and wait (up to 5 s) until it has gone.  A worker
 * that was launched but has not taken its slot yet (pid 0) is waited for,
 * then stopped too: it would connect to the database a moment later.
 */
void
leaf_stop_alloc_worker(Oid dboid, const char *command)
{
	int			i;
	pid_t		signalled = 0;

	for (i = 0; i < LEAF_STOP_WAIT_MS / LEAF_STOP_POLL_MS; i++)
	{
		LeafWorkerView view;

		if (!leaf_slot_lookup(dboid, &view))
			return;
		/* a launch that never came up is given up (as by leaf_wake_worker) */
		if (leaf_launch_lost(&view))
			return;

		if (view.pid != 0 && view.pid != signalled)
		{
			/* it exits quietly, not with FATAL (see leaf_worker_sigterm) */
			leaf_request_stop(dboid, view.pid, command);
			(void) kill(view.pid, SIGTERM);
			signalled = view.pid;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 LEAF_STOP_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Where the segments of a database come from, as its worker last said;
 * empty if it has no worker or the worker has not said.
 */
void
leaf_alloc_slot_source(Oid dboid, char *buf, size_t len)
{
	LeafWorkerSlot *w;

	buf[0] = '\0';
	LWLockAcquire(leaf_slots->lock, LW_SHARED);
	w = leaf_slot_find(dboid);
	if (w != NULL)
	{
		SpinLockAcquire(&leaf_slots->mutex);
		strlcpy(buf, w->source, len);
		SpinLockRelease(&leaf_slots->mutex);
	}
	LWLockRelease(leaf_slots->lock);
}

/*
 * Give this worker's slot back, if it still holds it.  Caller holds the
 * exclusive lock.
 */
static void
leaf_slot_release(void)
{
	LeafWorkerSlot *w;

	Assert(LWLockHeldByMeInMode(leaf_slots->lock, LW_EXCLUSIVE));
	w = leaf_slot_find(leaf_my_dboid);
	if (w != NULL && w->pid == MyProcPid)
	{
		SpinLockAcquire(&leaf_slots->mutex);
		w->pid = 0;
		w->latch = NULL;
		SpinLockRelease(&leaf_slots->mutex);
		w->dboid = InvalidOid;
	}
}

static void
leaf_slot_detach(int code, Datum arg)
{
	leaf_my_slot = NULL;
	LWLockReleaseAll();
	LWLockAcquire(leaf_slots->lock, LW_EXCLUSIVE);
	leaf_slot_release();
	LWLockRelease(leaf_slots->lock);
}

/*
 * In the allocator worker of a database: take its slot, the one a
 * launch claimed or a free one, and give it back at exit.  Returns false
 * if another worker serves the database, or there is no room.
 */
bool
leaf_alloc_slot_attach(Oid dboid)
{
	LeafWorkerSlot *w;

	leaf_my_dboid = dboid;
	LWLockAcquire(leaf_slots->lock, LW_EXCLUSIVE);
	w = leaf_slot_find(dboid);
	if (w == NULL)
		w = leaf_slot_find(InvalidOid);
	if (w == NULL || (w->pid != 0 && w->pid != MyProcPid))
	{
		LWLockRelease(leaf_slots->lock);
		return false;
	}
	SpinLockAcquire(&leaf_slots->mutex);
	if (w->dboid != dboid)
		w->owner = InvalidOid;	/* not launched: no owner's share */
	w->dboid = dboid;
	w->pid = MyProcPid;
	w->latch = MyLatch;
	w->stop_requested = false;
	w->stop_command[0] = '\0';
	w->warmed = false;
	leaf_my_slot = w;			/* before a DDL command can see our pid */
	SpinLockRelease(&leaf_slots->mutex);
	LWLockRelease(leaf_slots->lock);
	before_shmem_exit(leaf_slot_detach, (Datum) 0);
	return true;
}

/*
 * Has a database command asked this worker to exit?  Called by its
 * SIGTERM handler, so it takes no lock: stop_requested was set before
 * the kill() that raised the signal.
 */
bool
leaf_alloc_slot_stop_requested(void)
{
	return leaf_my_slot != NULL && leaf_my_slot->stop_requested;
}

/*
 * The database command that asked this worker to exit, into buf; empty if
 * none did.
 */
void
leaf_alloc_slot_stop_command(char *buf, size_t len)
{
	buf[0] = '\0';
	if (leaf_my_slot == NULL)
		return;
	SpinLockAcquire(&leaf_slots->mutex);
	if (leaf_my_slot->stop_requested)
		strlcpy(buf, (const char *) leaf_my_slot->stop_command, len);
	SpinLockRelease(&leaf_slots->mutex);
}

/*
 * Say where this worker's segments come from (leaf_segments shows it).
 */
void
leaf_alloc_slot_report_source(const char *source)
{
	LeafWorkerSlot *w;

	LWLockAcquire(leaf_slots->lock, LW_SHARED);
	w = leaf_slot_find(leaf_my_dboid);
	if (w != NULL)
	{
		SpinLockAcquire(&leaf_slots->mutex);
		if (w->pid == MyProcPid)
			strlcpy(w->source, source, sizeof(w->source));
		SpinLockRelease(&leaf_slots->mutex);
	}
	LWLockRelease(leaf_slots->lock);
}

/*
 * Say that this worker has asked for the tags the warm start file lists
 * for its database (leaf_warm_start_database), whatever came of them.
 */
void
leaf_alloc_slot_warmed(void)
{
	LeafWorkerSlot *w;

	LWLockAcquire(leaf_slots->lock, LW_SHARED);
	w = leaf_slot_find(leaf_my_dboid);
	if (w != NULL)
	{
		SpinLockAcquire(&leaf_slots->mutex);
		if (w->pid == MyProcPid)
			w->warmed = true;
		SpinLockRelease(&leaf_slots->mutex);
	}
	LWLockRelease(leaf_slots->lock);
}

/*
 * Where the allocator of a database is with the tags the warm start file
 * lists for it: none (no allocator, or a launch taken for lost: no worker
 * will ask for them), starting or asking for them, or done with them and
 * running.
 */
LeafWarmState
leaf_alloc_slot_warm_state(Oid dboid)
{
	LeafWorkerSlot *w;
	LeafWarmState state = LEAF_WARM_NONE;

	LWLockAcquire(leaf_slots->lock, LW_SHARED);
	w = leaf_slot_find(dboid);
	if (w != NULL)
	{
		LeafWorkerView view;
		bool		warmed;

		leaf_slot_copy(w, &view);
		SpinLockAcquire(&leaf_slots->mutex);
		warmed = w->warmed;
		SpinLockRelease(&leaf_slots->mutex);
		if (warmed)
			state = LEAF_WARM_DONE;
		else if (!leaf_launch_lost(&view))
			state = LEAF_WARM_WARMING;
	}
	LWLockRelease(leaf_slots->lock);
	return state;
}

/*
 * Give this worker's slot back unless busy() says it has work after all;
 * returns true if it did.  busy() runs under the exclusive lock, which
 * every wake takes (shared) to find the worker: a caller that asks for
 * work after busy() looked finds no worker, and launches one.
 */
bool
leaf_alloc_slot_give_up(bool (*busy) (void))
{
	bool		pending;

	LWLockAcquire(leaf_slots->lock, LW_EXCLUSIVE);
	pending = busy();
	if (!pending)
		leaf_slot_release();
	LWLockRelease(leaf_slots->lock);
	return !pending;
}
