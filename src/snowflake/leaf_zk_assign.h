/*-------------------------------------------------------------------------
 *
 * leaf_zk_assign.h
 *	  Worker IDs from ZooKeeper (leaf_zk_assign.c): registration, claims
 *	  of hand-set worker IDs, giving a worker ID up.  Only the sources of
 *	  worker IDs (leaf_sf_source_zk.c, leaf_sf_source_setting.c) use it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ZK_ASSIGN_H
#define LEAF_ZK_ASSIGN_H

#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_zk_client.h"

/* What a request to ZooKeeper found. */
typedef enum LeafZkResult
{
	LEAF_ZK_OK,
	LEAF_ZK_RETRY,				/* transient (clock, a race): try again */
	LEAF_ZK_LOST,				/* a request failed (connection, session):
								 * try again; the session's state says why */
	LEAF_ZK_FAIL				/* needs a fix by hand; still retried slowly */
} LeafZkResult;

/* What registration found: filled in by leaf_zk_register. */
typedef struct LeafZkRegistration
{
	LeafZkResult result;
	char		reason[LEAF_SF_REASON_LEN];	/* why not, for the status and the
											 * log; "" if nothing needs saying
											 * (a shutdown request, say) */
	int			worker_id;		/* our forever node's sequence number; this
								 * and the fields below count on LEAF_ZK_OK
								 * only */
	char		node_path[LEAF_ZK_PATH_LEN];	/* our forever node */
	int32		node_version;	/* its version, for the next write */
	int64		node_hwm;		/* the high-water mark it held, under our
								 * epoch (0 for a new node) */
	int64		node_epoch_ms;	/* the leaf.snowflake_epoch that mark was
								 * written under */
	bool		bounded;		/* it says: the lease stays within its mark */
	bool		fresh;			/* it never recorded a heartbeat (created
								 * now, or by a registration that did not
								 * finish) */
	int64		session_id;		/* on LEAF_ZK_OK: the session that holds our
								 * ephemeral node */
	bool		tree_read;		/* the forever nodes were read, even if the
								 * registration failed after that */
	long		found_seq;		/* then: the worker ID of the forever node
								 * of this node the tree held, or -1 */
	bool		file_superseded;	/* stopped (LEAF_ZK_RETRY) before taking
									 * another worker ID than the state
									 * file's: the file must stop naming
									 * its worker ID first */
	bool		peers_checked;	/* our clock was compared with the running
								 * peers', even if it was refused */
	int			npeers;			/* then: how many there were */
	int64		peer_offset_ms; /* and our clock minus their median (0 if
								 * none) */
} LeafZkRegistration;

/* What registration is told of this node's past. */
typedef struct LeafZkKnown
{
	int64		own_session;	/* session of this run's last registration,
								 * or 0 */
	int64		file_session;	/* session the state file records, if the
								 * file is ours, or 0 */
	const char *moved_from;		/* data directory whose state file this one
								 * took over (from another cluster), or "" */
	int			file_worker_id; /* worker ID the state file may stand in
								 * with, or -1: a registration that would
								 * take another one stops first, with
								 * file_superseded */
} LeafZkKnown;

extern void leaf_zk_register(LeafZkSession *zk, const LeafSfNode *node,
							 bool check_peers, const LeafZkKnown *known,
							 LeafZkRegistration *reg);
extern LeafZkResult leaf_zk_claim(LeafZkSession *zk, const LeafSfNode *node,
								  int wid, const char *claimed_in,
								  char *reason);
extern bool leaf_zk_abandon(LeafZkSession *zk, const LeafSfNode *node,
							int wid, const char *node_path,
							int32 node_version, int64 hwm);

#endif							/* LEAF_ZK_ASSIGN_H */
