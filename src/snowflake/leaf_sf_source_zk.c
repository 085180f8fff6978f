/*-------------------------------------------------------------------------
 *
 * leaf_sf_source_zk.c
 *	  The source of worker IDs from ZooKeeper, with the state file standing
 *	  in while ZooKeeper is unreachable.
 *
 * The worker ID is the sequence number of this node's forever node,
 * which registration (leaf_zk_assign.c) finds or makes; the node also
 * holds the high-water mark that every heartbeat writes, and whether the
 * lease is bounded by it ("bounded": with recycling, another node may
 * take the worker ID over once its mark has passed).  While it serves,
 * this node holds an ephemeral node <leaf.zk_root>/temporary/<address>,
 * which is how peers find each other; a session that expires or never
 * connects again is replaced, and the node registers again.
 *
 * With ZooKeeper unreachable and nothing to serve with, the worker ID
 * that the state file names stands in (its source "cache file"), unless
 * another node may have taken it over meanwhile: recycling on, or
 * declared, or ZooKeeper, when last reached, held no forever node of it.
 *
 * The session is opened here for the claims of hand-set worker IDs too
 * (leaf_sf_zk_connect).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "postmaster/interrupt.h"

#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_sf_lease.h"
#include "snowflake/leaf_sf_state.h"
#include "snowflake/leaf_zk_assign.h"
#include "snowflake/leaf_zk_client.h"

/* how long a step waits for a new session to connect, when not serving */
#define LEAF_ZK_CONNECT_MS		4000

/* What this source keeps of its own. */
typedef struct LeafSfZkState
{
	LeafZkSession zk;			/* the session, and whether it is
								 * registered */
	int64		unconnected_since;	/* the session has not been connected
									 * since then (ms), or 0 */
	bool		zk_retried;		/* a new session was tried before using the
								 * state file */
	bool		peer_checked;	/* the clock was compared with the peers'
								 * (at the first registration) */
	int32		node_version;	/* our forever node's version as of our last
								 * write, or -1 */
	bool		give_up_unsure; /* a give-up failed, perhaps after ZooKeeper
								 * made it: the file names the worker ID as
								 * superseded until a heartbeat finds our
								 * node as we left it */
} LeafSfZkState;

#define ZK(w)	((LeafSfZkState *) (w)->source_state)

/* leaf_sf_zk_write: our forever node was found changed by another */
#define LEAF_SF_ZK_CHANGED		INT_MIN

/* ---------------------------------------------------------------------
 * The state file standing in
 * ---------------------------------------------------------------------
 */

/*
 * The state file on disk names a worker ID that ZooKeeper gave this node,
 * so that it could stand in at the next start, whatever this run found
 * out since.  A file written while the node served from it (source "cache
 * file") names that same worker ID: a node restarted again while
 * ZooKeeper is still unreachable serves with it as the first restart did.
 */
static bool
leaf_sf_file_names_own(LeafSfWorker *w)
{
	const LeafSfSource *from = leaf_sf_source_named(w->file.source);

	return w->file.valid && !w->file.foreign &&
		(from == &leaf_sf_source_zk || from == &leaf_sf_source_cache_file) &&
		strcmp(w->file.node_address, w->node.addr) == 0 &&
		strcmp(w->file.zk_root, w->node.root) == 0;
}

/* The state file may stand in for ZooKeeper for this node. */
static bool
leaf_sf_file_usable(LeafSfWorker *w)
{
	return leaf_sf_file_names_own(w) && !w->file_refuted;
}

/*
 * May the worker ID of the state file be used while ZooKeeper is
 * unreachable?  Only if nobody may have taken it over meanwhile.
 */
static bool
leaf_sf_file_stands_in(LeafSfWorker *w)
{
	return leaf_sf_file_usable(w) && leaf_sf_reclaim_after_ms == 0 &&
		w->file.declared == 0;
}

/*
 * May another node take this node's worker ID over while it is down?
 * Yes if ZooKeeper holds "bounded" for our forever node, or if recycling
 * is on here, so that the next heartbeat will say so.
 */
static bool
leaf_sf_zk_recyclable(LeafSfWorker *w)
{
	return leaf_sf_worker_id == -1 &&
		(w->lease.bounded || leaf_sf_reclaim_after_ms > 0);
}

/* ---------------------------------------------------------------------
 * The session
 * ---------------------------------------------------------------------
 */

