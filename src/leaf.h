/*-------------------------------------------------------------------------
 *
 * leaf.h
 *	  Declarations shared by the files of the leaf extension.
 *
 * leaf has two generators:
 *	- segment mode (leaf_segment.c, leaf_alloc_worker.c): IDs from
 *	  double-buffered segments in shared memory, refilled from the
 *	  leaf_alloc table by a per-database background worker;
 *	- snowflake mode (leaf_snowflake.c; its worker in leaf_sf_worker.c,
 *	  leaf_sf_state.c, leaf_zk_client.c and leaf_zk_assign.c): 1+41+10+12
 *	  bit IDs from a lock-free generator in shared memory, with the worker
 *	  ID set by hand or taken from ZooKeeper.
 * Public IDs (leaf_public_id.c) are a keyed permutation of IDs, to show
 * to users instead of the IDs themselves.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_H
#define LEAF_H

#include "postgres.h"

#include "fmgr.h"
#include "leaf_compat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

/* Longest biz_tag, in bytes, as in leaf_alloc.biz_tag varchar(128). */
#define LEAF_TAG_MAXLEN			128

/* Leaf's cap on the dynamic step. */
#define LEAF_MAX_DYNAMIC_STEP	1000000

/* Most IDs leaf_segment_nextvals returns in one call. */
#define LEAF_MAX_NEXTVALS		1000000

/*
 * Fleet mode: most slots one database may hold for biz_tags that have not
 * been loaded yet (unknown tags included).
 */
#define LEAF_UNVERIFIED_PER_DB	Max(4, leaf_max_tags / 8)

/* Length of the error text a worker keeps for waiting callers. */
#define LEAF_ERRMSG_LEN			256

/* Length of the host:port of the server a segment came from. */
#define LEAF_SERVER_LEN			64

/*
 * SQLSTATEs of our own, in class LF ("leaf").  Generic conditions use
 * the core codes (see README).
 */
#define ERRCODE_LEAF_UNKNOWN_TAG		MAKE_SQLSTATE('L','F','0','0','1')
#define ERRCODE_LEAF_INVALID_TAG		MAKE_SQLSTATE('L','F','0','0','2')
#define ERRCODE_LEAF_ALLOC_TIMEOUT		MAKE_SQLSTATE('L','F','0','0','3')
#define ERRCODE_LEAF_ALLOC_FAILED		MAKE_SQLSTATE('L','F','0','0','4')
#define ERRCODE_LEAF_MAX_ID_BACKWARDS	MAKE_SQLSTATE('L','F','0','0','5')
#define ERRCODE_LEAF_ALLOC_SOURCE_CHANGED MAKE_SQLSTATE('L','F','0','0','6')
#define ERRCODE_LEAF_ALLOC_PROMOTED		MAKE_SQLSTATE('L','F','0','0','7')
#define ERRCODE_LEAF_PUBLIC_ID_NO_KEY	MAKE_SQLSTATE('L','F','0','0','8')
#define ERRCODE_LEAF_PUBLIC_ID_KEY_INVALID MAKE_SQLSTATE('L','F','0','0','9')
#define ERRCODE_LEAF_DROP_WITH_COUNTERS	MAKE_SQLSTATE('L','F','0','1','0')
#define ERRCODE_LEAF_ALLOC_SHAPE		MAKE_SQLSTATE('L','F','0','1','1')
#define ERRCODE_LEAF_CLOCK_BACKWARDS	MAKE_SQLSTATE('L','F','1','0','1')
#define ERRCODE_LEAF_SNOWFLAKE_NOT_READY MAKE_SQLSTATE('L','F','1','0','2')
#define ERRCODE_LEAF_TIMESTAMP_OVERFLOW	MAKE_SQLSTATE('L','F','1','0','3')

/* ---------- leaf.c: settings shared by several files ---------- */

extern int	leaf_max_tags;
extern int	leaf_max_databases;
extern int	leaf_wait_timeout_ms;
extern int	leaf_alloc_idle_timeout_ms;
extern int	leaf_preload_percent;
extern int	leaf_segment_duration_ms;
extern int	leaf_tag_refresh_ms;
extern char *leaf_alloc_conninfo;
extern int	leaf_alloc_timeout_ms;
extern int	leaf_alloc_failover;

