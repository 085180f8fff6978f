/*-------------------------------------------------------------------------
 *
 * leaf_ddl.c
 *	  The ProcessUtility hook: keep allocator workers out of the way of
 *	  database-level commands.
 *
 * An allocator worker stays connected to its database.  Left alone, it
 * would make DROP DATABASE, ALTER DATABASE ... RENAME and CREATE DATABASE
 * (from the template it serves, template1 if none is named) fail with
 * "database is being accessed by other users".
 * Before such a command (or ALTER DATABASE ... SET TABLESPACE) runs, the
 * worker of that database is asked to exit; a later call of
 * leaf_segment_nextval there starts a new one.  Once DROP DATABASE has
 * run, the database's tag slots are freed.  A worker stopped this way
 * exits with a LOG line, not with FATAL as after pg_terminate_backend.
 *
 * (Drops of leaf's tables of counters are checked in leaf_drop_guard.c.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "leaf.h"
#include "segment/leaf_alloc_slots.h"
#include "common/leaf_compat.h"
#include "segment/leaf_segment.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * The OID of a database the current user owns, or InvalidOid.
 */
static Oid
leaf_owned_database(const char *dbname)
{
	Oid			dboid;

	if (dbname == NULL || !leaf_alloc_slots_ready())
		return InvalidOid;
	dboid = get_database_oid(dbname, true);
	if (OidIsValid(dboid) && object_ownercheck(DatabaseRelationId, dboid, GetUserId()))
		return dboid;
	return InvalidOid;
}

/* Is the database marked as a template (datistemplate)? */
static bool
leaf_database_is_template(Oid dboid)
{
	HeapTuple	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	bool		istemplate = false;

	if (HeapTupleIsValid(tup))
	{
		istemplate = ((Form_pg_database) GETSTRUCT(tup))->datistemplate;
		ReleaseSysCache(tup);
	}
	return istemplate;
}

/*
 * Would CREATE DATABASE pass its own privilege checks for the current
 * user: CREATEDB (or superuser), and membership in the role named by
 * OWNER (from 16, membership that may SET ROLE to it)?  (Whether the template may be copied is checked by the caller.)
 * As in createdb(): CREATEDB of the current user itself, not inherited.
 */
static bool
leaf_may_create_database(CreatedbStmt *stmt)
{
	ListCell   *lc;
	bool		createdb = superuser();

	if (!createdb)
	{
		HeapTuple	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(GetUserId()));

		if (HeapTupleIsValid(tup))
		{
			createdb = ((Form_pg_authid) GETSTRUCT(tup))->rolcreatedb;
			ReleaseSysCache(tup);
		}
	}
	if (!createdb)
		return false;

	foreach(lc, stmt->options)
	{
		DefElem    *opt = (DefElem *) lfirst(lc);

		if (strcmp(opt->defname, "owner") == 0 && opt->arg != NULL)
		{
			Oid			owner = get_role_oid(defGetString(opt), true);

#if PG_VERSION_NUM >= 160000
			if (!OidIsValid(owner) || !member_can_set_role(GetUserId(), owner))
				return false;
#else
			if (!OidIsValid(owner) || !is_member_of_role(GetUserId(), owner))
				return false;
#endif
		}
	}
	return true;
}

/* Stop the allocator of a database the current user owns, for command. */
static void
leaf_stop_worker_of(const char *dbname, const char *command)
{
	Oid			dboid = leaf_owned_database(dbname);

	if (OidIsValid(dboid))
		leaf_stop_alloc_worker(dboid, command);
}

static void
leaf_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	Oid			dropped = InvalidOid;

	if (IsA(parsetree, DropdbStmt))
	{
		dropped = leaf_owned_database(((DropdbStmt *) parsetree)->dbname);
		if (OidIsValid(dropped))
			leaf_stop_alloc_worker(dropped, "DROP DATABASE");
	}
	else if (IsA(parsetree, AlterDatabaseStmt))
	{
		ListCell   *lc;

		/* SET TABLESPACE, too, needs the database to itself */
		foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
		{
			DefElem    *opt = (DefElem *) lfirst(lc);

			if (strcmp(opt->defname, "tablespace") == 0)
				leaf_stop_worker_of(((AlterDatabaseStmt *) parsetree)->dbname,
									"ALTER DATABASE");
		}
	}
	else if (IsA(parsetree, RenameStmt) &&
			 ((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
		leaf_stop_worker_of(((RenameStmt *) parsetree)->subname,
							"ALTER DATABASE");
	else if (IsA(parsetree, CreatedbStmt))
	{
		ListCell   *lc;
		const char *template = "template1";	/* as CREATE DATABASE's */
		Oid			dboid;

		foreach(lc, ((CreatedbStmt *) parsetree)->options)
		{
			DefElem    *opt = (DefElem *) lfirst(lc);

			if (strcmp(opt->defname, "template") == 0 && opt->arg != NULL)
				template = defGetString(opt);
		}

		/*
		 * Whoever may copy the template may have its allocator stopped:
		 * a role with CREATEDB (and membership in the new owner) that owns
		 * it, or any such role if it is a template.  Else an allocator
		 * that any caller can start there would make CREATE DATABASE fail
		 * for everyone.  A role that CREATE DATABASE will refuse stops
		 * nothing.
		 */
		dboid = leaf_alloc_slots_ready() ?
			get_database_oid(template, true) : InvalidOid;
		if (OidIsValid(dboid) &&
			leaf_may_create_database((CreatedbStmt *) parsetree) &&
			(leaf_database_is_template(dboid) ||
			 object_ownercheck(DatabaseRelationId, dboid, GetUserId())))
			leaf_stop_alloc_worker(dboid, "CREATE DATABASE");
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
		leaf_free_slots(dropped, InvalidOid);
}

void
leaf_ddl_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = leaf_ProcessUtility;
}
