/*-------------------------------------------------------------------------
 *
 * leaf_zk_client.c
 *	  The snowflake worker's ZooKeeper client: the session, the paths and
 *	  the data of leaf's nodes, and every request made to ZooKeeper.
 *
 * The session: the settings it needs (leaf.zk_hosts, leaf.zk_root, the
 * credentials of leaf.zk_auth or leaf.zk_auth_file, a node address fit
 * for node names), opening it, its state, closing it, and the ACL of the
 * nodes it creates.  Waiting for it to connect is the worker's part, since
 * the worker also handles its signals meanwhile.
 *
 * The nodes: leaf_zk_path names every node under leaf.zk_root, and
 * leaf_zk_forever_prefix and leaf_zk_forever_parse write and read the
 * names of forever nodes (<address>-<worker ID>).  The data of forever
 * and claimed nodes is a small JSON object that only leaf writes,
 * LeafZkNodeData: leaf_zk_node_format writes it and leaf_zk_node_parse
 * reads it, here only, so that a field is added in one place, and nodes
 * written by older releases keep being read as they were.
 *
 * The requests: creating leaf.zk_root with the nodes above it and its
 * folders, and one thin function per kind of request, so that the callers
 * (registration in leaf_zk_assign.c, the heartbeat in leaf_sf_source_zk.c)
 * never call the client library themselves.
 *
 * The ZooKeeper C client runs its own threads.  Only its synchronous
 * calls are used, from this process's main thread, except zoo_add_auth,
 * whose completion is not waited for (a refusal shows in zoo_state).  The
 * session watcher and that completion do nothing; all signals are
 * blocked while zookeeper_init starts the client threads, so that Postgres
 * signal handlers run on the main thread only.  No Postgres function is
 * called from a client thread.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include "storage/fd.h"
#include "utils/guc.h"

#include "leaf.h"
#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_zk_client.h"

/* leaf.zk_auth_file */
static char *leaf_sf_zk_auth_file = NULL;