/*
 * Open a session if there is none (or it expired) and wait for it to
 * connect.  Returns true when connected.
 */
bool
leaf_sf_zk_connect(LeafSfWorker *w, LeafZkSession *zk, int wait_ms)
{
	int			waited = 0;

	if (leaf_zk_auth_failed(zk))
	{
		leaf_sf_report_zk("authentication failed");
		leaf_sf_not_ready(w, "ZooKeeper refused the credentials of \"leaf.zk_auth\"");
		leaf_zk_close(zk);
		return false;
	}
	if (!leaf_zk_open(zk))
	{
		leaf_sf_report_zk("invalid hosts");
		return false;
	}

	while (!leaf_zk_connected(zk) && waited < wait_ms)
	{
		if (!leaf_sf_wait(20))
			break;
		waited += 20;
	}
	leaf_sf_report_zk(leaf_zk_state_name(zk));
	return leaf_zk_connected(zk);
}

/*
 * An expired session lost our ephemeral node: register again.  A session
 * that stays unconnected for longer than its timeout is as good as
 * expired, even when the client never says so (a server that lost its
 * data refuses the session, and the client keeps trying): open a new one.
 */
static void
leaf_sf_zk_watch(LeafSfWorker *w)
{
	LeafSfZkState *st = ZK(w);
	int64		now;

	if (st->zk.registered && leaf_zk_expired(&st->zk))
		st->zk.registered = false;

	if (st->zk.zh == NULL)
		return;
	now = leaf_sf_clock_ms();
	if (leaf_zk_connected(&st->zk))
		st->unconnected_since = 0;
	else if (st->unconnected_since == 0)
		st->unconnected_since = now;
	else if (now - st->unconnected_since > leaf_zk_session_timeout())
	{
		ereport(LOG,
				(errmsg("ZooKeeper session of the leaf snowflake worker has not connected for " INT64_FORMAT " ms, more than its timeout, opening a new one",
						now - st->unconnected_since)));
		leaf_zk_close(&st->zk);
		st->unconnected_since = 0;
	}
}

/* ---------------------------------------------------------------------
 * Registration
 * ---------------------------------------------------------------------
 */

/*
 * A registration read ZooKeeper's tree, and it holds no forever node of
 * ours with the state file's worker ID (it lost its data, or the node
 * was deleted): another node may be given that worker ID.  Should
 * ZooKeeper be lost again before a registration finishes, the file must
 * not stand in; if it already does, stop using it.
 */
static void
leaf_sf_zk_refute_file(LeafSfWorker *w, int from_file)
{
	w->file_refuted = true;
	if (w->lease.worker_id >= 0 && w->lease.from == &leaf_sf_source_cache_file)
	{
		leaf_sf_not_ready(w, "ZooKeeper holds no forever node of worker ID %d of \"%s\" (it lost its data, or the node was deleted), so that worker ID is no longer used from the file; waiting for a registration in ZooKeeper",
						  w->lease.worker_id, LEAF_SF_STATE_FILE);
		w->lease.worker_id = -1;
		leaf_sf_floor_lost(w);
		w->fresh_floor = false;
		w->floor_ms = 0;
		w->lease.ref[0] = '\0';
	}
	else
		ereport(LOG,
				(errmsg("ZooKeeper holds no forever node of worker ID %d of \"%s\": that worker ID is no longer used from the file",
						from_file, LEAF_SF_STATE_FILE)));
}

/* Note what a registration that finished gives this node. */
static void
leaf_sf_zk_take_registration(LeafSfWorker *w, const LeafZkRegistration *reg)
{
	w->superseded_wid = -1;
	ZK(w)->give_up_unsure = false;
	w->lease.worker_id = reg->worker_id;
	strlcpy(w->lease.ref, reg->node_path, sizeof(w->lease.ref));
	ZK(w)->node_version = reg->node_version;
	w->lease.taken_mark = reg->node_hwm;
	if (reg->node_hwm > 0 && reg->node_epoch_ms < leaf_sf_epoch_ms &&
		(w->file.epoch_moved_from == 0 ||
		 reg->node_epoch_ms < w->file.epoch_moved_from))
		w->file.epoch_moved_from = reg->node_epoch_ms;
	w->lease.bounded = reg->bounded;
	w->lease.token = reg->session_id;
}

