/*-------------------------------------------------------------------------
 *
 * leaf_sf_lease.h
 *	  The lease on a worker ID, and the sources it is taken from: the
 *	  contract between the snowflake worker (leaf_sf_worker.c) and its
 *	  sources, one file each: a worker ID set by hand or from a pod ordinal
 *	  (leaf_sf_source_setting.c), ZooKeeper with the state file standing
 *	  in (leaf_sf_source_zk.c), the allocation database, with the state
 *	  file standing in for a bound lease (leaf_sf_source_db.c).
 *
 * The worker runs one lease through its phases and calls its source
 * through a table of functions (LeafSfSource), as the segment allocator
 * calls its sources of segments (segment/leaf_alloc.h).  A source keeps
 * what only it knows in a state of its own (LeafSfWorker.source_state);
 * what every source shares is the lease record (LeafSfLease) and the
 * worker's state (LeafSfWorker), which the sources change through the
 * worker's functions below.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_SF_LEASE_H
#define LEAF_SF_LEASE_H

#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_sf_state.h"

typedef struct LeafSfSource LeafSfSource;

/*
 * The phases of the lease.  Configuring: no source can give a worker ID as
 * configured, the worker serves nothing.  Taking: the source is asked for
 * a worker ID.  Waiting: a worker ID is taken and its floor known; serving
 * starts once the clock has passed it and the source has settled.
 * Serving: the generator serves with the worker ID, and every heartbeat
 * renews the lease.  A source may take a worker ID again while serving
 * (ZooKeeper after a session expired, or after the state file stood in).
 */
typedef enum LeafSfLeasePhase
{
	LEAF_SF_CONFIGURING,
	LEAF_SF_TAKING,
	LEAF_SF_WAITING,
	LEAF_SF_SERVING
} LeafSfLeasePhase;

/*
 * The lease on a worker ID, as the worker and the state file know it.  The
 * holder is this node (LeafSfWorker.node: its address and the identity of
 * its data directory).
 */
typedef struct LeafSfLease
{
	int			worker_id;		/* worker ID held, -1 if none */
	const LeafSfSource *from;	/* the source whose name says where it came
								 * from (the state file standing in for
								 * ZooKeeper has a name of its own) */
	int64		token;			/* the holder's token: the ZooKeeper session
								 * that registered, the token drawn in the
								 * allocation database; or 0 */
	char		ref[LEAF_ZK_PATH_LEN];	/* the source's reference: our
										 * forever node, the allocation
										 * database's table of worker IDs
										 * (LEAF_SF_DB_FLEET_PREFIX); or "" */
	int64		taken_mark;		/* the mark the source held when the worker
								 * ID was taken, or 0 */
	int64		mark;			/* the last mark the source holds for us */
	bool		bounded;		/* the lease may not pass that mark: past
								 * it, another node may take the worker ID
								 * over */
	bool		renewed;		/* the last renewal reached the source */
} LeafSfLease;

/*
 * Everything the worker knows.  One instance, in
 * leaf_snowflake_worker_main; this process only.
 */
typedef struct LeafSfWorker
{
	LeafSfNode	node;			/* this node's address, data directory and
								 * root */
	LeafSfStateFile file;		/* the state file as read at start, with the
								 * marks written since */
	const LeafSfSource *source; /* the source of worker IDs in use */
	void	   *source_state;	/* what that source keeps of its own */
	LeafSfLease lease;
	LeafSfLeasePhase phase;

	/* the state file */
	bool		file_refuted;	/* the source, when reached, no longer held
								 * the file's worker ID for this node: it no
								 * longer stands in */
	int			superseded_wid; /* worker ID the state file was written as
								 * superseded for, until a new one is taken:
								 * written so while it still serves */
	int64		file_hwm;		/* last high-water mark the file holds */

	/* when serving may start */
	int64		last_issued;	/* timestamp of the last ID handed out before
								 * the worker started, or 0 (also once a new
								 * worker ID was requested) */
	int64		floor_ms;		/* IDs carry later timestamps only */
	bool		fresh_floor;	/* floor_ms waits out the earlier holders
								 * of a new worker ID */
	bool		new_id;			/* the worker ID was given up on request:
								 * the next one starts at its own floor */

	/* serving */
	int			serving_wid;	/* worker ID the generator uses, -1 if none
								 * yet */
	bool		lease_out;		/* serving, but the lease ran out */
	int64		lease_out_since;	/* when that was noticed */
	char		reason[LEAF_SF_REASON_LEN];	/* the reason last logged for not
											 * being ready */
} LeafSfWorker;

/*
 * A source of worker IDs.  The worker calls only these; a function a
 * source has no use for is NULL where the worker says so.
 */
