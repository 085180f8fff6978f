/*-------------------------------------------------------------------------
 *
 * leaf_zk_assign.c
 *	  Worker IDs from ZooKeeper: registration, claims of hand-set worker
 *	  IDs, giving a worker ID up.
 *
 * Under leaf.zk_root, each node that takes its worker ID from ZooKeeper
 * has a PERSISTENT_SEQUENTIAL node forever/<address>-<number>: the number
 * is the worker ID.  Registration finds this node's forever node by
 * address, takes one over from a node that has been dead for long enough
 * (leaf.worker_id_reclaim_after), or creates one; then it makes the
 * ephemeral node temporary/<address>, which names the forever node and is
 * how running nodes find each other.  A starting node first compares its
 * clock with the running peers' (see below).  A node with a hand-set
 * worker ID (leaf.worker_id) and leaf.zk_hosts claims its ID as
 * claimed/<worker ID>, so that ZooKeeper's numbering skips it and a second
 * node setting the same ID is refused.  The node layout names the layout
 * of the root's IDs (leaf.snowflake_layout); a node of another layout is
 * refused before it registers or claims.
 *
 * Peer clocks are compared without talking to the peers: each heartbeat
 * writes the writer's own clock into its forever node, and ZooKeeper
 * stamps the write with its own clock (mtime).  "ts - mtime" is thus the
 * writer's offset from ZooKeeper's clock at that moment.  A starting node
 * measures its own offset the same way, with a write to <root>/clock, and
 * compares it with the median offset of the nodes that hold an ephemeral
 * node.  The ZooKeeper clock (the leader's, in an ensemble) cancels out.
 *
 * Nothing here keeps state between calls: what a call found comes back in
 * its result, with the reason to report when it did not succeed; the
 * source of worker IDs from ZooKeeper (leaf_sf_source_zk.c) keeps it, or
 * the source of hand-set ones (leaf_sf_source_setting.c) for a claim.  Every call is a series of blocking
 * requests on the worker's session.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "postmaster/interrupt.h"
#include "utils/guc.h"

#include "leaf.h"
#include "snowflake/leaf_sf_layout.h"
#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_zk_assign.h"
#include "snowflake/leaf_zk_client.h"

#ifdef LEAF_TEST_HOOKS
/*
 * The leaf.test_* settings of registration, in a test build only (see
 * leaf_snowflake.c): a stall after a new forever node, and a give-up
 * written whose reply is taken as lost.
 */
static int	leaf_sf_test_register_pause_ms = 0;
static int	leaf_sf_test_abandon_lost_ms = 0;

