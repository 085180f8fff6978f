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

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "leaf.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* segment-mode settings */
int			leaf_max_tags = 1024;
int			leaf_max_databases = 8;
int			leaf_wait_timeout_ms = 5000;
int			leaf_preload_percent = 10;
int			leaf_segment_duration_ms = 15 * 60 * 1000;
int			leaf_tag_refresh_ms = 10 * 1000;
char	   *leaf_alloc_conninfo = NULL;
int			leaf_alloc_timeout_ms = 10 * 1000;

static bool leaf_preloaded = false;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void leaf_shmem_request(void);
static void leaf_shmem_startup(void);

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomIntVariable("leaf.max_tags",
							"Sets the number of biz_tags held in shared memory, over all databases.",
							NULL,
							&leaf_max_tags,
							1024, 16, 1000000,
							PGC_POSTMASTER,
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

	DefineCustomIntVariable("leaf.wait_timeout",
							"Sets how long a caller waits for a segment when both buffers are empty.",
							NULL,
							&leaf_wait_timeout_ms,
							5000, 1, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
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

	leaf_snowflake_init();
	leaf_public_id_init();

	MarkGUCPrefixReserved("leaf");

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = leaf_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = leaf_shmem_startup;
	leaf_utility_init();

	leaf_preloaded = true;
}

static void
leaf_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();

	leaf_segment_shmem_request();
	leaf_snowflake_shmem_request();
}

static void
leaf_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	leaf_segment_shmem_startup();
	leaf_snowflake_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Raise an error unless leaf was loaded at server start.
 */
void
leaf_require_preload(void)
{
	if (!leaf_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("leaf must be loaded via \"shared_preload_libraries\""),
				 errhint("Add leaf to the \"shared_preload_libraries\" setting and restart the server.")));
}
