/*-------------------------------------------------------------------------
 *
 * leaf_durable.h
 *	  Writing a file of the data directory durably (leaf_durable.c), for
 *	  the warm start's file and the snowflake worker's state file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_DURABLE_H
#define LEAF_DURABLE_H

extern bool leaf_durable_write(const char *path, const char *tmppath,
							   const char *data, int len, int elevel,
							   const char *who);

#endif							/* LEAF_DURABLE_H */