void
leaf_zk_assign_init_test_settings(void)
{
	DefineCustomIntVariable("leaf.test_register_pause_ms",
							"Pauses the snowflake worker after it created a forever node in ZooKeeper, before the registration goes on (for tests only).",
							NULL,
							&leaf_sf_test_register_pause_ms,
							0, 0, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.test_abandon_lost_ms",
							"Makes the snowflake worker take a give-up it wrote to ZooKeeper for one whose reply was lost, after a pause this long (for tests only).",
							NULL,
							&leaf_sf_test_abandon_lost_ms,
							0, 0, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
}
#endif

/* A child of forever, as read at registration. */
typedef struct LeafZkNode
{
	char		name[LEAF_SF_ADDR_LEN + 16];
	char		owner[LEAF_SF_ADDR_LEN];	/* "addr" in data, else name prefix */
	long		seq;
	char		id[LEAF_SF_ID_LEN];	/* owner's data directory, or "" */
	int64		ts;
	int64		hwm;			/* under our epoch */
	int64		ep;				/* the epoch it was written under */
	int64		mtime;
	int32		version;
	bool		bounded;		/* owner keeps its lease within hwm */
	bool		given_up;		/* given up on request by its owner */
	bool		live;			/* some ephemeral node names it */
} LeafZkNode;

/* What registration reads of the tree, in one registration. */
typedef struct LeafZkRegistry
{
	struct String_vector temp;	/* children of temporary: running nodes */
	struct String_vector children;	/* children of forever */
	struct String_vector claims;	/* children of claimed */
	bool	   *claimed;		/* per worker ID: claimed by hand */
	char	  **temp_names;		/* per running node: the forever node it
								 * names, or NULL */
	LeafZkNode *nodes;			/* per child of forever, as read */
	LeafZkNode *mine;			/* ours, with the lowest worker ID, or NULL */
	LeafZkNode *mine_high;		/* ours, above the limit of worker IDs */
	int64		my_offset;		/* our clock minus ZooKeeper's */
	int64		zk_now;			/* ZooKeeper's clock at the probe */
} LeafZkRegistry;

/* ---------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------
 */

static LeafZkResult leaf_zk_refuse(char *reason, LeafZkResult result,
								   const char *fmt,...) pg_attribute_printf(3, 4);

/* Say why not into reason (LEAF_SF_REASON_LEN bytes); returns result. */
static LeafZkResult
leaf_zk_refuse(char *reason, LeafZkResult result, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(reason, LEAF_SF_REASON_LEN, fmt, ap);
	va_end(ap);
	return result;
}

/* A request failed: say why not (the worker reports the session's state). */
static LeafZkResult
leaf_zk_fail_rc(LeafZkSession *zk, char *reason, const char *what, int rc)
{
	return leaf_zk_refuse(reason, LEAF_ZK_LOST,
						  "ZooKeeper request failed (%s): %s", what, zerror(rc));
}

/*
 * Who claims worker ID wid by hand, as "address (data directory id)" in
 * out; false if nobody does.
 */
static bool
leaf_claim_owner(LeafZkSession *zk, const LeafSfNode *node, int wid,
				 char *out, size_t size)
{
	char		path[LEAF_ZK_PATH_LEN];
	LeafZkNodeData claim;
	struct Stat st;

	leaf_zk_claim_path(path, node->root, wid);
	if (leaf_zk_node_read(zk, path, &claim, &st) != ZOK)
		return false;
	snprintf(out, size, "%s", claim.addr[0] ? claim.addr : "an unknown node");
	return true;
}

/* ---------------------------------------------------------------------
 * Reading the tree
 * ---------------------------------------------------------------------
 */

/*
 * Measure our clock against ZooKeeper's with a write to <root>/clock.
 * Sets *offset to our clock minus ZooKeeper's, *zk_now to ZooKeeper's.
 */
static int
leaf_zk_probe_clock(LeafZkSession *zk, const LeafSfNode *node,
					int64 *offset, int64 *zk_now)
{
	char		path[LEAF_ZK_PATH_LEN];
	struct Stat st;
	int64		before;
	int64		after;
	int			rc;

	leaf_zk_path(path, node->root, LEAF_ZK_CLOCK, NULL);
	before = leaf_sf_clock_ms();
	rc = leaf_zk_set(zk, path, node->addr, -1, &st);
	after = leaf_sf_clock_ms();
	if (rc != ZOK)
		return rc;
	*offset = (before + after) / 2 - st.mtime;
	*zk_now = st.mtime;
	return ZOK;
}

/* Does the folder hold any node?  false also when it is not there. */
static bool
leaf_zk_folder_used(LeafZkSession *zk, const LeafSfNode *node,
					LeafZkPlace folder)
{
	char		path[LEAF_ZK_PATH_LEN];
	struct Stat st;

	leaf_zk_path(path, node->root, folder, NULL);
	return leaf_zk_exists(zk, path, &st) == ZOK && st.numChildren > 0;
}

/*
 * The layout of the root's IDs is in <root>/layout, which the first node
 * of release 1.3 or later makes, with the root's ACL.  A root without it
 * whose folders hold nodes was numbered by an older release, under the
 * default layout.  A node whose leaf.snowflake_layout differs is refused:
 * two layouts' IDs may be equal.
 */
static LeafZkResult
leaf_zk_check_layout(LeafZkSession *zk, const LeafSfNode *node,
					 char *reason)
{
	char		path[LEAF_ZK_PATH_LEN];
	char		data[LEAF_ZK_DATA_LEN];
	char		mine[LEAF_SF_LAYOUT_LEN];
	LeafSfLayout theirs;
	LeafSfLayout dflt = leaf_sf_layout_default();
	const char *problem;
	struct ACL_vector acl = {0, NULL};
	struct Stat st;
	int			rc;

	leaf_sf_layout_format(&leaf_sf_layout, mine, sizeof(mine));
	leaf_zk_path(path, node->root, LEAF_ZK_LAYOUT, NULL);
	rc = leaf_zk_get(zk, path, data, sizeof(data), &st);
	if (rc == ZNONODE)
	{
		if (!leaf_sf_layout_equal(&leaf_sf_layout, &dflt) &&
			(leaf_zk_folder_used(zk, node, LEAF_ZK_FOREVER) ||
			 leaf_zk_folder_used(zk, node, LEAF_ZK_CLAIMED)))
			return leaf_zk_refuse(reason, LEAF_ZK_FAIL,
								  "ZooKeeper root %s holds nodes that registered before it recorded a layout, so its IDs have the default layout 41+10+12/1ms, but \"leaf.snowflake_layout\" is %s; give this node a root of its own layout (\"leaf.zk_root\")",
								  node->root, mine);
		if ((rc = leaf_zk_get_acl(zk, node->root, &acl)) != ZOK)
			return leaf_zk_fail_rc(zk, reason, "read the root's ACL", rc);
		rc = leaf_zk_create(zk, path, mine, &acl, ZOO_PERSISTENT, NULL, 0);
		deallocate_ACL_vector(&acl);
		if (rc == ZOK)
		{
			ereport(LOG,
					(errmsg("leaf snowflake worker recorded layout %s for ZooKeeper root %s",
							mine, node->root)));
			return LEAF_ZK_OK;
		}
		if (rc != ZNODEEXISTS)
			return leaf_zk_fail_rc(zk, reason, "record the layout", rc);
		/* another node recorded one meanwhile */
		rc = leaf_zk_get(zk, path, data, sizeof(data), &st);
	}
	if (rc != ZOK)
		return leaf_zk_fail_rc(zk, reason, "read the layout", rc);
	if (leaf_sf_layout_parse(data, &theirs, &problem) &&
		leaf_sf_layout_equal(&theirs, &leaf_sf_layout))
		return LEAF_ZK_OK;
	return leaf_zk_refuse(reason, LEAF_ZK_FAIL,
						  "ZooKeeper root %s records layout %s, but \"leaf.snowflake_layout\" is %s; set \"leaf.snowflake_layout\" to %s, or give this node a root of its own layout (\"leaf.zk_root\")",
						  node->root, data, mine, data);
}

/*
 * Create the tree if need be, measure the clock and list the running
 * nodes, the registered ones and the claims; then read the forever node
 * each running node names.
 */
static LeafZkResult
leaf_zk_list_registry(LeafZkSession *zk, const LeafSfNode *node,
					  LeafZkRegistry *reg, char *reason)
{
	char		path[LEAF_ZK_PATH_LEN];
	LeafZkResult r;
	int			rc;
	int			i;

	if ((rc = leaf_zk_ensure_tree(zk, node->root)) != ZOK)
		return leaf_zk_fail_rc(zk, reason, "create parent nodes", rc);
	if ((r = leaf_zk_check_layout(zk, node, reason)) != LEAF_ZK_OK)
		return r;
	if ((rc = leaf_zk_probe_clock(zk, node, &reg->my_offset, &reg->zk_now)) != ZOK)
		return leaf_zk_fail_rc(zk, reason, "clock probe", rc);

	leaf_zk_path(path, node->root, LEAF_ZK_TEMPORARY, NULL);
	if ((rc = leaf_zk_children(zk, path, &reg->temp)) != ZOK)
		return leaf_zk_fail_rc(zk, reason, "list running nodes", rc);

	leaf_zk_path(path, node->root, LEAF_ZK_FOREVER, NULL);
	if ((rc = leaf_zk_children(zk, path, &reg->children)) != ZOK)
		return leaf_zk_fail_rc(zk, reason, "list registered nodes", rc);

	/* worker IDs set by hand and claimed here (none in older trees) */
	reg->claimed = palloc0(sizeof(bool) * (leaf_sf_max_worker_id() + 1));
	leaf_zk_path(path, node->root, LEAF_ZK_CLAIMED, NULL);
	rc = leaf_zk_children(zk, path, &reg->claims);
	if (rc != ZOK && rc != ZNONODE)
		return leaf_zk_fail_rc(zk, reason, "list claimed worker IDs", rc);
	for (i = 0; i < reg->claims.count; i++)
	{
		long		c = strtol(reg->claims.data[i], NULL, 10);

		if (c >= 0 && c <= leaf_sf_max_worker_id())
			reg->claimed[c] = true;
	}

	/* the forever node each running peer names, read once */
	reg->temp_names = palloc0(sizeof(char *) * Max(reg->temp.count, 1));
	for (i = 0; i < reg->temp.count; i++)
	{
		char		tdata[LEAF_ZK_DATA_LEN];
		struct Stat st;

		if (ShutdownRequestPending)
			return LEAF_ZK_RETRY;
		leaf_zk_path(path, node->root, LEAF_ZK_TEMPORARY, reg->temp.data[i]);
		if (leaf_zk_get(zk, path, tdata, sizeof(tdata), &st) == ZOK)
			reg->temp_names[i] = pstrdup(tdata);
	}
	return LEAF_ZK_OK;
}

/*
 * Read forever node i of the registry into reg->nodes[i].  A node that is
 * gone, or that we may not read, gets no worker ID (seq -1).
 */
static LeafZkResult
leaf_zk_read_node(LeafZkSession *zk, const LeafSfNode *node,
				  LeafZkRegistry *reg, int i, char *reason)
{
	LeafZkNode *n = &reg->nodes[i];
	const char *child = reg->children.data[i];
	char		path[LEAF_ZK_PATH_LEN];
	LeafZkNodeData data;
	struct Stat st;
	int			rc;
	int			j;

	strlcpy(n->name, child, sizeof(n->name));
	n->seq = leaf_zk_forever_parse(child, NULL, 0);
	leaf_zk_path(path, node->root, LEAF_ZK_FOREVER, n->name);
	rc = leaf_zk_node_read(zk, path, &data, &st);
	if (rc == ZNONODE)
	{
		n->seq = -1;
		return LEAF_ZK_OK;
	}
	if (rc == ZNOAUTH)
	{
		/*
		 * A node created with credentials (leaf.zk_auth) that we lack:
		 * another node's, since ours are open.  Its number stays taken.  So
		 * nodes get credentials one at a time.
		 */
		n->seq = -1;
		return LEAF_ZK_OK;
	}
	if (rc != ZOK)
		return leaf_zk_fail_rc(zk, reason, "read registered node", rc);
	strlcpy(n->owner, data.addr, sizeof(n->owner));
	n->given_up = strncmp(data.addr, LEAF_ZK_GIVEN_UP_PREFIX,
						  strlen(LEAF_ZK_GIVEN_UP_PREFIX)) == 0;
	if (n->owner[0] == '\0')
		(void) leaf_zk_forever_parse(child, n->owner, sizeof(n->owner));
	strlcpy(n->id, data.id, sizeof(n->id));
	n->ts = data.ts;
	n->hwm = Max(data.hwm, data.ts);
	/* a mark that does not name its epoch counts from ours */
	n->ep = data.has_ep ? data.ep : leaf_sf_epoch_ms;
	if (n->hwm > 0)
		n->hwm += leaf_sf_epoch_ms - n->ep;
	n->bounded = data.bounded;
	n->mtime = st.mtime;
	n->version = st.version;

	for (j = 0; j < reg->temp.count; j++)
		if (reg->temp_names[j] != NULL &&
			strcmp(reg->temp_names[j], n->name) == 0 &&
			strcmp(reg->temp.data[j], node->addr) != 0)
			n->live = true;
	return LEAF_ZK_OK;
}

/* Does a running node hold the ephemeral node of our address? */
static bool
leaf_addr_running(const LeafSfNode *node, const struct String_vector *temp)
{
	int			j;

	for (j = 0; j < temp->count; j++)
		if (strcmp(temp->data[j], node->addr) == 0)
			return true;
	return false;
}

/*
 * n is the node of the data directory whose state file this one took over
 * (see leaf_sf_state_read), not running: ours from now on.  Its data names
 * this data directory at once, so that a restart with the file rewritten
 * still finds it ours.
 */
static LeafZkResult
leaf_zk_take_moved(LeafZkSession *zk, const LeafSfNode *node, LeafZkNode *n,
				   char *reason)
{
	char		path[LEAF_ZK_PATH_LEN];
	LeafZkNodeData data;
	struct Stat st;
	int			rc;

	leaf_zk_path(path, node->root, LEAF_ZK_FOREVER, n->name);
	leaf_zk_node_data_own(&data, node);
	data.ts = leaf_sf_clock_ms();
	data.hwm = n->hwm;
	data.bounded = n->bounded;
	rc = leaf_zk_node_write(zk, path, &data, n->version, &st);
	if (rc != ZOK)
		return leaf_zk_fail_rc(zk, reason, "take over the forever node of the state file", rc);
	ereport(LOG,
			(errmsg("leaf snowflake worker took over %s, the forever node of data directory %s, whose state file it now uses",
					path, n->id)));
	strlcpy(n->id, node->identity, sizeof(n->id));
	n->version = st.version;
	return LEAF_ZK_OK;
}

/*
 * Read every forever node, and find ours (by address): the one with the
 * lowest worker ID, or one above the limit.  Our address on another data
 * directory's node is refused, unless that data directory is moved_from,
 * whose state file this one took over.
 */
static LeafZkResult
leaf_zk_read_nodes(LeafZkSession *zk, const LeafSfNode *node,
				   LeafZkRegistry *reg, const char *moved_from, char *reason)
{
	LeafZkResult r;
	int			i;

	reg->nodes = palloc0(sizeof(LeafZkNode) * Max(reg->children.count, 1));
	for (i = 0; i < reg->children.count; i++)
	{
		LeafZkNode *n = &reg->nodes[i];

		if (ShutdownRequestPending)
			return LEAF_ZK_RETRY;
		if ((r = leaf_zk_read_node(zk, node, reg, i, reason)) != LEAF_ZK_OK)
			return r;
		if (n->seq < 0 || strcmp(n->owner, node->addr) != 0)
			continue;
		if (n->id[0] != '\0' && strcmp(n->id, node->identity) != 0 &&
			moved_from[0] != '\0' && strcmp(n->id, moved_from) == 0 &&
			!leaf_addr_running(node, &reg->temp))
		{
			r = leaf_zk_take_moved(zk, node, n, reason);
			if (r != LEAF_ZK_OK)
				return r;
		}
		if (n->id[0] != '\0' && strcmp(n->id, node->identity) != 0)
		{
			/* our address, but another data directory's node */
			return leaf_zk_refuse(reason, LEAF_ZK_FAIL,
								  "node address %s is registered in ZooKeeper by another data directory (%s, worker ID %ld); set \"leaf.node_address\" to an address unique to this node, or delete that forever node if its data directory will never serve again",
								  node->addr, n->name, n->seq);
		}
		if (n->seq <= leaf_sf_max_worker_id())
		{
			if (reg->mine == NULL || n->seq < reg->mine->seq)
				reg->mine = n;
		}
		else
			reg->mine_high = n;
	}
	return LEAF_ZK_OK;
}

static void
leaf_zk_registry_free(LeafZkRegistry *reg)
{
	int			j;

	if (reg->temp_names)
	{
		for (j = 0; j < reg->temp.count; j++)
			if (reg->temp_names[j])
				pfree(reg->temp_names[j]);
		pfree(reg->temp_names);
	}
	deallocate_String_vector(&reg->children);
	deallocate_String_vector(&reg->temp);
	deallocate_String_vector(&reg->claims);
	if (reg->nodes)
		pfree(reg->nodes);
	if (reg->claimed)
		pfree(reg->claimed);
}

/* ---------------------------------------------------------------------
 * The clock check of a starting node
 * ---------------------------------------------------------------------
 */

static int
leaf_cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * The offsets from ZooKeeper's clock of the running peers, and their
 * names, for leaf_zk_check_peers; returns how many peers there are.
 */
static int
leaf_zk_peer_offsets(LeafZkSession *zk, const LeafSfNode *node,
					 struct String_vector *temp, int64 *offsets, char **names)
{
	int			npeers = 0;
	int			i;

	for (i = 0; i < temp->count; i++)
	{
		char		path[LEAF_ZK_PATH_LEN];
		char		name[LEAF_ZK_DATA_LEN];
		char		fpath[LEAF_ZK_PATH_LEN];
		LeafZkNodeData data;
		struct Stat st;
		int64		ts;

		if (strcmp(temp->data[i], node->addr) == 0)
			continue;
		leaf_zk_path(path, node->root, LEAF_ZK_TEMPORARY, temp->data[i]);
		if (leaf_zk_get(zk, path, name, sizeof(name), &st) != ZOK || name[0] == '\0')
			continue;
		leaf_zk_path(fpath, node->root, LEAF_ZK_FOREVER, name);
		if (leaf_zk_node_read(zk, fpath, &data, &st) != ZOK)
			continue;
		ts = data.ts;
		if (ts <= 0)
			continue;
		offsets[npeers] = ts - st.mtime;
		names[npeers] = temp->data[i];
		npeers++;
	}
	return npeers;
}

/*
 * Compare our clock with the running peers' clocks.  Peers are the
 * ephemeral nodes under temporary/ other than ours; each names its forever
 * node, whose last heartbeat gives the peer's offset from ZooKeeper.  The
 * yardstick is the median offset, so that one peer with a wrong clock
 * neither blocks correct nodes nor lets a wrong one in; peers far from the
 * median are named in the log.  What was found goes to out, for the
 * worker's status.
 */
static LeafZkResult
leaf_zk_check_peers(LeafZkSession *zk, const LeafSfNode *node,
					int64 my_offset, struct String_vector *temp,
					LeafZkRegistration *out)
{
	int64	   *offsets;
	char	  **names;
	int64	   *sorted;
	int			npeers;
	int			i;
	int64		median;
	int64		diff;
	LeafZkResult result = LEAF_ZK_OK;

	offsets = palloc(sizeof(int64) * Max(temp->count, 1));
	sorted = palloc(sizeof(int64) * Max(temp->count, 1));
	names = palloc(sizeof(char *) * Max(temp->count, 1));
	npeers = leaf_zk_peer_offsets(zk, node, temp, offsets, names);

	out->peers_checked = true;
	out->npeers = npeers;
	if (npeers == 0)
		goto done;
	memcpy(sorted, offsets, sizeof(int64) * npeers);
	qsort(sorted, npeers, sizeof(int64), leaf_cmp_int64);
	median = (npeers % 2 == 1) ? sorted[npeers / 2] :
		sorted[npeers / 2 - 1] + (sorted[npeers / 2] - sorted[npeers / 2 - 1]) / 2;

	if (leaf_sf_max_clock_drift_ms > 0)
	{
		for (i = 0; i < npeers; i++)
		{
			int64		d = offsets[i] - median;

			if (d >= leaf_sf_max_clock_drift_ms || -d >= leaf_sf_max_clock_drift_ms)
				ereport(WARNING,
						(errmsg("the clock of running peer %s differs from the median of %d running peers by " INT64_FORMAT " ms, more than \"leaf.max_clock_drift_ms\" (%d ms)",
								names[i], npeers, d, leaf_sf_max_clock_drift_ms),
						 errhint("Check that node's clock; its IDs carry it.")));
		}
	}

	diff = my_offset - median;
	out->peer_offset_ms = diff;
	if (leaf_sf_max_clock_drift_ms > 0 &&
		(diff >= leaf_sf_max_clock_drift_ms || -diff >= leaf_sf_max_clock_drift_ms))
	{
		result = leaf_zk_refuse(out->reason, LEAF_ZK_RETRY,
								"clock differs from the median of %d running peers by " INT64_FORMAT " ms, \"leaf.max_clock_drift_ms\" is %d",
								npeers, diff, leaf_sf_max_clock_drift_ms);
		goto done;
	}
	ereport(LOG,
			(errmsg("leaf snowflake clock is within " INT64_FORMAT " ms of the median of %d running peers",
					diff, npeers)));
done:
	pfree(offsets);
	pfree(sorted);
	pfree(names);
	return result;
}

/* ---------------------------------------------------------------------
 * Choosing our forever node
 * ---------------------------------------------------------------------
 */

/*
 * Our node's worker ID claimed by hand by another node: a node that never
 * served with it (created by a registration that did not finish) gives it
 * up, for a new one; one that did cannot.
 */
static LeafZkResult
leaf_zk_mine_claimed(LeafZkSession *zk, const LeafSfNode *node,
					 LeafZkRegistry *reg, char *reason)
{
	LeafZkNode *mine = reg->mine;
	char		path[LEAF_ZK_PATH_LEN];
	char		cpath[LEAF_ZK_PATH_LEN];
	char		claimer[LEAF_SF_ADDR_LEN];
	int			rc;

	leaf_zk_path(path, node->root, LEAF_ZK_FOREVER, mine->name);
	if (mine->ts == 0 && mine->hwm == 0)
	{
		rc = leaf_zk_delete(zk, path, mine->version);
		if (rc != ZOK && rc != ZNONODE)
			return leaf_zk_fail_rc(zk, reason, "give up a claimed worker ID", rc);
		mine->seq = -1;
		reg->mine = NULL;
		return LEAF_ZK_OK;
	}
	if (!leaf_claim_owner(zk, node, (int) mine->seq, claimer, sizeof(claimer)))
		strlcpy(claimer, "a node", sizeof(claimer));
	leaf_zk_claim_path(cpath, node->root, (int) mine->seq);
	return leaf_zk_refuse(reason, LEAF_ZK_FAIL,
						  "worker ID %ld of %s (%s) is also claimed by %s, which has \"leaf.worker_id\" = %ld; two nodes must never serve with one worker ID: set \"leaf.worker_id\" there to an ID no node of %s uses, then delete %s",
						  mine->seq, node->addr, path, claimer, mine->seq,
						  node->root, cpath);
}

/*
 * Is n a worker ID of the layout that no running node names, that its
 * owner bounds by its mark, and that nobody claims by hand?  Only such a
 * worker ID may ever be taken over.
 */
static bool
leaf_zk_unheld(const LeafZkRegistry *reg, const LeafZkNode *n)
{
	return n->seq >= 0 && n->seq <= leaf_sf_max_worker_id() && !n->live &&
		n->bounded && !reg->claimed[n->seq];
}

/*
 * May worker ID n be taken over now?  One given up on request
 * (leaf_snowflake_new_worker_id()) whatever leaf.worker_id_reclaim_after
 * says, once its mark has passed: its owner stopped at that mark and
 * serves with another worker ID, so without this a node could use up the
 * worker IDs of a layout by asking for new ones.  With
 * leaf.worker_id_reclaim_after, also one that has gone without heartbeat
 * for that long, as long as it says its lease stays within its mark.
 */
static bool
leaf_zk_recyclable(const LeafSfNode *node, const LeafZkRegistry *reg,
				   const LeafZkNode *n)
{
	if (!leaf_zk_unheld(reg, n) || strcmp(n->owner, node->addr) == 0)
		return false;
	if (n->given_up && n->hwm < reg->zk_now)
		return true;
	return leaf_sf_reclaim_after_ms > 0 &&
		n->mtime <= reg->zk_now - leaf_sf_reclaim_after_ms;
}

/*
 * The oldest worker ID that may be taken over, or NULL.  A worker ID
 * whose mark is ahead of ZooKeeper's clock (its holder's clock ran ahead)
 * could serve only once the clock passes the mark: it is taken only when
 * the tree may have no new worker ID left to give.
 */
static LeafZkNode *
leaf_zk_oldest_dead(const LeafSfNode *node, LeafZkRegistry *reg)
{
	LeafZkNode *best = NULL;
	bool		best_future = false;
	bool		room = reg->children.count <= leaf_sf_max_worker_id();
	int64		zk_now = reg->zk_now;
	int			i;

	for (i = 0; i < reg->children.count; i++)
	{
		LeafZkNode *n = &reg->nodes[i];
		bool		future;

		if (!leaf_zk_recyclable(node, reg, n))
			continue;
		future = n->hwm > zk_now + leaf_sf_margin_ms();
		if (future && room)
			continue;
		if (best == NULL || (best_future && !future) ||
			(best_future == future && n->mtime < best->mtime))
		{
			best = n;
			best_future = future;
		}
	}
	return best;
}

/*
 * The worker ID given up on request whose mark passes first, or NULL: the
 * one a registration that found no worker ID left waits for.
 */
static LeafZkNode *
leaf_zk_next_given_up(const LeafSfNode *node, LeafZkRegistry *reg)
{
	LeafZkNode *best = NULL;
	int			i;

	for (i = 0; i < reg->children.count; i++)
	{
		LeafZkNode *n = &reg->nodes[i];

		if (!n->given_up || !leaf_zk_unheld(reg, n))
			continue;
		if (best == NULL || n->hwm < best->hwm)
			best = n;
	}
	return best;
}

/* Take over the oldest dead worker ID, if there is one: it becomes mine. */
static LeafZkResult
leaf_zk_take_over(LeafZkSession *zk, const LeafSfNode *node,
				  LeafZkRegistry *reg, char *reason)
{
	LeafZkNode *best = leaf_zk_oldest_dead(node, reg);
	char		path[LEAF_ZK_PATH_LEN];
	LeafZkNodeData data;
	struct Stat st;
	int			rc;

	if (best == NULL)
		return LEAF_ZK_OK;
	leaf_zk_path(path, node->root, LEAF_ZK_FOREVER, best->name);
	leaf_zk_node_data_own(&data, node);
	data.ts = leaf_sf_clock_ms();
	data.hwm = best->hwm;
	data.bounded = true;
	rc = leaf_zk_node_write(zk, path, &data, best->version, &st);
	if (rc != ZOK)
		return leaf_zk_fail_rc(zk, reason, "take over worker ID", rc);
	if (best->given_up)
		ereport(LOG,
				(errmsg("leaf snowflake worker took over worker ID %ld, which %s gave up on request, its mark passed " INT64_FORMAT " ms ago",
						best->seq, best->owner + strlen(LEAF_ZK_GIVEN_UP_PREFIX),
						reg->zk_now - best->hwm)));
	else
		ereport(LOG,
				(errmsg("leaf snowflake worker took over worker ID %ld of %s, last heard of " INT64_FORMAT " ms ago",
						best->seq, best->owner, reg->zk_now - best->mtime)));
	strlcpy(best->owner, node->addr, sizeof(best->owner));
	best->version = st.version;
	best->bounded = true;
	best->given_up = false;
	reg->mine = best;

	/* a node of ours above the limit, from an earlier try, is not needed */
	if (reg->mine_high != NULL)
	{
		leaf_zk_path(path, node->root, LEAF_ZK_FOREVER, reg->mine_high->name);
		(void) leaf_zk_delete(zk, path, reg->mine_high->version);
		reg->mine_high = NULL;
	}
	return LEAF_ZK_OK;
}

/* Our forever node is mine: say so in out. */
static void
leaf_zk_choose(const LeafSfNode *node, const LeafZkNode *mine,
			   LeafZkRegistration *out)
{
	out->worker_id = (int) mine->seq;
	leaf_zk_path(out->node_path, node->root, LEAF_ZK_FOREVER, mine->name);
	out->node_version = mine->version;
	out->node_hwm = mine->hwm;
	out->node_epoch_ms = mine->ep;
	out->bounded = mine->bounded;

	/*
	 * A node that never recorded a heartbeat was created by a registration
	 * that did not finish (say, the connection was lost before the
	 * ephemeral node was made): it is as new as one created now, and its
	 * worker ID must wait out earlier holders the same way.
	 */
	out->fresh = (mine->ts == 0 && mine->hwm == 0);
}

/*
 * Create our forever node.  ZooKeeper numbers the nodes; a number claimed
 * by a node with leaf.worker_id is skipped.  The claim is checked after
 * the create: a node claiming by hand checks for our node after its
 * claim, so one of the two sees the other.
 */
static LeafZkResult
leaf_zk_create_node(LeafZkSession *zk, const LeafSfNode *node,
					LeafZkRegistration *out)
{
	char		path[LEAF_ZK_PATH_LEN];
	LeafZkNodeData data;
	char		created[LEAF_ZK_PATH_LEN];
	char		claimer[LEAF_SF_ADDR_LEN];
	long		seq;
	int			skipped;
	int			rc;

	/* ZooKeeper appends the number */
	leaf_zk_forever_prefix(path, node->root, node->addr);
	/* no heartbeat yet (see leaf_zk_choose) */
	leaf_zk_node_data_own(&data, node);
	data.bounded = leaf_sf_reclaim_after_ms > 0;
	for (skipped = 0;; skipped++)
	{
		struct Stat st;
		char		cpath[LEAF_ZK_PATH_LEN];

		rc = leaf_zk_node_create(zk, path, &data, true, created,
								 sizeof(created));
		if (rc != ZOK)
		{
			/* after a connection loss the node may exist: list again first */
			return leaf_zk_fail_rc(zk, out->reason, "create forever node", rc);
		}
		seq = leaf_zk_forever_parse(created, NULL, 0);
		if (seq < 0 || seq > leaf_sf_max_worker_id() || skipped > leaf_sf_max_worker_id())
			break;
		leaf_zk_claim_path(cpath, node->root, (int) seq);
		rc = leaf_zk_exists(zk, cpath, &st);
		if (rc == ZNONODE)
			break;
		if (rc != ZOK)
			return leaf_zk_fail_rc(zk, out->reason, "check claimed worker IDs", rc);
		if (!leaf_claim_owner(zk, node, (int) seq, claimer, sizeof(claimer)))
			strlcpy(claimer, "a node", sizeof(claimer));
		ereport(LOG,
				(errmsg("leaf snowflake worker skips worker ID %ld: %s claims it with \"leaf.worker_id\"",
						seq, claimer)));
		rc = leaf_zk_delete(zk, created, 0);
		if (rc != ZOK && rc != ZNONODE)
			return leaf_zk_fail_rc(zk, out->reason, "give up a claimed worker ID", rc);
		if (ShutdownRequestPending)
			return LEAF_ZK_RETRY;
	}
	ereport(LOG,
			(errmsg("leaf snowflake worker registered %s as \"%s\"",
					node->addr, created)));
#ifdef LEAF_TEST_HOOKS
	/* a crash between the new node and the state file that names it */
	if (leaf_sf_test_register_pause_ms > 0)
		pg_usleep(leaf_sf_test_register_pause_ms * 1000L);
#endif
	if (seq < 0)
		return leaf_zk_refuse(out->reason, LEAF_ZK_FAIL,
							  "ZooKeeper created \"%s\" for %s, a name without a worker ID",
							  created, node->addr);
	/* above the limit: the caller says what to do */
	out->worker_id = (int) seq;	/* ZooKeeper numbers in 32 bits */
	strlcpy(out->node_path, created, sizeof(out->node_path));
	out->node_version = 0;
	out->node_hwm = 0;
	out->node_epoch_ms = leaf_sf_epoch_ms;
	out->bounded = leaf_sf_reclaim_after_ms > 0;
	out->fresh = true;
	return LEAF_ZK_OK;
}

/*
 * ZooKeeper's numbering has passed the last worker ID of the layout (wid
 * is what it gave us).  A worker ID given up on request is taken over once
 * its mark passes: wait for that.  Otherwise say how worker IDs come back.
 */
static LeafZkResult
leaf_zk_above_limit(const LeafSfNode *node, LeafZkRegistry *reg, long wid,
					char *reason)
{
	LeafZkNode *next = leaf_zk_next_given_up(node, reg);

	if (next != NULL)
		return leaf_zk_refuse(reason, LEAF_ZK_RETRY,
							  "ZooKeeper assigned worker ID %ld to %s, above the limit of %d; worker ID %ld, given up on request, is taken over once its mark passes, in " INT64_FORMAT " ms",
							  wid, node->addr, leaf_sf_max_worker_id(), next->seq,
							  Max(next->hwm - reg->zk_now, 0) + 1);
	return leaf_zk_refuse(reason, LEAF_ZK_FAIL,
						  "ZooKeeper assigned worker ID %ld to %s, above the limit of %d, and no worker ID under %s may be taken over: set \"leaf.worker_id_reclaim_after\" to recycle worker IDs of nodes that have gone without heartbeat that long, or delete the forever nodes of nodes that will never serve again",
						  wid, node->addr, leaf_sf_max_worker_id(), node->root);
}

/*
 * Find our forever node, take one over or create one, into out.  What was
 * read tells whether our worker ID is claimed by hand, and what may be
 * taken over.
 */
static LeafZkResult
leaf_zk_find_node(LeafZkSession *zk, const LeafSfNode *node,
				  LeafZkRegistry *reg, const LeafZkKnown *known,
				  LeafZkRegistration *out)
{
	LeafZkResult r;

	if (reg->mine != NULL && reg->claimed[reg->mine->seq] &&
		(r = leaf_zk_mine_claimed(zk, node, reg, out->reason)) != LEAF_ZK_OK)
		return r;

	/*
	 * About to take another worker ID than the one the state file may
	 * stand in with (that one's node is gone, or is no longer ours): stop,
	 * so that the file stops naming it before ZooKeeper gives us another.
	 * Otherwise a crash before the file names the new one, and a start
	 * with ZooKeeper unreachable, would serve with the old worker ID,
	 * which ZooKeeper may give to another node.
	 */
	if (known->file_worker_id >= 0 &&
		(reg->mine == NULL || reg->mine->seq != known->file_worker_id))
	{
		out->file_superseded = true;
		return LEAF_ZK_RETRY;
	}
	if (reg->mine == NULL &&
		(r = leaf_zk_take_over(zk, node, reg, out->reason)) != LEAF_ZK_OK)
		return r;

	if (reg->mine != NULL)
	{
		leaf_zk_choose(node, reg->mine, out);
		return LEAF_ZK_OK;
	}
	if (reg->mine_high != NULL)
		return leaf_zk_above_limit(node, reg, reg->mine_high->seq, out->reason);
	r = leaf_zk_create_node(zk, node, out);
	if (r == LEAF_ZK_OK && out->worker_id > leaf_sf_max_worker_id())
		return leaf_zk_above_limit(node, reg, out->worker_id, out->reason);
	return r;
}

/* ---------------------------------------------------------------------
 * Registration
 * ---------------------------------------------------------------------
 */

/*
 * Is the ephemeral node at path, held by a session this process does not
 * know, left over by an earlier session of this data directory?  That is
 * so if it names a forever node whose data directory is ours: an
 * immediate restart leaves its node behind for the session timeout, and
 * the state file may not have recorded that session yet.  Another node
 * with our address has another data directory.
 */
static bool
leaf_zk_ephemeral_ours(LeafZkSession *zk, const LeafSfNode *node,
					   const char *path, LeafZkRegistry *reg)
{
	char		data[LEAF_ZK_DATA_LEN];
	struct Stat st;
	int			i;

	if (leaf_zk_get(zk, path, data, sizeof(data), &st) != ZOK || data[0] == '\0')
		return false;
	for (i = 0; i < reg->children.count; i++)
		if (strcmp(reg->nodes[i].name, data) == 0)
			return reg->nodes[i].id[0] != '\0' &&
				strcmp(reg->nodes[i].id, node->identity) == 0;
	return false;
}

/*
 * Our lease: the ephemeral node temporary/<address>, naming our forever
 * node out->node_path.  One held by another session is ours to replace
 * only if that session was ours: one the worker knows of (this run's, the
 * state file's), or one whose node names our data directory's forever
 * node.
 */
static LeafZkResult
leaf_zk_claim_ephemeral(LeafZkSession *zk, const LeafSfNode *node,
						LeafZkRegistry *reg, const LeafZkKnown *known,
						LeafZkRegistration *out)
{
	char		path[LEAF_ZK_PATH_LEN];
	const char *name = leaf_zk_node_name(out->node_path);
	struct Stat st;
	int64		my_session = leaf_zk_session_id(zk);
	bool		made;
	int			rc;

	leaf_zk_path(path, node->root, LEAF_ZK_TEMPORARY, node->addr);
	rc = leaf_zk_create(zk, path, name, NULL, ZOO_EPHEMERAL, NULL, 0);
	made = (rc == ZOK);
	if (rc == ZNODEEXISTS &&
		(rc = leaf_zk_exists(zk, path, &st)) == ZOK &&
		st.ephemeralOwner != my_session)
	{
		if (st.ephemeralOwner != 0 &&
			(st.ephemeralOwner == known->own_session ||
			 st.ephemeralOwner == known->file_session ||
			 leaf_zk_ephemeral_ours(zk, node, path, reg)))
		{
			/*
			 * Left over by this node's earlier session, as recorded in the
			 * state file: delete exactly that one.
			 */
			rc = leaf_zk_delete(zk, path, st.version);
			if (rc == ZOK || rc == ZNONODE)
				rc = leaf_zk_create(zk, path, name, NULL, ZOO_EPHEMERAL,
									NULL, 0);
		}
		else
		{
			/*
			 * Another session holds our address: another running node, or
			 * an earlier session of ours that the state file does not know
			 * of, which ZooKeeper drops within the session timeout.  Never
			 * delete it; try again later.
			 */
			return leaf_zk_refuse(out->reason, LEAF_ZK_FAIL,
								  "node address %s is in use by another running node (ZooKeeper session 0x%llx holds %s); give each node its own \"leaf.node_address\"",
								  node->addr, (unsigned long long) st.ephemeralOwner,
								  path);
		}
	}
	if (rc == ZNODEEXISTS)
		rc = ZOK;
	/* ours already (this session): make it name our node now */
	if (rc == ZOK && !made)
		rc = leaf_zk_set(zk, path, name, -1, NULL);
	if (rc != ZOK)
		return leaf_zk_fail_rc(zk, out->reason, "create ephemeral node", rc);
	return LEAF_ZK_OK;
}

/*
 * Register: find, take over or create our forever node; check the clock
 * against peers first if check_peers; take our ephemeral node.  known
 * tells which sessions may have left our ephemeral node behind, and whose
 * forever node is ours with the state file.  The result goes to out; on
 * LEAF_ZK_OK the session is registered.
 */
void
leaf_zk_register(LeafZkSession *zk, const LeafSfNode *node, bool check_peers,
				 const LeafZkKnown *known, LeafZkRegistration *out)
{
	LeafZkRegistry reg;
	LeafZkResult r;

	memset(out, 0, sizeof(*out));
	out->worker_id = -1;
	memset(&reg, 0, sizeof(reg));

	r = leaf_zk_list_registry(zk, node, &reg, out->reason);
	if (r == LEAF_ZK_OK)
		r = leaf_zk_read_nodes(zk, node, &reg, known->moved_from,
							   out->reason);
	out->found_seq = -1;
	if (r == LEAF_ZK_OK)
	{
		out->tree_read = true;
		if (reg.mine != NULL)
			out->found_seq = reg.mine->seq;
	}
	if (r == LEAF_ZK_OK && check_peers)
		r = leaf_zk_check_peers(zk, node, reg.my_offset, &reg.temp, out);
	if (r == LEAF_ZK_OK)
		r = leaf_zk_find_node(zk, node, &reg, known, out);
	if (r == LEAF_ZK_OK)
		r = leaf_zk_claim_ephemeral(zk, node, &reg, known, out);
	if (r == LEAF_ZK_OK)
	{
		out->session_id = leaf_zk_session_id(zk);
		zk->registered = true;
	}
	out->result = r;
	leaf_zk_registry_free(&reg);
}

/* ---------------------------------------------------------------------
 * Giving a worker ID up
 * ---------------------------------------------------------------------
 */

/*
 * Give our forever node up, on request (leaf_snowflake_new_worker_id()).
 * It keeps hwm, the highest timestamp this node may have used with it, is
 * bounded by that, and no longer names our address: recycling takes it
 * over once that mark has passed, and our next registration creates a
 * new node.  The generator has stopped already.
 */
bool
leaf_zk_abandon(LeafZkSession *zk, const LeafSfNode *node, int wid,
				const char *node_path, int32 node_version, int64 hwm)
{
	LeafZkNodeData data;
	struct Stat st;
	int			rc;

	/* no data directory, and an address that is nobody's */
	leaf_zk_node_data_own(&data, node);
	snprintf(data.addr, sizeof(data.addr), LEAF_ZK_GIVEN_UP_PREFIX "%s",
			 node->addr);
	data.id[0] = '\0';
	data.ts = leaf_sf_clock_ms();
	data.hwm = hwm;
	data.bounded = true;
	rc = leaf_zk_node_write(zk, node_path, &data, node_version, &st);
#ifdef LEAF_TEST_HOOKS
	/* written, but the reply lost with the connection */
	if (rc == ZOK && leaf_sf_test_abandon_lost_ms > 0)
	{
		pg_usleep(leaf_sf_test_abandon_lost_ms * 1000L);
		rc = ZCONNECTIONLOSS;
	}
#endif
	if (rc != ZOK)
	{
		ereport(LOG,
				(errmsg("could not give up worker ID %d in ZooKeeper: %s",
						wid, zerror(rc))));
		return false;
	}
	ereport(LOG,
			(errmsg("leaf snowflake worker gave up worker ID %d on request (%s keeps its mark, " INT64_FORMAT " ms from now), registering a new one",
					wid, node_path, hwm - leaf_sf_clock_ms())));
	return true;
}

/* ---------------------------------------------------------------------
 * Claims of hand-set worker IDs
 * ---------------------------------------------------------------------
 */

/*
 * Has ZooKeeper's numbering given worker ID wid to a forever node?  Then
 * the claim is refused; one we made (created) is given up again, for a
 * later try.
 */
static LeafZkResult
leaf_zk_claim_numbered(LeafZkSession *zk, const LeafSfNode *node, int wid,
					   bool created, char *reason)
{
	char		path[LEAF_ZK_PATH_LEN];
	char		owner[LEAF_SF_ADDR_LEN];
	struct String_vector children = {0, NULL};
	int			rc;
	int			i;

	leaf_zk_path(path, node->root, LEAF_ZK_FOREVER, NULL);
	if ((rc = leaf_zk_children(zk, path, &children)) != ZOK)
		return leaf_zk_fail_rc(zk, reason, "list registered nodes", rc);
	for (i = 0; i < children.count; i++)
	{
		if (leaf_zk_forever_parse(children.data[i], owner,
								  sizeof(owner)) != wid)
			continue;
		leaf_zk_path(path, node->root, LEAF_ZK_FOREVER, children.data[i]);
		(void) leaf_zk_refuse(reason, LEAF_ZK_FAIL,
							  "\"leaf.worker_id\" is %d, but ZooKeeper gave worker ID %d to %s (%s): two nodes must never serve with one worker ID; set \"leaf.worker_id\" to an ID that no node under %s uses",
							  wid, wid, owner, path, node->root);
		deallocate_String_vector(&children);
		if (created)
		{
			/* we lost the race: give the claim up again */
			leaf_zk_claim_path(path, node->root, wid);
			(void) leaf_zk_delete(zk, path, -1);
			return LEAF_ZK_RETRY;
		}
		return LEAF_ZK_FAIL;
	}
	deallocate_String_vector(&children);
	return LEAF_ZK_OK;
}

/*
 * Create the claim of wid, or, if it is there, make sure it is ours and
 * say which data directory holds it now.  *created says whether we made
 * it.
 */
static LeafZkResult
leaf_zk_claim_node(LeafZkSession *zk, const LeafSfNode *node, int wid,
				   const char *claimed_in, bool *created, char *reason)
{
	char		path[LEAF_ZK_PATH_LEN];
	LeafZkNodeData claim;
	LeafZkNodeData data;
	const char *owner = claim.addr;
	const char *id = claim.id;
	struct Stat st;
	int			rc;

	/* a claim records who holds it and when, no mark */
	leaf_zk_node_data_own(&data, node);
	leaf_zk_claim_path(path, node->root, wid);
	rc = leaf_zk_node_read(zk, path, &claim, &st);
	if (rc == ZNONODE)
	{
		data.ts = leaf_sf_clock_ms();
		rc = leaf_zk_node_create(zk, path, &data, false, NULL, 0);
		if (rc == ZNODEEXISTS)
			return LEAF_ZK_RETRY;	/* someone else at the same moment */
		if (rc != ZOK)
			return leaf_zk_fail_rc(zk, reason, "claim worker ID", rc);
		*created = true;
		return LEAF_ZK_OK;
	}
	if (rc != ZOK)
		return leaf_zk_fail_rc(zk, reason, "read claimed worker ID", rc);

	/*
	 * Claimed already: ours if this data directory wrote it, or if our
	 * address wrote it and the state file says we claimed it (the data
	 * directory of a node upgraded with pg_upgrade is a new one).
	 */
	if (!(strcmp(id, node->identity) == 0 ||
		  (strcmp(owner, node->addr) == 0 &&
		   strcmp(claimed_in, node->root) == 0)))
		return leaf_zk_refuse(reason, LEAF_ZK_FAIL,
							  "\"leaf.worker_id\" is %d, but %s (data directory %s) claims worker ID %d by hand as well (%s): two nodes must never serve with one worker ID; give each node its own \"leaf.worker_id\", or, if %s will never serve again, delete %s",
							  wid, owner[0] ? owner : "another node", id[0] ? id : "unknown",
							  wid, path, owner[0] ? owner : "that node", path);
	/* ours: say which data directory holds it now */
	data.ts = leaf_sf_clock_ms();
	rc = leaf_zk_node_write(zk, path, &data, st.version, NULL);
	if (rc != ZOK)
		return leaf_zk_fail_rc(zk, reason, "claim worker ID", rc);
	return LEAF_ZK_OK;
}

/*
 * Claim worker ID wid, set by hand, under our root, so that ZooKeeper's
 * numbering skips it and a second node setting it by hand is refused.
 * claimed_in is the root where the state file says this node claimed it
 * before, or "".  The order makes a race with a node that ZooKeeper is
 * numbering safe: look for a forever node with our number, claim, look
 * again.  (That node looks for the claim after it is created.)  On
 * LEAF_ZK_OK, wid is claimed under our root.
 */
LeafZkResult
leaf_zk_claim(LeafZkSession *zk, const LeafSfNode *node, int wid,
			  const char *claimed_in, char *reason)
{
	bool		created = false;
	LeafZkResult r;
	int			rc;

	reason[0] = '\0';
	if (wid < 0 || wid > leaf_sf_max_worker_id())
		return LEAF_ZK_FAIL;
	if ((rc = leaf_zk_ensure_tree(zk, node->root)) != ZOK)
		return leaf_zk_fail_rc(zk, reason, "create parent nodes", rc);
	if ((r = leaf_zk_check_layout(zk, node, reason)) != LEAF_ZK_OK)
		return r;

	r = leaf_zk_claim_numbered(zk, node, wid, false, reason);
	if (r == LEAF_ZK_OK)
		r = leaf_zk_claim_node(zk, node, wid, claimed_in, &created, reason);
	if (r == LEAF_ZK_OK)
		r = leaf_zk_claim_numbered(zk, node, wid, created, reason);
	if (r != LEAF_ZK_OK)
		return r;

	if (strcmp(claimed_in, node->root) != 0 || created)
	{
		char		path[LEAF_ZK_PATH_LEN];

		leaf_zk_claim_path(path, node->root, wid);
		ereport(LOG,
				(errmsg("leaf snowflake worker claimed worker ID %d (\"leaf.worker_id\") in ZooKeeper as \"%s\"",
						wid, path)));
	}
	return LEAF_ZK_OK;
}
