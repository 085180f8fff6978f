/*-------------------------------------------------------------------------
 *
 * leaf_sf_worker.c
 *	  The snowflake worker: worker ID, high-water mark, ZooKeeper.
 *
 * One static background worker per instance, with shared memory access
 * but no database connection.  It
 *	- settles the worker ID: leaf.worker_id if set; else the sequence
 *	  number of this node's PERSISTENT_SEQUENTIAL node under
 *	  <leaf.zk_root>/forever (found by address, created if missing, or
 *	  taken over from a long-dead node when leaf.worker_id_reclaim_after
 *	  allows); else, with ZooKeeper unreachable, the worker ID cached in
 *	  $PGDATA/leaf_snowflake.state;
 *	- checks the clock before serving: it must be past the high-water mark
 *	  recorded for this node (in ZooKeeper and in the cache file), and
 *	  within leaf.max_clock_drift_ms of the running peers' median;
 *	- every leaf.heartbeat_interval records a new high-water mark (now plus
 *	  a margin) in the cache file and in the forever node, and only then
 *	  lets the generator use timestamps up to it (the "lease", see
 *	  leaf_snowflake.c);
 *	- holds an ephemeral node <leaf.zk_root>/temporary/<address> while it
 *	  serves, which is how peers find each other.
 *
 * Peer clocks are compared without talking to the peers: each heartbeat
 * writes the writer's own clock into its forever node, and ZooKeeper
 * stamps the write with its own clock (mtime).  "ts - mtime" is thus the
 * writer's offset from ZooKeeper's clock at that moment.  A starting node
 * measures its own offset the same way, with a write to <root>/clock, and
 * compares it with the median offset of the nodes that hold an ephemeral
 * node.  The ZooKeeper clock (the leader's, in an ensemble) cancels out.
 *
 * The ZooKeeper C client runs its own threads.  Only the synchronous API
 * is used, from this process's main thread; the session watcher does
 * nothing; all signals are blocked while zookeeper_init starts the
 * client threads, so that Postgres signal handlers run on the main
 * thread only.  No Postgres function is called from a client thread.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/procsignal.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "leaf_snowflake.h"
#include "leaf_sf_state.h"
#include "leaf_zk_assign.h"
#include "leaf_zk_client.h"



#define LEAF_ZK_CONNECT_MS		4000

/* the worker's own state; this process only */
static LeafZkSession leaf_zk;	/* the ZooKeeper session */
static LeafSfNode leaf_node;	/* this node's address, data directory and
								 * root */
static char leaf_reason[LEAF_SF_REASON_LEN];
static bool leaf_claimed = false;	/* the hand-set worker ID is claimed
									 * in ZooKeeper by this run */
static char leaf_claimed_in[LEAF_ZK_PATH_LEN];	/* root where it was claimed
												 * (this run or before), or "" */
static LeafSfCache leaf_cache;
static int64 leaf_session_id = 0;	/* session our ephemeral node is from */
static bool leaf_zk_bounded = false;	/* our node says: lease bounded by
										 * ZooKeeper's mark */

static int	leaf_wid = -1;		/* worker ID we serve with, -1 if none */
static bool leaf_serving = false;
static int	serving_wid = -1;	/* worker ID the generator uses */
static bool leaf_peer_checked = false;
static char leaf_node_path[LEAF_ZK_PATH_LEN];
static int32 leaf_node_version = -1;
static int64 leaf_zk_hwm = 0;	/* last high-water mark ZooKeeper holds */
static int64 leaf_node_hwm = 0; /* high-water mark read at registration */
static bool leaf_zk_retried = false;	/* a new session was tried before
										 * using the cache file */
static int64 leaf_unconnected_since = 0;	/* session not connected since */
static int64 leaf_file_hwm = 0; /* last high-water mark the file holds */
static bool leaf_new_id = false;	/* the worker ID was given up on request:
									 * the next one starts at its own floor */
static bool leaf_lease_out = false; /* serving, but the lease ran out */
static int64 leaf_lease_out_since = 0;	/* when that was noticed */

/* ---------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------
 */

static void
leaf_not_ready(const char *fmt,...) pg_attribute_printf(1, 2);

/* Do two reasons differ only in their numbers? (then log only once) */
static bool
leaf_same_reason(const char *a, const char *b)
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
leaf_not_ready(const char *fmt,...)
{
	char		buf[LEAF_SF_REASON_LEN];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	if (!leaf_same_reason(buf, leaf_reason))
	{
		ereport(LOG,
				(errmsg("leaf snowflake generator not ready: %s", buf)));
		strlcpy(leaf_reason, buf, sizeof(leaf_reason));
	}
	leaf_serving = false;
	leaf_lease_out = false;
	leaf_sf_report(LEAF_SF_NOT_READY, buf);
}

