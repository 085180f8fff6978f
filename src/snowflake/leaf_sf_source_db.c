/*-------------------------------------------------------------------------
 *
 * leaf_sf_source_db.c
 *	  The source of worker IDs held as leases in the allocation database
 *	  (leaf.worker_id_source = 'database'), over leaf_sf_db.h.
 *
 * A worker ID is a row of the allocation database's table of worker IDs,
 * taken (or, set by hand, claimed) with a token drawn for it, renewed at
 * every heartbeat with the new high-water mark, and given up or released
 * with a mark.  The state file names the lease (its token and its table)
 * so that the next start knows it as its own.
 *
 * An expiring lease (leaf.worker_id_lease = 'expiring') may be taken over
 * once it has ended, so the node serves no longer than its lease without
 * the database, and the state file never stands in for it: with the
 * database unreachable, a starting node waits.  A bound lease is taken
 * over by no other node by time alone, as a forever node of ZooKeeper
 * without recycling: the node serves on while the database is
 * unreachable, and a node that starts then serves with the worker ID of
 * its state file (source "database file"), if the file is this data
 * directory's and this address's, names a bound lease of the database
 * (written with no reclaim window) and was not superseded; once the
 * database answers, the node takes its row back.  With a reclaim window
 * (leaf.worker_id_reclaim_after), the node serves only within it, and
 * the file does not stand in.
 *
 * The requests and the SQL are leaf_sf_db.c's; this file only keeps the
 * lease (LeafSfDbLease) and tells the worker what it means.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "postmaster/interrupt.h"

#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_sf_db.h"
#include "snowflake/leaf_sf_lease.h"
#include "snowflake/leaf_sf_state.h"

/* What this source keeps of its own. */
typedef struct LeafSfDbState
{
	LeafSfDbLease db;			/* the lease */
	bool		released_bound; /* a clean stop released a row bound to
								 * us for good: it is still ours */
	char		renew_failed[LEAF_SF_REASON_LEN];	/* why the last renewal
													 * failed, or "" */
} LeafSfDbState;

#define DB(w)	(&((LeafSfDbState *) (w)->source_state)->db)

/* Is the worker serving with the worker ID of the state file? */
static bool
leaf_sf_db_standing_in(LeafSfWorker *w)
{
	return w->lease.from == &leaf_sf_source_db_file;
}

/*
 * May the state file stand in for the database, which is unreachable?
 * Only for a lease bound for good when this node last wrote the file
 * (declared 0: nobody may take it over by time), named by the file of this
 * data directory at this address, and only if we would take it so today.
 */
static bool
leaf_sf_db_file_stands_in(LeafSfWorker *w)
{
	const LeafSfSource *from = leaf_sf_source_named(w->file.source);
	LeafSfStateFile *f = &w->file;

	return leaf_sf_lease_mode == LEAF_SF_LEASE_BOUND &&
		leaf_sf_reclaim_after_ms == 0 && leaf_sf_worker_id < 0 &&
		f->valid && !f->foreign && !f->damaged && !w->file_refuted &&
		(from == &leaf_sf_source_db || from == &leaf_sf_source_db_file) &&
		f->declared == 0 && f->worker_id >= 0 && f->lease_token != 0 &&
		strncmp(f->lease_ref, LEAF_SF_DB_FLEET_PREFIX,
				strlen(LEAF_SF_DB_FLEET_PREFIX)) == 0 &&
		strcmp(f->node_address, w->node.addr) == 0;
}

/* Why the state file does not stand in for the unreachable database. */
static const char *
leaf_sf_db_no_stand_in(LeafSfWorker *w)
{
	if (leaf_sf_lease_mode != LEAF_SF_LEASE_BOUND)
		return "as a worker ID held there may be taken over once its lease has ended (\"leaf.worker_id_lease\" is 'expiring')";
	if (leaf_sf_reclaim_after_ms > 0)
		return "as \"leaf.worker_id_reclaim_after\" lets another node take a worker ID over after that long";
	if (w->file.valid && w->file.declared != 0)
		return "as its worker ID was not held bound for good in the allocation database when the file was last written";
	return "as it names no bound lease of this data directory at this address";
}

