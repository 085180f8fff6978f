/*-------------------------------------------------------------------------
 *
 * leaf_warm_start.h
 *	  The warm start of segment mode (leaf_warm_start.c), for the allocator
 *	  worker: the first segments of the tags the file lists for its
 *	  database.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_WARM_START_H
#define LEAF_WARM_START_H

extern bool leaf_warm_start_database(Oid dboid, const char *dbname);

#endif							/* LEAF_WARM_START_H */
