/*-------------------------------------------------------------------------
 *
 * leaf_alloc_source.h
 *	  The check of which allocation database segments come from
 *	  (leaf_alloc_source.c), for the two sources.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ALLOC_SOURCE_H
#define LEAF_ALLOC_SOURCE_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "segment/leaf_alloc.h"
#include "common/leaf_copy.h"

/* the sources, before a load and before tags decide which slots to free */
extern bool leaf_source_check(const LeafCopyIdent *cur,
							  const LeafLoadJob *job, LeafLoadResult *res);
/*
 * The start of the description leaf_alloc_cutover() writes into the
 * publisher it fences: its loads, and a confirmation there, are refused.
 */
#define LEAF_SOURCE_MOVED "moved: "


/* what the local source (leaf_alloc_local.c) reads of the record */
extern bool leaf_same_source(const LeafCopyIdent *a, const LeafCopyIdent *b);
extern bool leaf_source_has_dir(Oid relid);
extern const char *leaf_source_moved(const char *desc);
extern bool leaf_source_parse_row(HeapTuple tup, TupleDesc desc,
								  LeafCopyIdent *rec, bool *current);
extern void leaf_source_forget(void);

extern bool leaf_source_recorded_ok(const LeafCopyIdent *cur, char *errbuf,
									size_t errlen);
extern const char *leaf_source_refusal(void);

/*
 * What a refusal LF006 found: another allocation database than the
 * recorded one, this database a copy of the recorded one (a restored
 * dump, a template, a clone), or the recorded one's counters taken over
 * by another database (leaf_alloc_cutover()).
 */
typedef enum LeafSourceChange
{
	LEAF_SOURCE_OTHER,
	LEAF_SOURCE_COPY,
	LEAF_SOURCE_TAKEN_OVER,
} LeafSourceChange;

/* the refusal of a load from another source of segments (LF006) */
extern void leaf_source_refuse_changed(const char *tag, LeafSourceChange change,
									   LeafLoadResult *res);

#endif							/* LEAF_ALLOC_SOURCE_H */
