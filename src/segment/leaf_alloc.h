/*-------------------------------------------------------------------------
 *
 * leaf_alloc.h
 *	  The allocator's contract: a load to do (LeafLoadJob), its outcome
 *	  (LeafLoadResult) and a source of segments (LeafAllocSource), between
 *	  the worker (leaf_alloc_worker.c) and the two sources
 *	  (leaf_alloc_local.c, leaf_alloc_remote.c); what the sources share
 *	  (leaf_alloc.c); the check of leaf_alloc's shape
 *	  (leaf_alloc_shape.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_ALLOC_H
#define LEAF_ALLOC_H

#include "common/leaf_compat.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

/* Longest biz_tag, in bytes, as in leaf_alloc.biz_tag varchar(128). */
#define LEAF_TAG_MAXLEN			128

/* Length of the error text of a load, which waiting callers get. */
#define LEAF_ERRMSG_LEN			512

/* Length of the host:port of the server a segment came from. */
#define LEAF_SERVER_LEN			64

/* Length of the description of where segments come from. */
#define LEAF_SOURCE_LEN			128

/* Length of the message, other roles' detail and hint of a refusal. */
#define LEAF_REFUSAL_LEN		256

/*
 * How callers are told of a load that was refused for good (a copy, a
 * new timeline, a logical replica, a table of the wrong shape): the
 * error, composed where the refusal is decided, so that the backend that
 * raises it needs to know none of them.  detail is for superusers, and
 * for everyone when detail_public is empty; message is empty for a
 * failure that is no such refusal.
 */
typedef struct LeafRefusal
{
	char		message[LEAF_ERRMSG_LEN];
	char		detail[LEAF_ERRMSG_LEN];
	char		detail_public[LEAF_REFUSAL_LEN];
	char		hint[LEAF_REFUSAL_LEN];
} LeafRefusal;

/* A load to do, copied out of its slot. */
typedef struct LeafLoadJob
{
	int			slotno;
	uint64		generation;
	Oid			extoid;
	char		tag[LEAF_TAG_MAXLEN + 1];
	int64		want;
	int64		step;
	int32		min_step;
	int64		db_max_id;
	TimestampTz last_load;
	int			nloads;
	TimestampTz asked;			/* when a caller asked for it, or 0 */
	TimestampTz collected;		/* when the worker picked the load up */
	uint64		collected_no;	/* the slot's loads_collected for it */
	bool		serving;		/* the buffer in use had IDs left then */
	int64		serving_first;	/* and its first ID (if serving) */
} LeafLoadJob;

typedef enum LeafLoadStatus
{
	LEAF_LOAD_OK,
	LEAF_LOAD_FAILED,			/* see sqlstate/msg; retry later */
	LEAF_LOAD_FINAL,			/* see sqlstate/msg; callers fail at once */
	LEAF_LOAD_TAG_GONE,			/* tag deleted: free the slot */
	LEAF_LOAD_EXT_GONE			/* extension dropped or re-created */
} LeafLoadStatus;

typedef struct LeafLoadResult
{
	LeafLoadStatus status;
	int64		start;			/* first ID of the new segment */
	int64		size;			/* its number of IDs */
	int64		step;			/* dynamic step to remember */
	int32		min_step;		/* leaf_alloc.step */
	int64		db_max_id;		/* leaf_alloc.max_id after the update */
	uint32		timeline;		/* allocation database's timeline */
	char		server[LEAF_SERVER_LEN];	/* host:port, or "local" */
	int64		commit_us;		/* how long its local commit took (WAL
								 * flush, synchronous standbys), or -1 when
								 * the commit is part of its statement */
	int			sqlstate;
	char		msg[LEAF_ERRMSG_LEN];
	LeafRefusal refusal;		/* a refusal: how callers are told */
} LeafLoadResult;

/*
 * A source of segments: this database's own leaf_alloc
 * (leaf_alloc_local.c) or another server's (leaf_alloc_remote.c).  The
 * worker uses the one that leaf_remote_enabled() names at the time.
 */
typedef struct LeafAllocSource
{
	/*
	 * Load one segment for job, each in a transaction of its own (on the
	 * source).  Whatever happens, the outcome is in *res, and no
	 * transaction is left open here.
	 */
	void		(*load) (const LeafLoadJob *job, LeafLoadResult *res);

	/*
	 * Put every tag of the source's leaf_alloc into tags (keys of
	 * LEAF_TAG_MAXLEN + 1 bytes), in the worker's transaction, with SPI
	 * connected; nsp is leaf's schema in this database.  Returns false,
	 * with the reason in errbuf, if the list could not be read.
	 */
	bool		(*tags) (Oid nsp, HTAB *tags, char *errbuf, size_t errlen);

	/* Describe where segments come from, for leaf_segments. */
	void		(*describe) (char *buf, size_t len);

	/* over a connection: reading the tags may open it, or lose it */
	bool		remote;
} LeafAllocSource;

extern const LeafAllocSource leaf_local_source;
extern const LeafAllocSource leaf_remote_source;

/* Length of the name of a loader in leaf_segment_log. */
#define LEAF_LOADER_LEN			(NAMEDATALEN + 48)

/*
 * What a source writes into leaf_segment_log with a load: when the load
 * was begun (the loader's clock), who loaded, the segment the loader was
 * still serving, and the rows of the loader to prune (loaded before
 * prune_before, below the segment still in use).
 */
typedef struct LeafLoadLog
{
	TimestampTz loaded_at;
	TimestampTz prune_before;
	char		loaded_by[LEAF_LOADER_LEN];
} LeafLoadLog;

/* ---------- leaf_alloc.c: what the sources share ---------- */

extern int	leaf_tag_refresh_ms;
extern int	leaf_segment_log_retention_s;
extern int64 leaf_last_commit_us;
extern void leaf_alloc_set_loader(const char *dbname);
extern bool leaf_load_log_begin(LeafLoadLog *log);
extern void leaf_timestamp_iso(TimestampTz ts, char *buf, size_t len);
extern Oid	leaf_extension_namespace(Oid *extoid);
extern Oid	leaf_extension_relid(Oid nsp, const char *relname);
extern void leaf_alloc_request_stop(void);
extern bool leaf_alloc_stopping(void);
extern bool leaf_plan_segment(const LeafLoadJob *job, int64 max_id,
							  int32 row_step, LeafLoadResult *res);
extern bool leaf_in_transaction(void (*fn) (void *arg), void *arg,
								const char *activity, int *sqlstate,
								char *errbuf, size_t errlen);
pg_noreturn extern void leaf_report_refusal(int sqlstate,
											const LeafRefusal *refusal);

/* ---------- leaf_alloc_worker.c ---------- */

pg_noreturn extern PGDLLEXPORT void leaf_alloc_worker_main(Datum main_arg);

/* ---------- leaf_alloc_remote.c: segments from another server ---------- */

extern bool leaf_remote_enabled(void);
extern void leaf_remote_disconnect(void);
extern bool leaf_remote_woken(void);

/* ---------- leaf_alloc_shape.c ---------- */

extern bool leaf_alloc_column_ok(const char *name, bool found, Oid typid,
								 bool notnull, char *errbuf, size_t errlen);
extern const char *leaf_alloc_column_values(void);
extern bool leaf_alloc_persistence_ok(char relpersistence, char *errbuf,
									  size_t errlen);
extern bool leaf_alloc_shape_ok(Oid nsp, char *errbuf, size_t errlen);
extern void leaf_alloc_shape_refuse(const char *tag, LeafLoadResult *res);

#endif							/* LEAF_ALLOC_H */
