/*-------------------------------------------------------------------------
 *
 * leaf_sf_time.c
 *	  Time in the key: the SQL functions that map an instant to the
 *	  smallest snowflake ID of its unit of time, and an ID to the start of
 *	  its unit, so that a snowflake key can stand in for a creation time
 *	  in range scans, partition bounds and keyset pagination.
 *
 * leaf_snowflake_min_id(ts) computes under the server's leaf.snowflake_layout
 * and leaf.snowflake_epoch (STABLE: they are fixed at server start, but
 * another server may have others), through a function that takes the
 * layout and the epoch as arguments, never the globals.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "leaf.h"
#include "common/leaf_common.h"
#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_sf_layout.h"

/* ms from 1970-01-01 (Unix) to 2000-01-01 (PostgreSQL's epoch) */
#define LEAF_SF_PG_EPOCH_MS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)

PG_FUNCTION_INFO_V1(leaf_snowflake_min_id);

/* ms since 1970 of a finite timestamptz, rounded down */
static int64
leaf_sf_timestamptz_ms(TimestampTz t)
{
	int64		ms = t / 1000;

	if (t % 1000 < 0)
		ms--;
	return ms + LEAF_SF_PG_EPOCH_MS;
}

/*
 * The smallest ID of a layout whose time is at or after t: the timestamp
 * field of the unit that holds t, worker 0, sequence 0.  Every ID is at or
 * after an instant before the epoch (0); an instant past the layout's last
 * unit has no ID (22008).
 */
static int64
leaf_sf_min_id(const LeafSfLayout *layout, int64 epoch_ms, TimestampTz t)
{
	int64		ts;
	int64		max_ts = (INT64CONST(1) << layout->ts_bits) - 1;
	int64		ms;

	if (TIMESTAMP_IS_NOBEGIN(t))
		return 0;
	if (!TIMESTAMP_IS_NOEND(t))
	{
		ms = leaf_sf_timestamptz_ms(t);
		if (ms < epoch_ms)
			return 0;
		ts = (ms - epoch_ms) / layout->unit_ms;
		if (ts <= max_ts)
			return ts << (layout->worker_bits + layout->seq_bits);
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATETIME_FIELD_OVERFLOW),
			 errmsg("no snowflake ID is at or after %s: the %d-bit timestamp field ends before it",
					timestamptz_to_str(t), layout->ts_bits),
			 errhint("For a range open at the top, leave the upper bound out (or use MAXVALUE in a partition bound).")));
}

/*
 * leaf_snowflake_min_id(ts timestamptz) returns bigint, under the server's
 * layout and epoch
 */
Datum
leaf_snowflake_min_id(PG_FUNCTION_ARGS)
{
	leaf_require_preload();
	PG_RETURN_INT64(leaf_sf_min_id(&leaf_sf_layout, leaf_sf_epoch_ms,
								   PG_GETARG_TIMESTAMPTZ(0)));
}
