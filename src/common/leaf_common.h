/*-------------------------------------------------------------------------
 *
 * leaf_common.h
 *	  What every part of leaf shares: the few settings and limits that more
 *	  than one mode reads, and the check that leaf was loaded at server
 *	  start (leaf_common.c).
 *
 * It depends on no part of leaf, and no part depends on module load
 * (leaf.c, whose entry points are in leaf.h) through it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_COMMON_H
#define LEAF_COMMON_H

/*
 * Most IDs leaf_segment_nextvals and leaf_snowflake_nextvals return in one
 * call.
 */
#define LEAF_MAX_NEXTVALS		1000000

/*
 * Settings read by more than one mode, defined in leaf_common.c, which
 * depends on no mode: leaf.wait_timeout bounds the wait of segment and
 * snowflake callers alike; leaf.node_address names the node to
 * ZooKeeper, and to the allocation database in fleet mode.
 */
extern int	leaf_wait_timeout_ms;
extern char *leaf_sf_node_address;

/*
 * Set by module load (leaf.c) when leaf is loaded at server start.  The
 * SQL functions check it with leaf_require_preload().  It is defined in
 * leaf_common.c and checked by an inline function so that no file
 * depends on module load.
 */
extern PGDLLIMPORT bool leaf_preloaded;

/* Raise an error unless leaf was loaded at server start. */
static inline void
leaf_require_preload(void)
{
	if (!leaf_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("leaf must be loaded via \"shared_preload_libraries\""),
				 errhint("Add leaf to the \"shared_preload_libraries\" setting and restart the server.")));
}

#endif							/* LEAF_COMMON_H */
