/*-------------------------------------------------------------------------
 *
 * leaf_zk_client.h
 *	  The snowflake worker's ZooKeeper client (leaf_zk_client.c): the
 *	  session, the paths and the data of leaf's nodes, and every request
 *	  made to ZooKeeper.  Used by the sources of worker IDs that talk to
 *	  ZooKeeper (leaf_sf_source_zk.c, leaf_sf_source_setting.c) and
 *	  registration (leaf_zk_assign.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ZK_CLIENT_H
#define LEAF_ZK_CLIENT_H

#include <zookeeper/zookeeper.h>

#include "snowflake/leaf_snowflake.h"

#define LEAF_ZK_DATA_LEN		1024

/*
 * The worker's ZooKeeper session.  One per worker, in its own process;
 * only its main thread uses it.
 */
typedef struct LeafZkSession
{
	zhandle_t  *zh;				/* the session, or NULL if none is open */
	char		auth[LEAF_SF_ADDR_LEN]; /* digest credentials (user:password)
										 * from leaf.zk_auth or
										 * leaf.zk_auth_file, or "" */
	bool		registered;		/* registration made our ephemeral node in
								 * this session (and our forever node is
								 * known); false for a new or closed
								 * session */
} LeafZkSession;

/* the session */
extern int	leaf_zk_session_timeout(void);
extern const char *leaf_zk_config_problem(LeafZkSession *zk,
										  const LeafSfNode *node,
										  const char **zk_state);
extern bool leaf_zk_open(LeafZkSession *zk);
extern void leaf_zk_close(LeafZkSession *zk);
extern bool leaf_zk_connected(const LeafZkSession *zk);
extern bool leaf_zk_expired(const LeafZkSession *zk);
extern bool leaf_zk_auth_failed(const LeafZkSession *zk);
extern const char *leaf_zk_state_name(const LeafZkSession *zk);
extern struct ACL_vector *leaf_zk_acl(const LeafZkSession *zk);

/*
 * Where leaf's nodes are, under leaf.zk_root (see leaf_zk_assign.c).  The
 * first four are the folders the tree is made with, in that order.
 */
typedef enum LeafZkPlace
{
	LEAF_ZK_FOREVER,			/* forever/<address>-<worker ID>: one per
								 * registered node */
	LEAF_ZK_TEMPORARY,			/* temporary/<address>: the lease of a
								 * running node, naming its forever node */
	LEAF_ZK_CLAIMED,			/* claimed/<worker ID>: a worker ID set by
								 * hand */
	LEAF_ZK_CLOCK,				/* clock: written to measure our clock */
	LEAF_ZK_LAYOUT				/* layout: the layout of the root's IDs */
} LeafZkPlace;

#define LEAF_ZK_FOLDERS			(LEAF_ZK_CLOCK + 1)

/*
 * The data of a forever node, and of a claim of a hand-set worker ID: a
 * small JSON object that only leaf writes (and tests, by hand).  Any
 * field may be missing: the first writers had addr, ts and hwm only, and
 * a mark without "ep" counts from the epoch of whoever reads it.
 */
typedef struct LeafZkNodeData
{
	char		addr[LEAF_SF_ADDR_LEN + 16];	/* the owner's node address,
												 * or "abandoned by
												 * <address>" once given up;
												 * "" if none */
	char		id[LEAF_SF_ID_LEN];	/* the owner's data directory, or "" */
	int64		ts;				/* the owner's clock at the write; 0 before
								 * its first heartbeat */
	int64		hwm;			/* high-water mark: the owner issues no
								 * timestamp above it, counted from ep */
	int64		ep;				/* the owner's leaf.snowflake_epoch */
	bool		has_ep;			/* ep was there (parsed data only; it is
								 * always written) */
	bool		bounded;		/* the owner keeps its lease within hwm,
								 * which allows a take-over (see
								 * leaf_sf_zk_bounded in
								 * leaf_sf_source_zk.c) */
} LeafZkNodeData;

/* the address of a forever node given up on request: this, then the owner's */
#define LEAF_ZK_GIVEN_UP_PREFIX	"abandoned by "

/* paths */
extern void leaf_zk_path(char *buf, const char *root, LeafZkPlace place,
						 const char *name);
extern void leaf_zk_claim_path(char *buf, const char *root, int worker_id);
extern void leaf_zk_forever_prefix(char *buf, const char *root,
								   const char *addr);
extern long leaf_zk_forever_parse(const char *name, char *addr,
								  size_t addr_size);
extern const char *leaf_zk_node_name(const char *path);

/* node data */
extern void leaf_zk_node_data_own(LeafZkNodeData *data,
								  const LeafSfNode *node);
extern int	leaf_zk_node_format(char *buf, size_t size,
								const LeafZkNodeData *data);
extern void leaf_zk_node_parse(const char *json, LeafZkNodeData *data);

/* requests; each returns ZooKeeper's result code */
extern int	leaf_zk_ensure_tree(LeafZkSession *zk, const char *root);
extern int	leaf_zk_get(LeafZkSession *zk, const char *path, char *buf,
						int size, struct Stat *stat);
extern int	leaf_zk_set(LeafZkSession *zk, const char *path,
						const char *value, int32 version, struct Stat *stat);
extern int	leaf_zk_create(LeafZkSession *zk, const char *path,
						   const char *value, struct ACL_vector *acl,
						   int mode, char *created, int created_len);
extern int	leaf_zk_exists(LeafZkSession *zk, const char *path,
						   struct Stat *stat);
extern int	leaf_zk_delete(LeafZkSession *zk, const char *path,
						   int32 version);
extern int	leaf_zk_children(LeafZkSession *zk, const char *path,
							 struct String_vector *children);
extern int	leaf_zk_get_acl(LeafZkSession *zk, const char *path,
							struct ACL_vector *acl);
extern int64 leaf_zk_session_id(const LeafZkSession *zk);
extern int	leaf_zk_node_read(LeafZkSession *zk, const char *path,
							  LeafZkNodeData *data, struct Stat *stat);
extern int	leaf_zk_node_write(LeafZkSession *zk, const char *path,
							   const LeafZkNodeData *data, int32 version,
							   struct Stat *stat);
extern int	leaf_zk_node_create(LeafZkSession *zk, const char *path,
								const LeafZkNodeData *data, bool sequential,
								char *created, int created_len);

#endif							/* LEAF_ZK_CLIENT_H */