/* leaf.alloc_failover: what a load on a new timeline of the allocation database does */
typedef enum LeafAllocFailover
{
	LEAF_FAILOVER_CONFIRM,		/* refused (LF007) until a superuser confirms */
	LEAF_FAILOVER_SYNCHRONOUS	/* recorded, and loads go on */
} LeafAllocFailover;
extern bool leaf_allow_drop_with_counters;

extern void leaf_require_preload(void);

/* ---------- leaf_segment.c ---------- */

/* Where a segment buffer stands. */
typedef struct LeafSegment
{
	int64		start;			/* first ID of the segment */
	int64		next;			/* next ID to hand out */
	int64		max;			/* one past the last ID */
	int64		preload_at;		/* request the other buffer from this ID on */
} LeafSegment;

/*
 * One biz_tag of one database.  Slots live in a fixed array, so that a
 * backend may keep a pointer to one across calls and check that it still
 * names the same tag: a freed slot keeps its spinlock, and "generation"
 * changes each time it is reused.
 *
 * Fields marked (key) are set when the slot is taken, under the exclusive
 * LeafSegShared->lock, and do not change while generation stays the same.
 * Everything else is protected by the slot's mutex.
 */
typedef struct LeafTagSlot
{
	slock_t		mutex;			/* protects everything below but (key) */
	uint64		generation;		/* 0 when free; unique per use of the slot */

	Oid			dboid;			/* (key) database of the tag */
	Oid			extoid;			/* (key) leaf extension in that database */
	char		tag[LEAF_TAG_MAXLEN + 1];	/* (key) the biz_tag */

	LeafSegment seg[2];			/* the double buffer */
	int			cur;			/* index of the buffer in use */
	bool		next_ready;		/* seg[1 - cur] holds a loaded segment */
	bool		loading;		/* a load of seg[1 - cur] was requested */
	int64		want;			/* size asked for by a bulk caller, or 0 */
	TimestampTz retry_at;		/* after a failed load, not before this */

	int64		step;			/* step of the last load (dynamic) */
	int32		min_step;		/* leaf_alloc.step seen at the last load */
	int64		db_max_id;		/* leaf_alloc.max_id after the last load */
	TimestampTz last_load;		/* when the last segment was loaded, or 0 */
	int			nloads;			/* loads since the slot was taken */

	/* statistics for leaf_segments */
	int64		ids_issued;		/* IDs handed out since the slot was taken */
	int64		refills;		/* segments loaded */
	int64		waits;			/* callers that found both buffers empty */
	int64		max_wait_us;	/* longest such wait */
	TimestampTz last_success;	/* last load that worked */
	TimestampTz last_failure;	/* last load that failed */
	uint32		refill_timeline;	/* allocation database's timeline at the
									 * last load, or 0 */
	char		refill_server[LEAF_SERVER_LEN]; /* host:port or "local" */

	/* the last load failure, for callers waiting on it */
	uint64		fail_count;		/* bumped on each failed load */
	bool		fail_current;	/* the last load failed (none worked since) */
	bool		fail_final;		/* retrying cannot mend it: fail callers */
	int			fail_sqlstate;	/* its SQLSTATE */
	char		fail_msg[LEAF_ERRMSG_LEN];	/* its message */
} LeafTagSlot;

/* Length of the description of where segments come from. */
#define LEAF_SOURCE_LEN			128

/*
 * One allocator worker, serving one database.  dboid is protected by
 * LeafSegShared->lock; the other fields by LeafSegShared->mutex.
 */
typedef struct LeafWorkerSlot
{
	Oid			dboid;			/* database served, InvalidOid if free */
	pid_t		pid;			/* 0 while starting */
	Latch	   *latch;			/* worker's latch, NULL while starting */
	TimestampTz started;		/* when the slot was claimed */
	bool		stop_requested; /* a database command asked it to exit */
	char		source[LEAF_SOURCE_LEN];	/* where segments come from */
} LeafWorkerSlot;

typedef struct LeafSegShared
{
	LWLock	   *lock;			/* protects the tag hash, taking/freeing tag
								 * slots and the worker slots' dboid */
	slock_t		mutex;			/* protects the worker slots' pid and latch,
								 * and next_generation */
	uint64		next_generation;	/* source of LeafTagSlot.generation */
	pg_atomic_uint32 nslots_used;	/* atomic: slots[] beyond this index have
									 * never been used; only grows, under
									 * the exclusive lock */
	ConditionVariable cv;		/* broadcast whenever a load ends */
	LeafWorkerSlot *workers;	/* leaf_max_databases entries */
	LeafTagSlot *slots;			/* leaf_max_tags entries */
} LeafSegShared;

