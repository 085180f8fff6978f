/*-------------------------------------------------------------------------
 *
 * leaf_sf_layout.h
 *	  The layout of snowflake IDs (leaf.snowflake_layout): how many bits
 *	  the timestamp, the worker ID and the sequence take, and the unit of
 *	  the timestamp (leaf_sf_layout.c).
 *
 * An ID is, from the top: zero bits, ts_bits of time units since
 * leaf.snowflake_epoch, worker_bits of worker ID, seq_bits of sequence.
 * The layout is set when the server starts and does not change while it
 * runs, so every process reads these fields without a lock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_SF_LAYOUT_H
#define LEAF_SF_LAYOUT_H

#include "common/leaf_compat.h"

/* the widest worker-ID field: 65,536 nodes per ZooKeeper root */
#define LEAF_SF_MAX_WORKER_BITS	16
#define LEAF_SF_LAYOUT_LEN		32

typedef struct LeafSfLayout
{
	int			ts_bits;		/* bits of the timestamp */
	int			worker_bits;	/* bits of the worker ID */
	int			seq_bits;		/* bits of the sequence */
	int			unit_ms;		/* one timestamp step, in ms */
} LeafSfLayout;

/* set from leaf.snowflake_layout at start-up; constant afterwards */
extern LeafSfLayout leaf_sf_layout;

extern bool leaf_sf_layout_parse(const char *value, LeafSfLayout *out,
								 const char **problem);
extern void leaf_sf_layout_format(const LeafSfLayout *layout, char *buf,
								  size_t size);
extern bool leaf_sf_layout_equal(const LeafSfLayout *a,
								 const LeafSfLayout *b);
extern void leaf_sf_layout_describe_range(char *buf, size_t size);
extern void leaf_sf_layout_describe_span(char *buf, size_t size);

/* The layout of every ID before leaf.snowflake_layout existed. */
#define LEAF_SF_LAYOUT_DEFAULT	{41, 10, 12, 1}

static inline LeafSfLayout
leaf_sf_layout_default(void)
{
	LeafSfLayout l = LEAF_SF_LAYOUT_DEFAULT;

	return l;
}

static inline int
leaf_sf_max_worker_id(void)
{
	return (1 << leaf_sf_layout.worker_bits) - 1;
}

static inline int64
leaf_sf_max_ts(void)
{
	return (INT64CONST(1) << leaf_sf_layout.ts_bits) - 1;
}

static inline uint64
leaf_sf_seq_mask(void)
{
	return (UINT64CONST(1) << leaf_sf_layout.seq_bits) - 1;
}

static inline int
leaf_sf_ts_shift(void)
{
	return leaf_sf_layout.worker_bits + leaf_sf_layout.seq_bits;
}

/* the timestamp field of an ID */
static inline int64
leaf_sf_id_ts(uint64 id)
{
	return (int64) (id >> leaf_sf_ts_shift());
}

static inline int
leaf_sf_id_worker(uint64 id)
{
	return (int) ((id >> leaf_sf_layout.seq_bits) &
				  (uint64) leaf_sf_max_worker_id());
}

static inline uint64
leaf_sf_make_id(int64 ts, uint64 worker_id, uint64 seq)
{
	return ((uint64) ts << leaf_sf_ts_shift()) |
		(worker_id << leaf_sf_layout.seq_bits) | seq;
}

/*
 * Time units since the epoch of a clock reading in ms since 1970, or -1
 * for a reading before the epoch.  A timestamp stands for the first ms of
 * its unit, so ts_to_ms(ms_to_ts(ms)) <= ms < ts_to_ms(ms_to_ts(ms) + 1).
 */
static inline int64
leaf_sf_ms_to_ts(int64 ms, int64 epoch_ms)
{
	if (ms < epoch_ms)
		return -1;
	/* no division for the unit of every layout before 1.3 */
	if (likely(leaf_sf_layout.unit_ms == 1))
		return ms - epoch_ms;
	return (ms - epoch_ms) / leaf_sf_layout.unit_ms;
}

static inline int64
leaf_sf_ts_to_ms(int64 ts, int64 epoch_ms)
{
	return ts * leaf_sf_layout.unit_ms + epoch_ms;
}

/* Is a clock reading within the range of timestamps an ID can hold? */
static inline bool
leaf_sf_ms_in_range(int64 ms, int64 epoch_ms)
{
	int64		ts = leaf_sf_ms_to_ts(ms, epoch_ms);

	return ts >= 0 && ts <= leaf_sf_max_ts();
}

#endif							/* LEAF_SF_LAYOUT_H */