struct LeafSfSource
{
	/* where a worker ID came from, in the state file and the status */
	const char *name;
	/* the entry that names the state file standing in for it, or NULL */
	const LeafSfSource *stand_in;
	/* a pod ordinal or a state file of another layout stops it */
	bool		local_checks;
	/* the status shows a heartbeat only once the source recorded it */
	bool		heartbeat_is_renewal;
	/* how to serve sooner when the epoch moved later */
	const char *epoch_hint;

	/* Set up its own state, and this node's root (leaf_sf_choose_root). */
	void		(*init) (LeafSfWorker *w);
	/* Check its settings and start, once the worker checked the others. */
	void		(*start) (LeafSfWorker *w);
	/* At every turn, before anything else (may be NULL). */
	void		(*watch) (LeafSfWorker *w);
	/* Does it ask a coordinator now (not with the clock out of range)? */
	bool		(*remote) (LeafSfWorker *w);
	/* Take (or claim) a worker ID if needed; false on a shutdown request. */
	bool		(*take) (LeafSfWorker *w, long *delay);
	/* May the worker ID taken start serving once the floor is passed? */
	bool		(*settled) (LeafSfWorker *w);
	/* How long an earlier holder of a new worker ID may still serve. */
	int64		(*earlier_holder_ms) (void);
	/* May the state file alone extend the lease, before the renewal? */
	bool		(*file_first) (LeafSfWorker *w);
	/* Record mark hwm (the heartbeat); whether the source now holds it. */
	bool		(*renew) (LeafSfWorker *w, int64 now, int64 hwm);
	/* The latest timestamp the lease allows, or -1 if no longer held. */
	int64		(*bound) (LeafSfWorker *w, int64 now);
	/* Why the lease ran out. */
	void		(*lease_out) (LeafSfWorker *w, char *buf, size_t len);
	/* After the first renewal: may it serve? (else says why not) */
	bool		(*confirmed) (LeafSfWorker *w);
	/* Does it hold a worker ID it can give up on request? (may be NULL) */
	bool		(*can_give_up) (LeafSfWorker *w);
	/* Give it up with mark hwm; false if it is kept. */
	bool		(*give_up) (LeafSfWorker *w, int64 hwm);
	/* On a clean shutdown: the lease ends at hwm. */
	void		(*release) (LeafSfWorker *w, int64 hwm);
	/* Close what the source holds open. */
	void		(*stop) (LeafSfWorker *w);
	/* May another node take the worker ID over while this one is down? */
	bool		(*recyclable) (LeafSfWorker *w);
	/* What the state file records of the lease. */
	void		(*record) (LeafSfWorker *w, LeafSfStateRecord *rec);
};

/* the sources (leaf_sf_source_*.c), and none at all (leaf_sf_worker.c) */
extern const LeafSfSource leaf_sf_source_setting;
extern const LeafSfSource leaf_sf_source_zk;
extern const LeafSfSource leaf_sf_source_cache_file;
extern const LeafSfSource leaf_sf_source_db;
extern const LeafSfSource leaf_sf_source_db_file;
extern const LeafSfSource leaf_sf_source_none;
extern const LeafSfSource *leaf_sf_source_named(const char *name);

/* leaf_sf_worker.c: what the sources use of the worker */
extern void leaf_sf_not_ready(LeafSfWorker *w, const char *fmt,...)
			pg_attribute_printf(2, 3);
extern bool leaf_sf_same_reason(const char *a, const char *b);
extern bool leaf_sf_wait(long ms);
extern void leaf_sf_choose_root(LeafSfWorker *w, bool registers);
extern void leaf_sf_floor_known(LeafSfWorker *w);
extern void leaf_sf_floor_lost(LeafSfWorker *w);
extern bool leaf_sf_file_write(LeafSfWorker *w, int64 hwm_ms);
extern bool leaf_sf_file_supersede(LeafSfWorker *w, int wid, int64 hwm);
extern bool leaf_sf_file_lower(LeafSfWorker *w, int64 hwm);
extern int64 leaf_sf_given_up_mark(LeafSfWorker *w);
extern void leaf_sf_wait_out_earlier_holder(LeafSfWorker *w);
extern void leaf_sf_record_plain(LeafSfWorker *w, LeafSfStateRecord *rec);

/* leaf_sf_source_setting.c: the check of a hand-set worker ID */
extern bool leaf_sf_setting_take(LeafSfWorker *w);

/* leaf_sf_source_zk.c: a session to ZooKeeper, for claims too */
struct LeafZkSession;
extern bool leaf_sf_zk_connect(LeafSfWorker *w, struct LeafZkSession *zk,
							   int wait_ms);

#endif							/* LEAF_SF_LEASE_H */