extern LeafSegShared *leaf_seg;

extern void leaf_segment_shmem_request(void);
extern void leaf_segment_shmem_startup(void);
extern Oid	leaf_extension_namespace(Oid *extoid);
extern LeafWorkerSlot *leaf_worker_slot_for(Oid dboid);
extern void leaf_wake_worker(Oid dboid);
extern void leaf_free_slot(int slotno, uint64 generation);
extern void leaf_free_database_slots(Oid dboid);
extern int	leaf_slots_in_use(void);

/* ---------- leaf_alloc_worker.c ---------- */

/* A load to do, copied out of its slot. */
typedef struct LeafLoadJob
{
	int			slotno;
	uint64		generation;
	Oid			extoid;
	char		tag[LEAF_TAG_MAXLEN + 1];
	int64		want;
	int64		step;
	int32		min_step;
	int64		db_max_id;
	TimestampTz last_load;
	int			nloads;
} LeafLoadJob;

typedef enum LeafLoadStatus
{
	LEAF_LOAD_OK,
	LEAF_LOAD_FAILED,			/* see sqlstate/msg; retry later */
	LEAF_LOAD_FINAL,			/* see sqlstate/msg; callers fail at once */
	LEAF_LOAD_TAG_GONE,			/* tag deleted: free the slot */
	LEAF_LOAD_EXT_GONE			/* extension dropped or re-created */
} LeafLoadStatus;

typedef struct LeafLoadResult
{
	LeafLoadStatus status;
	int64		start;			/* first ID of the new segment */
	int64		size;			/* its number of IDs */
	int64		step;			/* dynamic step to remember */
	int32		min_step;		/* leaf_alloc.step */
	int64		db_max_id;		/* leaf_alloc.max_id after the update */
	uint32		timeline;		/* allocation database's timeline */
	char		server[LEAF_SERVER_LEN];	/* host:port, or "local" */
	int			sqlstate;
	char		msg[LEAF_ERRMSG_LEN];
} LeafLoadResult;

extern bool leaf_plan_segment(const LeafLoadJob *job, int64 max_id,
							  int32 row_step, LeafLoadResult *res);

extern bool leaf_in_transaction(void (*fn) (void *arg), void *arg,
								const char *activity, int *sqlstate,
								char *errbuf, size_t errlen);
pg_noreturn extern PGDLLEXPORT void leaf_alloc_worker_main(Datum main_arg);
extern bool leaf_alloc_worker_stopping(void);
extern void leaf_launch_alloc_worker(Oid dboid);

/* ---------- leaf_alloc_remote.c: segments from another server ---------- */

extern bool leaf_remote_enabled(void);
extern void leaf_remote_load(const LeafLoadJob *job, LeafLoadResult *res);
extern bool leaf_remote_tags(HTAB *tags, char *errbuf, size_t errlen);
extern void leaf_remote_disconnect(void);
extern void leaf_remote_source(char *buf, size_t len);
extern bool leaf_local_source_check(const LeafLoadJob *job, LeafLoadResult *res);
pg_noreturn extern void leaf_report_source_changed(const char *tag, const char *detail);
pg_noreturn extern void leaf_report_promoted(const char *tag, const char *msg);

/* ---------- leaf_alloc_shape.c ---------- */

extern bool leaf_alloc_column_ok(const char *name, bool found, Oid typid,
								 bool notnull, char *errbuf, size_t errlen);
extern const char *leaf_alloc_column_values(void);
extern bool leaf_alloc_persistence_ok(char relpersistence, char *errbuf,
									  size_t errlen);
extern bool leaf_alloc_shape_ok(Oid nsp, char *errbuf, size_t errlen);

/* ---------- leaf_drop_guard.c ---------- */

extern void leaf_drop_guard_init(void);

/* ---------- leaf_utility.c ---------- */

extern void leaf_utility_init(void);

/* ---------- leaf_public_id.c ---------- */

extern void leaf_public_id_init(void);

/* ---------- leaf_snowflake.c ---------- */

extern void leaf_snowflake_init(void);
extern void leaf_snowflake_shmem_request(void);
extern void leaf_snowflake_shmem_startup(void);

#endif							/* LEAF_H */
