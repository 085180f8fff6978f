/*-------------------------------------------------------------------------
 *
 * leaf_zk_client.h
 *	  The snowflake worker's ZooKeeper client (leaf_zk_client.c): the
 *	  session, node helpers and the data of leaf's nodes.  Used by the
 *	  worker (leaf_sf_worker.c) and registration (leaf_zk_assign.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ZK_CLIENT_H
#define LEAF_ZK_CLIENT_H

#include <zookeeper/zookeeper.h>

#include "leaf_snowflake.h"

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
										  const LeafSfNode *node);
extern bool leaf_zk_open(LeafZkSession *zk);
extern void leaf_zk_close(LeafZkSession *zk);
extern bool leaf_zk_connected(const LeafZkSession *zk);
extern bool leaf_zk_expired(const LeafZkSession *zk);
extern bool leaf_zk_auth_failed(const LeafZkSession *zk);
extern const char *leaf_zk_state_name(const LeafZkSession *zk);
extern struct ACL_vector *leaf_zk_acl(const LeafZkSession *zk);

/* nodes */
extern int	leaf_zk_ensure_tree(LeafZkSession *zk, const char *root);
extern int	leaf_zk_get(LeafZkSession *zk, const char *path, char *buf,
						int size, struct Stat *stat);

/* the data of forever and claimed nodes */
extern int	leaf_zk_format(char *buf, size_t size, const LeafSfNode *node,
						   int64 ts, int64 hwm, bool bounded);
extern int64 leaf_zk_json_int(const char *json, const char *key);
extern void leaf_zk_json_str(const char *json, const char *key, char *out,
							 size_t size);

#endif							/* LEAF_ZK_CLIENT_H */