/*
 * The database is unreachable and nothing is served: serve with the
 * worker ID of the state file, above its mark, if it may stand in.
 */
static bool
leaf_sf_db_fall_back(LeafSfWorker *w)
{
	if (w->phase != LEAF_SF_TAKING || !leaf_sf_db_file_stands_in(w))
		return false;
	w->lease.worker_id = w->file.worker_id;
	w->lease.token = w->file.lease_token;
	strlcpy(w->lease.ref, w->file.lease_ref, sizeof(w->lease.ref));
	w->floor_ms = Max(w->file.hwm_ms, w->last_issued);
	w->floor_ms = Max(w->floor_ms, leaf_sf_state_mark(&w->file,
													  w->lease.worker_id));
	w->lease.from = &leaf_sf_source_db_file;
	leaf_sf_floor_known(w);
	leaf_sf_report_identity(w->lease.worker_id, w->lease.from->name,
							w->node.addr, NULL);
	leaf_sf_report_zk("not used");
	ereport(LOG,
			(errmsg("the allocation database is unreachable, using worker ID %d, bound to this node there, from \"%s\"",
					w->lease.worker_id, LEAF_SF_STATE_FILE)));
	return true;
}

/*
 * The database, reached again, refuses this node (another table of worker
 * IDs, other settings than the fleet's): the worker ID of the state file
 * may be another node's there, so it stands in no more.
 */
static void
leaf_sf_db_stand_in_refuted(LeafSfWorker *w)
{
	w->file_refuted = true;
	w->lease.from = &leaf_sf_source_db;
	w->lease.token = 0;
	w->lease.ref[0] = '\0';
	w->lease.worker_id = -1;
}

/*
 * The token of the lease that the state file names: the one this data
 * directory's last run took, or 0.
 */
static int64
leaf_sf_db_file_token(LeafSfWorker *w)
{
	if (!w->file.valid || w->file.foreign || w->file.damaged)
		return 0;
	return w->file.lease_token;
}

/*
 * The table of worker IDs in which the state file says this data directory
 * held its worker ID (leaf_worker_lease_fleet's fleet_id), or 0.
 */
static int64
leaf_sf_db_file_fleet(LeafSfWorker *w)
{
	const char *p = w->file.lease_ref;

	if (!w->file.valid || w->file.foreign || w->file.damaged ||
		strncmp(p, LEAF_SF_DB_FLEET_PREFIX, strlen(LEAF_SF_DB_FLEET_PREFIX)) != 0)
		return 0;
	return strtoi64(p + strlen(LEAF_SF_DB_FLEET_PREFIX), NULL, 10);
}

/*
 * The lease was taken: the floor is past every mark known of its worker
 * ID, and for a worker ID taken from no row or from another holder, past
 * the longest lease an earlier holder could still use: its lease in the
 * database (leaf_sf_margin_ms() at most) on a clock within
 * leaf.max_clock_drift_ms of ours.  The state file names the lease at
 * once, with the floor as its mark.
 */
