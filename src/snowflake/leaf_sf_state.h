/*-------------------------------------------------------------------------
 *
 * leaf_sf_state.h
 *	  The snowflake worker's state file, $PGDATA/leaf_snowflake.state
 *	  (leaf_sf_state.c).  Only the worker (leaf_sf_worker.c) and its
 *	  sources of worker IDs (leaf_sf_source_*.c) use it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_SF_STATE_H
#define LEAF_SF_STATE_H

#include "snowflake/leaf_sf_layout.h"
#include "snowflake/leaf_snowflake.h"

#define LEAF_SF_STATE_FILE		"leaf_snowflake.state"

/*
 * The source of a file whose worker ID a registration in ZooKeeper was
 * about to replace: it keeps the marks but never stands in for ZooKeeper.
 */
#define LEAF_SF_SOURCE_SUPERSEDED	"superseded"

/*
 * What the state file holds.  Besides the worker ID in use, it keeps a
 * high-water mark for every worker ID this data directory ever served
 * with, and the data directory it belongs to ("bound_to": the system
 * identifier and the inode of the data directory), so that a copy of it
 * (a standby, a restored backup) can tell that the worker IDs in it are
 * not its own.
 */
typedef struct LeafSfStateFile
{
	bool		valid;
	bool		damaged;		/* there, but unreadable or not valid */
	bool		foreign;		/* written by another data directory */
	char		bound_to[LEAF_SF_ID_LEN];	/* "" in files of version 1 */
	char		moved_from[LEAF_SF_ID_LEN]; /* bound_to of a file brought
											 * from another cluster, taken
											 * as this one's, or "" */
	int			worker_id;
	char		source[16];		/* the name of the source of worker_id
								 * (leaf_sf_lease.h), or
								 * LEAF_SF_SOURCE_SUPERSEDED */
	char		node_address[LEAF_SF_ADDR_LEN];
	char		zk_root[LEAF_ZK_PATH_LEN];
	char		lease_ref[LEAF_ZK_PATH_LEN];	/* the source's reference of
												 * the lease: a forever node,
												 * a table of worker IDs */
	char		claimed_in[LEAF_ZK_PATH_LEN];	/* root where worker_id, set
												 * by hand, was claimed */
	int			declared;		/* recyclable ("bounded") as last declared
								 * in ZooKeeper: 1, 0, or -1 if unknown */
	int64		lease_token;	/* the holder's token of the lease: the
								 * ZooKeeper session that registered, the
								 * token drawn in the allocation database */
	int64		hwm_ms;			/* mark of worker_id, see marks[] */
	int64		written_ms;		/* when the file was written */
	bool		epoch_changed;	/* some mark was converted to a new epoch */
	int64		epoch_moved_from;	/* an earlier leaf.snowflake_epoch some
									 * mark was written under, while the
									 * node waits for that mark; or 0 */
	LeafSfLayout layout;		/* the layout of the IDs the file's marks
								 * bound (the default in files before 1.3) */
	/* per worker ID of the layout: high-water mark in ms since 1970 under
	 * the current leaf.snowflake_epoch (converted when the file has
	 * another), or 0; leaf_sf_max_worker_id() + 1 entries */
	int64	   *marks;
} LeafSfStateFile;

/*
 * What one write records besides this node (LeafSfNode) and the marks of
 * the other worker IDs, which come from the LeafSfStateFile written to.
 */
typedef struct LeafSfStateRecord
{
	int			worker_id;		/* the worker ID in use */
	const char *source;			/* where it came from: the name of a
								 * source, or LEAF_SF_SOURCE_SUPERSEDED */
	int64		hwm_ms;			/* its new high-water mark */
	const char *lease_ref;		/* the source's reference of the lease, or
								 * "" */
	int64		lease_token;	/* the holder's token of the lease, or 0 */
	bool		recyclable;		/* declared recyclable in ZooKeeper */
	const char *claimed_in;		/* root where a hand-set worker ID was
								 * claimed, or "" */
} LeafSfStateRecord;

extern void leaf_sf_state_read(LeafSfStateFile *file, const char *identity);
extern bool leaf_sf_state_write(LeafSfStateFile *file, const LeafSfNode *node,
								const LeafSfStateRecord *rec);
extern int64 leaf_sf_state_mark(const LeafSfStateFile *file, int worker_id);
extern void leaf_sf_state_forget_marks(LeafSfStateFile *file);
extern bool leaf_sf_state_layout_differs(const LeafSfStateFile *file,
										 char *reason, size_t size);

#endif							/* LEAF_SF_STATE_H */
