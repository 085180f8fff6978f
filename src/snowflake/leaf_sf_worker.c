/*-------------------------------------------------------------------------
 *
 * leaf_sf_worker.c
 *	  The snowflake worker: its main loop, and the lease.
 *
 * One static background worker per instance, with shared memory access
 * but no database connection.  It
 *	- settles the worker ID: leaf.worker_id if set (claimed in ZooKeeper
 *	  first if leaf.zk_hosts is set too); else the sequence number of this
 *	  node's forever node in ZooKeeper (leaf_zk_assign.c); else, with
 *	  ZooKeeper unreachable, the worker ID cached in the state file
 *	  $PGDATA/leaf_snowflake.state (leaf_sf_state.c);
 *	- checks the clock before serving: it must be past the high-water mark
 *	  recorded for this node (in ZooKeeper and in the state file), and
 *	  within leaf.max_clock_drift_ms of the running peers' median;
 *	- every leaf.heartbeat_interval records a new high-water mark (now plus
 *	  a margin) in the state file and in the forever node, and only then
 *	  lets the generator use timestamps up to it (the "lease", see
 *	  leaf_snowflake.c);
 *	- holds an ephemeral node <leaf.zk_root>/temporary/<address> while it
 *	  serves, which is how peers find each other.
 * With leaf.worker_id_source = 'database', the worker ID and the marks are
 * held in the allocation database instead of ZooKeeper (leaf_sf_db.c,
 * called from the steps marked "database" below).
 *
 * The main loop runs once per heartbeat, or sooner when a step asks for
 * it.  Each turn watches the ZooKeeper session, handles a request for a
 * new worker ID (leaf_snowflake_new_worker_id()), then takes the one step
 * that the worker's state calls for: claim a hand-set worker ID, register
 * in ZooKeeper (or fall back on the state file), start serving once the
 * clock has passed the floor, or, while serving, record the next mark.
 * Every ZooKeeper request blocks, so a termination request or a reload is
 * acted on between requests.
 *
 * Everything the worker knows is in one LeafSfWorkerState, which lives in
 * leaf_snowflake_worker_main and is passed to every function here.  What
 * other backends see of it goes through leaf_snowflake.c's reports.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/procsignal.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "common/leaf_compat.h"
#include "common/leaf_copy.h"
#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_sf_db.h"
#include "snowflake/leaf_sf_state.h"
#include "snowflake/leaf_zk_assign.h"
#include "snowflake/leaf_zk_client.h"

/* how long a step waits for a new session to connect, when not serving */
#define LEAF_ZK_CONNECT_MS		4000

/* leaf.zk_root */
static char *leaf_sf_zk_root = NULL;

/*
 * The worker's state.  One instance, in leaf_snowflake_worker_main; this
 * process only.
 */
typedef struct LeafSfWorkerState
{
	/* set at start */
	LeafSfNode	node;			/* this node's address, data directory and
								 * root */
	bool		use_zk;			/* the worker ID comes from ZooKeeper
								 * (leaf.worker_id is -1, and ZooKeeper is
								 * configured usably) */
	bool		claim;			/* the hand-set worker ID is claimed in
								 * ZooKeeper before it is used (leaf.zk_hosts
								 * is set) */
	LeafSfStateFile file;		/* the state file as read at start, with the
								 * marks written since */
	bool		use_db;			/* the worker ID, and its lease, are held in
								 * the allocation database */
	LeafSfDbLease db;			/* that lease */
	char		db_renew_failed[LEAF_SF_REASON_LEN];	/* why the last renewal
														 * failed, or "" */

	/* ZooKeeper */
	LeafZkSession zk;			/* the session, and whether it is
								 * registered */
	int64		unconnected_since;	/* the session has not been connected
									 * since then (ms), or 0 */
	bool		zk_retried;		/* a new session was tried before using the
								 * state file */
	bool		file_refuted;	/* a registration read a tree without the
								 * state file's forever node: the file's
								 * worker ID no longer stands in */
	int			superseded_wid; /* worker ID the state file was written as
								 * superseded for, until a registration
								 * ends: written so while it still serves */
	bool		peer_checked;	/* the clock was compared with the peers'
								 * (at the first registration) */
	int64		session_id;		/* session our ephemeral node is from, or 0 */

	/* the worker ID */
	int			wid;			/* worker ID we serve with, -1 if none */
	const char *source;			/* where it came from: "setting",
								 * "zookeeper" or "cache file" */
	char		node_path[LEAF_ZK_PATH_LEN];	/* our forever node, or "" */
	int32		node_version;	/* its version as of our last write, or -1 */
	int64		node_hwm;		/* the high-water mark it held at
								 * registration */
	bool		zk_bounded;		/* our node says: lease bounded by
								 * ZooKeeper's mark */
	bool		claimed;		/* the hand-set worker ID is claimed in
								 * ZooKeeper by this run */
	bool		claim_refused;	/* the last claim was refused */
	char		claimed_in[LEAF_ZK_PATH_LEN];	/* root where it was claimed
												 * (this run or before), or
												 * "" */

	/* when serving may start */
	int64		last_issued;	/* timestamp of the last ID handed out before
								 * the worker started, or 0 (also once a new
								 * worker ID was requested) */
	int64		floor_ms;		/* IDs carry later timestamps only */
	bool		have_floor;		/* floor_ms is known: serving may start
								 * once the clock has passed it */
	bool		fresh_floor;	/* floor_ms waits out the earlier holders
								 * of a new worker ID */
	bool		new_id;			/* the worker ID was given up on request:
								 * the next one starts at its own floor */
	bool		give_up_unsure;	/* a give-up of wid failed, perhaps after
								 * ZooKeeper made it: the file names wid as
								 * superseded until a heartbeat finds our
								 * node as we left it */

	/* serving and the lease */
	bool		serving;		/* the generator serves with serving_wid */
	int			serving_wid;	/* worker ID the generator uses, -1 if none
								 * yet */
	int64		file_hwm;		/* last high-water mark the file holds */
	int64		zk_hwm;			/* last high-water mark ZooKeeper holds */
	bool		last_zk_ok;		/* the last heartbeat reached ZooKeeper and
								 * found our node */
	bool		lease_out;		/* serving, but the lease ran out */
	int64		lease_out_since;	/* when that was noticed */
	char		reason[LEAF_SF_REASON_LEN];	/* the reason last logged for not
											 * being ready */
} LeafSfWorkerState;

/* ---------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------
 */

static void leaf_sf_not_ready(LeafSfWorkerState *w, const char *fmt,...)
			pg_attribute_printf(2, 3);

/* Do two reasons differ only in their numbers? (then log only once) */
static bool
leaf_sf_same_reason(const char *a, const char *b)
{
	for (;;)
	{
		while (*a >= '0' && *a <= '9')
			a++;
		while (*b >= '0' && *b <= '9')
			b++;
		if (*a != *b)
			return false;
		if (*a == '\0')
			return true;
		a++;
		b++;
	}
}

/*
 * Stop serving (if we were) and publish why.  Logged when the reason
 * changes.
 */
static void
leaf_sf_not_ready(LeafSfWorkerState *w, const char *fmt,...)
{
	char		buf[LEAF_SF_REASON_LEN];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	if (!leaf_sf_same_reason(buf, w->reason))
	{
		ereport(LOG,
				(errmsg("leaf snowflake generator not ready: %s", buf)));
		strlcpy(w->reason, buf, sizeof(w->reason));
	}
	w->serving = false;
	w->lease_out = false;
	leaf_sf_report(LEAF_SF_NOT_READY, buf);
}

/* The worker's own setting: the root it registers under. */
void
leaf_sf_worker_init_settings(void)
{
	DefineCustomStringVariable("leaf.zk_root",
							   "Sets the ZooKeeper path under which snowflake nodes register.",
							   NULL,
							   &leaf_sf_zk_root,
							   "",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);
}

