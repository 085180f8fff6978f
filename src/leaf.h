/*-------------------------------------------------------------------------
 *
 * leaf.h
 *	  The entry points that module load (leaf.c) calls in each part: the
 *	  settings' init functions and the shared memory hooks.  What every
 *	  part shares (the settings and limits that more than one mode reads,
 *	  the check that leaf was preloaded) is in common/leaf_common.h.
 *
 * leaf has two generators:
 *	- segment mode (leaf_segment.c and the allocator, leaf_alloc*.c): IDs
 *	  from double-buffered segments in shared memory, refilled from the
 *	  leaf_alloc table by a per-database background worker; after a
 *	  restart the first segments of the tags in use before are loaded
 *	  before their first call (leaf_warm_start.c);
 *	- snowflake mode (leaf_snowflake.c; its worker in leaf_sf_worker.c,
 *	  with the state file in leaf_sf_state.c and the sources of worker IDs
 *	  in leaf_sf_source_*.c over leaf_sf_ordinal.c, leaf_zk_assign.c,
 *	  leaf_zk_client.c and leaf_sf_db.c): IDs of a timestamp, a worker ID
 *	  and a sequence number (1+41+10+12 bits in the default layout, others
 *	  set by leaf.snowflake_layout, see leaf_sf_layout.h) from a lock-free
 *	  generator in shared memory, with the worker ID set by hand, taken
 *	  from a pod ordinal, from ZooKeeper or as a lease in the allocation
 *	  database.
 * Public IDs (leaf_public_id.c) are a keyed permutation of IDs, to show
 * to users instead of the IDs themselves.
 *
 * Each setting is defined and registered by the part that reads it; a
 * variable is declared in a header only when another file reads it.  Each
 * mode has headers of its own: leaf_segment.h, leaf_alloc.h,
 * leaf_snowflake.h; the SQLSTATEs are in leaf_errcodes.h, and what every
 * part shares in leaf_common.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_H
#define LEAF_H

/* leaf_common.c */
extern void leaf_common_init_settings(void);

/* segment mode: leaf_segment.c, leaf_alloc_slots.c */
extern void leaf_segment_init_settings(void);
extern void leaf_segment_shmem_request(void);
extern void leaf_segment_shmem_startup(void);
extern void leaf_alloc_slots_init_settings(void);
extern void leaf_alloc_slots_shmem_request(void);
extern void leaf_alloc_slots_shmem_startup(void);

/* the allocator: leaf_alloc.c, leaf_alloc_worker.c, leaf_alloc_source.c */
extern void leaf_alloc_init_settings(void);
extern void leaf_alloc_worker_init_settings(void);
extern void leaf_alloc_source_init_settings(void);

/* the warm start of segment mode: leaf_warm_start.c */
extern void leaf_warm_start_init_settings(void);
extern void leaf_warm_start_register(void);

/* fleet mode: leaf_alloc_remote.c */
extern void leaf_alloc_remote_init_settings(void);

/* leaf_ddl.c, leaf_drop_guard.c */
extern void leaf_ddl_init(void);
extern void leaf_drop_guard_init_settings(void);
extern void leaf_drop_guard_init(void);

/* leaf_public_id.c */
extern void leaf_public_id_init(void);

/* leaf_snowflake.c */
extern void leaf_snowflake_init(void);
extern void leaf_snowflake_shmem_request(void);
extern void leaf_snowflake_shmem_startup(void);

/* the snowflake worker: leaf_sf_worker.c, leaf_zk_client.c, leaf_zk_assign.c */
extern void leaf_sf_worker_init_settings(void);
extern void leaf_zk_client_init_settings(void);
#ifdef LEAF_TEST_HOOKS
extern void leaf_zk_assign_init_test_settings(void);
#endif

#endif							/* LEAF_H */