static void
leaf_sf_db_taken(LeafSfWorker *w, bool hand_set)
{
	LeafSfDbLease *db = DB(w);
	int			wid = db->worker_id;
	int64		f;

	if (w->phase == LEAF_SF_SERVING &&
		(wid != w->serving_wid || db->fresh))
	{
		/* everything up to the lease may have been used */
		leaf_sf_not_ready(w, "the allocation database gave worker ID %d%s instead of %d of \"%s\", restarting the generator",
						  wid, db->fresh ? " (new to this node)" : "",
						  w->serving_wid, LEAF_SF_STATE_FILE);
		w->floor_ms = Max(w->floor_ms, leaf_sf_get_lease());
	}
	w->lease.worker_id = wid;
	f = Max(db->row_hwm, w->last_issued);
	f = Max(f, leaf_sf_state_mark(&w->file, wid));
	f = Max(f, leaf_sf_get_lease());
	if (hand_set)
		f = Max(f, w->floor_ms);
	w->floor_ms = f;
	if (db->fresh)
		leaf_sf_wait_out_earlier_holder(w);
	/* the file names the lease, for the next start to know it as ours */
	w->lease.token = db->token;
	snprintf(w->lease.ref, sizeof(w->lease.ref),
			 LEAF_SF_DB_FLEET_PREFIX INT64_FORMAT, db->fleet_id);
	leaf_sf_floor_known(w);
	if (!hand_set)
		w->lease.from = &leaf_sf_source_db;
	leaf_sf_report_identity(wid, w->lease.from->name, w->node.addr, NULL);
	leaf_sf_report_zk("not used");
	ereport(LOG,
			(errmsg("leaf snowflake worker holds worker ID %d in the allocation database%s",
					wid, db->fresh ? " (new to this node)" : "")));
	(void) leaf_sf_file_write(w, Max(w->floor_ms,
									 leaf_sf_state_mark(&w->file, wid)));
}

/*
 * Not holding a worker ID in the allocation database: take one there (or
 * claim the hand-set one, once leaf_sf_setting_take took it).  Returns
 * false on a shutdown request.
 */
static bool
leaf_sf_db_take(LeafSfWorker *w, long *delay)
{
	char		reason[LEAF_SF_REASON_LEN];
	int			want = leaf_sf_worker_id;
	int64		hint = Max(w->last_issued, leaf_sf_get_lease());
	LeafSfDbResult r;

	if (DB(w)->held ||
		(w->phase == LEAF_SF_SERVING && !leaf_sf_db_standing_in(w)) ||
		(want >= 0 && w->lease.worker_id < 0))
		return true;
	hint = Max(hint, w->file_hwm);
	if (want >= 0)
		hint = Max(hint, leaf_sf_state_mark(&w->file, want));
	r = leaf_sf_db_acquire(&w->node, want, hint, leaf_sf_db_file_token(w),
						   leaf_sf_db_file_fleet(w), DB(w), reason,
						   sizeof(reason));
	if (ShutdownRequestPending)
		return false;
	if (r != LEAF_SF_DB_OK)
	{
		/* unreachable, or not yet: serving on from the file meanwhile */
		if (leaf_sf_db_standing_in(w) && r != LEAF_SF_DB_FAIL)
			return true;
		if (leaf_sf_db_standing_in(w))
			leaf_sf_db_stand_in_refuted(w);
		if (r == LEAF_SF_DB_RETRY && leaf_sf_db_fall_back(w))
			return true;
		if (r != LEAF_SF_DB_RETRY)
			leaf_sf_not_ready(w, "%s", reason);
		else
			leaf_sf_not_ready(w, "could not take a worker ID from the allocation database: %s; \"%s\" does not stand in for it, %s",
							  reason, LEAF_SF_STATE_FILE,
							  leaf_sf_db_no_stand_in(w));
		*delay = Max(*delay, r == LEAF_SF_DB_FAIL ? 10000 : 1000);
		leaf_sf_floor_lost(w);
		return true;
	}
	leaf_sf_db_taken(w, want >= 0);
	return true;
}

/*
 * Record mark hwm in the allocation database and renew the lease there.
 * Returns whether it was recorded; a row no longer ours stops the node,
 * which takes a worker ID anew.
 */
