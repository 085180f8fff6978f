/*-------------------------------------------------------------------------
 *
 * leaf_refill_time.c
 *	  How long the refills of a tag take.  Each refill is timed from the
 *	  moment a caller asked for it (leaf_take crossed the preload point,
 *	  or found the buffers empty) to the moment the allocator published
 *	  its segment, and split into the wait for the allocator to pick it
 *	  up, the work of the load and the commit of a local load
 *	  (LeafRefillTimes, in the tag's slot).  The slot keeps the last
 *	  refill, the longest with its parts, the number of refills by time,
 *	  and the longest refill decaying with time (the tail); the columns
 *	  of leaf_segment_refills() are filled here (docs/monitoring.md).
 *
 *	  The preload trigger (leaf_preload_at in leaf_segment.c) plans with
 *	  the tail rather than with a recent average: one slow commit (a WAL
 *	  flush behind a checkpoint, a busy disk, an allocator that did not
 *	  get the CPU) is what makes every caller wait, and the next one is
 *	  likely within minutes.  leaf_refill_lead says how many IDs must be
 *	  left when the next segment is asked for (docs/segment.md, "When the
 *	  next segment is loaded").
 *
 *	  Every function but leaf_refill_row is called holding the slot's
 *	  mutex: none raises an error or takes a lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "segment/leaf_segment_shmem.h"

/* The tail halves every minute without a refill as long. */
#define LEAF_REFILL_TAIL_HALF_LIFE_MS	(60.0 * 1000.0)

/*
 * Upper bounds, in ms, of the buckets of refills by time; the last bucket
 * holds the refills of 5 s and longer.
 */
static const double leaf_refill_bounds[LEAF_REFILL_BUCKETS - 1] = {
	1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000
};

/* A caller asked for a refill: the first ask of it counts. */
void
leaf_refill_asked(LeafRefillTimes *rt, TimestampTz now)
{
	if (rt->asked_at == 0)
		rt->asked_at = now;
}

/* The tail of rt, decayed to now. */
static double
leaf_refill_tail(const LeafRefillTimes *rt, TimestampTz now)
{
	double		age_ms;

	if (rt->tail_at == 0 || now <= rt->tail_at)
		return rt->tail_ms;
	age_ms = (double) (now - rt->tail_at) / 1000.0;
	return rt->tail_ms * pow(0.5, age_ms / LEAF_REFILL_TAIL_HALF_LIFE_MS);
}

/*
 * The refill that job asked for was published at now, res its outcome:
 * record its time and its parts.
 */
void
leaf_refill_record(LeafRefillTimes *rt, const LeafLoadJob *job,
				   const LeafLoadResult *res, TimestampTz now)
{
	TimestampTz asked = job->asked;
	double		total;
	double		queue;
	double		commit;
	int			b;

	if (asked == 0 || asked > job->collected)
		asked = job->collected;
	total = Max((double) (now - asked) / 1000.0, 0.0);
	queue = (double) (job->collected - asked) / 1000.0;
	commit = res->commit_us < 0 ? -1.0 : (double) res->commit_us / 1000.0;

	rt->last_ms = total;
	rt->last_queue_ms = queue;
	rt->last_commit_ms = commit;
	rt->last_work_ms = Max(total - queue - Max(commit, 0.0), 0.0);
	if (total >= rt->max_ms)
	{
		rt->max_ms = total;
		rt->max_queue_ms = queue;
		rt->max_work_ms = rt->last_work_ms;
		rt->max_commit_ms = commit;
		rt->max_at = now;
	}
	rt->tail_ms = Max(total, leaf_refill_tail(rt, now));
	rt->tail_at = now;

	for (b = 0; b < LEAF_REFILL_BUCKETS - 1; b++)
		if (total < leaf_refill_bounds[b])
			break;
	rt->buckets[b]++;
	rt->asked_at = 0;
}

/*
 * The preload trigger's lead for a tag whose IDs go at rate a ms: twice
 * the tail of its refill times, and never less than floor_ms.  Returns
 * the IDs that last the lead at that rate, which must be left when the
 * next segment is asked for.
 */
int64
leaf_refill_lead(const LeafRefillTimes *rt, TimestampTz now, double rate,
				 int floor_ms)
{
	double		lead_ms = Max(2.0 * leaf_refill_tail(rt, now), (double) floor_ms);
	double		lead = rate * lead_ms;

	/* more than any segment holds is as good as all of it */
	return lead >= (double) PG_INT32_MAX ? PG_INT32_MAX : (int64) ceil(lead);
}

/*
 * An upper bound of the 99th percentile of the refill times: the upper
 * bound of the bucket that holds it, or the longest refill if that is
 * less.
 */
static double
leaf_refill_p99(const LeafRefillTimes *rt, int64 n)
{
	int64		rank = n - n / 100;
	int64		seen = 0;
	int			b;

	for (b = 0; b < LEAF_REFILL_BUCKETS - 1; b++)
	{
		seen += rt->buckets[b];
		if (seen >= rank)
			return Min(leaf_refill_bounds[b], rt->max_ms);
	}
	return rt->max_ms;
}

/*
 * Fill the LEAF_REFILL_COLUMNS columns of leaf_segment_refills() after
 * the tag's database and name, from a copy of a slot's refill times:
 * the last refill and its parts (queue, work, commit), the longest and its
 * parts, when it ended, the p99, the tail now and the buckets.  Times
 * in ms, NULL before the first refill; a commit that is part of the
 * statement (a fleet's) is NULL.  Returns the number of columns.
 */
int
leaf_refill_row(const LeafRefillTimes *rt, TimestampTz now,
				Datum *values, bool *nulls)
{
	Datum		counts[LEAF_REFILL_BUCKETS];
	int64		n = 0;
	int			j = 0;
	int			b;

	for (b = 0; b < LEAF_REFILL_BUCKETS; b++)
	{
		n += rt->buckets[b];
		counts[b] = Int64GetDatum(rt->buckets[b]);
	}
	values[j++] = Float8GetDatum(rt->last_ms);
	values[j++] = Float8GetDatum(rt->last_queue_ms);
	values[j++] = Float8GetDatum(rt->last_work_ms);
	nulls[j] = rt->last_commit_ms < 0;
	values[j++] = Float8GetDatum(rt->last_commit_ms);
	values[j++] = Float8GetDatum(rt->max_ms);
	values[j++] = Float8GetDatum(rt->max_queue_ms);
	values[j++] = Float8GetDatum(rt->max_work_ms);
	nulls[j] = rt->max_commit_ms < 0;
	values[j++] = Float8GetDatum(rt->max_commit_ms);
	values[j++] = TimestampTzGetDatum(rt->max_at);
	values[j++] = Float8GetDatum(n > 0 ? leaf_refill_p99(rt, n) : 0.0);
	values[j++] = Float8GetDatum(leaf_refill_tail(rt, now));
	if (n == 0)
	{
		for (b = 0; b < j; b++)
			nulls[b] = true;
	}
	values[j++] = PointerGetDatum(construct_array(counts, LEAF_REFILL_BUCKETS,
												  INT8OID, sizeof(int64),
												  FLOAT8PASSBYVAL,
												  TYPALIGN_DOUBLE));
	Assert(j == LEAF_REFILL_COLUMNS);
	return j;
}
