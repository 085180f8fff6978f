/*-------------------------------------------------------------------------
 *
 * leaf_snowflake.h
 *	  Interface between the snowflake generator (leaf_snowflake.c) and
 *	  the worker that assigns its worker ID (leaf_sf_worker.c), and what
 *	  the worker's files share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_SNOWFLAKE_H
#define LEAF_SNOWFLAKE_H

#include "common/leaf_common.h"
#include "common/leaf_compat.h"

#define LEAF_SF_ADDR_LEN		256
#define LEAF_SF_REASON_LEN		512
#define LEAF_SF_ID_LEN			64
#define LEAF_ZK_PATH_LEN		1024

typedef enum LeafSfPhase
{
	LEAF_SF_STARTING = 0,		/* worker has not decided yet: callers wait */
	LEAF_SF_NOT_READY,			/* cannot serve now, reason says why */
	LEAF_SF_READY				/* serving */
} LeafSfPhase;

extern int	leaf_sf_worker_id;
extern char *leaf_sf_zk_hosts;
extern char *leaf_sf_zk_auth;
extern int64 leaf_sf_epoch_ms;
extern int	leaf_sf_heartbeat_ms;
extern int	leaf_sf_max_backward_ms;
extern int	leaf_sf_max_clock_drift_ms;
extern int	leaf_sf_reclaim_after_ms;
extern const char *leaf_sf_ordinal_problem;

/* leaf.worker_id_source */
typedef enum LeafSfIdSource
{
	LEAF_SF_SOURCE_AUTO,		/* as before 1.5: leaf.worker_id if set, else
								 * ZooKeeper if leaf.zk_hosts is set */
	LEAF_SF_SOURCE_ZOOKEEPER,
	LEAF_SF_SOURCE_DATABASE,
	LEAF_SF_SOURCE_SETTING
} LeafSfIdSource;

extern int	leaf_sf_id_source;

/*
 * leaf.worker_id_lease: how a lease in the allocation database ends.
 * Expiring: a few seconds after its last renewal, and others take it over.
 * Bound: never by time alone (only by a give-up, or after
 * leaf.worker_id_reclaim_after without renewal if set), so the holder
 * serves through an outage of the allocation database.
 */
typedef enum LeafSfLeaseMode
{
	LEAF_SF_LEASE_EXPIRING,
	LEAF_SF_LEASE_BOUND
} LeafSfLeaseMode;

extern int	leaf_sf_lease_mode;

/* leaf_sf_ordinal.c */
extern void leaf_sf_ordinal_define_settings(void);
extern bool leaf_sf_ordinal_configured(void);
extern void leaf_sf_ordinal_resolve(int worker_id);

pg_noreturn extern PGDLLEXPORT void leaf_snowflake_worker_main(Datum main_arg);
extern int64 leaf_sf_clock_ms(void);
extern int64 leaf_sf_attach_worker(void);
extern void leaf_sf_detach_worker(void);
extern void leaf_sf_report(LeafSfPhase phase, const char *reason);
extern void leaf_sf_report_zk(const char *state);
extern void leaf_sf_report_identity(int worker_id, const char *source,
									const char *node_address,
									const char *zk_node);
extern void leaf_sf_report_heartbeat(int64 ms);
extern void leaf_sf_report_peers(int npeers, int64 offset_ms);
extern void leaf_sf_report_not_before(int64 ms);
extern bool leaf_sf_start_serving(int worker_id, int64 floor_ms, bool new_id);
extern bool leaf_sf_new_id_requested(void);
extern void leaf_sf_set_lease(int64 lease_ms);
extern int64 leaf_sf_get_lease(void);
extern int64 leaf_sf_last_issued_ms(void);

/*
 * This node, as its state file and its nodes in ZooKeeper name it.  The
 * worker sets it when it starts; it does not change afterwards.
 */
typedef struct LeafSfNode
{
	char		addr[LEAF_SF_ADDR_LEN];	/* node address (host:port), or ""
										 * if none is unique to this host */
	char		identity[LEAF_SF_ID_LEN];	/* this data directory: system
											 * identifier and inode */
	char		root[LEAF_ZK_PATH_LEN]; /* leaf.zk_root, or the root the state
										 * file records */
} LeafSfNode;

/* How far ahead of the clock a recorded high-water mark reaches. */
static inline int64
leaf_sf_margin_ms(void)
{
	return 2 * (int64) leaf_sf_heartbeat_ms + 1000;
}

/*
 * The longest an earlier holder of a worker ID may still serve with it,
 * on our clock, once its record is gone (lost, set back or taken over),
 * from the moment that record could last be renewed: its lease, on a
 * clock within leaf.max_clock_drift_ms of the coordinator's, as ours is.
 */
static inline int64
leaf_sf_earlier_holder_ms(void)
{
	return leaf_sf_margin_ms() + 2 * (int64) Max(leaf_sf_max_clock_drift_ms, 0);
}

#endif							/* LEAF_SNOWFLAKE_H */