/*
 * Register in ZooKeeper (see leaf_zk_register).  Only a registration that
 * finished makes its worker ID ours.  One that failed after it chose a
 * forever node (at the ephemeral node, say) leaves the worker as it was:
 * that worker ID has not waited out its earlier holders, and neither
 * serving nor the state file may take it for a registration.  The next
 * registration finds that node again, as new (leaf_zk_choose).
 */
static LeafZkResult
leaf_sf_zk_register(LeafSfWorker *w, LeafZkRegistration *reg)
{
	LeafSfZkState *st = ZK(w);
	LeafZkKnown known;
	int			from_file = -1;

	known.own_session = w->lease.token;
	known.file_session = w->file.foreign ? 0 : w->file.lease_token;
	known.moved_from = w->file.moved_from;
	/*
	 * What the file on disk names, even if this run no longer uses it: a
	 * registration must not take another worker ID while the file could
	 * stand in with this one at the next start.
	 */
	known.file_worker_id = leaf_sf_file_names_own(w) ? w->file.worker_id : -1;
	leaf_zk_register(&st->zk, &w->node, !st->peer_checked, &known, reg);
	if (reg->peers_checked)
		leaf_sf_report_peers(reg->npeers, reg->peer_offset_ms);
	if (reg->result == LEAF_ZK_LOST)
		leaf_sf_report_zk(leaf_zk_state_name(&st->zk));
	if (reg->reason[0] != '\0')
		leaf_sf_not_ready(w, "%s", reg->reason);
	/*
	 * The worker ID this node may take from the state file, or serves
	 * from it now (the file then says "cache file").
	 */
	if (leaf_sf_file_usable(w))
		from_file = w->file.worker_id;
	else if (w->lease.worker_id >= 0 &&
			 w->lease.from == &leaf_sf_source_cache_file)
		from_file = w->lease.worker_id;
	if (reg->result != LEAF_ZK_OK && reg->tree_read &&
		from_file >= 0 && reg->found_seq != from_file)
		leaf_sf_zk_refute_file(w, from_file);
	if (reg->file_superseded &&
		!leaf_sf_file_supersede(w, w->file.worker_id,
								leaf_sf_state_mark(&w->file,
												   w->file.worker_id)))
		leaf_sf_not_ready(w, "ZooKeeper no longer holds worker ID %d of \"%s\" for this node, and the file could not be written to say so; the node registers anew once it can be written",
						  w->file.worker_id, LEAF_SF_STATE_FILE);
	if (reg->result != LEAF_ZK_OK)
		return reg->result;
	leaf_sf_zk_take_registration(w, reg);
	return LEAF_ZK_OK;
}

/*
 * ZooKeeper may have lost the node of an earlier holder of a worker ID.
 * A running holder finds out within a session timeout and a heartbeat
 * (its node gone, or its session never connecting again) and stops; its
 * IDs carry its clock.  A holder that crashed used timestamps up to its
 * lease, at most the lease margin ahead.  Its clock is within
 * leaf.max_clock_drift_ms of ours.
 */
static int64
leaf_sf_zk_earlier_holder_ms(void)
{
	return Max(leaf_sf_margin_ms(),
			   leaf_zk_session_timeout() + leaf_sf_heartbeat_ms) +
		Max(leaf_sf_max_clock_drift_ms, 0);
}

/*
 * Registration succeeded: the floor of our worker ID is past every mark
 * known of it, and, for a new node, past what an earlier holder may still
 * use.  The state file records the worker ID.
 */
