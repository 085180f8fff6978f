/*-------------------------------------------------------------------------
 *
 * leaf_segment_shmem.h
 *	  The shared memory of segment mode, private to its files: the tag
 *	  slots, whose segments callers take IDs from (leaf_segment.c, which
 *	  owns them) and the allocator fills (leaf_alloc_worker.c), through
 *	  the functions at the end of this file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_SEGMENT_SHMEM_H
#define LEAF_SEGMENT_SHMEM_H

#include "segment/leaf_alloc.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

/* Where a segment buffer stands. */
typedef struct LeafSegment
{
	int64		start;			/* first ID of the segment */
	int64		next;			/* next ID to hand out */
	int64		max;			/* one past the last ID */
	int64		preload_at;		/* request the other buffer from this ID on */
} LeafSegment;

/*
 * How long a tag's refills took (leaf_refill_time.c), kept in its slot
 * under the slot's mutex.  A refill runs from the moment a caller asked
 * for it (asked_at) to the moment its segment was published; its parts
 * are the wait for the allocator to pick it up (queue: the worker waking
 * up, the loads of other tags ahead of it, failed attempts and their
 * pauses), the work of the load (work: its statements, the round trip and
 * the row lock of a fleet's allocation database), and the commit of a
 * local load (commit: its WAL flush and the synchronous standbys; -1 in
 * a fleet, whose commit is part of its statement).  tail_ms is what
 * the preload trigger plans for: the longest refill, halving every
 * LEAF_REFILL_TAIL_HALF_LIFE_MS.  Times in ms.
 */
#define LEAF_REFILL_BUCKETS		12
#define LEAF_REFILL_COLUMNS		12

typedef struct LeafRefillTimes
{
	TimestampTz asked_at;		/* the refill under way was asked for then,
								 * or 0 */
	double		last_ms;		/* the last refill, and its parts */
	double		last_queue_ms;
	double		last_work_ms;
	double		last_commit_ms;
	double		max_ms;			/* the longest since the slot was taken, and
								 * its parts */
	double		max_queue_ms;
	double		max_work_ms;
	double		max_commit_ms;
	TimestampTz max_at;			/* when that one ended */
	double		tail_ms;		/* the decaying longest, as of tail_at */
	TimestampTz tail_at;
	int64		buckets[LEAF_REFILL_BUCKETS];	/* refills by time (bounds in
												 * leaf_refill_time.c) */
} LeafRefillTimes;

/*
 * One biz_tag of one database.  Slots live in a fixed array, so that a
 * backend may keep a pointer to one across calls and check that it still
 * names the same tag: a freed slot keeps its spinlock, and "generation"
 * changes each time it is reused.
 *
 * Fields marked (key) are set when the slot is taken, under the exclusive
 * LeafSegShared->lock, and do not change while generation stays the same.
 * generation is written only holding both the exclusive lock and the
 * slot's mutex, so it may be read holding either.  Everything else is
 * protected by the slot's mutex, but cv, which needs no lock.
 *
 * Callers that found both buffers empty sleep on the slot's cv.  It is
 * broadcast when a load of the slot ends, whatever its outcome
 * (leaf_publish_load), and when the slot is freed (leaf_free_slot), so
 * that callers of the old tag look it up again; a waiter is not woken
 * by the loads of other tags.  A freed slot keeps its cv: a caller still
 * asleep on it when it is reused wakes with the new tag's loads, sees
 * the generation change and looks its tag up again.
 */
typedef struct LeafTagSlot
{
	slock_t		mutex;			/* protects everything below but (key) and
								 * cv */
	ConditionVariable cv;		/* no lock: callers waiting for a load of
								 * the slot, or for it to be freed */
	uint64		generation;		/* lock and mutex: 0 when free; unique per
								 * use of the slot */

	Oid			dboid;			/* (key) database of the tag */
	Oid			extoid;			/* (key) leaf extension in that database */
	char		tag[LEAF_TAG_MAXLEN + 1];	/* (key) the biz_tag */
	Oid			owner;			/* (key) the database's owner, whose share
								 * the slot counts in (leaf_tag_share.c);
								 * InvalidOid for a superuser */

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
	int64		ids_at_load;	/* ids_issued when the last segment was
								 * loaded */
	LeafRefillTimes refill;		/* how long its refills took */

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
	char		source[LEAF_SOURCE_LEN];	/* the source of the last load, as
											 * its worker described it */
	TimestampTz hold_until;		/* after a refusal of the database as a
								 * whole, until when a caller that was told
								 * it already is told it again at once, and
								 * starts no allocator (leaf_wake_for) */

	/* the last load failure, for callers waiting on it */
	uint64		loads_collected;	/* loads the worker has picked up */
	uint64		fail_load;		/* loads_collected of the load that failed
								 * last: a caller counts only the failures
								 * of loads picked up after it came */
	uint64		fail_count;		/* bumped on each failed load */
	bool		fail_current;	/* the last load failed (none worked since) */
	bool		fail_final;		/* retrying cannot mend it: fail callers */
	int			fail_sqlstate;	/* its SQLSTATE */
	char		fail_msg[LEAF_ERRMSG_LEN];	/* its message */
	LeafRefusal fail_refusal;	/* if final, the error callers get, as the
								 * refusal composed it (empty message: a
								 * failure of no refusal) */
} LeafTagSlot;

