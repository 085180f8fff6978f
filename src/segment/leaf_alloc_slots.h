/*-------------------------------------------------------------------------
 *
 * leaf_alloc_slots.h
 *	  The registry of allocator workers, one slot per database served
 *	  (leaf_alloc_slots.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ALLOC_SLOTS_H
#define LEAF_ALLOC_SLOTS_H

/* the shared memory (its hooks are in leaf.h) */
extern bool leaf_alloc_slots_ready(void);
extern int	leaf_alloc_slots_max(void);

/* backends: the worker of a database */
extern void leaf_wake_worker(Oid dboid);
extern void leaf_wake_running_worker(Oid dboid);
extern Oid	leaf_alloc_share_owner(Oid dboid);
extern void leaf_stop_alloc_worker(Oid dboid, const char *command);
extern void leaf_alloc_slot_source(Oid dboid, char *buf, size_t len);

/* the warm start's leader: where is a database's allocator with it? */
typedef enum LeafWarmState
{
	LEAF_WARM_NONE,				/* no allocator (or a launch lost) */
	LEAF_WARM_WARMING,			/* starting, or asking for the file's tags */
	LEAF_WARM_DONE				/* done with them, and running */
} LeafWarmState;

extern LeafWarmState leaf_alloc_slot_warm_state(Oid dboid);

/* the allocator worker: its own slot */
extern bool leaf_alloc_slot_attach(Oid dboid);
extern bool leaf_alloc_slot_claim_owner(void);
extern bool leaf_alloc_slot_stop_requested(void);
extern void leaf_alloc_slot_stop_command(char *buf, size_t len);
extern void leaf_alloc_slot_report_source(const char *source);
extern bool leaf_alloc_slot_give_up(bool (*busy) (void));
extern void leaf_alloc_slot_warmed(void);

#endif							/* LEAF_ALLOC_SLOTS_H */