/* the wait event of the worker between its steps, once named */
static uint32 leaf_sf_wait_event = 0;

/* Wait on our latch; false if shutdown was requested. */
static bool
leaf_sf_wait(long ms)
{
	if (leaf_sf_wait_event == 0)
		leaf_sf_wait_event = WaitEventExtensionNew("LeafSnowflakeMain");
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 Max(ms, 1), leaf_sf_wait_event);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
	return !ShutdownRequestPending;
}

/* Is host a name or address that every machine has (loopback, wildcard)? */
static bool
leaf_sf_host_not_unique(const char *host)
{
	return host[0] == '\0' || strcmp(host, "*") == 0 ||
		strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 ||
		pg_strcasecmp(host, "localhost") == 0 ||
		pg_strncasecmp(host, "localhost.", 10) == 0 ||
		strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0;
}

/*
 * The default node address: the first entry of listen_addresses that is
 * neither loopback nor a wildcard, else the host name, plus the port.  It
 * stays empty if neither is unique to this host.
 */
static void
leaf_sf_compute_address(LeafSfNode *node)
{
	char		host[LEAF_SF_ADDR_LEN];
	const char *p = ListenAddresses ? ListenAddresses : "";

	node->addr[0] = '\0';
	if (leaf_sf_node_address && leaf_sf_node_address[0] != '\0')
	{
		strlcpy(node->addr, leaf_sf_node_address, sizeof(node->addr));
		return;
	}

	host[0] = '\0';
	for (;;)
	{
		size_t		len;

		while (*p == ' ' || *p == ',')
			p++;
		len = strcspn(p, " ,");
		if (len == 0)
			break;
		if (len < sizeof(host))
		{
			memcpy(host, p, len);
			host[len] = '\0';
			if (!leaf_sf_host_not_unique(host))
				break;
		}
		host[0] = '\0';
		p += len;
	}
	if (host[0] == '\0')
	{
		if (gethostname(host, sizeof(host)) != 0)
			host[0] = '\0';
		host[sizeof(host) - 1] = '\0';
		if (leaf_sf_host_not_unique(host))
			return;
	}
	snprintf(node->addr, sizeof(node->addr), "%s:%d", host, PostPortNumber);
}

/* The identity of this data directory, as a holder of a worker ID. */
static void
leaf_sf_compute_identity(LeafSfNode *node)
{
	leaf_copy_holder_name(node->identity, sizeof(node->identity));
}

/* Is the clock within the range of timestamps an ID can hold? */
static bool
leaf_sf_clock_in_range(void)
{
	return leaf_sf_ms_in_range(leaf_sf_clock_ms(), leaf_sf_epoch_ms);
}

/* ---------------------------------------------------------------------
 * The state file
 * ---------------------------------------------------------------------
 */

/*
 * May another node take this node's worker ID over while it is down?
 * Yes if ZooKeeper holds "bounded" for our forever node, or if recycling
 * is on here, so that the next heartbeat will say so.  The state file
 * records the answer: whether the file may stand in for ZooKeeper at the
 * next start depends on what this node declared, not on the setting of
 * that day.
 */
static bool
leaf_sf_recyclable(LeafSfWorkerState *w)
{
	/* a worker ID from the allocation database is recycled there */
	if (w->use_db)
		return leaf_sf_worker_id == -1;
	return leaf_sf_worker_id == -1 &&
		(w->zk_bounded || leaf_sf_reclaim_after_ms > 0);
}

/*
 * Write the state file and, if that worked, note the mark it now holds.
 * Returns false (after logging) on failure.
 */
static bool
leaf_sf_file_write(LeafSfWorkerState *w, int64 hwm_ms)
{
	LeafSfStateRecord rec;

	rec.worker_id = w->wid;
	rec.source = w->source;
	/*
	 * A worker ID the file was written as superseded for stays so while
	 * this node still serves with it (until the registration in progress
	 * ends): the file must not stand in with it again.
	 */
	if (w->wid == w->superseded_wid && w->source != NULL &&
		strcmp(w->source, "zookeeper") == 0)
		rec.source = LEAF_SF_SOURCE_SUPERSEDED;
	rec.hwm_ms = hwm_ms;
	rec.lease_ref = w->node_path;
	rec.lease_token = w->session_id;
	rec.recyclable = leaf_sf_recyclable(w);
	rec.claimed_in = strcmp(rec.source, "setting") == 0 ? w->claimed_in : "";
	if (!leaf_sf_state_write(&w->file, &w->node, &rec))
		return false;
	w->file_hwm = hwm_ms;
	/* the file now holds a registration ZooKeeper confirmed */
	if (rec.source != NULL && strcmp(rec.source, "zookeeper") == 0)
		w->file_refuted = false;
	return true;
}

/*
 * The state file on disk names a worker ID that ZooKeeper gave this node,
 * so that it could stand in at the next start, whatever this run found
 * out since.  A file written while the node served from it (source "cache
 * file") names that same worker ID: a node restarted again while
 * ZooKeeper is still unreachable serves with it as the first restart did.
 */
static bool
leaf_sf_file_names_own(LeafSfWorkerState *w)
{
	return w->file.valid && !w->file.foreign &&
		(strcmp(w->file.source, "zookeeper") == 0 ||
		 strcmp(w->file.source, "cache file") == 0) &&
		strcmp(w->file.node_address, w->node.addr) == 0 &&
		strcmp(w->file.zk_root, w->node.root) == 0;
}

/* The state file may stand in for ZooKeeper for this node. */
static bool
leaf_sf_file_usable(LeafSfWorkerState *w)
{
	return leaf_sf_file_names_own(w) && !w->file_refuted;
}

/*
 * Did this node declare its worker ID recyclable, when it last wrote to
 * ZooKeeper?  Then another node may have taken it over while this one was
 * down, whatever leaf.worker_id_reclaim_after says today.  A file of an
 * older release does not say: as if it did.
 */
static bool
leaf_sf_file_declared_recyclable(LeafSfWorkerState *w)
{
	return w->file.declared != 0;
}

/*
 * Registration is about to take another worker ID than the one the state
 * file may stand in with, or this node is about to give its worker ID up
 * in ZooKeeper: first write the file so that it no longer stands in with
 * worker ID wid (source "superseded", with mark hwm and the marks of the
 * other worker IDs kept), should this node crash before it names the new
 * one and start with ZooKeeper unreachable.  A file that cannot be
 * written stops standing in for this run only; returns whether it was
 * written (a registration waits until it was).
 */
static bool
leaf_sf_file_supersede(LeafSfWorkerState *w, int wid, int64 hwm)
{
	LeafSfStateRecord rec;
	bool		written;

	rec.worker_id = wid;
	rec.source = LEAF_SF_SOURCE_SUPERSEDED;
	rec.hwm_ms = Max(hwm, 1);
	rec.lease_ref = "";
	rec.lease_token = 0;
	rec.recyclable = leaf_sf_file_declared_recyclable(w);
	rec.claimed_in = "";
	written = leaf_sf_state_write(&w->file, &w->node, &rec);
	if (written)
		w->superseded_wid = wid;
	w->file_refuted = true;
	return written;
}

/*
 * May the worker ID of the state file be used while ZooKeeper is
 * unreachable?  Only if nobody may have taken it over meanwhile.
 */
static bool
leaf_sf_file_stands_in(LeafSfWorkerState *w)
{
	return leaf_sf_file_usable(w) && leaf_sf_reclaim_after_ms == 0 &&
		!leaf_sf_file_declared_recyclable(w);
}

/* ---------------------------------------------------------------------
 * ZooKeeper
 * ---------------------------------------------------------------------
 */

/*
 * Open a session if there is none (or it expired) and wait for it to
 * connect.  Returns true when connected.
 */