/* The client's own setting: the file of the credentials. */
void
leaf_zk_client_init_settings(void)
{
	DefineCustomStringVariable("leaf.zk_auth_file",
							   "Sets a file holding the ZooKeeper digest credentials (user:password) of the snowflake worker.",
							   "Used when leaf.zk_auth is empty.  Unlike a setting, the file's content is not shown by pg_file_settings.",
							   &leaf_sf_zk_auth_file,
							   "",
							   PGC_POSTMASTER,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
}

/* ---------------------------------------------------------------------
 * The session
 * ---------------------------------------------------------------------
 */

/* Runs on a client thread: must not touch anything of Postgres. */
static void
leaf_zk_watcher(zhandle_t *zh, int type, int state, const char *path,
				void *ctx)
{
}

/* Runs on a client thread, like the watcher: a failure shows in zoo_state. */
static void
leaf_zk_auth_done(int rc, const void *data)
{
}

/* ZooKeeper session timeout we ask for. */
int
leaf_zk_session_timeout(void)
{
	return Max(6000, 3 * leaf_sf_heartbeat_ms);
}

/*
 * ACL of every node we create: with leaf.zk_auth, only the same digest
 * credentials may read, write, delete or change it; else open.
 */
struct ACL_vector *
leaf_zk_acl(const LeafZkSession *zk)
{
	if (zk->auth[0] != '\0')
		return &ZOO_CREATOR_ALL_ACL;
	return &ZOO_OPEN_ACL_UNSAFE;
}

/* Is leaf.zk_hosts a list of host:port with valid ports? */
static bool
leaf_zk_hosts_valid(const char *hosts)
{
	const char *p = hosts;

	if (*p == '\0')
		return false;
	for (;;)
	{
		size_t		len = strcspn(p, ",");
		const char *colon = NULL;
		const char *q;
		long		port;
		char	   *end;

		for (q = p; q < p + len; q++)
			if (*q == ':')
				colon = q;
		if (colon == NULL || colon == p || colon + 1 >= p + len)
			return false;
		for (q = p; q < colon; q++)
			if (*q == ' ' || *q == '/')
				return false;
		errno = 0;
		port = strtol(colon + 1, &end, 10);
		if (errno != 0 || end != p + len || port < 1 || port > 65535)
			return false;
		if (p[len] == '\0')
			return true;
		p += len + 1;
	}
}

static bool
leaf_zk_root_valid(const char *root)
{
	size_t		len = strlen(root);

	return len > 1 && len < LEAF_ZK_PATH_LEN / 2 && root[0] == '/' &&
		root[len - 1] != '/' && strstr(root, "//") == NULL;
}

/*
 * The credentials: leaf.zk_auth, else the first line of leaf.zk_auth_file,
 * into zk->auth.  Returns a problem, or NULL.  The file must not be
 * readable by group or others, as for a libpq password file; its content
 * is never logged.
 */
static const char *
leaf_zk_load_auth(LeafZkSession *zk)
{
	static char buf[LEAF_SF_REASON_LEN];
	FILE	   *f;
	struct stat st;

	zk->auth[0] = '\0';
	if (leaf_sf_zk_auth && leaf_sf_zk_auth[0] != '\0')
	{
		strlcpy(zk->auth, leaf_sf_zk_auth, sizeof(zk->auth));
		return NULL;
	}
	if (leaf_sf_zk_auth_file == NULL || leaf_sf_zk_auth_file[0] == '\0')
		return NULL;
	f = AllocateFile(leaf_sf_zk_auth_file, "r");
	if (f == NULL)
	{
		snprintf(buf, sizeof(buf), "could not open \"leaf.zk_auth_file\" \"%s\": %s",
				 leaf_sf_zk_auth_file, strerror(errno));
		return buf;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
	{
		FreeFile(f);
		snprintf(buf, sizeof(buf), "\"leaf.zk_auth_file\" \"%s\" has group or world access; it must be readable by the server's user only (chmod 0600)",
				 leaf_sf_zk_auth_file);
		return buf;
	}
	if (fgets(zk->auth, sizeof(zk->auth), f) == NULL)
		zk->auth[0] = '\0';
	FreeFile(f);
	zk->auth[strcspn(zk->auth, "\r\n")] = '\0';
	if (strchr(zk->auth, ':') == NULL || zk->auth[0] == ':')
	{
		zk->auth[0] = '\0';
		snprintf(buf, sizeof(buf), "\"leaf.zk_auth_file\" \"%s\" must hold user:password on its first line",
				 leaf_sf_zk_auth_file);
		return buf;
	}
	return NULL;
}

/*
 * What keeps this node from using ZooKeeper as configured, or NULL; loads
 * the credentials.  *zk_state is set to what the status should show of
 * ZooKeeper because of that problem, or NULL.  The node address goes into
 * node names and into JSON: it may not hold "/", a quote or a backslash.
 */
const char *
leaf_zk_config_problem(LeafZkSession *zk, const LeafSfNode *node,
					   const char **zk_state)
{
	static char buf[LEAF_SF_REASON_LEN];

	const char *auth_problem = leaf_zk_load_auth(zk);

	*zk_state = NULL;
	if (auth_problem != NULL)
		return auth_problem;
	if (!leaf_zk_hosts_valid(leaf_sf_zk_hosts))
	{
		*zk_state = "invalid hosts";
		snprintf(buf, sizeof(buf), "\"leaf.zk_hosts\" is not a list of host:port: \"%s\"",
				 leaf_sf_zk_hosts);
	}
	else if (node->root[0] == '\0')
		snprintf(buf, sizeof(buf), "\"leaf.zk_root\" is not set: every node of a fleet must name the fleet's root, such as '/leaf/orders'");
	else if (!leaf_zk_root_valid(node->root))
		snprintf(buf, sizeof(buf), "\"leaf.zk_root\" is not an absolute ZooKeeper path: \"%s\"",
				 node->root);
	else if (node->addr[0] == '\0')
		snprintf(buf, sizeof(buf), "no node address unique to this host: listen_addresses has only loopback or wildcard entries and the host name is not usable; set \"leaf.node_address\"");
	else if (strpbrk(node->addr, "/\"\\") != NULL)
		snprintf(buf, sizeof(buf), "node address \"%s\" must not contain \"/\", a double quote or a backslash",
				 node->addr);
	else
		return NULL;
	return buf;
}

/* Is the session connected? */
bool
leaf_zk_connected(const LeafZkSession *zk)
{
	return zk->zh != NULL && zoo_state(zk->zh) == ZOO_CONNECTED_STATE;
}

/* Has the session expired? */
bool
leaf_zk_expired(const LeafZkSession *zk)
{
	return zk->zh != NULL && zoo_state(zk->zh) == ZOO_EXPIRED_SESSION_STATE;
}

/* Did ZooKeeper refuse the session's credentials? */
bool
leaf_zk_auth_failed(const LeafZkSession *zk)
{
	return zk->zh != NULL && zoo_state(zk->zh) == ZOO_AUTH_FAILED_STATE;
}

const char *
leaf_zk_state_name(const LeafZkSession *zk)
{
	int			state;

	if (zk->zh == NULL)
		return "disconnected";
	state = zoo_state(zk->zh);
	if (state == ZOO_CONNECTED_STATE)
		return "connected";
	if (state == ZOO_EXPIRED_SESSION_STATE)
		return "session expired";
	if (state == ZOO_AUTH_FAILED_STATE)
		return "authentication failed";
	return "connecting";
}

/*
 * Open a session if there is none (or it expired); it connects in the
 * background.  Returns false if no client could be started (the hosts
 * could not be resolved, say).
 */
bool
leaf_zk_open(LeafZkSession *zk)
{
	if (leaf_zk_expired(zk))
	{
		ereport(LOG,
				(errmsg("ZooKeeper session of the leaf snowflake worker expired, opening a new one")));
		leaf_zk_close(zk);
	}

	if (zk->zh == NULL)
	{
		sigset_t	all;
		sigset_t	old;
		int			timeout = leaf_zk_session_timeout();

		/* the client threads must not take our signals */
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		zoo_set_debug_level((ZooLogLevel) 0);
		zk->zh = zookeeper_init(leaf_sf_zk_hosts, leaf_zk_watcher, timeout,
								NULL, NULL, 0);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (zk->zh == NULL)
			return false;
		/* sent with every (re)connection of this session */
		if (zk->auth[0] != '\0')
			(void) zoo_add_auth(zk->zh, "digest", zk->auth,
								strlen(zk->auth), leaf_zk_auth_done, NULL);
		/* a new session must register its ephemeral node again */
		zk->registered = false;
	}
	return true;
}

void
leaf_zk_close(LeafZkSession *zk)
{
	if (zk->zh != NULL)
	{
		zookeeper_close(zk->zh);
		zk->zh = NULL;
	}
	zk->registered = false;
}

/* ---------------------------------------------------------------------
 * Paths
 * ---------------------------------------------------------------------
 */

static const char *const leaf_zk_place_names[] = {
	[LEAF_ZK_FOREVER] = "forever",
	[LEAF_ZK_TEMPORARY] = "temporary",
	[LEAF_ZK_CLAIMED] = "claimed",
	[LEAF_ZK_CLOCK] = "clock",
	[LEAF_ZK_LAYOUT] = "layout",
};

/*
 * Path of place under root into buf (LEAF_ZK_PATH_LEN bytes): the folder
 * or node itself if name is NULL, else the child name of the folder.
 * leaf_zk_config_problem keeps the root to half of buf, and names are
 * node addresses or worker IDs, so nothing is cut.
 */
void
leaf_zk_path(char *buf, const char *root, LeafZkPlace place, const char *name)
{
	if (name == NULL)
		snprintf(buf, LEAF_ZK_PATH_LEN, "%s/%s", root,
				 leaf_zk_place_names[place]);
	else
		snprintf(buf, LEAF_ZK_PATH_LEN, "%s/%s/%s", root,
				 leaf_zk_place_names[place], name);
}

/* Path of the claim of a worker ID set by hand (leaf.worker_id). */
void
leaf_zk_claim_path(char *buf, const char *root, int worker_id)
{
	char		name[16];

	snprintf(name, sizeof(name), "%010d", worker_id);
	leaf_zk_path(buf, root, LEAF_ZK_CLAIMED, name);
}

/*
 * Forever nodes are named <address>-<worker ID>: leaf creates them
 * sequential under the name <address>-, and ZooKeeper appends the number.
 * The next two functions alone know this format.
 */

/* Path of a new forever node of addr under root, before its number. */
void
leaf_zk_forever_prefix(char *buf, const char *root, const char *addr)
{
	leaf_zk_path(buf, root, LEAF_ZK_FOREVER, addr);
	strlcat(buf, "-", LEAF_ZK_PATH_LEN);
}

/*
 * The worker ID in the name (or path) of a forever node: the number after
 * its last hyphen, -1 if it has no hyphen.  If addr is not NULL, the node
 * address before that hyphen goes there (addr_size bytes, cut if longer),
 * or "" if there is none.
 */
long
leaf_zk_forever_parse(const char *name, char *addr, size_t addr_size)
{
	const char *dash = strrchr(name, '-');

	if (addr != NULL && addr_size > 0)
	{
		if (dash != NULL)
			snprintf(addr, addr_size, "%.*s", (int) (dash - name), name);
		else
			addr[0] = '\0';
	}
	return dash != NULL ? strtol(dash + 1, NULL, 10) : -1;
}

/* The name of the node at path: what follows its last slash. */
const char *
leaf_zk_node_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash != NULL ? slash + 1 : path;
}

/* ---------------------------------------------------------------------
 * The data of forever and claimed nodes
 * ---------------------------------------------------------------------
 */

/*
 * This node's data, as it writes it: its address, data directory and
 * epoch.  The caller fills in the time, the mark and "bounded".
 */
void
leaf_zk_node_data_own(LeafZkNodeData *data, const LeafSfNode *node)
{
	memset(data, 0, sizeof(*data));
	strlcpy(data->addr, node->addr, sizeof(data->addr));
	strlcpy(data->id, node->identity, sizeof(data->id));
	data->ep = leaf_sf_epoch_ms;
	data->has_ep = true;
}

/*
 * The JSON of data into buf; returns its length, as snprintf.  These are
 * the bytes every release has written since "ep", "id" and "bounded" were
 * added; a new field goes at the end, since nodes of other releases share
 * the tree.
 */
int
leaf_zk_node_format(char *buf, size_t size, const LeafZkNodeData *data)
{
	return snprintf(buf, size,
					"{\"addr\":\"%s\",\"ts\":" INT64_FORMAT ",\"hwm\":" INT64_FORMAT
					",\"ep\":" INT64_FORMAT ",\"id\":\"%s\",\"bounded\":%d}",
					data->addr, data->ts, data->hwm, data->ep, data->id,
					data->bounded ? 1 : 0);
}

/* Value of a numeric field of our JSON, or 0; *found says if it is there. */
static int64
leaf_zk_json_int(const char *json, const char *key, bool *found)
{
	char		pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	if (found != NULL)
		*found = (p != NULL);
	return p ? strtoll(p + strlen(pat), NULL, 10) : 0;
}

/* Value of a string field of our JSON into out, or "" (also if too long). */
static void
leaf_zk_json_str(const char *json, const char *key, char *out, size_t size)
{
	char		pat[64];
	const char *p;
	size_t		len;

	out[0] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	p = strstr(json, pat);
	if (p == NULL)
		return;
	p += strlen(pat);
	len = strcspn(p, "\"");
	if (len >= size)
		return;
	memcpy(out, p, len);
	out[len] = '\0';
}

/*
 * Read the JSON of a forever node or a claim into data.  A missing field
 * reads as 0, "" or false.  An address longer than a node address can be
 * (a long one given up, "abandoned by <address>") reads as "", as it
 * always has: readers then take the owner from the node's name.
 */
void
leaf_zk_node_parse(const char *json, LeafZkNodeData *data)
{
	memset(data, 0, sizeof(*data));
	leaf_zk_json_str(json, "addr", data->addr, LEAF_SF_ADDR_LEN);
	leaf_zk_json_str(json, "id", data->id, sizeof(data->id));
	data->ts = leaf_zk_json_int(json, "ts", NULL);
	data->hwm = leaf_zk_json_int(json, "hwm", NULL);
	data->ep = leaf_zk_json_int(json, "ep", &data->has_ep);
	data->bounded = leaf_zk_json_int(json, "bounded", NULL) == 1;
}

/* ---------------------------------------------------------------------
 * Requests
 *
 * Every request leaf makes goes through here, on the session's handle,
 * with node data as strings (or as LeafZkNodeData).  Each returns
 * ZooKeeper's result code (ZOK, ZNONODE, ...), which callers act on.
 * ---------------------------------------------------------------------
 */

/*
 * Create a persistent node with the given ACL; an existing one is fine.
 * Existence is checked first: ZooKeeper refuses a create under a parent we
 * may not write to even when the node is there already (a folder made by
 * a node with credentials).
 */
static int
leaf_zk_ensure(LeafZkSession *zk, const char *path, struct ACL_vector *acl)
{
	struct Stat st;
	int			rc = zoo_exists(zk->zh, path, 0, &st);

	if (rc == ZOK)
		return ZOK;
	rc = zoo_create(zk->zh, path, NULL, -1, acl, ZOO_PERSISTENT, NULL, 0);
	return rc == ZNODEEXISTS ? ZOK : rc;
}

/*
 * Create root and every node above it, and its folders.  The folders get
 * the root's ACL, so that a folder a newer release adds to an open tree
 * stays open even when a node with credentials makes it.
 */
int
leaf_zk_ensure_tree(LeafZkSession *zk, const char *root)
{
	char		path[LEAF_ZK_PATH_LEN];
	const char *p = root;
	struct ACL_vector acl = {0, NULL};
	struct Stat st;
	int			rc;
	int			i;

	while ((p = strchr(p + 1, '/')) != NULL)
	{
		snprintf(path, sizeof(path), "%.*s", (int) (p - root), root);
		if ((rc = leaf_zk_ensure(zk, path, leaf_zk_acl(zk))) != ZOK)
			return rc;
	}
	if ((rc = leaf_zk_ensure(zk, root, leaf_zk_acl(zk))) != ZOK)
		return rc;
	for (i = 0; i < LEAF_ZK_FOLDERS && rc == ZOK; i++)
	{
		leaf_zk_path(path, root, (LeafZkPlace) i, NULL);
		if (zoo_exists(zk->zh, path, 0, &st) == ZOK)
			continue;
		if (acl.count == 0 &&
			(rc = zoo_get_acl(zk->zh, root, &acl, &st)) != ZOK)
			break;
		rc = leaf_zk_ensure(zk, path, &acl);
	}
	if (acl.count > 0)
		deallocate_ACL_vector(&acl);
	return rc;
}

/* Get a node's data as a string. */
int
leaf_zk_get(LeafZkSession *zk, const char *path, char *buf, int size,
			struct Stat *stat)
{
	int			len = size - 1;
	int			rc = zoo_get(zk->zh, path, 0, buf, &len, stat);

	if (rc == ZOK)
		buf[len < 0 ? 0 : len] = '\0';
	return rc;
}

/*
 * Set a node's data to a string, if its version is version (-1: any).
 * stat, if not NULL, gets the node's new Stat (its mtime is ZooKeeper's
 * clock at the write).
 */
int
leaf_zk_set(LeafZkSession *zk, const char *path, const char *value,
			int32 version, struct Stat *stat)
{
	struct Stat st;

	return zoo_set2(zk->zh, path, value, (int) strlen(value), version,
					stat != NULL ? stat : &st);
}

/*
 * Create a node holding a string (or no data, for NULL), with acl or, if
 * that is NULL, the ACL of our nodes.  mode is ZOO_PERSISTENT,
 * ZOO_EPHEMERAL or ZOO_PERSISTENT_SEQUENTIAL; a sequential node's path
 * goes to created.
 */
int
leaf_zk_create(LeafZkSession *zk, const char *path, const char *value,
			   struct ACL_vector *acl, int mode, char *created,
			   int created_len)
{
	return zoo_create(zk->zh, path, value,
					  value != NULL ? (int) strlen(value) : -1,
					  acl != NULL ? acl : leaf_zk_acl(zk), mode,
					  created, created_len);
}

int
leaf_zk_exists(LeafZkSession *zk, const char *path, struct Stat *stat)
{
	return zoo_exists(zk->zh, path, 0, stat);
}

/* Delete a node if its version is version (-1: any). */
int
leaf_zk_delete(LeafZkSession *zk, const char *path, int32 version)
{
	return zoo_delete(zk->zh, path, version);
}

/* Names of a node's children; free them with deallocate_String_vector. */
int
leaf_zk_children(LeafZkSession *zk, const char *path,
				 struct String_vector *children)
{
	return zoo_get_children(zk->zh, path, 0, children);
}

/* A node's ACL; free it with deallocate_ACL_vector. */
int
leaf_zk_get_acl(LeafZkSession *zk, const char *path, struct ACL_vector *acl)
{
	struct Stat st;

	return zoo_get_acl(zk->zh, path, acl, &st);
}

/* The id of the session, which owns the ephemeral nodes it creates. */
int64
leaf_zk_session_id(const LeafZkSession *zk)
{
	return zoo_client_id(zk->zh)->client_id;
}

/* Read a forever node or a claim into data. */
int
leaf_zk_node_read(LeafZkSession *zk, const char *path, LeafZkNodeData *data,
				  struct Stat *stat)
{
	char		buf[LEAF_ZK_DATA_LEN];
	int			rc = leaf_zk_get(zk, path, buf, sizeof(buf), stat);

	if (rc == ZOK)
		leaf_zk_node_parse(buf, data);
	return rc;
}

/* Write data into a forever node or a claim (see leaf_zk_set). */
int
leaf_zk_node_write(LeafZkSession *zk, const char *path,
				   const LeafZkNodeData *data, int32 version,
				   struct Stat *stat)
{
	char		buf[LEAF_ZK_DATA_LEN];

	(void) leaf_zk_node_format(buf, sizeof(buf), data);
	return leaf_zk_set(zk, path, buf, version, stat);
}

/*
 * Create a claim, or, if sequential, a forever node (whose path goes to
 * created), holding data.
 */
int
leaf_zk_node_create(LeafZkSession *zk, const char *path,
					const LeafZkNodeData *data, bool sequential,
					char *created, int created_len)
{
	char		buf[LEAF_ZK_DATA_LEN];

	(void) leaf_zk_node_format(buf, sizeof(buf), data);
	return leaf_zk_create(zk, path, buf, NULL,
						  sequential ? ZOO_PERSISTENT_SEQUENTIAL : ZOO_PERSISTENT,
						  created, created_len);
}
