/*-------------------------------------------------------------------------
 *
 * leaf_alloc_source.h
 *	  The check of which allocation database segments come from
 *	  (leaf_alloc_source.c), for the two sources and for the backends that
 *	  report its refusals.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ALLOC_SOURCE_H
#define LEAF_ALLOC_SOURCE_H

#include "leaf_alloc.h"

/*
 * Which allocation database segments come from.  A streaming replica
 * keeps its primary's system identifier, and its databases and
 * extensions keep their OIDs, so a failover does not change this.
 */
typedef struct LeafSourceIdent
{
	bool		remote;			/* false: this database's own leaf_alloc */
	int64		sysid;			/* pg_control_system() of its cluster */
	Oid			dboid;			/* database holding leaf_alloc */
	Oid			extoid;			/* the leaf extension there */
	uint32		timeline;		/* its timeline now, 0 if unknown (not
								 * part of the identity) */
	uint64		datadir;		/* local: the inode of the data directory,
								 * 0 if unknown (not part of the identity:
								 * see leaf_source_judge) */
	char		address[LEAF_SOURCE_LEN];	/* host:port/dbname, for people */
} LeafSourceIdent;

/* the sources, before a load and before tags decide which slots to free */
extern bool leaf_source_check(const LeafSourceIdent *cur,
							  const LeafLoadJob *job, LeafLoadResult *res);
/*
 * The start of the description leaf_alloc_cutover() writes into the
 * publisher it fences: its loads, and a confirmation there, are refused.
 */
#define LEAF_SOURCE_MOVED "moved: "

extern void leaf_local_ident(LeafSourceIdent *local);
extern bool leaf_local_source_check(const LeafLoadJob *job, LeafLoadResult *res);
extern bool leaf_local_source_still_ok(Oid nsp, LeafLoadResult *res);
extern bool leaf_source_recorded_ok(const LeafSourceIdent *cur, char *errbuf,
									size_t errlen);
extern const char *leaf_source_refusal(void);

/* backends waiting for a segment that a check refused */
pg_noreturn extern void leaf_report_source_changed(const char *tag, const char *detail);
pg_noreturn extern void leaf_report_promoted(const char *tag, const char *detail);

#endif							/* LEAF_ALLOC_SOURCE_H */