static void
leaf_sf_zk_registered(LeafSfWorker *w, const LeafZkRegistration *reg)
{
	int64		f = Max(w->lease.taken_mark, w->last_issued);
	int64		mark;
	int			wid = w->lease.worker_id;
	bool		serving = w->phase == LEAF_SF_SERVING;

	f = Max(f, leaf_sf_state_mark(&w->file, wid));
	ZK(w)->peer_checked = true;
	if (serving && (wid != w->serving_wid || reg->fresh))
	{
		/* everything up to the lease may have been used */
		leaf_sf_not_ready(w, "ZooKeeper gave worker ID %d (a new registration) instead of %d, restarting the generator",
						  wid, w->serving_wid);
		f = Max(f, leaf_sf_get_lease());
	}
	w->floor_ms = Max(w->floor_ms, f);
	if (reg->fresh)
		leaf_sf_wait_out_earlier_holder(w);
	w->lease.from = &leaf_sf_source_zk;
	leaf_sf_report_identity(wid, w->lease.from->name, w->node.addr,
							w->lease.ref);
	/* back in touch after serving from the state file */
	if (w->phase == LEAF_SF_SERVING && leaf_sf_get_lease() > 0)
		ereport(LOG,
				(errmsg("leaf snowflake worker registered in ZooKeeper as worker ID %d",
						wid)));
	leaf_sf_floor_known(w);

	/*
	 * The state file names the worker ID of this registration at once,
	 * with the floor as its mark: a crash before this node serves, then a
	 * start with ZooKeeper unreachable, must not take a worker ID from the
	 * file that ZooKeeper has since given to another node.
	 */
	mark = Max(w->floor_ms, leaf_sf_get_lease());
	mark = Max(mark, w->file_hwm);
	mark = Max(mark, leaf_sf_state_mark(&w->file, wid));
	(void) leaf_sf_file_write(w, mark);
}

/* Why the state file does not stand in for ZooKeeper. */
static void
leaf_sf_zk_no_stand_in(LeafSfWorker *w)
{
	if (ZK(w)->zk.zh == NULL)
		leaf_sf_not_ready(w, "could not start a ZooKeeper client for \"%s\": %m",
						  leaf_sf_zk_hosts);
	else if (w->file_refuted)
		leaf_sf_not_ready(w, "could not connect to ZooKeeper at \"%s\", and ZooKeeper, when last reached, held no forever node of worker ID %d of \"%s\"; the node waits for a registration in ZooKeeper",
						  leaf_sf_zk_hosts, w->file.worker_id, LEAF_SF_STATE_FILE);
	else if (leaf_sf_file_usable(w) && leaf_sf_reclaim_after_ms > 0)
		leaf_sf_not_ready(w, "could not connect to ZooKeeper at \"%s\", and \"leaf.worker_id_reclaim_after\" forbids using worker ID %d from \"%s\"",
						  leaf_sf_zk_hosts, w->file.worker_id, LEAF_SF_STATE_FILE);
	else if (leaf_sf_file_usable(w))
		leaf_sf_not_ready(w, "could not connect to ZooKeeper at \"%s\", and worker ID %d in \"%s\" was last declared recyclable in ZooKeeper (\"leaf.worker_id_reclaim_after\" was set), so another node may have taken it over while this one was down; the worker ID is used again once ZooKeeper confirms it",
						  leaf_sf_zk_hosts, w->file.worker_id,
						  LEAF_SF_STATE_FILE);
	else if (w->file.valid && !w->file.foreign &&
			 strcmp(w->file.source, LEAF_SF_SOURCE_SUPERSEDED) == 0)
		leaf_sf_not_ready(w, "could not connect to ZooKeeper at \"%s\", and worker ID %d of \"%s\" was superseded by a registration in ZooKeeper that did not finish; the node waits for a registration in ZooKeeper",
						  leaf_sf_zk_hosts, w->file.worker_id, LEAF_SF_STATE_FILE);
	else
		leaf_sf_not_ready(w, "could not connect to ZooKeeper at \"%s\", and \"%s\" holds no worker ID for this node",
						  leaf_sf_zk_hosts, LEAF_SF_STATE_FILE);
}

/*
 * ZooKeeper is unreachable and the worker has nothing to serve with: use
 * the worker ID of the state file if it may stand in, else say why not.
 */
static void
leaf_sf_zk_fall_back(LeafSfWorker *w, long *delay)
{
	LeafSfZkState *st = ZK(w);

	if (st->zk.zh != NULL && leaf_sf_file_stands_in(w) && !st->zk_retried)
	{
		/*
		 * A server that lost its data refuses a session it has never seen,
		 * and the client then keeps "connecting" just as if ZooKeeper were
		 * down.  Only a new session tells the two apart, so try one before
		 * falling back on the state file: a restored ZooKeeper may have
		 * given our worker ID to another node already.
		 */
		leaf_zk_close(&st->zk);
		st->zk_retried = true;
		*delay = 10;
	}
	else if (leaf_sf_file_stands_in(w))
	{
		w->lease.worker_id = w->file.worker_id;
		strlcpy(w->lease.ref, w->file.lease_ref, sizeof(w->lease.ref));
		w->floor_ms = Max(w->file.hwm_ms, w->last_issued);
		leaf_sf_floor_known(w);
		w->lease.from = &leaf_sf_source_cache_file;
		leaf_sf_report_identity(w->lease.worker_id, w->lease.from->name,
								w->node.addr, w->lease.ref);
		ereport(LOG,
				(errmsg("ZooKeeper at \"%s\" is unreachable, using worker ID %d from \"%s\"",
						leaf_sf_zk_hosts, w->lease.worker_id, LEAF_SF_STATE_FILE)));
	}
	else
		leaf_sf_zk_no_stand_in(w);
}

