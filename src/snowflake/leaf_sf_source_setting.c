/*-------------------------------------------------------------------------
 *
 * leaf_sf_source_setting.c
 *	  The source of a worker ID set by hand (leaf.worker_id), or from a
 *	  pod ordinal (leaf_sf_ordinal.c sets leaf.worker_id at start-up).
 *
 * The worker ID is taken as configured, once the state file (the only
 * record of its marks) says it may be: not from a damaged file, not from
 * a copy's.  A pod ordinal this data directory did not serve with last
 * waits out an earlier holder.  With leaf.zk_hosts set, the worker ID is
 * claimed in ZooKeeper before it is used (leaf_zk_claim in
 * leaf_zk_assign.c), and used from the state file while ZooKeeper is down
 * once it was claimed under this root.  The lease is the state file's
 * alone: nobody else may take the worker ID over.
 *
 * The check of the setting (leaf_sf_setting_take) serves the allocation
 * database's source too, for a hand-set worker ID held there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "postmaster/interrupt.h"

#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_sf_lease.h"
#include "snowflake/leaf_sf_state.h"
#include "snowflake/leaf_zk_assign.h"
#include "snowflake/leaf_zk_client.h"

/* how long a step waits for a new session to connect, when not serving */
#define LEAF_ZK_CONNECT_MS		4000

/* What this source keeps of its own: the claim in ZooKeeper. */
typedef struct LeafSfSettingState
{
	LeafZkSession zk;			/* the session the claim is made in */
	bool		claim;			/* the worker ID is claimed in ZooKeeper
								 * before it is used (leaf.zk_hosts is set) */
	bool		claimed;		/* it is claimed by this run */
	bool		claim_refused;	/* the last claim was refused */
	char		claimed_in[LEAF_ZK_PATH_LEN];	/* root where it was claimed
												 * (this run or before), or
												 * "" */
} LeafSfSettingState;

#define SETTING(w)	((LeafSfSettingState *) (w)->source_state)

/*
 * A worker ID this data directory did not serve with last waits out an
 * earlier holder: its lease, on a clock within leaf.max_clock_drift_ms of
 * ours.
 */
static int64
leaf_sf_setting_earlier_holder_ms(void)
{
	return leaf_sf_margin_ms() + Max(leaf_sf_max_clock_drift_ms, 0);
}

/* The root; a claim made under it before still holds. */
static void
leaf_sf_setting_init(LeafSfWorker *w)
{
	LeafSfSettingState *st = palloc0(sizeof(LeafSfSettingState));
	LeafSfStateFile *file = &w->file;

	w->source_state = st;
	st->claim = leaf_sf_zk_hosts[0] != '\0';
	leaf_sf_choose_root(w, st->claim);
	if (st->claim && file->valid && !file->foreign &&
		file->worker_id == leaf_sf_worker_id &&
		leaf_sf_source_named(file->source) == &leaf_sf_source_setting &&
		w->node.root[0] != '\0' && strcmp(file->claimed_in, w->node.root) == 0)
		strlcpy(st->claimed_in, w->node.root, sizeof(st->claimed_in));
}

/* Say why the hand-set worker ID may not be used; false if it may. */
static bool
leaf_sf_setting_refused(LeafSfWorker *w)
{
	LeafSfStateFile *file = &w->file;

	if ((leaf_sf_worker_id < 0 || leaf_sf_worker_id > leaf_sf_max_worker_id()) &&
		leaf_sf_ordinal_configured())
		leaf_sf_not_ready(w, "\"leaf.worker_id\" is %d, the pod ordinal of \"leaf.worker_id_from\" plus \"leaf.worker_id_offset\", but must be between 0 and %d; lower \"leaf.worker_id_offset\", or the StatefulSet's number of replicas",
						  leaf_sf_worker_id, leaf_sf_max_worker_id());
	else if (leaf_sf_worker_id < 0 || leaf_sf_worker_id > leaf_sf_max_worker_id())
		leaf_sf_not_ready(w, "\"leaf.worker_id\" is %d, but must be between 0 and %d (or -1 to use ZooKeeper)",
						  leaf_sf_worker_id, leaf_sf_max_worker_id());
	else if (file->damaged)
	{
		/*
		 * Not the same as no file: the marks it held are lost, and the clock
		 * may be behind the last ID issued (a crash, then a clock set back).
		 * ZooKeeper keeps marks of its own; a worker ID set by hand has only
		 * this file.
		 */
		leaf_sf_not_ready(w, "\"%s\" is damaged, so the last timestamp issued with worker ID %d is not known; once this node has been stopped for longer than %d ms and its clock is right (or \"leaf.worker_id\" is set to a worker ID no node ever used), move the file away and restart the snowflake worker",
						  LEAF_SF_STATE_FILE, leaf_sf_worker_id,
						  2 * leaf_sf_heartbeat_ms + 1000);
	}
	else if (file->foreign && leaf_sf_state_mark(file, leaf_sf_worker_id) > 0)
	{
		/* a copy must not serve with the original's worker ID */
		leaf_sf_not_ready(w, "worker ID %d belongs to another data directory: \"%s\" is a copy of the state of %s; set \"leaf.worker_id\" to a worker ID no other node uses, or, if the original data directory will never serve again, delete the line \"bound_to\" from \"%s\"",
						  leaf_sf_worker_id, LEAF_SF_STATE_FILE,
						  file->bound_to, LEAF_SF_STATE_FILE);
	}
	else
		return false;
	return true;
}