static bool
leaf_sf_connect(LeafSfWorkerState *w, int wait_ms)
{
	int			waited = 0;

	if (leaf_zk_auth_failed(&w->zk))
	{
		leaf_sf_report_zk("authentication failed");
		leaf_sf_not_ready(w, "ZooKeeper refused the credentials of \"leaf.zk_auth\"");
		leaf_zk_close(&w->zk);
		return false;
	}
	if (!leaf_zk_open(&w->zk))
	{
		leaf_sf_report_zk("invalid hosts");
		return false;
	}

	while (!leaf_zk_connected(&w->zk) && waited < wait_ms)
	{
		if (!leaf_sf_wait(20))
			break;
		waited += 20;
	}
	leaf_sf_report_zk(leaf_zk_state_name(&w->zk));
	return leaf_zk_connected(&w->zk);
}

/*
 * Register in ZooKeeper (see leaf_zk_register).  Only a registration that
 * finished makes its worker ID ours.  One that failed after it chose a
 * forever node (at the ephemeral node, say) leaves the worker as it was:
 * that worker ID has not waited out its earlier holders, and neither
 * leaf_sf_try_serve nor the state file may take it for a registration.  The
 * next registration finds that node again, as new (leaf_zk_choose).
 */
static LeafZkResult
leaf_sf_register(LeafSfWorkerState *w, LeafZkRegistration *reg)
{
	LeafZkKnown known;
	int			from_file = -1;

	known.own_session = w->session_id;
	known.file_session = w->file.foreign ? 0 : w->file.lease_token;
	known.moved_from = w->file.moved_from;
	/*
	 * What the file on disk names, even if this run no longer uses it: a
	 * registration must not take another worker ID while the file could
	 * stand in with this one at the next start.
	 */
	known.file_worker_id = leaf_sf_file_names_own(w) ? w->file.worker_id : -1;
	leaf_zk_register(&w->zk, &w->node, !w->peer_checked, &known, reg);
	if (reg->peers_checked)
		leaf_sf_report_peers(reg->npeers, reg->peer_offset_ms);
	if (reg->result == LEAF_ZK_LOST)
		leaf_sf_report_zk(leaf_zk_state_name(&w->zk));
	if (reg->reason[0] != '\0')
		leaf_sf_not_ready(w, "%s", reg->reason);
	/*
	 * The worker ID this node may take from the state file, or serves
	 * from it now (the file then says "cache file").
	 */
	if (leaf_sf_file_usable(w))
		from_file = w->file.worker_id;
	else if (w->wid >= 0 && w->source != NULL &&
			 strcmp(w->source, "cache file") == 0)
		from_file = w->wid;
	if (reg->result != LEAF_ZK_OK && reg->tree_read &&
		from_file >= 0 && reg->found_seq != from_file)
	{
		/*
		 * ZooKeeper, reached, holds no forever node of ours with the
		 * state file's worker ID (it lost its data, or the node was
		 * deleted): another node may be given that worker ID.  Should
		 * ZooKeeper be lost again before a registration finishes, the
		 * file must not stand in; if it already does, stop using it.
		 */
		w->file_refuted = true;
		if (w->wid >= 0 && w->source != NULL &&
			strcmp(w->source, "cache file") == 0)
		{
			leaf_sf_not_ready(w, "ZooKeeper holds no forever node of worker ID %d of \"%s\" (it lost its data, or the node was deleted), so that worker ID is no longer used from the file; waiting for a registration in ZooKeeper",
						   w->wid, LEAF_SF_STATE_FILE);
			w->wid = -1;
			w->have_floor = false;
			w->fresh_floor = false;
			w->floor_ms = 0;
			w->node_path[0] = '\0';
		}
		else
			ereport(LOG,
					(errmsg("ZooKeeper holds no forever node of worker ID %d of \"%s\": that worker ID is no longer used from the file",
							from_file, LEAF_SF_STATE_FILE)));
	}
	if (reg->file_superseded &&
		!leaf_sf_file_supersede(w, w->file.worker_id,
								leaf_sf_state_mark(&w->file,
												   w->file.worker_id)))
		leaf_sf_not_ready(w, "ZooKeeper no longer holds worker ID %d of \"%s\" for this node, and the file could not be written to say so; the node registers anew once it can be written",
					   w->file.worker_id, LEAF_SF_STATE_FILE);
	if (reg->result != LEAF_ZK_OK)
		return reg->result;
	w->superseded_wid = -1;
	w->give_up_unsure = false;
	w->wid = reg->worker_id;
	strlcpy(w->node_path, reg->node_path, sizeof(w->node_path));
	w->node_version = reg->node_version;
	w->node_hwm = reg->node_hwm;
	if (reg->node_hwm > 0 && reg->node_epoch_ms < leaf_sf_epoch_ms &&
		(w->file.epoch_moved_from == 0 ||
		 reg->node_epoch_ms < w->file.epoch_moved_from))
		w->file.epoch_moved_from = reg->node_epoch_ms;
	w->zk_bounded = reg->bounded;
	w->session_id = reg->session_id;
	return LEAF_ZK_OK;
}

/* Claim the hand-set worker ID in ZooKeeper (see leaf_zk_claim). */
static LeafZkResult
leaf_sf_claim(LeafSfWorkerState *w)
{
	char		reason[LEAF_SF_REASON_LEN];
	LeafZkResult r;

	r = leaf_zk_claim(&w->zk, &w->node, w->wid, w->claimed_in, reason);
	if (r == LEAF_ZK_LOST)
		leaf_sf_report_zk(leaf_zk_state_name(&w->zk));
	if (reason[0] != '\0')
		leaf_sf_not_ready(w, "%s", reason);
	if (r == LEAF_ZK_OK)
	{
		strlcpy(w->claimed_in, w->node.root, sizeof(w->claimed_in));
		w->claimed = true;
	}
	return r;
}

/*
 * The highest timestamp this or an earlier run may have used with our
 * worker ID: the mark it keeps when it is given up.
 */
static int64
leaf_sf_given_up_mark(LeafSfWorkerState *w)
{
	int64		hwm = Max(leaf_sf_get_lease(), w->zk_hwm);

	hwm = Max(hwm, w->file_hwm);
	hwm = Max(hwm, w->node_hwm);
	hwm = Max(hwm, leaf_sf_state_mark(&w->file, w->wid));
	hwm = Max(hwm, leaf_sf_last_issued_ms() + 1);
	return hwm;
}

/* Give our worker ID up in ZooKeeper, on request, with mark hwm. */
static bool
leaf_sf_abandon(LeafSfWorkerState *w, int64 hwm)
{
	return leaf_zk_abandon(&w->zk, &w->node, w->wid, w->node_path,
						   w->node_version, hwm);
}

/* ---------------------------------------------------------------------
 * The allocation database (leaf.worker_id_source = 'database')
 * ---------------------------------------------------------------------
 */

/*
 * The token of the lease that the state file names: the one this data
 * directory's last run took, or 0.
 */
static int64
leaf_sf_db_file_token(LeafSfWorkerState *w)
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
leaf_sf_db_file_fleet(LeafSfWorkerState *w)
{
	const char *p = w->file.lease_ref;

	if (!w->file.valid || w->file.foreign || w->file.damaged ||
		strncmp(p, LEAF_SF_DB_FLEET_PREFIX, strlen(LEAF_SF_DB_FLEET_PREFIX)) != 0)
		return 0;
	return strtoi64(p + strlen(LEAF_SF_DB_FLEET_PREFIX), NULL, 10);
}

/*
 * Not holding a worker ID in the allocation database: take one there (or
 * claim the hand-set one).  The floor is past every mark known of it, and
 * for a worker ID taken from no row or from another holder, past the
 * longest lease an earlier holder could still use: its lease in the
 * database (leaf_sf_margin_ms() at most) on a clock within
 * leaf.max_clock_drift_ms of ours.  A worker ID held there may be taken
 * over once its lease has ended, so the state file never stands in for
 * the database (as for ZooKeeper with recycling on): with the database
 * unreachable, the node waits.  Returns false on a shutdown request.
 */
