/*-------------------------------------------------------------------------
 *
 * leaf_alloc_replica.h
 *	  Segment mode in a logical replica (leaf_alloc_replica.c): the check
 *	  before a local load, which carries the error of its refusal, and
 *	  the backends' own refusal.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ALLOC_REPLICA_H
#define LEAF_ALLOC_REPLICA_H

#include "segment/leaf_alloc.h"

extern bool leaf_replica_check(Oid nsp, Oid extoid, const char *tag,
							   LeafLoadResult *res);
extern void leaf_replica_refuse(Oid nsp, const char *tag);

#endif							/* LEAF_ALLOC_REPLICA_H */