/*
 * Not registered in ZooKeeper: register, or, with ZooKeeper unreachable
 * and nothing to serve with, fall back on the state file.  Returns false
 * on a shutdown request.
 */
static bool
leaf_sf_zk_take(LeafSfWorker *w, long *delay)
{
	LeafSfZkState *st = ZK(w);
	bool		connected;
	LeafZkRegistration reg;
	LeafZkResult r;

	if (st->zk.registered)
		return true;
	/* while serving, never stall the heartbeats waiting for ZooKeeper */
	connected = leaf_sf_zk_connect(w, &st->zk,
								   w->phase == LEAF_SF_SERVING ? 200 : LEAF_ZK_CONNECT_MS);
	if (ShutdownRequestPending)
		return false;
	if (!connected)
	{
		if (w->phase == LEAF_SF_TAKING)
			leaf_sf_zk_fall_back(w, delay);
		return true;
	}
	r = leaf_sf_zk_register(w, &reg);
	if (r == LEAF_ZK_OK)
		leaf_sf_zk_registered(w, &reg);
	else if (r == LEAF_ZK_FAIL)
		*delay = Max(*delay, 10000);
	return true;
}

/* ---------------------------------------------------------------------
 * The lease
 * ---------------------------------------------------------------------
 */

/*
 * Our forever node no longer holds what we wrote: our give-up, made
 * although its reply did not come, or another node's write.  Stop, and
 * register anew.
 */
static void
leaf_sf_zk_node_changed(LeafSfWorker *w, const LeafZkNodeData *cur)
{
	if (strncmp(cur->addr, LEAF_ZK_GIVEN_UP_PREFIX,
				strlen(LEAF_ZK_GIVEN_UP_PREFIX)) == 0)
		leaf_sf_not_ready(w, "worker ID %d was given up in ZooKeeper (%s), registering a new one",
						  w->lease.worker_id, cur->addr);
	else
		leaf_sf_not_ready(w, "worker ID %d was taken over by %s",
						  w->lease.worker_id, cur->addr);
	ZK(w)->zk.registered = false;
	w->lease.worker_id = -1;
}

/*
 * Write the heartbeat (time and high-water mark) into our forever node
 * over the version we last wrote, or over a write of ours whose answer
 * was lost.  Returns ZooKeeper's answer, or LEAF_SF_ZK_CHANGED if the
 * node was found changed by another (the worker then stopped).
 */
static int
leaf_sf_zk_write(LeafSfWorker *w, const LeafZkNodeData *data, struct Stat *st)
{
	LeafSfZkState *zs = ZK(w);
	LeafZkNodeData cur;
	int			rc;

	rc = leaf_zk_node_write(&zs->zk, w->lease.ref, data, zs->node_version, st);
	if (rc != ZBADVERSION ||
		leaf_zk_node_read(&zs->zk, w->lease.ref, &cur, st) != ZOK)
		return rc;
	if (strcmp(cur.addr, w->node.addr) == 0 &&
		(cur.id[0] == '\0' || strcmp(cur.id, w->node.identity) == 0))
	{
		zs->node_version = st->version;
		return leaf_zk_node_write(&zs->zk, w->lease.ref, data,
								  zs->node_version, st);
	}
	leaf_sf_zk_node_changed(w, &cur);
	return LEAF_SF_ZK_CHANGED;
}

/*
 * Write the heartbeat into our forever node.  Returns true if ZooKeeper
 * now holds hwm.
 */
