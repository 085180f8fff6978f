/*-------------------------------------------------------------------------
 *
 * leaf_segment.h
 *	  Segment mode for the rest of the module: its settings and those of
 *	  fleet mode (segments drawn from another server), defined in leaf.c;
 *	  what leaf_segment.c offers outside segment mode's own files.
 *
 * leaf.wait_timeout, which snowflake mode reads as well, is in leaf.h;
 * the shared memory of segment mode in leaf_segment_shmem.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_SEGMENT_H
#define LEAF_SEGMENT_H

/* segment mode */
extern int	leaf_max_tags;
extern int	leaf_max_databases;
extern int	leaf_max_tags_per_database;
extern int	leaf_alloc_idle_timeout_ms;
extern int	leaf_preload_percent;
extern int	leaf_segment_duration_ms;
extern int	leaf_tag_refresh_ms;
extern bool leaf_allow_drop_with_counters;

/* fleet mode */
extern char *leaf_alloc_conninfo;
extern int	leaf_alloc_timeout_ms;
extern int	leaf_alloc_failover;

/* leaf.alloc_failover: what a load on a new timeline of the allocation database does */
typedef enum LeafAllocFailover
{
	LEAF_FAILOVER_CONFIRM,		/* refused (LF007) until a superuser confirms */
	LEAF_FAILOVER_SYNCHRONOUS	/* recorded, and loads go on */
} LeafAllocFailover;

/* leaf_segment.c: free the tag slots of a (dropped) database */
extern void leaf_free_slots(Oid dboid, Oid keep_extoid);
extern void leaf_discard_database_segments(Oid dboid);

#endif							/* LEAF_SEGMENT_H */
