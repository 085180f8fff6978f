/*-------------------------------------------------------------------------
 *
 * leaf_copy.h
 *	  Where a piece of leaf's state lives, and which copy of it this is
 *	  (leaf_copy.c): one answer for the segment counters, the worker-ID
 *	  leases, the snowflake state file and the warm-start file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_COPY_H
#define LEAF_COPY_H

#include "fmgr.h"

#define LEAF_COPY_ADDRESS_LEN	128

/*
 * Which copy of a database's state this is.  A streaming replica keeps
 * its primary's system identifier, and its databases and extensions keep
 * their OIDs; every copy of a data directory (pg_basebackup, a restore, a
 * file copy) is another directory, with another inode, unless it is a
 * volume clone; a promotion or an archive recovery moves to a new
 * timeline; pg_upgrade, a restored dump and a logical replica are another
 * cluster.
 */
typedef struct LeafCopyIdent
{
	bool		remote;			/* false: this server's own */
	int64		sysid;			/* pg_control_system() of its cluster */
	Oid			dboid;			/* the database */
	Oid			extoid;			/* the leaf extension there */
	uint32		timeline;		/* its timeline now, 0 if unknown */
	uint64		datadir;		/* the inode of the data directory, 0 if
								 * unknown */
	char		address[LEAF_COPY_ADDRESS_LEN]; /* host:port/dbname, for
												 * people */
} LeafCopyIdent;

/*
 * The timeline a server writes WAL on, from SQL: the first eight hex
 * digits of the name of the WAL file being written (NULL in recovery).
 */
#define LEAF_COPY_TIMELINE_HEX_SQL \
	"pg_catalog.substr(pg_catalog.pg_walfile_name(" \
	"pg_catalog.pg_current_wal_insert_lsn()), 1, 8)"
#define LEAF_COPY_TIMELINE_SQL \
	"('x' OPERATOR(pg_catalog.||) " LEAF_COPY_TIMELINE_HEX_SQL \
	")::pg_catalog.bit(32)::pg_catalog.int8"

extern void leaf_copy_here(LeafCopyIdent *here);
extern uint64 leaf_copy_data_directory(void);
extern void leaf_copy_holder_name(char *buf, size_t len);

/* logical replication into a database (SPI connected) */
extern bool leaf_copy_subscribed(Oid extoid, char *detail, size_t len);
extern bool leaf_copy_replicated(Oid nsp, char *detail, size_t len);
extern bool leaf_copy_written_by_replication(Oid nsp, Oid extoid,
											 char *detail, size_t len);

/* leaf's own writes, with session_replication_role = origin */
extern void leaf_copy_own_writes(void);
extern int	leaf_copy_own_writes_begin(void);

extern Datum leaf_copy_status(PG_FUNCTION_ARGS);

#endif							/* LEAF_COPY_H */