static bool
leaf_sf_db_step(LeafSfWorkerState *w, long *delay)
{
	char		reason[LEAF_SF_REASON_LEN];
	int			want = leaf_sf_worker_id;
	int64		hint = Max(w->last_issued, leaf_sf_get_lease());
	int64		f;
	LeafSfDbResult r;

	hint = Max(hint, w->file_hwm);
	if (want >= 0)
		hint = Max(hint, leaf_sf_state_mark(&w->file, want));
	r = leaf_sf_db_acquire(&w->node, want, hint, leaf_sf_db_file_token(w),
						   leaf_sf_db_file_fleet(w), &w->db, reason,
						   sizeof(reason));
	if (ShutdownRequestPending)
		return false;
	if (r != LEAF_SF_DB_OK)
	{
		if (r != LEAF_SF_DB_RETRY)
			leaf_sf_not_ready(w, "%s", reason);
		else
			leaf_sf_not_ready(w, "could not take a worker ID from the allocation database: %s; \"%s\" does not stand in for it, as a worker ID held there may be taken over once its lease has ended",
							  reason, LEAF_SF_STATE_FILE);
		*delay = Max(*delay, r == LEAF_SF_DB_FAIL ? 10000 : 1000);
		w->have_floor = false;
		return true;
	}

	w->wid = w->db.worker_id;
	f = Max(w->db.row_hwm, w->last_issued);
	f = Max(f, leaf_sf_state_mark(&w->file, w->wid));
	f = Max(f, leaf_sf_get_lease());
	if (want >= 0)
		f = Max(f, w->floor_ms);
	if (w->db.fresh)
	{
		/* its lease, on a clock up to twice the drift from ours */
		f = Max(f, leaf_sf_clock_ms() + leaf_sf_earlier_holder_ms());
		w->fresh_floor = true;
	}
	/* the file names the lease, for the next start to know it as ours */
	w->session_id = w->db.token;
	snprintf(w->node_path, sizeof(w->node_path), LEAF_SF_DB_FLEET_PREFIX INT64_FORMAT,
			 w->db.fleet_id);
	w->floor_ms = f;
	w->have_floor = true;
	if (want < 0)
		w->source = "database";
	leaf_sf_report_identity(w->wid, w->source, w->node.addr, NULL);
	leaf_sf_report_zk("not used");
	ereport(LOG,
			(errmsg("leaf snowflake worker holds worker ID %d in the allocation database%s",
					w->wid, w->db.fresh ? " (new to this node)" : "")));
	/* the file names the worker ID at once, with the floor as its mark */
	(void) leaf_sf_file_write(w, Max(f, leaf_sf_state_mark(&w->file, w->wid)));
	return true;
}

/*
 * Record mark hwm in the allocation database and renew the lease there.
 * Returns whether it was recorded; a row no longer ours stops the node,
 * which takes a worker ID anew.
 */
static bool
leaf_sf_db_heartbeat(LeafSfWorkerState *w, int64 now, int64 hwm)
{
	char		reason[LEAF_SF_REASON_LEN];
	LeafSfDbResult r;

	if (!w->db.held)
		return false;
	r = leaf_sf_db_renew(&w->node, &w->db, hwm, reason, sizeof(reason));
	if (r == LEAF_SF_DB_OK)
	{
		w->db_renew_failed[0] = '\0';
		return true;
	}
	if (r == LEAF_SF_DB_LOST)
	{
		leaf_sf_not_ready(w, "%s, taking a worker ID anew", reason);
		if (leaf_sf_worker_id < 0)
			w->wid = -1;
		w->have_floor = false;
		w->fresh_floor = false;
		return false;
	}
	/* once per reason, as leaf_sf_not_ready logs */
	if (!leaf_sf_same_reason(reason, w->db_renew_failed))
		ereport(LOG,
				(errmsg("leaf snowflake worker could not renew its lease in the allocation database: %s",
						reason)));
	strlcpy(w->db_renew_failed, reason, sizeof(w->db_renew_failed));
	return false;
}

/*
 * The latest timestamp the lease in the allocation database lets this
 * node use: the mark it holds, and no later than the lease there can
 * last, on our monotonic clock from the start of the last renewal.
 */
static int64
leaf_sf_db_lease_end(LeafSfWorkerState *w, int64 now)
{
	int64		left = w->db.until_mono - leaf_sf_mono_ms();

	if (!w->db.held)
		return 0;
	return Min(w->db.db_hwm, now + left);
}

/* ---------------------------------------------------------------------
 * The lease
 * ---------------------------------------------------------------------
 */

/*
 * Write the heartbeat (time and high-water mark) into our forever node.
 * Returns true if ZooKeeper now holds hwm.
 */
static bool
leaf_sf_heartbeat(LeafSfWorkerState *w, int64 now, int64 hwm, bool bounded)
{
	LeafZkNodeData data;
	struct Stat st;
	int			rc;

	leaf_zk_node_data_own(&data, &w->node);
	data.ts = now;
	data.hwm = hwm;
	data.bounded = bounded;
	rc = leaf_zk_node_write(&w->zk, w->node_path, &data, w->node_version, &st);
	if (rc == ZBADVERSION)
	{
		LeafZkNodeData cur;

		/* a write of ours whose answer was lost, or someone else's */
		if (leaf_zk_node_read(&w->zk, w->node_path, &cur, &st) == ZOK)
		{
			if (strcmp(cur.addr, w->node.addr) == 0 &&
				(cur.id[0] == '\0' || strcmp(cur.id, w->node.identity) == 0))
			{
				w->node_version = st.version;
				rc = leaf_zk_node_write(&w->zk, w->node_path, &data,
										w->node_version, &st);
			}
			else if (strncmp(cur.addr, LEAF_ZK_GIVEN_UP_PREFIX,
							 strlen(LEAF_ZK_GIVEN_UP_PREFIX)) == 0)
			{
				/* our give-up, made although its reply did not come */
				leaf_sf_not_ready(w, "worker ID %d was given up in ZooKeeper (%s), registering a new one",
							   w->wid, cur.addr);
				w->zk.registered = false;
				w->wid = -1;
				return false;
			}
			else
			{
				leaf_sf_not_ready(w, "worker ID %d was taken over by %s", w->wid, cur.addr);
				w->zk.registered = false;
				w->wid = -1;
				return false;
			}
		}
	}
	if (rc == ZNONODE)
	{
		/*
		 * Our forever node is gone: deleted, or ZooKeeper lost its data.
		 * Another node may be given our worker ID any moment, so stop at
		 * once and register again.
		 */
		leaf_sf_not_ready(w, "forever node %s is gone from ZooKeeper (deleted, or ZooKeeper lost its data), registering again",
					   w->node_path);
		w->zk.registered = false;
		w->wid = -1;
		return false;
	}
	if (rc != ZOK)
	{
		leaf_sf_report_zk(leaf_zk_state_name(&w->zk));
		return false;
	}
	w->node_version = st.version;
	w->zk_hwm = hwm;
	w->zk_bounded = bounded;
	if (w->give_up_unsure)
	{
		/* written over the version we knew: no give-up was made */
		w->give_up_unsure = false;
		w->superseded_wid = -1;
	}
	leaf_sf_report_zk("connected");
	return true;
}

/*
 * While serving, the lease may run out because the mark could not be
 * recorded: calls then wait and fail with LF102.  Say why, once, in the
 * log and in the status (the generator stays "ready" to its callers, who
 * wait for the next heartbeat), and say when the lease is extended again.
 */