/*
 * The databases whose loads were refused lately (a copy, a replica...),
 * with when: such a database takes only free or refused slots, never the
 * slot of another database above its share (leaf_tag_share.c), since it
 * could not serve from it.  A load that works takes a database out.
 */
#define LEAF_REFUSED_DBS		64
#define LEAF_REFUSED_DB_MS		(10 * 1000)

typedef struct LeafRefusedDb
{
	Oid			dboid;			/* InvalidOid: a free entry */
	TimestampTz refused_at;		/* the last refusal of a load there */
} LeafRefusedDb;

typedef struct LeafSegShared
{
	LWLock	   *lock;			/* protects the tag hash, taking/freeing tag
								 * slots */
	slock_t		mutex;			/* protects next_generation and refused */
	uint64		next_generation;	/* source of LeafTagSlot.generation */
	LeafRefusedDb refused[LEAF_REFUSED_DBS];	/* mutex */
	pg_atomic_uint32 nslots_used;	/* atomic: slots[] beyond this index have
									 * never been used; only grows, under
									 * the exclusive lock */
	LeafTagSlot *slots;			/* leaf_max_tags entries */
} LeafSegShared;

/*
 * Was a slot's last load refused for the database as a whole (a copy, a
 * replica, a fence: a LeafRefusal, not an unknown tag)?  And is its tag
 * refused: that, no load is asked for and it has no ID left?  Such a slot holds nothing:
 * it counts in no share, is taken over first, and the allocator of its
 * database does not stay for it.  Caller holds the slot's mutex.
 */
static inline bool
leaf_slot_refusal_current(const LeafTagSlot *slot)
{
	return slot->fail_current && slot->fail_final &&
		slot->fail_refusal.message[0] != '\0';
}

static inline bool
leaf_slot_refused(const LeafTagSlot *slot)
{
	return leaf_slot_refusal_current(slot) && !slot->loading &&
		!slot->next_ready && slot->seg[slot->cur].next >= slot->seg[slot->cur].max;
}

/* leaf_segment.c: the pool of slots, for leaf_tag_share.c */
extern LeafSegShared *leaf_seg;
extern int leaf_max_tags;
extern int	leaf_tag_slots_in_use(void);
extern bool leaf_database_refused(Oid dboid);

/* leaf_tag_share.c: who may take a slot */
extern void leaf_tag_share_init_settings(void);
extern int	leaf_tag_share_guaranteed(void);
extern int	leaf_tag_share_pick(Oid dboid, Oid owner, uint64 *evict);

/*
 * leaf_segment.c, for the allocator worker of database dboid: the loads
 * its callers wait for, publishing their outcome, freeing slots.
 */
extern bool leaf_loads_wanted(Oid dboid);
extern bool leaf_loads_refused(Oid dboid);
extern int	leaf_collect_loads(Oid dboid, TimestampTz now, LeafLoadJob *jobs,
							   int maxjobs, long *next_retry);
extern void leaf_publish_load(const LeafLoadJob *job, const LeafLoadResult *res,
							  const char *source, int preload_percent,
							  int preload_floor_ms, int retry_ms);
extern void leaf_free_slot(int slotno, uint64 generation);

/*
 * leaf_refill_time.c: the time refills take, for leaf_segment.c (each
 * called holding the slot's mutex, but leaf_refill_row, on a copy).
 */
extern void leaf_refill_asked(LeafRefillTimes *rt, TimestampTz now);
extern void leaf_refill_record(LeafRefillTimes *rt, const LeafLoadJob *job,
							   const LeafLoadResult *res, TimestampTz now);
extern int64 leaf_refill_lead(const LeafRefillTimes *rt, TimestampTz now,
							  double rate, int floor_ms);
extern int	leaf_refill_row(const LeafRefillTimes *rt, TimestampTz now,
							Datum *values, bool *nulls);
extern void leaf_free_stale_slots(Oid dboid, HTAB *tags);

/*
 * leaf_segment.c, for the warm start (leaf_warm_start.c, in the leader
 * and in the allocator): the tags that have a slot, and the first call of
 * a tag in the current database.
 */
typedef struct LeafTagInUse
{
	Oid			dboid;
	char		tag[LEAF_TAG_MAXLEN + 1];
	uint64		generation;		/* of the slot */
	int64		ids_issued;		/* IDs handed out since it was taken */
} LeafTagInUse;

extern LeafTagInUse *leaf_segment_tags_in_use(int *ntags);
extern bool leaf_segment_warm(const char *tag);

#endif							/* LEAF_SEGMENT_SHMEM_H */