static bool
leaf_sf_zk_heartbeat(LeafSfWorker *w, int64 now, int64 hwm, bool bounded)
{
	LeafSfZkState *zs = ZK(w);
	LeafZkNodeData data;
	struct Stat st;
	int			rc;

	leaf_zk_node_data_own(&data, &w->node);
	data.ts = now;
	data.hwm = hwm;
	data.bounded = bounded;
	rc = leaf_sf_zk_write(w, &data, &st);
	if (rc == LEAF_SF_ZK_CHANGED)
		return false;
	if (rc == ZNONODE)
	{
		/*
		 * Our forever node is gone: deleted, or ZooKeeper lost its data.
		 * Another node may be given our worker ID any moment, so stop at
		 * once and register again.
		 */
		leaf_sf_not_ready(w, "forever node %s is gone from ZooKeeper (deleted, or ZooKeeper lost its data), registering again",
						  w->lease.ref);
		zs->zk.registered = false;
		w->lease.worker_id = -1;
		return false;
	}
	if (rc != ZOK)
	{
		leaf_sf_report_zk(leaf_zk_state_name(&zs->zk));
		return false;
	}
	zs->node_version = st.version;
	w->lease.mark = hwm;
	w->lease.bounded = bounded;
	if (zs->give_up_unsure)
	{
		/* written over the version we knew: no give-up was made */
		zs->give_up_unsure = false;
		w->superseded_wid = -1;
	}
	leaf_sf_report_zk("connected");
	return true;
}

/*
 * A forever node that says "bounded" may be taken over by a recycling
 * node once it has gone without heartbeat for long enough, and the new
 * owner starts right above the mark it holds.  So while our node says
 * "bounded", or recycling is on here (and the node is about to say so),
 * the lease never passes what ZooKeeper holds.  A node with recycling off
 * writes "bounded":0 and extends its lease from the file only once
 * ZooKeeper holds that, so nobody takes its worker ID over.
 */
static bool
leaf_sf_zk_bounded(LeafSfWorker *w)
{
	return leaf_sf_reclaim_after_ms > 0 || w->lease.bounded;
}

/* Without recycling, the file is the record that counts. */
static bool
leaf_sf_zk_file_first(LeafSfWorker *w)
{
	return !leaf_sf_zk_bounded(w);
}

/* The heartbeat, if registered. */
static bool
leaf_sf_zk_renew(LeafSfWorker *w, int64 now, int64 hwm)
{
	LeafSfZkState *st = ZK(w);

	if (!st->zk.registered || st->zk.zh == NULL)
		return false;
	return leaf_sf_zk_heartbeat(w, now, hwm, leaf_sf_reclaim_after_ms > 0);
}

static int64
leaf_sf_zk_bound(LeafSfWorker *w, int64 now)
{
	return leaf_sf_zk_bounded(w) ? w->lease.mark : PG_INT64_MAX;
}

static void
leaf_sf_zk_lease_out(LeafSfWorker *w, char *buf, size_t len)
{
	snprintf(buf, len,
			 "ZooKeeper has not recorded a new high-water mark (ZooKeeper state: %s), and with worker-ID recycling (\"leaf.worker_id_reclaim_after\") the lease may not pass the mark ZooKeeper holds",
			 leaf_zk_state_name(&ZK(w)->zk));
}

/*
 * A registration is used only once a heartbeat has found its forever
 * node still there, as written: the node may have been deleted, or
 * ZooKeeper may have lost its data, while this node waited to serve (or
 * was stopped), and then another node may hold the worker ID.  That holds
 * as well when the session of the registration was given up during the
 * wait (no heartbeat is then tried at all): the status says so rather
 * than keeping the wait's message.  Once serving, a heartbeat that finds
 * the node gone stops it.
 */
static bool
leaf_sf_zk_confirmed(LeafSfWorker *w)
{
	if (w->lease.from != &leaf_sf_source_zk || w->lease.renewed)
		return true;
	leaf_sf_not_ready(w, "worker ID %d is used once ZooKeeper confirms its registration (ZooKeeper state: %s)",
					  w->lease.worker_id, leaf_zk_state_name(&ZK(w)->zk));
	return false;
}

/* ---------------------------------------------------------------------
 * Giving up, shutting down
 * ---------------------------------------------------------------------
 */

static bool
leaf_sf_zk_can_give_up(LeafSfWorker *w)
{
	LeafSfZkState *st = ZK(w);

	return st->zk.registered && st->zk.zh != NULL &&
		w->lease.worker_id >= 0 && w->lease.from == &leaf_sf_source_zk;
}