/*
 * Take the hand-set worker ID, if it may be used: its floor is past its
 * mark in the state file.  Returns whether it was taken.
 */
bool
leaf_sf_setting_take(LeafSfWorker *w)
{
	LeafSfStateFile *file = &w->file;
	int			wid = leaf_sf_worker_id;

	if (leaf_sf_setting_refused(w))
		return false;
	/* a copy's other worker IDs are not ours: forget their marks */
	if (file->foreign)
		leaf_sf_state_forget_marks(file);
	w->lease.worker_id = wid;
	w->floor_ms = Max(w->last_issued, leaf_sf_state_mark(file, wid));
	if (file->epoch_changed && w->floor_ms > leaf_sf_clock_ms())
		ereport(LOG,
				(errmsg("\"leaf.snowflake_epoch\" was moved later: worker ID %d waits until " INT64_FORMAT " so that its IDs stay above those it issued",
						wid, w->floor_ms)));
	if (leaf_sf_ordinal_configured() &&
		!(file->valid && !file->foreign && file->worker_id == wid))
	{
		/*
		 * A pod ordinal whose worker ID this data directory did not serve
		 * with last: a new volume, a volume copied or restored from another
		 * pod's (the copy of a block device keeps the inode, so it is not
		 * seen as a copy), or another leaf.worker_id_offset or pod name
		 * than at the last start.  Some other pod may have held the worker
		 * ID since this data directory recorded a mark of it, if it ever
		 * did, and issued IDs up to its lease.  Wait that out, as a new
		 * registration in ZooKeeper does.
		 */
		if (file->valid && !file->foreign && file->worker_id >= 0)
			ereport(LOG,
					(errmsg("leaf snowflake worker ID %d from the pod ordinal is not worker ID %d, which this data directory served with last: it waits out an earlier holder",
							wid, file->worker_id),
					 errdetail("\"leaf.worker_id_offset\" or the pod's name changed, or the volume is another pod's."),
					 errhint("Without \"leaf.zk_hosts\", nothing stops a pod that still runs with worker ID %d: change \"leaf.worker_id_offset\" only with every pod of the StatefulSet stopped.",
							 wid)));
		w->floor_ms = Max(w->floor_ms, leaf_sf_clock_ms() +
						  leaf_sf_setting_earlier_holder_ms());
		w->fresh_floor = true;
	}
	w->file_hwm = 0;
	leaf_sf_floor_known(w);
	leaf_sf_report_identity(wid, leaf_sf_source_setting.name, w->node.addr,
							NULL);
	return true;
}

/* Take the worker ID; with leaf.zk_hosts, ZooKeeper must be usable. */
static void
leaf_sf_setting_start(LeafSfWorker *w)
{
	LeafSfSettingState *st = SETTING(w);
	const char *zk_state;
	const char *bad;

	if (!leaf_sf_setting_take(w) || !st->claim)
		return;
	bad = leaf_zk_config_problem(&st->zk, &w->node, &zk_state);
	if (bad != NULL)
	{
		leaf_sf_not_ready(w, "\"leaf.worker_id\" is set with \"leaf.zk_hosts\", so it is claimed in ZooKeeper before it is used, but %s", bad);
		leaf_sf_report_zk("not used");
		w->phase = LEAF_SF_CONFIGURING;
		st->claim = false;
	}
}

/* Claim the hand-set worker ID in ZooKeeper (see leaf_zk_claim). */
static LeafZkResult
leaf_sf_setting_claim(LeafSfWorker *w)
{
	LeafSfSettingState *st = SETTING(w);
	char		reason[LEAF_SF_REASON_LEN];
	LeafZkResult r;

	r = leaf_zk_claim(&st->zk, &w->node, w->lease.worker_id, st->claimed_in,
					  reason);
	if (r == LEAF_ZK_LOST)
		leaf_sf_report_zk(leaf_zk_state_name(&st->zk));
	if (reason[0] != '\0')
		leaf_sf_not_ready(w, "%s", reason);
	if (r == LEAF_ZK_OK)
	{
		strlcpy(st->claimed_in, w->node.root, sizeof(st->claimed_in));
		st->claimed = true;
	}
	return r;
}

