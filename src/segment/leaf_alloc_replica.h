/*-------------------------------------------------------------------------
 *
 * leaf_alloc_replica.h
 *	  Segment mode in a logical replica (leaf_alloc_replica.c): the check
 *	  before a local load, the error of a refused one, and what the
 *	  cut-over (leaf_alloc_cutover.c) asks before it takes over.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ALLOC_REPLICA_H
#define LEAF_ALLOC_REPLICA_H

#include "segment/leaf_alloc.h"

extern bool leaf_replica_check(Oid nsp, Oid extoid, LeafLoadResult *res);
extern void leaf_replica_refuse(Oid nsp, const char *tag);
pg_noreturn extern void leaf_report_replicated(const char *tag, const char *detail);

#endif							/* LEAF_ALLOC_REPLICA_H */