/* Wait on our latch; false if shutdown was requested. */
static bool
leaf_wait(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 Max(ms, 1), PG_WAIT_EXTENSION);
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
leaf_host_not_unique(const char *host)
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
leaf_compute_address(void)
{
	char		host[LEAF_SF_ADDR_LEN];
	const char *p = ListenAddresses ? ListenAddresses : "";

	leaf_node.addr[0] = '\0';
	if (leaf_sf_node_address && leaf_sf_node_address[0] != '\0')
	{
		strlcpy(leaf_node.addr, leaf_sf_node_address, sizeof(leaf_node.addr));
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
			if (!leaf_host_not_unique(host))
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
		if (leaf_host_not_unique(host))
			return;
	}
	snprintf(leaf_node.addr, sizeof(leaf_node.addr), "%s:%d", host, PostPortNumber);
}

/*
 * The identity of this data directory: the system identifier (shared by
 * every physical copy) and the inode of the directory (different in each
 * copy made by pg_basebackup, a restore or a file copy).
 */
static void
leaf_compute_identity(void)
{
	struct stat st;
	unsigned long long ino = 0;

	if (stat(DataDir, &st) == 0)
		ino = (unsigned long long) st.st_ino;
	snprintf(leaf_node.identity, sizeof(leaf_node.identity), UINT64_FORMAT ":%llu",
			 GetSystemIdentifier(), ino);
}

/*
 * May another node take this node's worker ID over while it is down?
 * Yes if ZooKeeper holds "bounded" for our forever node, or if recycling
 * is on here, so that the next heartbeat will say so.  The state file
 * records the answer: whether the file may stand in for ZooKeeper at the
 * next start depends on what this node declared, not on the setting of
 * that day.
 */
static bool
leaf_recyclable(void)
{
	return leaf_sf_worker_id == -1 &&
		(leaf_zk_bounded || leaf_sf_reclaim_after_ms > 0);
}

/*
 * Write the state file and, if that worked, note the mark it now holds.
 * Returns false (after logging) on failure.
 */