static void
leaf_sf_lease_report(LeafSfWorkerState *w, int64 now, const char *why)
{
	char		buf[LEAF_SF_REASON_LEN];

	if (!w->serving)
		return;
	if (why != NULL && !w->lease_out)
	{
		snprintf(buf, sizeof(buf), "the lease ran out: %s", why);
		ereport(LOG,
				(errmsg("leaf snowflake generator not ready: %s", buf),
				 errdetail("Calls fail with LF102 until a new high-water mark is recorded.")));
		leaf_sf_report(LEAF_SF_READY, why);
		w->lease_out = true;
		w->lease_out_since = now;
	}
	else if (why == NULL && w->lease_out)
	{
		ereport(LOG,
				(errmsg("leaf snowflake lease extended again after " INT64_FORMAT " ms, generator ready with worker ID %d",
						now - w->lease_out_since, w->wid)));
		leaf_sf_report(LEAF_SF_READY, NULL);
		w->lease_out = false;
	}
}

/*
 * Record a new high-water mark and extend the lease.  With ZooKeeper,
 * the mark also goes into our forever node.
 *
 * A forever node that says "bounded" may be taken over by a recycling
 * node once it has gone without heartbeat for long enough, and the new
 * owner starts right above the mark it holds.  So while our node says
 * "bounded", or recycling is on here (and the node is about to say so),
 * the lease never passes what ZooKeeper holds.  A node with recycling off
 * writes "bounded":0 and extends its lease from the file only once
 * ZooKeeper holds that, so nobody takes its worker ID over.
 */
static void
leaf_sf_record(LeafSfWorkerState *w)
{
	int64		now = leaf_sf_clock_ms();
	int64		hwm = now + leaf_sf_margin_ms();
	int64		lease;
	bool		use_zk = w->use_zk;
	bool		zk_ok = false;
	bool		bounded = leaf_sf_reclaim_after_ms > 0;

	/* never lower a mark that may have been used */
	hwm = Max(hwm, leaf_sf_get_lease());
	hwm = Max(hwm, w->file_hwm);

	if (!leaf_sf_file_write(w, hwm))
	{
		if (leaf_sf_get_lease() <= now)
			leaf_sf_lease_report(w, now, "could not write \"" LEAF_SF_STATE_FILE "\", see the errors above");
		return;
	}

	/*
	 * Without recycling the file is the record that counts: extend the
	 * lease before talking to ZooKeeper, which may block for seconds while
	 * an ensemble elects a leader.
	 */
	if (!w->use_db && (!use_zk || (!bounded && !w->zk_bounded)))
		leaf_sf_set_lease(w->file_hwm);

	if (use_zk && w->zk.registered && w->zk.zh != NULL)
		zk_ok = leaf_sf_heartbeat(w, now, hwm, bounded);
	if (w->use_db)
		zk_ok = leaf_sf_db_heartbeat(w, now, hwm);
	w->last_zk_ok = zk_ok;
	if (w->wid < 0 || (w->use_db && !w->db.held))
		return;

	lease = w->file_hwm;
	if (use_zk && (bounded || w->zk_bounded))
		lease = Min(lease, w->zk_hwm);
	if (w->use_db)
		lease = Min(lease, leaf_sf_db_lease_end(w, now));
	leaf_sf_set_lease(lease);
	if (zk_ok || !use_zk)
		leaf_sf_report_heartbeat(now);

	if (lease > now)
		leaf_sf_lease_report(w, now, NULL);
	else if (w->use_db)
		leaf_sf_lease_report(w, now, "the allocation database has not recorded a new high-water mark, and a worker ID held there may not be used past the mark and the lease it holds");
	else
	{
		char		why[LEAF_SF_REASON_LEN];

		snprintf(why, sizeof(why),
				 "ZooKeeper has not recorded a new high-water mark (ZooKeeper state: %s), and with worker-ID recycling (\"leaf.worker_id_reclaim_after\") the lease may not pass the mark ZooKeeper holds",
				 leaf_zk_state_name(&w->zk));
		leaf_sf_lease_report(w, now, why);
	}
}

/*
 * Serve with w->wid once the clock has passed w->floor_ms.  Returns false
 * while still waiting.
 */
static bool
leaf_sf_try_serve(LeafSfWorkerState *w)
{
	int64		now = leaf_sf_clock_ms();
	int64		floor_ms = w->floor_ms;

	if (!leaf_sf_ms_in_range(now, leaf_sf_epoch_ms))
	{
		char		range[64];

		leaf_sf_layout_describe_range(range, sizeof(range));
		leaf_sf_not_ready(w, "the clock is outside the %s since \"leaf.snowflake_epoch\"",
					   range);
		return false;
	}
	if (now <= floor_ms && w->fresh_floor)
	{
		char		buf[LEAF_SF_REASON_LEN];

		/* expected at every new registration: callers wait */
		snprintf(buf, sizeof(buf),
				 "new worker ID %d is used only from " INT64_FORMAT " ms from now, past the longest lease an earlier holder could still use",
				 w->wid, floor_ms - now + 1);
		leaf_sf_report_not_before(floor_ms);
		w->serving = false;
		leaf_sf_report(LEAF_SF_STARTING, buf);
		return false;
	}
	if (now <= floor_ms && w->file.epoch_moved_from > 0)
	{
		/* not the clock: the same IDs now stand for later times */
		leaf_sf_report_not_before(floor_ms);
		leaf_sf_not_ready(w, "\"leaf.snowflake_epoch\" was moved later, from " INT64_FORMAT " to " INT64_FORMAT ", since worker ID %d recorded its last mark, so its IDs stay above those it issued only from " INT64_FORMAT " ms from now; to serve sooner, set \"leaf.snowflake_epoch\" back to " INT64_FORMAT " and restart%s",
					   w->file.epoch_moved_from, leaf_sf_epoch_ms, w->wid,
					   floor_ms - now + 1, w->file.epoch_moved_from,
					   w->use_zk ? ", or call leaf_snowflake_new_worker_id() for another worker ID" :
					   ", or set \"leaf.worker_id\" to a worker ID no node ever used");
		return false;
	}
	if (now <= floor_ms)
	{
		leaf_sf_report_not_before(floor_ms);
		leaf_sf_not_ready(w, "clock is " INT64_FORMAT " ms behind the last time recorded for this node, waiting for it to pass",
					   floor_ms - now + 1);
		return false;
	}
	/* past every mark: a moved epoch no longer holds this node back */
	w->file.epoch_moved_from = 0;

	leaf_sf_record(w);

	/* the first heartbeat may have found our worker ID taken over */
	if (w->wid < 0)
		return false;

	/*
	 * A registration is used only once a heartbeat has found its forever
	 * node still there, as written: the node may have been deleted, or
	 * ZooKeeper may have lost its data, while this node waited to serve
	 * (or was stopped), and then another node may hold the worker ID.
	 * That holds as well when the session of the registration was given
	 * up during the wait (no heartbeat is then tried at all): the status
	 * says so rather than keeping the wait's message.  Once serving, a
	 * heartbeat that finds the node gone stops it.
	 */
	if (w->use_db && !w->last_zk_ok)
	{
		leaf_sf_not_ready(w, "worker ID %d is used once the allocation database records its mark",
						  w->wid);
		return false;
	}
	if (w->use_zk && strcmp(w->source, "zookeeper") == 0 && !w->last_zk_ok)
	{
		leaf_sf_not_ready(w, "worker ID %d is used once ZooKeeper confirms its registration (ZooKeeper state: %s)",
					   w->wid, leaf_zk_state_name(&w->zk));
		return false;
	}
	if (leaf_sf_get_lease() <= now)
	{
		leaf_sf_not_ready(w, "could not record the high-water mark of issued timestamps");
		return false;
	}
	if (!leaf_sf_start_serving(w->wid, floor_ms, w->new_id))
		return false;
	w->new_id = false;
	w->serving_wid = w->wid;
	w->serving = true;
	w->reason[0] = '\0';
	ereport(LOG,
			(errmsg("leaf snowflake generator ready with worker ID %d from %s",
					w->wid, w->source)));
	return true;
}

