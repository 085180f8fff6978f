/*-------------------------------------------------------------------------
 *
 * leaf_drop_guard.c
 *	  Keep the counters of a database from being dropped by accident.
 *
 * leaf_alloc and leaf_alloc_retired hold every counter and every mark of
 * a database; a tag created again after they are gone starts over and
 * hands out its IDs a second time.  Whatever drops them (DROP EXTENSION,
 * DROP SCHEMA ... CASCADE of the extension's schema, DROP OWNED BY the
 * extension's owner) drops them one object at a time, and each object is
 * first shown to the object access hook.  There the drop is refused
 * (LF010) while either table has rows, unless the superuser setting
 * leaf.allow_drop_with_counters is on.  DROP DATABASE drops no objects
 * one by one and is not checked: it leaves no database to repeat IDs in.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/dependency.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "leaf.h"
#include "common/leaf_compat.h"
#include "common/leaf_errcodes.h"

static object_access_hook_type prev_object_access_hook = NULL;

/* leaf.allow_drop_with_counters */
static bool leaf_allow_drop_with_counters = false;

/* Rows of a table that this transaction sees. */
static int64
leaf_visible_rows(Oid relid)
{
	Relation	rel;
	Snapshot	snap;
	TableScanDesc scan;
	TupleTableSlot *slot;
	int64		n = 0;

	if (!OidIsValid(relid))
		return 0;
	rel = table_open(relid, AccessShareLock);
	snap = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snap, 0, NULL, 0);
	slot = table_slot_create(rel, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		n++;
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	return n;
}

/*
 * A relation is about to be dropped.  If it is one of leaf's two tables
 * of counters, refuse while they hold any.
 */
static void
leaf_check_drop_relation(Oid relid)
{
	char	   *relname = get_rel_name(relid);
	Oid			extoid;
	Oid			nsp;
	int64		tags;
	int64		marks;

	if (relname == NULL ||
		(strcmp(relname, "leaf_alloc") != 0 &&
		 strcmp(relname, "leaf_alloc_retired") != 0))
		return;
	extoid = get_extension_oid("leaf", true);
	if (!OidIsValid(extoid) ||
		getExtensionOfObject(RelationRelationId, relid) != extoid)
		return;

	/* the other table may be gone already, dropped in this command */
	nsp = get_rel_namespace(relid);
	tags = leaf_visible_rows(get_relname_relid("leaf_alloc", nsp));
	marks = leaf_visible_rows(get_relname_relid("leaf_alloc_retired", nsp));
	if (tags == 0 && marks == 0)
		return;

	ereport(ERROR,
			(errcode(ERRCODE_LEAF_DROP_WITH_COUNTERS),
			 errmsg("cannot drop extension leaf while leaf_alloc holds counters"),
			 errdetail("Dropping the extension drops leaf_alloc and leaf_alloc_retired (biz_tags: " INT64_FORMAT ", retired biz_tags: " INT64_FORMAT "), and a biz_tag created again afterwards would hand out its IDs again.",
					   tags, marks),
			 errhint("To drop it anyway, save the counters in the same transaction as the drop, after LOCK TABLE %s.leaf_alloc, %s.leaf_alloc_retired, %s.leaf_alloc_source IN EXCLUSIVE MODE, and turn \"leaf.allow_drop_with_counters\" (a superuser setting) on with SET LOCAL.",
					 quote_identifier(get_namespace_name(nsp)),
					 quote_identifier(get_namespace_name(nsp)),
					 quote_identifier(get_namespace_name(nsp)))));
}

static void
leaf_object_access(ObjectAccessType access, Oid classId, Oid objectId,
				   int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (access == OAT_DROP && classId == RelationRelationId && subId == 0 &&
		!leaf_allow_drop_with_counters)
		leaf_check_drop_relation(objectId);
}

/*
 * Define the setting that lets the counters go.  Unlike the hook, which
 * leaf_drop_guard_init() installs, it is defined with the other settings,
 * before the "leaf" prefix is reserved.
 */
void
leaf_drop_guard_init_settings(void)
{
	DefineCustomBoolVariable("leaf.allow_drop_with_counters",
							 "Allows DROP EXTENSION leaf while leaf_alloc or leaf_alloc_retired has rows.",
							 "Dropping the extension drops every counter of the database.",
							 &leaf_allow_drop_with_counters,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
}

void
leaf_drop_guard_init(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = leaf_object_access;
}
