/*-------------------------------------------------------------------------
 *
 * leaf_utility.c
 *	  Keep allocator workers out of the way of database-level commands.
 *
 * An allocator worker stays connected to its database.  Left alone, it
 * would make DROP DATABASE, ALTER DATABASE ... RENAME and CREATE DATABASE
 * ... TEMPLATE fail with "database is being accessed by other users".
 * Before such a command (or ALTER DATABASE ... SET TABLESPACE) runs, the
 * worker of that database is asked to exit; a later call of
 * leaf_segment_nextval there starts a new one.  Once DROP DATABASE has
 * run, the database's tag slots are freed.  A worker stopped this way
 * exits with a LOG line, not with FATAL as after pg_terminate_backend.
 *
 * DROP EXTENSION leaf is refused while leaf_alloc or leaf_alloc_retired
 * has rows, unless leaf.allow_drop_with_counters is on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/wait_event.h"

#include "leaf.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * Stop the allocator worker of a database, and wait (up to 5 s) until it
 * has gone.  A worker that was launched but has not taken its slot yet
 * (pid 0) is waited for, then stopped too: it would connect to the
 * database a moment later.
 */
static void
leaf_stop_alloc_worker(Oid dboid)
{
	int			i;
	pid_t		signalled = 0;

	for (i = 0; i < 500; i++)
	{
		LeafWorkerSlot *w;
		pid_t		pid = 0;
		TimestampTz started = 0;

		LWLockAcquire(leaf_seg->lock, LW_SHARED);
		w = leaf_worker_slot_for(dboid);
		if (w != NULL)
		{
			SpinLockAcquire(&leaf_seg->mutex);
			pid = w->pid;
			started = w->started;
			SpinLockRelease(&leaf_seg->mutex);
		}
		LWLockRelease(leaf_seg->lock);
		if (w == NULL)
			return;
		/* a launch that never came up is given up after 10 s (see leaf_wake_worker) */
		if (pid == 0 &&
			TimestampDifferenceExceeds(started, GetCurrentTimestamp(), 10 * 1000))
			return;

		if (pid != 0 && pid != signalled)
		{
			/* it exits quietly, not with FATAL (see leaf_worker_sigterm) */
			LWLockAcquire(leaf_seg->lock, LW_SHARED);
			w = leaf_worker_slot_for(dboid);
			if (w != NULL)
			{
				SpinLockAcquire(&leaf_seg->mutex);
				if (w->pid == pid)
					w->stop_requested = true;
				SpinLockRelease(&leaf_seg->mutex);
			}
			LWLockRelease(leaf_seg->lock);
			(void) kill(pid, SIGTERM);
			signalled = pid;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * The OID of a database the current user owns, or InvalidOid.
 */
static Oid
leaf_owned_database(const char *dbname)
{
	Oid			dboid;

	if (dbname == NULL || leaf_seg == NULL)
		return InvalidOid;
	dboid = get_database_oid(dbname, true);
	if (OidIsValid(dboid) && object_ownercheck(DatabaseRelationId, dboid, GetUserId()))
		return dboid;
	return InvalidOid;
}

static void
leaf_stop_worker_of(const char *dbname)
{
	Oid			dboid = leaf_owned_database(dbname);

	if (OidIsValid(dboid))
		leaf_stop_alloc_worker(dboid);
}

/* Rows of one of leaf's tables in schema nsp, or 0 if it is not there. */
static int64
leaf_count_rows(Oid nsp, const char *relname)
{
	int64		n = 0;
	bool		isnull;

	if (!OidIsValid(get_relname_relid(relname, nsp)))
		return 0;
	if (SPI_execute(psprintf("SELECT count(*) FROM %s.%s",
							 quote_identifier(get_namespace_name(nsp)),
							 quote_identifier(relname)), true, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not count the rows of %s", relname);
	n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
									SPI_tuptable->tupdesc, 1, &isnull));
	return n;
}

/*
 * DROP EXTENSION leaf drops leaf_alloc and leaf_alloc_retired, and with
 * them every counter of the database: a tag created again afterwards
 * would start over and hand out its IDs a second time.  Refuse it while
 * they have rows, unless leaf.allow_drop_with_counters is on.
 */
static void
leaf_check_drop_extension(DropStmt *stmt)
{
	ListCell   *lc;
	bool		drops_leaf = false;
	Oid			extoid;
	Oid			nsp;
	int64		tags;
	int64		marks;

	foreach(lc, stmt->objects)
	{
		Node	   *obj = (Node *) lfirst(lc);

		if (IsA(obj, String) && strcmp(strVal(obj), "leaf") == 0)
			drops_leaf = true;
	}
	if (!drops_leaf || leaf_allow_drop_with_counters)
		return;
	nsp = leaf_extension_namespace(&extoid);
	if (!OidIsValid(extoid))
		return;					/* not there: DROP says so, or IF EXISTS */

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	tags = leaf_count_rows(nsp, "leaf_alloc");
	marks = leaf_count_rows(nsp, "leaf_alloc_retired");
	SPI_finish();

	if (tags > 0 || marks > 0)
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_DROP_WITH_COUNTERS),
				 errmsg("cannot drop extension leaf while leaf_alloc holds counters"),
				 errdetail("Dropping the extension drops leaf_alloc (" INT64_FORMAT " rows) and leaf_alloc_retired (" INT64_FORMAT " rows), and a biz_tag created again afterwards would hand out its IDs again.",
						   tags, marks),
				 errhint("Save them first, for example with pg_dump -t '%s.leaf_alloc*' --data-only; then SET leaf.allow_drop_with_counters = on in this session and drop the extension again.",
						 get_namespace_name(nsp))));
}

static void
leaf_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	Oid			dropped = InvalidOid;

	if (IsA(parsetree, DropStmt) &&
		((DropStmt *) parsetree)->removeType == OBJECT_EXTENSION)
		leaf_check_drop_extension((DropStmt *) parsetree);
	else if (IsA(parsetree, DropdbStmt))
	{
		dropped = leaf_owned_database(((DropdbStmt *) parsetree)->dbname);
		if (OidIsValid(dropped))
			leaf_stop_alloc_worker(dropped);
	}
	else if (IsA(parsetree, AlterDatabaseStmt))
	{
		ListCell   *lc;

		/* SET TABLESPACE, too, needs the database to itself */
		foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
		{
			DefElem    *opt = (DefElem *) lfirst(lc);

			if (strcmp(opt->defname, "tablespace") == 0)
				leaf_stop_worker_of(((AlterDatabaseStmt *) parsetree)->dbname);
		}
	}
	else if (IsA(parsetree, RenameStmt) &&
			 ((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
		leaf_stop_worker_of(((RenameStmt *) parsetree)->subname);
	else if (IsA(parsetree, CreatedbStmt))
	{
		ListCell   *lc;

		foreach(lc, ((CreatedbStmt *) parsetree)->options)
		{
			DefElem    *opt = (DefElem *) lfirst(lc);

			if (strcmp(opt->defname, "template") == 0 && opt->arg != NULL)
				leaf_stop_worker_of(defGetString(opt));
		}
	}

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);

	/*
	 * The slots of a dropped database would otherwise wait for the worker
	 * of another database to free them, and if they filled leaf.max_tags
	 * no worker could ever start to do so.
	 */
	if (OidIsValid(dropped))
		leaf_free_database_slots(dropped);
}

void
leaf_utility_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = leaf_ProcessUtility;
}
