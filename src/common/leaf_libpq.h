/*-------------------------------------------------------------------------
 *
 * leaf_libpq.h
 *	  leaf's one way of talking to another server with libpq
 *	  (leaf_libpq.c): connect, run a statement and disconnect without
 *	  blocking, on the process latch, under a deadline, with the socket
 *	  counted against the process's file descriptors.
 *
 * Used by the fleet's allocator workers (leaf_alloc_remote.c), the
 * snowflake worker's leases (leaf_sf_db.c) and leaf_alloc_cutover()
 * (leaf_alloc_cutover.c), each with its own messages: a call that fails
 * returns false (or NULL) with the kind of failure in the connection's
 * struct and libpq's reason in the caller's buffer; it never raises an
 * error of its own, so that a worker's loop can go on.  An interrupt is
 * handled where it arrives: a backend's cancel or termination raises its
 * error there, after the connection was closed.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_LIBPQ_H
#define LEAF_LIBPQ_H

#include "libpq-fe.h"

/* Why the last call on a connection failed. */
typedef enum LeafPqFailure
{
	LEAF_PQ_OK,
	LEAF_PQ_BROKEN,				/* libpq's error: the reason is its message */
	LEAF_PQ_TIMEOUT,			/* the deadline passed */
	LEAF_PQ_STOPPED,			/* the caller's stop() said to give up */
	LEAF_PQ_NO_FD				/* no file descriptor left for the socket */
} LeafPqFailure;

/*
 * One connection and how its caller waits.  Zeroed, it is closed, waits
 * without a deadline as PG_WAIT_EXTENSION and is never stopped but by
 * an interrupt.  A failed call closes the connection.
 */
typedef struct LeafPq
{
	PGconn	   *conn;			/* NULL when closed */
	bool		fd_held;		/* AcquireExternalFD() counted its socket */
	int64		deadline_ms;	/* leaf_pq_mono_ms() at which a call gives
								 * up; 0 for none */
	uint32		wait_event;		/* of its waits; 0 for PG_WAIT_EXTENSION */
	bool		(*stop) (void); /* a worker's "give up now", asked before
								 * each wait and after each wake-up; NULL
								 * for none */
	bool		latch_seen;		/* the latch was set during a wait (the
								 * caller clears it) */
	LeafPqFailure failure;		/* of the last call */
} LeafPq;

extern int64 leaf_pq_mono_ms(void);
extern bool leaf_pq_connect(LeafPq *pq, const char *const *keywords,
							const char *const *values,
							char *reason, size_t reasonlen);
extern PGresult *leaf_pq_exec(LeafPq *pq, const char *sql, int nparams,
							  const char *const *params,
							  char *reason, size_t reasonlen);
extern void leaf_pq_finish(LeafPq *pq);
extern void leaf_pq_error(const LeafPq *pq, const char *what,
						  const PGresult *res, char *buf, size_t len);
extern void leaf_pq_prefix(const char *what, char *buf, size_t len);
extern bool leaf_pq_leaf_schema(LeafPq *pq, char *schema, size_t schemalen,
								Oid *extoid, char *reason, size_t reasonlen);

#endif							/* LEAF_LIBPQ_H */
