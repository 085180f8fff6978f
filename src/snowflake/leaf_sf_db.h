/*-------------------------------------------------------------------------
 *
 * leaf_sf_db.h
 *	  Snowflake worker IDs held as leases in the allocation database
 *	  (leaf_sf_db.c).  Only the worker's source of worker IDs from the
 *	  database (leaf_sf_source_db.c) uses it, and the worker
 *	  (leaf_sf_worker.c) and leaf_snowflake.c for the setting.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_SF_DB_H
#define LEAF_SF_DB_H

#include "snowflake/leaf_snowflake.h"

/*
 * What the state file records as the reference of a lease in the
 * allocation database (lease_ref): this, then the fleet_id of its table
 * of worker IDs.
 */
#define LEAF_SF_DB_FLEET_PREFIX "database fleet "

/* the outcome of a request to the allocation database */
typedef enum LeafSfDbResult
{
	LEAF_SF_DB_OK,
	LEAF_SF_DB_RETRY,			/* unreachable: try again soon */
	LEAF_SF_DB_WAIT,			/* not now: try again soon */
	LEAF_SF_DB_FAIL,			/* refused: try again much later */
	LEAF_SF_DB_LOST				/* our row is gone or held by another node */
} LeafSfDbResult;

/*
 * The lease this node holds in the allocation database.  Kept by the
 * worker; leaf_sf_db.c fills it in.
 */
typedef struct LeafSfDbLease
{
	bool		held;			/* a row of leaf_worker_lease is ours */
	int			worker_id;
	int64		token;			/* drawn when the row was taken: the
								 * renewals name it */
	int64		fleet_id;		/* leaf_worker_lease_fleet's, where it was
								 * taken */
	bool		fresh;			/* taken from no row, from another holder,
								 * or from a run of this data directory
								 * that the state file does not know:
								 * wait out earlier holders */
	int64		row_hwm;		/* the mark the row held when we took it */
	int64		db_hwm;			/* the last mark the row holds for us */
	bool		bound;			/* taken bound (leaf.worker_id_lease):
								 * no other node takes it by time alone */
	int64		reclaim_ms;		/* of a bound lease: others may take it this
								 * long after its last renewal, or 0 */
	int64		until_mono;		/* monotonic ms until which we may serve
								 * with it: before the lease in the
								 * database could end (expiring), or the
								 * reclaim window minus the clock drift
								 * (bound); PG_INT64_MAX if bound for good */
	int64		clock_offset_ms;	/* our clock minus the database's, at
									 * the last request */
} LeafSfDbLease;

extern const char *leaf_sf_db_config_problem(void);
extern int64 leaf_sf_mono_ms(void);
extern LeafSfDbResult leaf_sf_db_acquire(const LeafSfNode *node, int want_wid,
										 int64 floor_hint, int64 file_token,
										 int64 file_fleet,
										 LeafSfDbLease *lease,
										 char *reason, size_t reasonlen);
extern LeafSfDbResult leaf_sf_db_renew(const LeafSfNode *node,
									   LeafSfDbLease *lease, int64 hwm,
									   char *reason, size_t reasonlen);
extern bool leaf_sf_db_release(const LeafSfNode *node, LeafSfDbLease *lease,
							   int64 hwm);
extern bool leaf_sf_db_give_up(const LeafSfNode *node, LeafSfDbLease *lease,
							   int64 hwm, char *reason, size_t reasonlen);
extern void leaf_sf_db_disconnect(void);

#endif							/* LEAF_SF_DB_H */
