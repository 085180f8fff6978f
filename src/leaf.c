/*-------------------------------------------------------------------------
 *
 * leaf.c
 *	  Module load: settings, shared memory hooks and background workers.
 *
 * leaf must be loaded with shared_preload_libraries: its segments and its
 * snowflake state live in shared memory, and its workers are started by
 * the postmaster.  Loaded any other way, the module defines nothing and
 * every function raises an error that says so.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "nodes/pg_list.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"

#include "leaf.h"
#include "leaf_compat.h"
#include "leaf_segment.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* segment-mode settings */
int			leaf_max_tags = 1024;
int			leaf_max_databases = 8;
int			leaf_max_tags_per_database = -1;
int			leaf_alloc_idle_timeout_ms = 60 * 1000;
int			leaf_preload_percent = 10;
int			leaf_segment_duration_ms = 15 * 60 * 1000;
int			leaf_tag_refresh_ms = 10 * 1000;
char	   *leaf_alloc_conninfo = NULL;
int			leaf_alloc_timeout_ms = 10 * 1000;
int			leaf_alloc_failover = LEAF_FAILOVER_CONFIRM;

static const struct config_enum_entry leaf_alloc_failover_options[] = {
	{"confirm", LEAF_FAILOVER_CONFIRM, false},
	{"synchronous", LEAF_FAILOVER_SYNCHRONOUS, false},
	{NULL, 0, false}
};
bool		leaf_allow_drop_with_counters = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void leaf_shmem_request(void);
static void leaf_shmem_startup(void);
static List *leaf_start_values(void);
static void leaf_refuse_rejected(List *values);

/*
 * A leaf.* setting given at server start, kept as the text of its
 * placeholder from before the setting was defined.
 */
typedef struct LeafStartValue
{
	char	   *name;
	char	   *value;
} LeafStartValue;

void
_PG_init(void)
{
	List	   *start_values;

	if (!process_shared_preload_libraries_in_progress)
		return;

	start_values = leaf_start_values();

	leaf_common_init_settings();

	DefineCustomIntVariable("leaf.max_tags",
							"Sets the number of biz_tags held in shared memory, over all databases.",
							NULL,
							&leaf_max_tags,
							1024, 16, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.max_tags_per_database",
							"Sets the number of biz_tags one database may hold in shared memory.",
							"-1 means half of leaf.max_tags; 0 means all of them.  "
							"ALTER DATABASE ... SET gives one database another share.",
							&leaf_max_tags_per_database,
							-1, -1, 1000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.max_databases",
							"Sets the number of databases that can use segment mode at once.",
							"Each such database has its own allocator worker, "
							"which takes a slot of max_worker_processes.",
							&leaf_max_databases,
							8, 1, 128,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.preload_percent",
							"Sets how much of a segment is used before the next one is loaded.",
							NULL,
							&leaf_preload_percent,
							10, 0, 100,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.segment_duration",
							"Sets the target lifetime of a segment for the dynamic step.",
							"A segment used up faster doubles the next step; one lasting "
							"twice as long halves it.",
							&leaf_segment_duration_ms,
							15 * 60 * 1000, 1, INT_MAX,
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

	DefineCustomIntVariable("leaf.tag_refresh_interval",
							"Sets how often allocator workers look for biz_tags deleted from leaf_alloc.",
							NULL,
							&leaf_tag_refresh_ms,
							10 * 1000, 100, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("leaf.alloc_conninfo",
							   "Sets the connection string of the database whose leaf_alloc serves segments.",
							   "Empty means the leaf_alloc of the caller's own database.",
							   &leaf_alloc_conninfo,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.alloc_timeout",
							"Sets how long an allocator worker waits for the allocation database in one load.",
							"Past it, the connection is closed, the load is retried and its segment, "
							"if it was committed after all, is never used.",
							&leaf_alloc_timeout_ms,
							10 * 1000, 100, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("leaf.alloc_failover",
							 "Sets what segment loads do once the allocation database is on a new timeline.",
							 "A new timeline means a promotion or a restore, which may have lost the last "
							 "allocations: \"confirm\" refuses loads until a superuser confirms, "
							 "\"synchronous\" goes on (the promoted server was a synchronous standby).",
							 &leaf_alloc_failover,
							 LEAF_FAILOVER_CONFIRM,
							 leaf_alloc_failover_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("leaf.allow_drop_with_counters",
							 "Allows DROP EXTENSION leaf while leaf_alloc or leaf_alloc_retired has rows.",
							 "Dropping the extension drops every counter of the database.",
							 &leaf_allow_drop_with_counters,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	leaf_snowflake_init();
	leaf_public_id_init();

	leaf_refuse_rejected(start_values);
	MarkGUCPrefixReserved("leaf");

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = leaf_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = leaf_shmem_startup;
	leaf_ddl_init();
	leaf_drop_guard_init();

	leaf_preloaded = true;
}

/*
 * The leaf.* settings given at server start (postgresql.conf,
 * postgresql.auto.conf, the command line), while they are still
 * placeholders.
 */
static List *
leaf_start_values(void)
{
	int			n;
	struct config_generic **vars = get_guc_variables(&n);
	List	   *result = NIL;
	int			i;

	for (i = 0; i < n; i++)
	{
		const char *value;
		LeafStartValue *sv;

		if ((vars[i]->flags & GUC_CUSTOM_PLACEHOLDER) == 0 ||
			strncmp(vars[i]->name, "leaf.", 5) != 0)
			continue;
		value = GetConfigOption(vars[i]->name, true, false);
		if (value == NULL)
			continue;
		sv = palloc(sizeof(LeafStartValue));
		sv->name = pstrdup(vars[i]->name);
		sv->value = pstrdup(value);
		result = lappend(result, sv);
	}
	return result;
}

/*
 * Refuse to start if a leaf setting given at server start was rejected.
 * Core only warns about an invalid value of an extension's setting and
 * goes on with the default, so a mistyped leaf.max_tags or
 * leaf.wait_timeout would go unnoticed until it mattered.  Each value is
 * checked again as postgresql.conf would set it (without setting it):
 * the WARNING says what is wrong with it, the FATAL stops the server.
 * (Without changeVal, set_config_option returns 0 for an invalid value
 * and -1 for a valid one.)
 */
static void
leaf_refuse_rejected(List *values)
{
	ListCell   *lc;

	foreach(lc, values)
	{
		LeafStartValue *sv = (LeafStartValue *) lfirst(lc);

		if (set_config_option(sv->name, sv->value, PGC_POSTMASTER, PGC_S_FILE,
							  GUC_ACTION_SET, false, WARNING, false) == 0)
			ereport(FATAL,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for parameter \"%s\": \"%s\"",
							sv->name, sv->value),
					 errdetail("leaf does not start with a setting it would ignore."),
					 errhint("Correct the value (see the WARNING above for the valid range) or remove the setting, then start the server again.")));
	}
}

static void
leaf_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();

	leaf_segment_shmem_request();
	leaf_alloc_slots_shmem_request();
	leaf_snowflake_shmem_request();
}

static void
leaf_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	leaf_segment_shmem_startup();
	leaf_alloc_slots_shmem_startup();
	leaf_snowflake_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}