/* On a clean shutdown, bring the recorded mark down to what was used. */
static void
leaf_sf_shutdown(LeafSfWorkerState *w)
{
	int64		t1;
	int64		hwm;

	if (!w->serving || w->wid < 0)
		return;

	leaf_sf_report(LEAF_SF_STARTING, NULL);
	t1 = leaf_sf_clock_ms();
	leaf_sf_set_lease(t1);
	pg_memory_barrier();

	/*
	 * A backend that read the old lease read its clock before we lowered
	 * it, so its timestamp is at most t1 + 1 (the clock read may straddle
	 * a millisecond boundary); anything later is below the new lease.
	 */
	hwm = Max(leaf_sf_last_issued_ms(), t1 + 1);
	/* the lease in the allocation database ends now, above what was used */
	if (w->use_db)
		leaf_sf_db_release(&w->node, &w->db, hwm);
	if (hwm >= w->file_hwm)
		return;
	if (!leaf_sf_file_write(w, hwm))
		return;
	if (w->use_zk && w->zk.registered && w->zk.zh != NULL)
		(void) leaf_sf_heartbeat(w, leaf_sf_clock_ms(), hwm, w->zk_bounded);
}

/* ---------------------------------------------------------------------
 * Start
 * ---------------------------------------------------------------------
 */

/*
 * The root names the fleet: nodes under different roots get worker IDs
 * from separate numberings.  It has no default, so that a node whose
 * configuration lost the line does not join another fleet.  A node that
 * registered under a root before keeps it.
 */
static void
leaf_sf_choose_root(LeafSfWorkerState *w)
{
	LeafSfStateFile *file = &w->file;

	strlcpy(w->node.root, leaf_sf_zk_root ? leaf_sf_zk_root : "",
			sizeof(w->node.root));
	if (w->node.root[0] == '\0' && (w->use_zk || w->claim) && file->valid &&
		!file->foreign && file->zk_root[0] != '\0')
	{
		strlcpy(w->node.root, file->zk_root, sizeof(w->node.root));
		ereport(LOG,
				(errmsg("\"leaf.zk_root\" is not set, using \"%s\", where this node registered before",
						w->node.root),
				 errhint("Set \"leaf.zk_root\" to '%s' in the configuration of this node.",
						 w->node.root)));
	}
	if (w->claim && file->valid && !file->foreign &&
		file->worker_id == leaf_sf_worker_id &&
		strcmp(file->source, "setting") == 0 && w->node.root[0] != '\0' &&
		strcmp(file->claimed_in, w->node.root) == 0)
		strlcpy(w->claimed_in, w->node.root, sizeof(w->claimed_in));
}

/* The worker ID is set by hand (leaf.worker_id): may it be used? */
static void
leaf_sf_take_setting(LeafSfWorkerState *w)
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
	{
		/* a copy's other worker IDs are not ours: forget their marks */
		if (file->foreign)
			leaf_sf_state_forget_marks(file);
		w->wid = leaf_sf_worker_id;
		w->floor_ms = Max(w->last_issued, leaf_sf_state_mark(file, w->wid));
		if (file->epoch_changed && w->floor_ms > leaf_sf_clock_ms())
			ereport(LOG,
					(errmsg("\"leaf.snowflake_epoch\" was moved later: worker ID %d waits until " INT64_FORMAT " so that its IDs stay above those it issued",
							w->wid, w->floor_ms)));
		if (leaf_sf_ordinal_configured() &&
			!(file->valid && !file->foreign && file->worker_id == w->wid))
		{
			/*
			 * A pod ordinal whose worker ID this data directory did not
			 * serve with last: a new volume, a volume copied or restored
			 * from another pod's (the copy of a block device keeps the
			 * inode, so it is not seen as a copy), or another
			 * leaf.worker_id_offset or pod name than at the last start.
			 * Some other pod may have held the worker ID since this data
			 * directory recorded a mark of it, if it ever did, and issued
			 * IDs up to its lease, on a clock within leaf.max_clock_drift_ms
			 * of ours.  Wait that out, as a new registration in ZooKeeper
			 * does.
			 */
			if (file->valid && !file->foreign && file->worker_id >= 0)
				ereport(LOG,
						(errmsg("leaf snowflake worker ID %d from the pod ordinal is not worker ID %d, which this data directory served with last: it waits out an earlier holder",
								w->wid, file->worker_id),
						 errdetail("\"leaf.worker_id_offset\" or the pod's name changed, or the volume is another pod's."),
						 errhint("Without \"leaf.zk_hosts\", nothing stops a pod that still runs with worker ID %d: change \"leaf.worker_id_offset\" only with every pod of the StatefulSet stopped.",
								 w->wid)));
			w->floor_ms = Max(w->floor_ms, leaf_sf_clock_ms() +
							  leaf_sf_margin_ms() +
							  Max(leaf_sf_max_clock_drift_ms, 0));
			w->fresh_floor = true;
		}
		w->file_hwm = 0;
		w->have_floor = true;
		leaf_sf_report_identity(w->wid, "setting", w->node.addr, NULL);
		if (w->claim)
		{
			const char *zk_state;
			const char *bad = leaf_zk_config_problem(&w->zk, &w->node,
													 &zk_state);

			if (bad != NULL)
			{
				leaf_sf_not_ready(w, "\"leaf.worker_id\" is set with \"leaf.zk_hosts\", so it is claimed in ZooKeeper before it is used, but %s", bad);
				leaf_sf_report_zk("not used");
				w->have_floor = false;
				w->claim = false;
			}
		}
	}
}

/*
 * Set the worker up: who this node is, what the state file holds, where
 * the worker ID comes from, and whether that can work as configured.
 */
static void
leaf_sf_start(LeafSfWorkerState *w)
{
	const char *problem;
	const char *zk_state;
	char		reason[LEAF_SF_REASON_LEN];

	memset(w, 0, sizeof(*w));
	w->source = "setting";
	w->wid = -1;
	w->serving_wid = -1;
	w->node_version = -1;
	w->superseded_wid = -1;

	w->last_issued = leaf_sf_attach_worker();
	leaf_sf_report(LEAF_SF_STARTING, NULL);
	leaf_sf_compute_address(&w->node);
	leaf_sf_compute_identity(&w->node);
	leaf_sf_state_read(&w->file, w->node.identity);

	w->use_zk = (leaf_sf_worker_id == -1);
	w->claim = !w->use_zk && leaf_sf_zk_hosts[0] != '\0';
	w->use_db = (leaf_sf_id_source == LEAF_SF_SOURCE_DATABASE);
	if (w->use_db)
		w->use_zk = w->claim = false;
	leaf_sf_choose_root(w);

	if (w->file.foreign)
		ereport(LOG,
				(errmsg("\"%s\" was written by another data directory (%s), this one is %s",
						LEAF_SF_STATE_FILE, w->file.bound_to, w->node.identity),
				 errdetail("This data directory is a copy (a standby, a restored backup or a copied directory): the worker IDs recorded there belong to the original.")));
	else if (w->file.moved_from[0] != '\0')
		ereport(LOG,
				(errmsg("\"%s\" was written by data directory %s of another cluster, and is taken as the state of this one (%s)",
						LEAF_SF_STATE_FILE, w->file.moved_from, w->node.identity),
				 errdetail("A copy of a data directory keeps its system identifier; a state file of another one was brought here by hand, as after pg_upgrade.")));

	if ((problem = leaf_sf_db_config_problem()) != NULL)
	{
		leaf_sf_not_ready(w, "%s", problem);
		w->use_zk = w->claim = w->use_db = false;
	}
	else if (leaf_sf_ordinal_problem != NULL)
	{
		/* no worker ID from the ordinal: none from anywhere else either */
		leaf_sf_not_ready(w, "%s", leaf_sf_ordinal_problem);
		w->use_zk = false;
		w->claim = false;
	}
	else if (leaf_sf_state_layout_differs(&w->file, reason, sizeof(reason)))
	{
		/* never mix layouts: serve nothing, register nowhere */
		leaf_sf_not_ready(w, "%s", reason);
		w->use_zk = false;
		w->claim = false;
	}
	else if (w->use_db && leaf_sf_worker_id < 0)
		;						/* the allocation database gives it */
	else if (!w->use_zk)
		leaf_sf_take_setting(w);
	else if ((problem = leaf_zk_config_problem(&w->zk, &w->node,
												&zk_state)) != NULL)
	{
		if (zk_state != NULL)
			leaf_sf_report_zk(zk_state);
		leaf_sf_not_ready(w, "%s", problem);
		w->use_zk = false;
	}
	else if (w->file.foreign)
	{
		/* ZooKeeper holds the marks that count; the copy's are not ours */
		leaf_sf_state_forget_marks(&w->file);
		w->file.lease_token = 0;
	}
}