/* Give our worker ID up in ZooKeeper, with mark hwm, and register anew. */
static bool
leaf_sf_zk_give_up(LeafSfWorker *w, int64 hwm)
{
	LeafSfZkState *st = ZK(w);

	if (!leaf_zk_abandon(&st->zk, &w->node, w->lease.worker_id, w->lease.ref,
						 st->node_version, hwm))
	{
		/*
		 * The worker ID is kept, but a reply lost with the connection does
		 * not say whether ZooKeeper made the write: it may hold the worker
		 * ID given up, for recycling to hand to another node once its mark
		 * passes.  The file keeps naming it as superseded until a
		 * heartbeat finds our node as we left it; a heartbeat that finds it
		 * given up stops the node, which registers anew.
		 */
		st->give_up_unsure = true;
		return false;
	}
	st->zk.registered = false;
	return true;
}

/* The file's mark comes down to what was used, and so does our node's. */
static void
leaf_sf_zk_release(LeafSfWorker *w, int64 hwm)
{
	LeafSfZkState *st = ZK(w);

	if (!leaf_sf_file_lower(w, hwm))
		return;
	if (st->zk.registered && st->zk.zh != NULL)
		(void) leaf_sf_zk_heartbeat(w, leaf_sf_clock_ms(), hwm,
									w->lease.bounded);
}

static void
leaf_sf_zk_stop(LeafSfWorker *w)
{
	leaf_zk_close(&ZK(w)->zk);
}

/* ---------------------------------------------------------------------
 * Start
 * ---------------------------------------------------------------------
 */

/* A node that registered under a root before keeps it. */
static void
leaf_sf_zk_init(LeafSfWorker *w)
{
	LeafSfZkState *st = palloc0(sizeof(LeafSfZkState));

	st->node_version = -1;
	w->source_state = st;
	leaf_sf_choose_root(w, true);
}

/* ZooKeeper must be configured usably. */
static void
leaf_sf_zk_start(LeafSfWorker *w)
{
	const char *problem;
	const char *zk_state;

	if ((problem = leaf_zk_config_problem(&ZK(w)->zk, &w->node,
										  &zk_state)) != NULL)
	{
		if (zk_state != NULL)
			leaf_sf_report_zk(zk_state);
		leaf_sf_not_ready(w, "%s", problem);
		w->source = &leaf_sf_source_none;
		w->phase = LEAF_SF_CONFIGURING;
	}
	else if (w->file.foreign)
	{
		/* ZooKeeper holds the marks that count; the copy's are not ours */
		leaf_sf_state_forget_marks(&w->file);
		w->file.lease_token = 0;
	}
}

static bool
leaf_sf_zk_remote(LeafSfWorker *w)
{
	return true;
}

static bool
leaf_sf_zk_settled(LeafSfWorker *w)
{
	return true;
}

const LeafSfSource leaf_sf_source_zk = {
	.name = "zookeeper",
	.stand_in = &leaf_sf_source_cache_file,
	.local_checks = true,
	.heartbeat_is_renewal = true,
	.epoch_hint = ", or call leaf_snowflake_new_worker_id() for another worker ID",
	.init = leaf_sf_zk_init,
	.start = leaf_sf_zk_start,
	.watch = leaf_sf_zk_watch,
	.remote = leaf_sf_zk_remote,
	.take = leaf_sf_zk_take,
	.settled = leaf_sf_zk_settled,
	.earlier_holder_ms = leaf_sf_zk_earlier_holder_ms,
	.file_first = leaf_sf_zk_file_first,
	.renew = leaf_sf_zk_renew,
	.bound = leaf_sf_zk_bound,
	.lease_out = leaf_sf_zk_lease_out,
	.confirmed = leaf_sf_zk_confirmed,
	.can_give_up = leaf_sf_zk_can_give_up,
	.give_up = leaf_sf_zk_give_up,
	.release = leaf_sf_zk_release,
	.stop = leaf_sf_zk_stop,
	.recyclable = leaf_sf_zk_recyclable,
	.record = leaf_sf_record_plain,
};

/*
 * The state file standing in for ZooKeeper: only a name, for the worker
 * ID it gives (leaf_sf_zk_fall_back), in the status and the file.
 */
const LeafSfSource leaf_sf_source_cache_file = {
	.name = "cache file",
};
