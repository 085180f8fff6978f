/*-------------------------------------------------------------------------
 *
 * leaf_segment.h
 *	  What leaf_segment.c offers outside segment mode's own files.
 *
 * The settings of segment mode are defined by the files that read them;
 * leaf.wait_timeout, which snowflake mode reads as well, is in
 * common/leaf_common.h; the shared memory of segment mode in
 * leaf_segment_shmem.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_SEGMENT_H
#define LEAF_SEGMENT_H

/* leaf_segment.c: free the tag slots of a (dropped) database */
extern void leaf_free_slots(Oid dboid, Oid keep_extoid);
extern void leaf_discard_database_segments(Oid dboid);

#endif							/* LEAF_SEGMENT_H */
