/*-------------------------------------------------------------------------
 *
 * leaf.c
 *	  Module load: each part's settings, the check of the values given at
 *	  server start, and the shared memory hooks.
 *
 * leaf must be loaded with shared_preload_libraries: its segments and its
 * snowflake state live in shared memory, and its workers are started by
 * the postmaster.  Loaded any other way, the module defines nothing and
 * every function raises an error that says so.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "nodes/pg_list.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"

#include "leaf.h"
#include "common/leaf_common.h"
#include "common/leaf_compat.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

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

	/*
	 * Each part defines the settings it reads (CONTRIBUTING.md, "Style").
	 * No check or assign hook reads another setting, so the order of the
	 * calls does not matter.  All of them come before the values given at
	 * server start are checked, and before the prefix is reserved, which
	 * would throw away the value given for a setting defined later.
	 */
	leaf_common_init_settings();
	leaf_segment_init_settings();
	leaf_alloc_slots_init_settings();
	leaf_alloc_init_settings();
	leaf_alloc_worker_init_settings();
	leaf_alloc_remote_init_settings();
	leaf_alloc_source_init_settings();
	leaf_warm_start_init_settings();
	leaf_drop_guard_init_settings();
	leaf_sf_worker_init_settings();
	leaf_zk_client_init_settings();
#ifdef LEAF_TEST_HOOKS
	leaf_zk_assign_init_test_settings();
#endif
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
	leaf_warm_start_register();

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
