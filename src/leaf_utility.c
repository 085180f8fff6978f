/*-------------------------------------------------------------------------
 *
 * leaf_utility.c
 *	  Keep allocator workers out of the way of database-level commands.
 *
 * An allocator worker stays connected to its database.  Left alone, it
 * would make DROP DATABASE, ALTER DATABASE ... RENAME and CREATE DATABASE
 * ... TEMPLATE fail with "database is being accessed by other users".
 * Before such a command runs, the worker of that database is asked to
 * exit; a later call of leaf_segment_nextval there starts a new one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/wait_event.h"

#include "leaf.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * Stop the allocator worker of a database, and wait (up to 5 s) until it
 * has gone.
 */
static void
leaf_stop_alloc_worker(Oid dboid)
{
	int			i;

	for (i = 0; i < 500; i++)
	{
		LeafWorkerSlot *w;
		pid_t		pid = 0;

		LWLockAcquire(leaf_seg->lock, LW_SHARED);
		w = leaf_worker_slot_for(dboid);
		if (w != NULL)
		{
			SpinLockAcquire(&leaf_seg->mutex);
			pid = w->pid;
			SpinLockRelease(&leaf_seg->mutex);
		}
		LWLockRelease(leaf_seg->lock);
		if (w == NULL || pid == 0)
			return;

		if (i == 0)
			(void) kill(pid, SIGTERM);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

static void
leaf_stop_worker_of(const char *dbname)
{
	Oid			dboid;

	if (dbname == NULL || leaf_seg == NULL)
		return;
	dboid = get_database_oid(dbname, true);
	if (OidIsValid(dboid) && pg_database_ownercheck(dboid, GetUserId()))
		leaf_stop_alloc_worker(dboid);
}

static void
leaf_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, DropdbStmt))
		leaf_stop_worker_of(((DropdbStmt *) parsetree)->dbname);
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
}

void
leaf_utility_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = leaf_ProcessUtility;
}
