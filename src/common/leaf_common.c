/*-------------------------------------------------------------------------
 *
 * leaf_common.c
 *	  The settings that more than one mode reads, and whether leaf was
 *	  loaded at server start.
 *
 * Every other setting is defined and registered by the one part that
 * reads it.  These two are read by two modes each, so neither mode owns
 * them: leaf.wait_timeout bounds the wait of segment callers
 * (leaf_segment.c) and of snowflake callers (leaf_snowflake.c) alike;
 * leaf.node_address names the node to ZooKeeper (leaf_sf_worker.c) and,
 * in fleet mode, to the allocation server (leaf_alloc_remote.c).  Kept
 * in either mode's file, they would make the other mode depend on it.
 * This file depends on no other part of leaf, and every part may read
 * what it defines (declared in leaf_common.h).
 *
 * leaf_preloaded is here rather than in module load (leaf.c) for the same
 * reason: every SQL function reads it, and module load calls into every
 * part, so no part depends on module load.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "leaf.h"
#include "common/leaf_common.h"

/* leaf.wait_timeout, in ms */
int			leaf_wait_timeout_ms = 5000;

/*
 * leaf.node_address.  The variable keeps the name it had when snowflake
 * mode alone read it.
 */
char	   *leaf_sf_node_address = NULL;

bool		leaf_preloaded = false;

/* Define the settings that more than one mode reads. */
void
leaf_common_init_settings(void)
{
	DefineCustomIntVariable("leaf.wait_timeout",
							"Sets how long a caller waits for a segment when both buffers are empty.",
							NULL,
							&leaf_wait_timeout_ms,
							5000, 1, 3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("leaf.node_address",
							   "Sets the address (host:port) that identifies this node in ZooKeeper.",
							   "Empty means the first of listen_addresses (or the host name) and port.",
							   &leaf_sf_node_address,
							   "",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);
}
