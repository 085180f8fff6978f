/*-------------------------------------------------------------------------
 *
 * leaf_errcodes.h
 *	  The SQLSTATEs of leaf's own conditions, in class LF ("leaf").
 *
 * Generic conditions use the core codes.  docs/errors.md lists every code
 * of this file, and the fault-injection run's checker reads it there: a
 * new code goes into both.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ERRCODES_H
#define LEAF_ERRCODES_H

/* segment mode */
#define ERRCODE_LEAF_UNKNOWN_TAG		MAKE_SQLSTATE('L','F','0','0','1')
#define ERRCODE_LEAF_INVALID_TAG		MAKE_SQLSTATE('L','F','0','0','2')
#define ERRCODE_LEAF_ALLOC_TIMEOUT		MAKE_SQLSTATE('L','F','0','0','3')
#define ERRCODE_LEAF_ALLOC_FAILED		MAKE_SQLSTATE('L','F','0','0','4')
#define ERRCODE_LEAF_MAX_ID_BACKWARDS	MAKE_SQLSTATE('L','F','0','0','5')
#define ERRCODE_LEAF_ALLOC_SOURCE_CHANGED MAKE_SQLSTATE('L','F','0','0','6')
#define ERRCODE_LEAF_ALLOC_PROMOTED		MAKE_SQLSTATE('L','F','0','0','7')

/* public IDs */
#define ERRCODE_LEAF_PUBLIC_ID_NO_KEY	MAKE_SQLSTATE('L','F','0','0','8')
#define ERRCODE_LEAF_PUBLIC_ID_KEY_INVALID MAKE_SQLSTATE('L','F','0','0','9')

/* segment mode: the tables of counters and their shape */
#define ERRCODE_LEAF_DROP_WITH_COUNTERS	MAKE_SQLSTATE('L','F','0','1','0')
#define ERRCODE_LEAF_ALLOC_SHAPE		MAKE_SQLSTATE('L','F','0','1','1')
/* segment mode: leaf_alloc written by logical replication (1.4) */
#define ERRCODE_LEAF_ALLOC_REPLICATED	MAKE_SQLSTATE('L','F','0','1','2')
/* segment mode: leaf_segment_create() of a tag that exists (1.5) */
#define ERRCODE_LEAF_DUPLICATE_TAG		MAKE_SQLSTATE('L','F','0','1','3')

/* snowflake mode */
#define ERRCODE_LEAF_CLOCK_BACKWARDS	MAKE_SQLSTATE('L','F','1','0','1')
#define ERRCODE_LEAF_SNOWFLAKE_NOT_READY MAKE_SQLSTATE('L','F','1','0','2')
#define ERRCODE_LEAF_TIMESTAMP_OVERFLOW	MAKE_SQLSTATE('L','F','1','0','3')

#endif							/* LEAF_ERRCODES_H */