/* ---------------------------------------------------------------------
 * The steps of the main loop
 * ---------------------------------------------------------------------
 */

/*
 * An expired session lost our ephemeral node: register again.  A session
 * that stays unconnected for longer than its timeout is as good as
 * expired, even when the client never says so (a server that lost its
 * data refuses the session, and the client keeps trying): open a new one.
 */
static void
leaf_sf_watch_session(LeafSfWorkerState *w)
{
	int64		now;

	if (w->zk.registered && leaf_zk_expired(&w->zk))
		w->zk.registered = false;

	if (w->zk.zh == NULL)
		return;
	now = leaf_sf_clock_ms();
	if (leaf_zk_connected(&w->zk))
		w->unconnected_since = 0;
	else if (w->unconnected_since == 0)
		w->unconnected_since = now;
	else if (now - w->unconnected_since > leaf_zk_session_timeout())
	{
		ereport(LOG,
				(errmsg("ZooKeeper session of the leaf snowflake worker has not connected for " INT64_FORMAT " ms, more than its timeout, opening a new one",
						now - w->unconnected_since)));
		leaf_zk_close(&w->zk);
		w->unconnected_since = 0;
	}
}

/*
 * leaf_snowflake_new_worker_id() with worker IDs from the allocation
 * database: give our row up, with the mark of everything this node may
 * have used, and take a worker ID anew.  The state file names the worker
 * ID given up as superseded first, so that it never stands in with it.
 */
static void
leaf_sf_db_handle_new_id(LeafSfWorkerState *w)
{
	char		reason[LEAF_SF_REASON_LEN];
	int64		hwm;
	int			wid = w->wid;

	leaf_sf_not_ready(w, "a new worker ID was requested, giving up worker ID %d",
					  wid);
	hwm = leaf_sf_given_up_mark(w);
	if (!leaf_sf_file_supersede(w, wid, hwm))
	{
		ereport(LOG,
				(errmsg("could not give up worker ID %d: \"%s\" could not be written",
						wid, LEAF_SF_STATE_FILE)));
		return;
	}
	if (!leaf_sf_db_give_up(&w->node, &w->db, hwm, reason, sizeof(reason)))
	{
		/* a renewal tells whether the row is still ours */
		ereport(LOG,
				(errmsg("could not give up worker ID %d in the allocation database: %s",
						wid, reason)));
		return;
	}
	ereport(LOG,
			(errmsg("leaf snowflake worker gave up worker ID %d in the allocation database, with mark " INT64_FORMAT,
					wid, hwm),
			 errdetail("The row stays; another node may take it over once its mark has passed.")));
	leaf_sf_set_lease(0);
	w->file_hwm = 0;
	w->wid = -1;
	w->have_floor = false;
	w->fresh_floor = false;
	w->floor_ms = 0;
	w->last_issued = 0;
	w->new_id = true;
}

/*
 * leaf_snowflake_new_worker_id(): give the worker ID from ZooKeeper up,
 * and register anew.
 */
static void
leaf_sf_handle_new_id(LeafSfWorkerState *w)
{
	int64		hwm;

	if (w->use_db && w->db.held && w->wid >= 0 && leaf_sf_worker_id < 0)
	{
		leaf_sf_db_handle_new_id(w);
		return;
	}
	if (!(w->use_zk && w->zk.registered && w->zk.zh != NULL && w->wid >= 0 &&
		  strcmp(w->source, "zookeeper") == 0))
	{
		ereport(LOG,
				(errmsg("a new snowflake worker ID was requested, but the worker is not registered in ZooKeeper now: ignored")));
		return;
	}

	leaf_sf_not_ready(w, "a new worker ID was requested, giving up worker ID %d",
				   w->wid);
	hwm = leaf_sf_given_up_mark(w);

	/*
	 * The state file first: once ZooKeeper holds the worker ID given up,
	 * recycling may give it to another node, and a crash, then a start
	 * with ZooKeeper unreachable, must not serve it from the file.  A file
	 * that cannot be written keeps the worker ID.
	 */
	if (!leaf_sf_file_supersede(w, w->wid, hwm))
	{
		ereport(LOG,
				(errmsg("could not give up worker ID %d: \"%s\" could not be written",
						w->wid, LEAF_SF_STATE_FILE)));
		return;
	}
	if (!leaf_sf_abandon(w, hwm))
	{
		/*
		 * The worker ID is kept, but a reply lost with the connection does
		 * not say whether ZooKeeper made the write: it may hold the worker
		 * ID given up, for recycling to hand to another node once its mark
		 * passes.  The file keeps naming it as superseded until a
		 * heartbeat finds our node as we left it; a heartbeat that finds it
		 * given up stops the node, which registers anew.
		 */
		w->give_up_unsure = true;
		return;
	}

	/* nothing of the old worker ID bounds the new one */
	leaf_sf_set_lease(0);
	w->file_hwm = 0;
	w->zk.registered = false;
	w->wid = -1;
	w->have_floor = false;
	w->fresh_floor = false;
	w->floor_ms = 0;
	w->last_issued = 0;
	w->new_id = true;
}

/*
 * A worker ID set by hand, with ZooKeeper: claim it there.  Returns false
 * on a shutdown request.
 */
static bool
leaf_sf_claim_step(LeafSfWorkerState *w, long *delay)
{
	bool		connected = leaf_sf_connect(w, w->serving ? 200 : LEAF_ZK_CONNECT_MS);
	LeafZkResult r = LEAF_ZK_RETRY;

	if (ShutdownRequestPending)
		return false;
	if (connected)
		r = leaf_sf_claim(w);
	if (r == LEAF_ZK_OK)
	{
		w->claim_refused = false;
		leaf_zk_close(&w->zk);
		leaf_sf_report_zk("claimed");
	}
	else if (r == LEAF_ZK_FAIL)
	{
		w->claim_refused = true;
		*delay = Max(*delay, 10000);
	}
	else if (!connected && !w->serving &&
			 strcmp(w->claimed_in, w->node.root) != 0)
		leaf_sf_not_ready(w, "\"leaf.worker_id\" %d is not used before it is claimed in ZooKeeper (\"leaf.zk_hosts\" is set), and ZooKeeper at \"%s\" is unreachable; once claimed, the worker ID is used from \"%s\" when ZooKeeper is down",
					   w->wid, leaf_sf_zk_hosts, LEAF_SF_STATE_FILE);
	return true;
}

/*
 * Registration succeeded: the floor of our worker ID is past every mark
 * known of it, and, for a new node, past what an earlier holder may still
 * use.  The state file records the worker ID.
 */