static bool
leaf_cache_write(int worker_id, const char *source, int64 hwm_ms)
{
	LeafSfStateRecord rec;

	rec.worker_id = worker_id;
	rec.source = source;
	rec.hwm_ms = hwm_ms;
	rec.zk_node = leaf_node_path;
	rec.session_id = leaf_session_id;
	rec.recyclable = leaf_recyclable();
	rec.claimed_in = leaf_claimed_in;
	if (!leaf_sf_state_write(&leaf_cache, &leaf_node, &rec))
		return false;
	leaf_file_hwm = hwm_ms;
	return true;
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
leaf_sf_connect(int wait_ms)
{
	int			waited = 0;

	if (leaf_zk_auth_failed(&leaf_zk))
	{
		leaf_sf_report_zk("authentication failed");
		leaf_not_ready("ZooKeeper refused the credentials of leaf.zk_auth");
		leaf_zk_close(&leaf_zk);
		return false;
	}
	if (!leaf_zk_open(&leaf_zk))
		return false;

	while (!leaf_zk_connected(&leaf_zk) && waited < wait_ms)
	{
		if (!leaf_wait(20))
			break;
		waited += 20;
	}
	leaf_sf_report_zk(leaf_zk_state_name(&leaf_zk));
	return leaf_zk_connected(&leaf_zk);
}

/*
 * Register in ZooKeeper (see leaf_zk_register).  A worker ID that
 * registration chose becomes ours even when the ephemeral node could not
 * be made after that: until the next registration, the state file names
 * it.
 */
static LeafZkResult
leaf_sf_register(LeafZkRegistration *reg)
{
	LeafZkKnown known;

	known.own_session = leaf_session_id;
	known.file_session = leaf_cache.foreign ? 0 : leaf_cache.session_id;
	known.moved_from = leaf_cache.moved_from;
	leaf_zk_register(&leaf_zk, &leaf_node, !leaf_peer_checked, &known, reg);
	if (reg->reason[0] != '\0')
		leaf_not_ready("%s", reg->reason);
	if (reg->chosen)
	{
		leaf_wid = reg->worker_id;
		strlcpy(leaf_node_path, reg->node_path, sizeof(leaf_node_path));
		leaf_node_version = reg->node_version;
		leaf_node_hwm = reg->node_hwm;
		leaf_zk_bounded = reg->bounded;
	}
	if (reg->result == LEAF_ZK_OK)
		leaf_session_id = reg->session_id;
	return reg->result;
}

/*
 * Give our worker ID up in ZooKeeper, on request, with the highest
 * timestamp this or an earlier run may have used with it.
 */
static bool
leaf_sf_abandon(void)
{
	int64		hwm = Max(leaf_sf_get_lease(), leaf_zk_hwm);

	/* whatever this or an earlier run may have used with it */
	hwm = Max(hwm, leaf_file_hwm);
	hwm = Max(hwm, leaf_node_hwm);
	hwm = Max(hwm, leaf_sf_state_mark(&leaf_cache, leaf_wid));
	hwm = Max(hwm, leaf_sf_last_issued_ms() + 1);
	return leaf_zk_abandon(&leaf_zk, &leaf_node, leaf_wid, leaf_node_path,
						   leaf_node_version, hwm);
}

/*
 * Write the heartbeat (time and high-water mark) into our forever node.
 * Returns true if ZooKeeper now holds hwm.
 */
static bool
leaf_zk_heartbeat(int64 now, int64 hwm, bool bounded)
{
	char		data[LEAF_ZK_DATA_LEN];
	int			len = leaf_zk_format(data, sizeof(data), &leaf_node, now, hwm, bounded);
	struct Stat st;
	int			rc;

	rc = zoo_set2(leaf_zk.zh, leaf_node_path, data, len, leaf_node_version, &st);
	if (rc == ZBADVERSION)
	{
		char		cur[LEAF_ZK_DATA_LEN];
		char		owner[LEAF_SF_ADDR_LEN];
		char		id[LEAF_SF_ID_LEN];

		/* a write of ours whose answer was lost, or someone else's */
		if (leaf_zk_get(&leaf_zk, leaf_node_path, cur, sizeof(cur), &st) == ZOK)
		{
			leaf_zk_json_str(cur, "addr", owner, sizeof(owner));
			leaf_zk_json_str(cur, "id", id, sizeof(id));
			if (strcmp(owner, leaf_node.addr) == 0 &&
				(id[0] == '\0' || strcmp(id, leaf_node.identity) == 0))
			{
				leaf_node_version = st.version;
				rc = zoo_set2(leaf_zk.zh, leaf_node_path, data, len,
							  leaf_node_version, &st);
			}
			else
			{
				leaf_not_ready("worker ID %d was taken over by %s", leaf_wid, owner);
				leaf_zk.registered = false;
				leaf_wid = -1;
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
		leaf_not_ready("forever node %s is gone from ZooKeeper (deleted, or ZooKeeper lost its data), registering again",
					   leaf_node_path);
		leaf_zk.registered = false;
		leaf_wid = -1;
		return false;
	}
	if (rc != ZOK)
	{
		leaf_sf_report_zk(leaf_zk_state_name(&leaf_zk));
		return false;
	}
	leaf_node_version = st.version;
	leaf_zk_hwm = hwm;
	leaf_zk_bounded = bounded;
	leaf_sf_report_zk("connected");
	return true;
}

/* ---------------------------------------------------------------------
 * Main loop
 * ---------------------------------------------------------------------
 */

/*
 * While serving, the lease may run out because the mark could not be
 * recorded: calls then wait and fail with LF102.  Say why, once, in the
 * log and in the status (the generator stays "ready" to its callers, who
 * wait for the next heartbeat), and say when the lease is extended again.
 */
static void
leaf_lease_report(int64 now, const char *why)
{
	char		buf[LEAF_SF_REASON_LEN];

	if (!leaf_serving)
		return;
	if (why != NULL && !leaf_lease_out)
	{
		snprintf(buf, sizeof(buf), "the lease ran out: %s", why);
		ereport(LOG,
				(errmsg("leaf snowflake generator not ready: %s", buf),
				 errdetail("Calls fail with LF102 until a new high-water mark is recorded.")));
		leaf_sf_report(LEAF_SF_READY, why);
		leaf_lease_out = true;
		leaf_lease_out_since = now;
	}
	else if (why == NULL && leaf_lease_out)
	{
		ereport(LOG,
				(errmsg("leaf snowflake lease extended again after " INT64_FORMAT " ms, generator ready with worker ID %d",
						now - leaf_lease_out_since, leaf_wid)));
		leaf_sf_report(LEAF_SF_READY, NULL);
		leaf_lease_out = false;
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
leaf_record(bool use_zk, const char *source)
{
	int64		now = leaf_sf_clock_ms();
	int64		hwm = now + leaf_sf_margin_ms();
	int64		lease;
	bool		zk_ok = false;
	bool		bounded = leaf_sf_reclaim_after_ms > 0;

	/* never lower a mark that may have been used */
	hwm = Max(hwm, leaf_sf_get_lease());
	hwm = Max(hwm, leaf_file_hwm);

	if (!leaf_cache_write(leaf_wid, source, hwm))
	{
		if (leaf_sf_get_lease() <= now)
			leaf_lease_report(now, "could not write \"" LEAF_SF_STATE_FILE "\", see the errors above");
		return;
	}

	/*
	 * Without recycling the file is the record that counts: extend the
	 * lease before talking to ZooKeeper, which may block for seconds while
	 * an ensemble elects a leader.
	 */
	if (!use_zk || (!bounded && !leaf_zk_bounded))
		leaf_sf_set_lease(leaf_file_hwm);

	if (use_zk && leaf_zk.registered && leaf_zk.zh != NULL)
		zk_ok = leaf_zk_heartbeat(now, hwm, bounded);
	if (leaf_wid < 0)
		return;

	lease = leaf_file_hwm;
	if (use_zk && (bounded || leaf_zk_bounded))
		lease = Min(lease, leaf_zk_hwm);
	leaf_sf_set_lease(lease);
	if (zk_ok || !use_zk)
		leaf_sf_report_heartbeat(now);

	if (lease > now)
		leaf_lease_report(now, NULL);
	else
	{
		char		why[LEAF_SF_REASON_LEN];

		snprintf(why, sizeof(why),
				 "ZooKeeper has not recorded a new high-water mark (ZooKeeper state: %s), and with worker-ID recycling (leaf.worker_id_reclaim_after) the lease may not pass the mark ZooKeeper holds",
				 leaf_zk_state_name(&leaf_zk));
		leaf_lease_report(now, why);
	}
}

/*
 * Serve with leaf_wid once the clock has passed floor_ms.  Returns false
 * while still waiting.
 */
static bool
leaf_try_serve(int64 floor_ms, bool use_zk, const char *source, bool fresh)
{
	int64		now = leaf_sf_clock_ms();

	if (now < leaf_sf_epoch_ms || now - leaf_sf_epoch_ms >= (INT64CONST(1) << 41))
	{
		leaf_not_ready("the clock is outside the 41-bit range of timestamps since leaf.snowflake_epoch");
		return false;
	}
	if (now <= floor_ms && fresh)
	{
		char		buf[LEAF_SF_REASON_LEN];

		/* expected at every new registration: callers wait */
		snprintf(buf, sizeof(buf),
				 "new worker ID %d is used only from " INT64_FORMAT " ms from now, past the longest lease an earlier holder could still use",
				 leaf_wid, floor_ms - now + 1);
		leaf_sf_report_not_before(floor_ms);
		leaf_serving = false;
		leaf_sf_report(LEAF_SF_STARTING, buf);
		return false;
	}
	if (now <= floor_ms)
	{
		leaf_sf_report_not_before(floor_ms);
		leaf_not_ready("clock is " INT64_FORMAT " ms behind the last time recorded for this node, waiting for it to pass",
					   floor_ms - now + 1);
		return false;
	}

	leaf_record(use_zk, source);

	/* the first heartbeat may have found our worker ID taken over */
	if (leaf_wid < 0 || (use_zk && strcmp(source, "zookeeper") == 0 &&
						 !leaf_zk.registered))
		return false;
	if (leaf_sf_get_lease() <= now)
	{
		leaf_not_ready("could not record the high-water mark of issued timestamps");
		return false;
	}
	if (!leaf_sf_start_serving(leaf_wid, floor_ms, leaf_new_id))
		return false;
	leaf_new_id = false;
	serving_wid = leaf_wid;
	leaf_serving = true;
	leaf_reason[0] = '\0';
	ereport(LOG,
			(errmsg("leaf snowflake generator ready with worker ID %d from %s",
					leaf_wid, source)));
	return true;
}

/* The cache file may stand in for ZooKeeper for this node. */
static bool
leaf_cache_usable(void)
{
	return leaf_cache.valid && !leaf_cache.foreign &&
		strcmp(leaf_cache.source, "zookeeper") == 0 &&
		strcmp(leaf_cache.node_address, leaf_node.addr) == 0 &&
		strcmp(leaf_cache.zk_root, leaf_node.root) == 0;
}

/*
 * Did this node declare its worker ID recyclable, when it last wrote to
 * ZooKeeper?  Then another node may have taken it over while this one was
 * down, whatever leaf.worker_id_reclaim_after says today.  A file of an
 * older release does not say: as if it did.
 */
static bool
leaf_cache_declared_recyclable(void)
{
	return leaf_cache.declared != 0;
}

/* Is the clock within the range of timestamps an ID can hold? */
static bool
leaf_clock_in_range(void)
{
	int64		now = leaf_sf_clock_ms();

	return now >= leaf_sf_epoch_ms &&
		now - leaf_sf_epoch_ms < (INT64CONST(1) << 41);
}

/* On a clean shutdown, bring the recorded mark down to what was used. */
static void
leaf_shutdown(bool use_zk, const char *source)
{
	int64		t1;
	int64		hwm;

	if (!leaf_serving || leaf_wid < 0)
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
	if (hwm >= leaf_file_hwm)
		return;
	if (!leaf_cache_write(leaf_wid, source, hwm))
		return;
	if (use_zk && leaf_zk.registered && leaf_zk.zh != NULL)
		(void) leaf_zk_heartbeat(leaf_sf_clock_ms(), hwm, leaf_zk_bounded);
}

void
leaf_snowflake_worker_main(Datum main_arg)
{
	int64		last_issued;
	bool		use_zk;
	const char *source = "setting";
	int64		floor_ms = 0;
	bool		have_floor = false;
	bool		fresh_floor = false;
	bool		claim;
	bool		claim_refused = false;
	const char *problem;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGUSR1, procsignal_sigusr1_handler);
	BackgroundWorkerUnblockSignals();

	/* no database: this only makes the worker a backend, in pg_stat_activity */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("leaf snowflake worker");

	last_issued = leaf_sf_attach_worker();
	leaf_sf_report(LEAF_SF_STARTING, NULL);
	leaf_compute_address();
	leaf_compute_identity();
	leaf_sf_state_read(&leaf_cache, leaf_node.identity);

	use_zk = (leaf_sf_worker_id == -1);
	claim = !use_zk && leaf_sf_zk_hosts[0] != '\0';

	/*
	 * The root names the fleet: nodes under different roots get worker IDs
	 * from separate numberings.  It has no default, so that a node whose
	 * configuration lost the line does not join another fleet.  A node
	 * that registered under a root before keeps it.
	 */
	strlcpy(leaf_node.root, leaf_sf_zk_root ? leaf_sf_zk_root : "", sizeof(leaf_node.root));
	if (leaf_node.root[0] == '\0' && (use_zk || claim) && leaf_cache.valid &&
		!leaf_cache.foreign && leaf_cache.zk_root[0] != '\0')
	{
		strlcpy(leaf_node.root, leaf_cache.zk_root, sizeof(leaf_node.root));
		ereport(LOG,
				(errmsg("leaf.zk_root is not set, using \"%s\", where this node registered before",
						leaf_node.root),
				 errhint("Set leaf.zk_root = '%s' in the configuration of this node.",
						 leaf_node.root)));
	}
	if (claim && leaf_cache.valid && !leaf_cache.foreign &&
		leaf_cache.worker_id == leaf_sf_worker_id &&
		strcmp(leaf_cache.source, "setting") == 0 && leaf_node.root[0] != '\0' &&
		strcmp(leaf_cache.claimed_in, leaf_node.root) == 0)
		strlcpy(leaf_claimed_in, leaf_node.root, sizeof(leaf_claimed_in));

	if (leaf_cache.foreign)
		ereport(LOG,
				(errmsg("\"%s\" was written by another data directory (%s), this one is %s",
						LEAF_SF_STATE_FILE, leaf_cache.bound_to, leaf_node.identity),
				 errdetail("This data directory is a copy (a standby, a restored backup or a copied directory): the worker IDs recorded there belong to the original.")));
	else if (leaf_cache.moved_from[0] != '\0')
		ereport(LOG,
				(errmsg("\"%s\" was written by data directory %s of another cluster, and is taken as the state of this one (%s)",
						LEAF_SF_STATE_FILE, leaf_cache.moved_from, leaf_node.identity),
				 errdetail("A copy of a data directory keeps its system identifier; a state file of another one was brought here by hand, as after pg_upgrade.")));

	if (!use_zk)
	{
		if (leaf_sf_worker_id < 0 || leaf_sf_worker_id > LEAF_SF_MAX_WORKER_ID)
			leaf_not_ready("leaf.worker_id is %d, but must be between 0 and %d (or -1 to use ZooKeeper)",
						   leaf_sf_worker_id, LEAF_SF_MAX_WORKER_ID);
		else if (leaf_cache.damaged)
		{
			/*
			 * Not the same as no file: the marks it held are lost, and the
			 * clock may be behind the last ID issued (a crash, then a clock
			 * set back).  ZooKeeper keeps marks of its own; a worker ID set
			 * by hand has only this file.
			 */
			leaf_not_ready("\"%s\" is damaged, so the last timestamp issued with worker ID %d is not known; once this node has been stopped for longer than %d ms and its clock is right (or leaf.worker_id is set to a worker ID no node ever used), move the file away and restart the snowflake worker",
						   LEAF_SF_STATE_FILE, leaf_sf_worker_id,
						   2 * leaf_sf_heartbeat_ms + 1000);
		}
		else if (leaf_cache.foreign && leaf_sf_state_mark(&leaf_cache, leaf_sf_worker_id) > 0)
		{
			/* a copy must not serve with the original's worker ID */
			leaf_not_ready("worker ID %d belongs to another data directory: \"%s\" is a copy of the state of %s; set leaf.worker_id to a worker ID no other node uses, or, if the original data directory will never serve again, delete the line \"bound_to\" from \"%s\"",
						   leaf_sf_worker_id, LEAF_SF_STATE_FILE,
						   leaf_cache.bound_to, LEAF_SF_STATE_FILE);
		}
		else
		{
			/* a copy's other worker IDs are not ours: forget their marks */
			if (leaf_cache.foreign)
				memset(leaf_cache.marks, 0, sizeof(leaf_cache.marks));
			leaf_wid = leaf_sf_worker_id;
			floor_ms = Max(last_issued, leaf_sf_state_mark(&leaf_cache, leaf_wid));
			if (leaf_cache.epoch_changed && floor_ms > leaf_sf_clock_ms())
				ereport(LOG,
						(errmsg("leaf.snowflake_epoch was moved later: worker ID %d waits until " INT64_FORMAT " so that its IDs stay above those it issued",
								leaf_wid, floor_ms)));
			leaf_file_hwm = 0;
			have_floor = true;
			leaf_sf_report_identity(leaf_wid, "setting", leaf_node.addr, NULL);
			if (claim)
			{
				const char *bad = leaf_zk_config_problem(&leaf_zk, &leaf_node);

				if (bad != NULL)
				{
					leaf_not_ready("leaf.worker_id is set with leaf.zk_hosts, so it is claimed in ZooKeeper before it is used, but %s", bad);
					leaf_sf_report_zk("not used");
					have_floor = false;
					claim = false;
				}
			}
		}
	}
	else if ((problem = leaf_zk_config_problem(&leaf_zk, &leaf_node)) != NULL)
	{
		leaf_not_ready("%s", problem);
		use_zk = false;
	}
	else if (leaf_cache.foreign)
	{
		/* ZooKeeper holds the marks that count; the copy's are not ours */
		memset(leaf_cache.marks, 0, sizeof(leaf_cache.marks));
		leaf_cache.session_id = 0;
	}

	while (!ShutdownRequestPending)
	{
		long		delay = leaf_sf_heartbeat_ms;

		/* an expired session lost our ephemeral node: register again */
		if (use_zk && leaf_zk.registered && leaf_zk_expired(&leaf_zk))
			leaf_zk.registered = false;

		/*
		 * A session that stays unconnected for longer than its timeout is
		 * as good as expired, even when the client never says so (a server
		 * that lost its data refuses the session, and the client keeps
		 * trying): open a new one.
		 */
		if (use_zk && leaf_zk.zh != NULL)
		{
			int64		now = leaf_sf_clock_ms();

			if (leaf_zk_connected(&leaf_zk))
				leaf_unconnected_since = 0;
			else if (leaf_unconnected_since == 0)
				leaf_unconnected_since = now;
			else if (now - leaf_unconnected_since > leaf_zk_session_timeout())
			{
				ereport(LOG,
						(errmsg("ZooKeeper session of the leaf snowflake worker has not connected for " INT64_FORMAT " ms, more than its timeout, opening a new one",
								now - leaf_unconnected_since)));
				leaf_zk_close(&leaf_zk);
				leaf_unconnected_since = 0;
			}
		}

		/* leaf_snowflake_new_worker_id() */
		if (leaf_sf_new_id_requested())
		{
			if (use_zk && leaf_zk.registered && leaf_zk.zh != NULL && leaf_wid >= 0 &&
				strcmp(source, "zookeeper") == 0)
			{
				int			old_wid = leaf_wid;

				leaf_not_ready("a new worker ID was requested, giving up worker ID %d",
							   old_wid);
				if (leaf_sf_abandon())
				{
					/* nothing of the old worker ID bounds the new one */
					leaf_sf_set_lease(0);
					leaf_file_hwm = 0;
					leaf_zk.registered = false;
					leaf_wid = -1;
					have_floor = false;
					fresh_floor = false;
					floor_ms = 0;
					last_issued = 0;
					leaf_new_id = true;
				}
			}
			else
				ereport(LOG,
						(errmsg("a new snowflake worker ID was requested, but the worker is not registered in ZooKeeper now: ignored")));
		}

		/*
		 * A clock before the epoch (or past the 41-bit range) cannot serve:
		 * do not register, which would use up a worker ID for nothing.
		 */
		if (!leaf_serving && (use_zk || claim) && !leaf_clock_in_range())
		{
			leaf_not_ready("the clock is outside the 41-bit range of timestamps since leaf.snowflake_epoch (it is before the epoch, or more than 2^41 ms after it): not registering until it is inside");
			if (!leaf_wait(1000))
				break;
			continue;
		}

		/* a worker ID set by hand, with ZooKeeper: claim it there */
		if (claim && !leaf_claimed && leaf_wid >= 0)
		{
			bool		connected = leaf_sf_connect(leaf_serving ? 200 : LEAF_ZK_CONNECT_MS);
			LeafZkResult r = LEAF_ZK_RETRY;

			if (ShutdownRequestPending)
				break;
			if (connected)
			{
				char		reason[LEAF_SF_REASON_LEN];

				r = leaf_zk_claim(&leaf_zk, &leaf_node, leaf_wid,
								  leaf_claimed_in, reason);
				if (reason[0] != '\0')
					leaf_not_ready("%s", reason);
				if (r == LEAF_ZK_OK)
				{
					strlcpy(leaf_claimed_in, leaf_node.root,
							sizeof(leaf_claimed_in));
					leaf_claimed = true;
				}
			}
			if (r == LEAF_ZK_OK)
			{
				claim_refused = false;
				leaf_zk_close(&leaf_zk);
				leaf_sf_report_zk("claimed");
			}
			else if (r == LEAF_ZK_FAIL)
			{
				claim_refused = true;
				delay = Max(delay, 10000);
			}
			else if (!connected && !leaf_serving &&
					 strcmp(leaf_claimed_in, leaf_node.root) != 0)
				leaf_not_ready("leaf.worker_id %d is not used before it is claimed in ZooKeeper (leaf.zk_hosts is set), and ZooKeeper at \"%s\" is unreachable; once claimed, the worker ID is used from \"%s\" when ZooKeeper is down",
							   leaf_wid, leaf_sf_zk_hosts, LEAF_SF_STATE_FILE);
		}

		if (use_zk && !leaf_zk.registered)
		{
			/* while serving, never stall the heartbeats waiting for ZooKeeper */
			bool		connected = leaf_sf_connect(leaf_serving ? 200 : LEAF_ZK_CONNECT_MS);
			LeafZkResult r = LEAF_ZK_RETRY;
			LeafZkRegistration reg;

			if (ShutdownRequestPending)
				break;
			if (connected)
				r = leaf_sf_register(&reg);
			if (r == LEAF_ZK_OK)
			{
				int64		f = Max(leaf_node_hwm, last_issued);

				f = Max(f, leaf_sf_state_mark(&leaf_cache, leaf_wid));
				leaf_peer_checked = true;
				if (leaf_serving && (leaf_wid != serving_wid || reg.fresh))
				{
					/* everything up to the lease may have been used */
					leaf_not_ready("ZooKeeper gave worker ID %d (a new registration) instead of %d, restarting the generator",
								   leaf_wid, serving_wid);
					f = Max(f, leaf_sf_get_lease());
				}
				if (reg.fresh)
				{
					/*
					 * ZooKeeper may have lost the node of an earlier holder
					 * of this worker ID.  A running holder finds out within
					 * a session timeout and a heartbeat (its node gone, or
					 * its session never connecting again) and stops; its
					 * IDs carry its clock.  A holder that crashed used
					 * timestamps up to its lease, at most the lease margin
					 * ahead.  Its clock is within leaf.max_clock_drift_ms
					 * of ours.
					 */
					f = Max(f, leaf_sf_clock_ms() +
							Max(leaf_sf_margin_ms(),
								leaf_zk_session_timeout() + leaf_sf_heartbeat_ms) +
							Max(leaf_sf_max_clock_drift_ms, 0));
					fresh_floor = true;
				}
				source = "zookeeper";
				leaf_sf_report_identity(leaf_wid, source, leaf_node.addr,
										leaf_node_path);
				if (leaf_serving && leaf_sf_get_lease() > 0)
				{
					/* back in touch after serving from the cache file */
					ereport(LOG,
							(errmsg("leaf snowflake worker registered in ZooKeeper as worker ID %d",
									leaf_wid)));
				}
				floor_ms = Max(floor_ms, f);
				have_floor = true;

				/*
				 * The state file names the worker ID of this registration
				 * at once, with the floor as its mark: a crash before this
				 * node serves, then a start with ZooKeeper unreachable,
				 * must not take a worker ID from the file that ZooKeeper
				 * has since given to another node.
				 */
				{
					int64		mark = Max(floor_ms, leaf_sf_get_lease());

					mark = Max(mark, leaf_file_hwm);
					mark = Max(mark, leaf_sf_state_mark(&leaf_cache, leaf_wid));
					(void) leaf_cache_write(leaf_wid, source, mark);
				}
			}
			else if (!connected && !leaf_serving && !have_floor &&
					 leaf_zk.zh != NULL && leaf_cache_usable() &&
					 leaf_sf_reclaim_after_ms == 0 &&
					 !leaf_cache_declared_recyclable() && !leaf_zk_retried)
			{
				/*
				 * A server that lost its data refuses a session it has
				 * never seen, and the client then keeps "connecting" just as
				 * if ZooKeeper were down.  Only a new session tells the two
				 * apart, so try one before falling back on the cache file:
				 * a restored ZooKeeper may have given our worker ID to
				 * another node already.
				 */
				leaf_zk_close(&leaf_zk);
				leaf_zk_retried = true;
				delay = 10;
			}
			else if (!connected && !leaf_serving && !have_floor)
			{
				if (leaf_cache_usable() && leaf_sf_reclaim_after_ms == 0 &&
					!leaf_cache_declared_recyclable())
				{
					leaf_wid = leaf_cache.worker_id;
					strlcpy(leaf_node_path, leaf_cache.zk_node,
							sizeof(leaf_node_path));
					floor_ms = Max(leaf_cache.hwm_ms, last_issued);
					have_floor = true;
					source = "cache file";
					leaf_sf_report_identity(leaf_wid, source, leaf_node.addr,
											leaf_node_path);
					ereport(LOG,
							(errmsg("ZooKeeper at \"%s\" is unreachable, using worker ID %d from \"%s\"",
									leaf_sf_zk_hosts, leaf_wid, LEAF_SF_STATE_FILE)));
				}
				else if (leaf_zk.zh == NULL)
					leaf_not_ready("could not start a ZooKeeper client for \"%s\": %m",
								   leaf_sf_zk_hosts);
				else if (leaf_cache_usable() && leaf_sf_reclaim_after_ms > 0)
					leaf_not_ready("could not connect to ZooKeeper at \"%s\", and leaf.worker_id_reclaim_after forbids using the cached worker ID",
								   leaf_sf_zk_hosts);
				else if (leaf_cache_usable())
					leaf_not_ready("could not connect to ZooKeeper at \"%s\", and worker ID %d in \"%s\" was last declared recyclable in ZooKeeper (leaf.worker_id_reclaim_after was set), so another node may have taken it over while this one was down; the worker ID is used again once ZooKeeper confirms it",
								   leaf_sf_zk_hosts, leaf_cache.worker_id,
								   LEAF_SF_STATE_FILE);
				else
					leaf_not_ready("could not connect to ZooKeeper at \"%s\", and \"%s\" holds no worker ID for this node",
								   leaf_sf_zk_hosts, LEAF_SF_STATE_FILE);
			}
			else if (r == LEAF_ZK_FAIL)
				delay = Max(delay, 10000);
		}

		if (have_floor && leaf_wid >= 0 && !leaf_serving &&
			(!claim || leaf_claimed ||
			 (!claim_refused && strcmp(leaf_claimed_in, leaf_node.root) == 0)))
		{
			if (!leaf_try_serve(floor_ms, use_zk, source, fresh_floor))
				delay = Min(delay, Max(floor_ms - leaf_sf_clock_ms() + 1, 10));
			else
				fresh_floor = false;
		}
		else if (leaf_serving)
			leaf_record(use_zk, source);

		if (!leaf_wait(delay))
			break;
	}

	leaf_shutdown(use_zk, source);
	leaf_zk_close(&leaf_zk);
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