/*
 * With ZooKeeper, claim the worker ID there until it is claimed.  Returns
 * false on a shutdown request.
 */
static bool
leaf_sf_setting_claim_step(LeafSfWorker *w, long *delay)
{
	LeafSfSettingState *st = SETTING(w);
	bool		serving = w->phase == LEAF_SF_SERVING;
	bool		connected;
	LeafZkResult r = LEAF_ZK_RETRY;

	if (!st->claim || st->claimed || w->lease.worker_id < 0)
		return true;
	connected = leaf_sf_zk_connect(w, &st->zk, serving ? 200 : LEAF_ZK_CONNECT_MS);
	if (ShutdownRequestPending)
		return false;
	if (connected)
		r = leaf_sf_setting_claim(w);
	if (r == LEAF_ZK_OK)
	{
		st->claim_refused = false;
		leaf_zk_close(&st->zk);
		leaf_sf_report_zk("claimed");
	}
	else if (r == LEAF_ZK_FAIL)
	{
		st->claim_refused = true;
		*delay = Max(*delay, 10000);
	}
	else if (!connected && !serving &&
			 strcmp(st->claimed_in, w->node.root) != 0)
		leaf_sf_not_ready(w, "\"leaf.worker_id\" %d is not used before it is claimed in ZooKeeper (\"leaf.zk_hosts\" is set), and ZooKeeper at \"%s\" is unreachable; once claimed, the worker ID is used from \"%s\" when ZooKeeper is down",
						  w->lease.worker_id, leaf_sf_zk_hosts, LEAF_SF_STATE_FILE);
	return true;
}

/* A claim asks ZooKeeper. */
static bool
leaf_sf_setting_remote(LeafSfWorker *w)
{
	return SETTING(w)->claim;
}

/*
 * Not before it is claimed, if it is claimed in ZooKeeper: by this run,
 * or before under this root (so that it serves while ZooKeeper is down),
 * unless the last claim was refused.
 */
static bool
leaf_sf_setting_settled(LeafSfWorker *w)
{
	LeafSfSettingState *st = SETTING(w);

	return !st->claim || st->claimed ||
		(!st->claim_refused && strcmp(st->claimed_in, w->node.root) == 0);
}

/* The state file is the lease: nothing else to renew. */
static bool
leaf_sf_setting_file_first(LeafSfWorker *w)
{
	return true;
}

static bool
leaf_sf_setting_renew(LeafSfWorker *w, int64 now, int64 hwm)
{
	return true;
}

static int64
leaf_sf_setting_bound(LeafSfWorker *w, int64 now)
{
	return PG_INT64_MAX;
}

static void
leaf_sf_setting_lease_out(LeafSfWorker *w, char *buf, size_t len)
{
	snprintf(buf, len, "could not record the high-water mark of issued timestamps");
}

/* On a clean shutdown, the file's mark comes down to what was used. */
static void
leaf_sf_setting_release(LeafSfWorker *w, int64 hwm)
{
	(void) leaf_sf_file_lower(w, hwm);
}

static void
leaf_sf_setting_stop(LeafSfWorker *w)
{
	leaf_zk_close(&SETTING(w)->zk);
}

/* Nobody takes a hand-set worker ID over. */
static bool
leaf_sf_setting_recyclable(LeafSfWorker *w)
{
	return false;
}

/* The file says where the worker ID was claimed. */
static void
leaf_sf_setting_record(LeafSfWorker *w, LeafSfStateRecord *rec)
{
	leaf_sf_record_plain(w, rec);
	rec->claimed_in = SETTING(w)->claimed_in;
}

const LeafSfSource leaf_sf_source_setting = {
	.name = "setting",
	.local_checks = true,
	.epoch_hint = ", or set \"leaf.worker_id\" to a worker ID no node ever used",
	.init = leaf_sf_setting_init,
	.start = leaf_sf_setting_start,
	.remote = leaf_sf_setting_remote,
	.take = leaf_sf_setting_claim_step,
	.settled = leaf_sf_setting_settled,
	.earlier_holder_ms = leaf_sf_setting_earlier_holder_ms,
	.file_first = leaf_sf_setting_file_first,
	.renew = leaf_sf_setting_renew,
	.bound = leaf_sf_setting_bound,
	.lease_out = leaf_sf_setting_lease_out,
	.release = leaf_sf_setting_release,
	.stop = leaf_sf_setting_stop,
	.recyclable = leaf_sf_setting_recyclable,
	.record = leaf_sf_setting_record,
};