static void
leaf_sf_registered(LeafSfWorkerState *w, const LeafZkRegistration *reg)
{
	int64		f = Max(w->node_hwm, w->last_issued);
	int64		mark;

	f = Max(f, leaf_sf_state_mark(&w->file, w->wid));
	w->peer_checked = true;
	if (w->serving && (w->wid != w->serving_wid || reg->fresh))
	{
		/* everything up to the lease may have been used */
		leaf_sf_not_ready(w, "ZooKeeper gave worker ID %d (a new registration) instead of %d, restarting the generator",
					   w->wid, w->serving_wid);
		f = Max(f, leaf_sf_get_lease());
	}
	if (reg->fresh)
	{
		/*
		 * ZooKeeper may have lost the node of an earlier holder of this
		 * worker ID.  A running holder finds out within a session timeout
		 * and a heartbeat (its node gone, or its session never connecting
		 * again) and stops; its IDs carry its clock.  A holder that crashed
		 * used timestamps up to its lease, at most the lease margin ahead.
		 * Its clock is within leaf.max_clock_drift_ms of ours.
		 */
		f = Max(f, leaf_sf_clock_ms() +
				Max(leaf_sf_margin_ms(),
					leaf_zk_session_timeout() + leaf_sf_heartbeat_ms) +
				Max(leaf_sf_max_clock_drift_ms, 0));
		w->fresh_floor = true;
	}
	w->source = "zookeeper";
	leaf_sf_report_identity(w->wid, w->source, w->node.addr, w->node_path);
	if (w->serving && leaf_sf_get_lease() > 0)
	{
		/* back in touch after serving from the state file */
		ereport(LOG,
				(errmsg("leaf snowflake worker registered in ZooKeeper as worker ID %d",
						w->wid)));
	}
	w->floor_ms = Max(w->floor_ms, f);
	w->have_floor = true;

	/*
	 * The state file names the worker ID of this registration at once,
	 * with the floor as its mark: a crash before this node serves, then a
	 * start with ZooKeeper unreachable, must not take a worker ID from the
	 * file that ZooKeeper has since given to another node.
	 */
	mark = Max(w->floor_ms, leaf_sf_get_lease());
	mark = Max(mark, w->file_hwm);
	mark = Max(mark, leaf_sf_state_mark(&w->file, w->wid));
	(void) leaf_sf_file_write(w, mark);
}

/*
 * ZooKeeper is unreachable and the worker has nothing to serve with: use
 * the worker ID of the state file if it may stand in, else say why not.
 */
static void
leaf_sf_fall_back(LeafSfWorkerState *w, long *delay)
{
	if (w->zk.zh != NULL && leaf_sf_file_stands_in(w) && !w->zk_retried)
	{
		/*
		 * A server that lost its data refuses a session it has never seen,
		 * and the client then keeps "connecting" just as if ZooKeeper were
		 * down.  Only a new session tells the two apart, so try one before
		 * falling back on the state file: a restored ZooKeeper may have
		 * given our worker ID to another node already.
		 */
		leaf_zk_close(&w->zk);
		w->zk_retried = true;
		*delay = 10;
	}
	else if (leaf_sf_file_stands_in(w))
	{
		w->wid = w->file.worker_id;
		strlcpy(w->node_path, w->file.lease_ref, sizeof(w->node_path));
		w->floor_ms = Max(w->file.hwm_ms, w->last_issued);
		w->have_floor = true;
		w->source = "cache file";
		leaf_sf_report_identity(w->wid, w->source, w->node.addr, w->node_path);
		ereport(LOG,
				(errmsg("ZooKeeper at \"%s\" is unreachable, using worker ID %d from \"%s\"",
						leaf_sf_zk_hosts, w->wid, LEAF_SF_STATE_FILE)));
	}
	else if (w->zk.zh == NULL)
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
 * Not registered in ZooKeeper: register, or, with ZooKeeper unreachable
 * and nothing to serve with, fall back on the state file.  Returns false
 * on a shutdown request.
 */
static bool
leaf_sf_register_step(LeafSfWorkerState *w, long *delay)
{
	/* while serving, never stall the heartbeats waiting for ZooKeeper */
	bool		connected = leaf_sf_connect(w, w->serving ? 200 : LEAF_ZK_CONNECT_MS);
	LeafZkRegistration reg;
	LeafZkResult r;

	if (ShutdownRequestPending)
		return false;
	if (!connected)
	{
		if (!w->serving && !w->have_floor)
			leaf_sf_fall_back(w, delay);
		return true;
	}
	r = leaf_sf_register(w, &reg);
	if (r == LEAF_ZK_OK)
		leaf_sf_registered(w, &reg);
	else if (r == LEAF_ZK_FAIL)
		*delay = Max(*delay, 10000);
	return true;
}

/*
 * May the hand-set worker ID serve?  Not before it is claimed, if it is
 * claimed in ZooKeeper: by this run, or before under this root (so that
 * it serves while ZooKeeper is down), unless the last claim was refused.
 */
static bool
leaf_sf_claim_settled(LeafSfWorkerState *w)
{
	if (w->use_db)
		return w->db.held;
	return !w->claim || w->claimed ||
		(!w->claim_refused && strcmp(w->claimed_in, w->node.root) == 0);
}

/* Start serving once the floor allows, or, while serving, record a mark. */
static void
leaf_sf_serve_step(LeafSfWorkerState *w, long *delay)
{
	if (w->have_floor && w->wid >= 0 && !w->serving && leaf_sf_claim_settled(w))
	{
		if (!leaf_sf_try_serve(w))
			*delay = Min(*delay, Max(w->floor_ms - leaf_sf_clock_ms() + 1, 10));
		else
			w->fresh_floor = false;
	}
	else if (w->serving)
		leaf_sf_record(w);
}

/* ---------------------------------------------------------------------
 * Main
 * ---------------------------------------------------------------------
 */

void
leaf_snowflake_worker_main(Datum main_arg)
{
	LeafSfWorkerState w;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGUSR1, procsignal_sigusr1_handler);
	BackgroundWorkerUnblockSignals();

	/* no database: this only makes the worker a backend, in pg_stat_activity */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("leaf snowflake worker");

	leaf_sf_start(&w);

	while (!ShutdownRequestPending)
	{
		long		delay = leaf_sf_heartbeat_ms;

		if (w.use_zk)
			leaf_sf_watch_session(&w);
		if (leaf_sf_new_id_requested())
			leaf_sf_handle_new_id(&w);

		/*
		 * A clock before the epoch (or past the layout's range) cannot serve:
		 * do not register, which would use up a worker ID for nothing.
		 */
		if (!w.serving && (w.use_zk || w.claim || w.use_db) &&
			!leaf_sf_clock_in_range())
		{
			char		range[64];
			char		span[32];

			leaf_sf_layout_describe_range(range, sizeof(range));
			leaf_sf_layout_describe_span(span, sizeof(span));
			leaf_sf_not_ready(&w, "the clock is outside the %s since \"leaf.snowflake_epoch\" (it is before the epoch, or more than %s after it): not registering until it is inside",
						   range, span);
			if (!leaf_sf_wait(1000))
				break;
			continue;
		}

		/* a worker ID set by hand, with ZooKeeper: claim it there */
		if (w.claim && !w.claimed && w.wid >= 0 &&
			!leaf_sf_claim_step(&w, &delay))
			break;
		if (w.use_zk && !w.zk.registered && !leaf_sf_register_step(&w, &delay))
			break;
		/* a hand-set worker ID only once leaf_sf_take_setting took it */
		if (w.use_db && !w.db.held && !w.serving &&
			(leaf_sf_worker_id < 0 || w.wid >= 0) &&
			!leaf_sf_db_step(&w, &delay))
			break;
		leaf_sf_serve_step(&w, &delay);

		if (!leaf_sf_wait(delay))
			break;
	}

	leaf_sf_shutdown(&w);
	leaf_zk_close(&w.zk);
	leaf_sf_db_disconnect();
	leaf_sf_detach_worker();

	/*
	 * Exit code 1: the postmaster starts the worker again after
	 * bgw_restart_time, unless the whole server is shutting down.  Callers
	 * meanwhile wait as for a starting worker.
	 */
	ereport(LOG,
			(errmsg("leaf snowflake worker stopping on a termination request"),
			 errdetail("Unless the server is shutting down, it is started again within a second.")));
	proc_exit(1);
}
