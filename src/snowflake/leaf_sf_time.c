/*-------------------------------------------------------------------------
 *
 * leaf_sf_time.c
 *	  Time in the key: the SQL functions that map an instant to the
 *	  smallest snowflake ID of its unit of time, and an ID to the start of
 *	  its unit, so that a snowflake key can stand in for a creation time
 *	  in range scans, partition bounds and keyset pagination.
 *
 * Each function has two forms: one under the server's leaf.snowflake_layout
 * and leaf.snowflake_epoch (STABLE: they are fixed at server start, but
 * another server may have others), and one with the layout and the epoch
 * given (IMMUTABLE, for partition bounds, indexes and generated columns;
 * it reads no shared memory, so it works without shared_preload_libraries
 * too).  Both compute with the layout passed down, never with the global
 * one, so that they cannot disagree.  leaf_snowflake_decode
 * (leaf_snowflake.c) takes the time of an ID from here too.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "leaf.h"
#include "common/leaf_common.h"
#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_sf_layout.h"
#include "snowflake/leaf_sf_time.h"

/* ms from 1970-01-01 (Unix) to 2000-01-01 (PostgreSQL's epoch) */
#define LEAF_SF_PG_EPOCH_MS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)

/* the bound of leaf.snowflake_epoch, as leaf_sf_check_epoch has it */
#define LEAF_SF_EPOCH_LIMIT_MS	(INT64CONST(1) << 42)

PG_FUNCTION_INFO_V1(leaf_snowflake_min_id);
PG_FUNCTION_INFO_V1(leaf_snowflake_min_id_in);
PG_FUNCTION_INFO_V1(leaf_snowflake_time);
PG_FUNCTION_INFO_V1(leaf_snowflake_time_in);

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
 * The timestamptz of the start of unit ts of a layout, or 22008 when it is
 * beyond what timestamptz holds (a wide timestamp field of long units, or
 * an ID with bits above its layout's).
 */
static TimestampTz
leaf_sf_unit_start(const LeafSfLayout *layout, int64 epoch_ms, int64 ts)
{
	int64		ms;
	int64		us;

	if (pg_mul_s64_overflow(ts, (int64) layout->unit_ms, &ms) ||
		pg_add_s64_overflow(ms, epoch_ms - LEAF_SF_PG_EPOCH_MS, &ms) ||
		pg_mul_s64_overflow(ms, INT64CONST(1000), &us) ||
		!IS_VALID_TIMESTAMP(us))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range: timestamp field " INT64_FORMAT " of a snowflake ID",
						ts)));
	return (TimestampTz) us;
}

/*
 * The start of the unit of time of an ID of a layout; 22023 for a negative
 * ID.
 */
TimestampTz
leaf_sf_id_time(const LeafSfLayout *layout, int64 epoch_ms, int64 id)
{
	if (id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowflake ID must not be negative: " INT64_FORMAT, id)));
	return leaf_sf_unit_start(layout, epoch_ms,
							  id >> (layout->worker_bits + layout->seq_bits));
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

/* The layout of a text argument; 22023 with the forms if it does not parse. */
static void
leaf_sf_layout_arg(text *arg, LeafSfLayout *layout)
{
	char	   *value = text_to_cstring(arg);
	const char *problem;

	if (!leaf_sf_layout_parse(value, layout, &problem))
	{
		/* a problem of syntax says no more than the hint: no detail then */
		bool		syntax = strncmp(problem, "\"leaf.snowflake_layout\" must be", 31) == 0;
		/* quoted up to a layout's length at most, cut between characters */
		int			shown = pg_mbcliplen(value, strlen(value), LEAF_SF_LAYOUT_LEN);

		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid snowflake layout: \"%.*s%s\"", shown, value,
						value[shown] != '\0' ? "..." : ""),
				 syntax ? 0 : errdetail("%s", problem),
				 errhint("A layout is written as \"leaf.snowflake_layout\" is: \"default\", \"js53\", or timestamp+worker+sequence bits with an optional unit of time, such as \"41+10+12\" or \"38+12+13/10ms\".")));
	}
	pfree(value);
}

/*
 * The epoch of a timestamptz argument, in ms since 1970: 22023 unless it
 * is a value leaf.snowflake_epoch can take (whole ms, within 2^42 ms of
 * 1970).
 */
static int64
leaf_sf_epoch_arg(TimestampTz epoch)
{
	int64		ms;

	if (TIMESTAMP_NOT_FINITE(epoch) || epoch % 1000 != 0 ||
		(ms = leaf_sf_timestamptz_ms(epoch)) < -LEAF_SF_EPOCH_LIMIT_MS ||
		ms > LEAF_SF_EPOCH_LIMIT_MS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid snowflake epoch: %s", timestamptz_to_str(epoch)),
				 errdetail("An epoch is a whole number of milliseconds within 2^42 ms of 1970-01-01 00:00:00 UTC, as \"leaf.snowflake_epoch\" is.")));
	return ms;
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

/*
 * leaf_snowflake_min_id(ts timestamptz, layout text, epoch timestamptz)
 * returns bigint
 */
Datum
leaf_snowflake_min_id_in(PG_FUNCTION_ARGS)
{
	LeafSfLayout layout;

	leaf_sf_layout_arg(PG_GETARG_TEXT_PP(1), &layout);
	PG_RETURN_INT64(leaf_sf_min_id(&layout,
								   leaf_sf_epoch_arg(PG_GETARG_TIMESTAMPTZ(2)),
								   PG_GETARG_TIMESTAMPTZ(0)));
}

/* leaf_snowflake_time(id bigint) returns timestamptz */
Datum
leaf_snowflake_time(PG_FUNCTION_ARGS)
{
	leaf_require_preload();
	PG_RETURN_TIMESTAMPTZ(leaf_sf_id_time(&leaf_sf_layout, leaf_sf_epoch_ms,
										  PG_GETARG_INT64(0)));
}

/*
 * leaf_snowflake_time(id bigint, layout text, epoch timestamptz) returns
 * timestamptz
 */
Datum
leaf_snowflake_time_in(PG_FUNCTION_ARGS)
{
	LeafSfLayout layout;

	leaf_sf_layout_arg(PG_GETARG_TEXT_PP(1), &layout);
	PG_RETURN_TIMESTAMPTZ(leaf_sf_id_time(&layout,
										  leaf_sf_epoch_arg(PG_GETARG_TIMESTAMPTZ(2)),
										  PG_GETARG_INT64(0)));
}