static bool
leaf_sf_db_heartbeat(LeafSfWorker *w, int64 now, int64 hwm)
{
	LeafSfDbState *st = (LeafSfDbState *) w->source_state;
	char		reason[LEAF_SF_REASON_LEN];
	LeafSfDbResult r;

	if (!st->db.held)
		return false;
	r = leaf_sf_db_renew(&w->node, &st->db, hwm, reason, sizeof(reason));
	if (r == LEAF_SF_DB_OK)
	{
		st->renew_failed[0] = '\0';
		return true;
	}
	if (r == LEAF_SF_DB_LOST)
	{
		leaf_sf_not_ready(w, "%s, taking a worker ID anew", reason);
		if (leaf_sf_worker_id < 0)
			w->lease.worker_id = -1;
		leaf_sf_floor_lost(w);
		w->fresh_floor = false;
		return false;
	}
	/* once per reason, as leaf_sf_not_ready logs */
	if (!leaf_sf_same_reason(reason, st->renew_failed))
		ereport(LOG,
				(errmsg("leaf snowflake worker could not renew its lease in the allocation database: %s",
						reason)));
	strlcpy(st->renew_failed, reason, sizeof(st->renew_failed));
	return false;
}

/*
 * The latest timestamp the lease in the allocation database lets this
 * node use: an expiring lease, the mark it holds, and no later than the
 * lease there can last, on our monotonic clock from the start of the last
 * renewal; a bound one, no later than its reclaim window allows
 * (leaf_sf_db_until), or only the state file's mark; -1 once the lease is
 * no longer held (unless the state file stands in for a bound one).
 */
static int64
leaf_sf_db_bound(LeafSfWorker *w, int64 now)
{
	LeafSfDbLease *db = DB(w);

	if (!db->held)
		return leaf_sf_db_standing_in(w) ? PG_INT64_MAX : -1;
	if (db->until_mono == PG_INT64_MAX)
		return PG_INT64_MAX;
	if (db->bound)
		return now + (db->until_mono - leaf_sf_mono_ms());
	return Min(db->db_hwm, now + (db->until_mono - leaf_sf_mono_ms()));
}

/*
 * An expiring lease, or a bound one with a reclaim window, bounds what is
 * used: never extended from the file alone.  One bound for good is
 * nobody else's, and the file, written first, is the record that counts.
 */
static bool
leaf_sf_db_file_first(LeafSfWorker *w)
{
	return leaf_sf_db_standing_in(w) ||
		(DB(w)->held && DB(w)->until_mono == PG_INT64_MAX);
}

static void
leaf_sf_db_lease_out(LeafSfWorker *w, char *buf, size_t len)
{
	if (DB(w)->bound)
		snprintf(buf, len, "the allocation database has not confirmed the lease for longer than \"leaf.worker_id_reclaim_after\" (%lld ms) less \"leaf.max_clock_drift_ms\", after which another node may take worker ID %d over",
				 (long long) DB(w)->reclaim_ms, w->lease.worker_id);
	else
		snprintf(buf, len, "the allocation database has not recorded a new high-water mark, and a worker ID held there may not be used past the mark and the lease it holds");
}

/*
 * A worker ID is used only once the allocation database holds its mark,
 * or, bound there, while the state file stands in.
 */
static bool
leaf_sf_db_confirmed(LeafSfWorker *w)
{
	if (w->lease.renewed || leaf_sf_db_standing_in(w))
		return true;
	leaf_sf_not_ready(w, "worker ID %d is used once the allocation database records its mark",
					  w->lease.worker_id);
	return false;
}

/* Serving waits until the lease is held, or the state file stands in. */
static bool
leaf_sf_db_settled(LeafSfWorker *w)
{
	return DB(w)->held || leaf_sf_db_standing_in(w);
}

/* A worker ID taken from the database (not set by hand) can be given up. */
static bool
leaf_sf_db_can_give_up(LeafSfWorker *w)
{
	return DB(w)->held && w->lease.worker_id >= 0 && leaf_sf_worker_id < 0;
}

/*
 * Give our row up, with mark hwm.  Should that fail, a renewal tells
 * whether the row is still ours.
 */
static bool
leaf_sf_db_give_up_lease(LeafSfWorker *w, int64 hwm)
{
	char		reason[LEAF_SF_REASON_LEN];
	int			wid = w->lease.worker_id;

	if (!leaf_sf_db_give_up(&w->node, DB(w), hwm, reason, sizeof(reason)))
	{
		ereport(LOG,
				(errmsg("could not give up worker ID %d in the allocation database: %s",
						wid, reason)));
		return false;
	}
	ereport(LOG,
			(errmsg("leaf snowflake worker gave up worker ID %d in the allocation database, with mark " INT64_FORMAT,
					wid, hwm),
			 errdetail("The row stays; another node may take it over once its mark has passed.")));
	return true;
}

/*
 * The lease in the allocation database ends now, above what was used.  A
 * row bound for good stays ours when released, so the file written after
 * may stand in at the next start as before.
 */
static void
leaf_sf_db_release_lease(LeafSfWorker *w, int64 hwm)
{
	LeafSfDbState *st = (LeafSfDbState *) w->source_state;
	LeafSfDbLease *db = &st->db;
	bool		for_good = db->held && db->bound && db->reclaim_ms <= 0;

	if (db->held && leaf_sf_db_release(&w->node, db, hwm))
		st->released_bound = for_good;
	(void) leaf_sf_file_lower(w, hwm);
}

static void
leaf_sf_db_stop(LeafSfWorker *w)
{
	leaf_sf_db_disconnect();
}

/*
 * A worker ID from the allocation database is recycled there, unless its
 * row is bound to this node for good, held or released at a clean stop:
 * the file may then stand in.
 */
static bool
leaf_sf_db_recyclable(LeafSfWorker *w)
{
	LeafSfDbState *st = (LeafSfDbState *) w->source_state;
	LeafSfDbLease *db = &st->db;

	if (leaf_sf_worker_id != -1)
		return false;
	if (leaf_sf_db_standing_in(w))
		return false;
	return !((db->held || st->released_bound) && db->bound &&
			 db->reclaim_ms <= 0);
}

static void
leaf_sf_db_init(LeafSfWorker *w)
{
	w->source_state = palloc0(sizeof(LeafSfDbState));
	leaf_sf_choose_root(w, false);
}

/* A hand-set worker ID is checked as without the database first. */
static void
leaf_sf_db_start(LeafSfWorker *w)
{
	if (leaf_sf_worker_id >= 0)
		(void) leaf_sf_setting_take(w);
}

static bool
leaf_sf_db_remote(LeafSfWorker *w)
{
	return true;
}

const LeafSfSource leaf_sf_source_db = {
	.name = "database",
	.epoch_hint = ", or set \"leaf.worker_id\" to a worker ID no node ever used",
	.init = leaf_sf_db_init,
	.start = leaf_sf_db_start,
	.remote = leaf_sf_db_remote,
	.take = leaf_sf_db_take,
	.settled = leaf_sf_db_settled,
	.earlier_holder_ms = leaf_sf_earlier_holder_ms,
	.file_first = leaf_sf_db_file_first,
	.renew = leaf_sf_db_heartbeat,
	.bound = leaf_sf_db_bound,
	.lease_out = leaf_sf_db_lease_out,
	.confirmed = leaf_sf_db_confirmed,
	.can_give_up = leaf_sf_db_can_give_up,
	.give_up = leaf_sf_db_give_up_lease,
	.release = leaf_sf_db_release_lease,
	.stop = leaf_sf_db_stop,
	.recyclable = leaf_sf_db_recyclable,
	.record = leaf_sf_record_plain,
};

/*
 * The state file standing in for a bound lease in the unreachable
 * allocation database: only a name, for the worker ID it gives
 * (leaf_sf_db_fall_back), in the status and the file.
 */
const LeafSfSource leaf_sf_source_db_file = {
	.name = "database file",
};
