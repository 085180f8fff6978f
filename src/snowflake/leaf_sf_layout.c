/*-------------------------------------------------------------------------
 *
 * leaf_sf_layout.c
 *	  The layout of snowflake IDs: leaf.snowflake_layout, read once at
 *	  start-up.
 *
 * The setting is a preset or the three field widths, with an optional
 * unit of time:
 *	- "default" is 41+10+12/1ms, the layout of every release before 1.3:
 *	  69.7 years, 1,024 worker IDs, 4,096 IDs per ms and node;
 *	- "js53" is 41+6+6/1ms: every ID is below 2^53, so that JavaScript
 *	  numbers hold it exactly; 69.7 years, 64 worker IDs, 64 IDs per ms
 *	  and node;
 *	- "T+W+S" or "T+W+S/U" with U like "10ms" or "1s": T bits of time
 *	  units, W bits of worker ID (at most 16: 65,536 nodes), S bits of
 *	  sequence; T+W+S at most 63.
 *
 * The worker records the layout in the state file and in the ZooKeeper
 * root, and refuses to serve under another (leaf_sf_worker.c,
 * leaf_zk_assign.c): IDs of two layouts may collide.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "snowflake/leaf_sf_layout.h"

LeafSfLayout leaf_sf_layout = LEAF_SF_LAYOUT_DEFAULT;

/* read a number of at most 4 digits at *p; -1 if there is none */
static int
leaf_sf_layout_number(const char **p)
{
	int			v = 0;
	int			digits = 0;

	while (isdigit((unsigned char) **p) && digits < 5)
	{
		v = v * 10 + (**p - '0');
		(*p)++;
		digits++;
	}
	return (digits == 0 || digits > 4) ? -1 : v;
}

/* the unit after "/": "10ms", "1s"; -1 if it is not one */
static int
leaf_sf_layout_unit(const char *p)
{
	int			n = leaf_sf_layout_number(&p);

	if (n <= 0)
		return -1;
	if (pg_strcasecmp(p, "ms") == 0)
		return n;
	if (pg_strcasecmp(p, "s") == 0 && n <= 1000)
		return n * 1000;
	return -1;
}

/*
 * Parse a value of leaf.snowflake_layout into *out.  On failure returns
 * false with *problem saying why.
 */
bool
leaf_sf_layout_parse(const char *value, LeafSfLayout *out,
					 const char **problem)
{
	const char *p = value;
	LeafSfLayout l;

	*problem = NULL;
	if (pg_strcasecmp(value, "default") == 0)
	{
		*out = leaf_sf_layout_default();
		return true;
	}
	if (pg_strcasecmp(value, "js53") == 0)
	{
		LeafSfLayout js = {41, 6, 6, 1};

		*out = js;
		return true;
	}

	l.unit_ms = 1;
	l.ts_bits = leaf_sf_layout_number(&p);
	if (l.ts_bits < 0 || *p++ != '+')
		goto syntax;
	l.worker_bits = leaf_sf_layout_number(&p);
	if (l.worker_bits < 0 || *p++ != '+')
		goto syntax;
	l.seq_bits = leaf_sf_layout_number(&p);
	if (l.seq_bits < 0)
		goto syntax;
	if (*p == '/')
	{
		l.unit_ms = leaf_sf_layout_unit(p + 1);
		if (l.unit_ms < 0 || l.unit_ms > 1000)
		{
			*problem = "The unit of time after \"/\" must be from 1ms to 1s, such as 10ms or 1s.";
			return false;
		}
	}
	else if (*p != '\0')
		goto syntax;

	if (l.ts_bits < 20 || l.ts_bits > 52)
		*problem = "The timestamp must have from 20 to 52 bits.";
	else if (l.worker_bits < 1 || l.worker_bits > LEAF_SF_MAX_WORKER_BITS)
		*problem = "The worker ID must have from 1 to 16 bits.";
	else if (l.seq_bits < 1 || l.seq_bits > 22)
		*problem = "The sequence must have from 1 to 22 bits.";
	else if (l.ts_bits + l.worker_bits + l.seq_bits > 63)
		*problem = "The three fields must have at most 63 bits together: an ID is a positive bigint.";
	if (*problem != NULL)
		return false;
	*out = l;
	return true;

syntax:
	*problem = "\"leaf.snowflake_layout\" must be \"default\", \"js53\", or timestamp+worker+sequence bits with an optional unit of time, such as \"41+10+12\" or \"38+12+13/10ms\".";
	return false;
}

/* The canonical name of a layout, such as "41+10+12/1ms". */
void
leaf_sf_layout_format(const LeafSfLayout *layout, char *buf, size_t size)
{
	snprintf(buf, size, "%d+%d+%d/%dms", layout->ts_bits,
			 layout->worker_bits, layout->seq_bits, layout->unit_ms);
}

bool
leaf_sf_layout_equal(const LeafSfLayout *a, const LeafSfLayout *b)
{
	return a->ts_bits == b->ts_bits && a->worker_bits == b->worker_bits &&
		a->seq_bits == b->seq_bits && a->unit_ms == b->unit_ms;
}

/*
 * How long the timestamps of this layout last, for messages: "2^41 ms" or
 * "2^38 x 10 ms".
 */
void
leaf_sf_layout_describe_span(char *buf, size_t size)
{
	if (leaf_sf_layout.unit_ms == 1)
		snprintf(buf, size, "2^%d ms", leaf_sf_layout.ts_bits);
	else
		snprintf(buf, size, "2^%d x %d ms", leaf_sf_layout.ts_bits,
				 leaf_sf_layout.unit_ms);
}

/*
 * The range of timestamps of this layout, for messages: "41-bit range of
 * timestamps" or "38-bit range of 10 ms timestamps".
 */
void
leaf_sf_layout_describe_range(char *buf, size_t size)
{
	if (leaf_sf_layout.unit_ms == 1)
		snprintf(buf, size, "%d-bit range of timestamps",
				 leaf_sf_layout.ts_bits);
	else
		snprintf(buf, size, "%d-bit range of %d ms timestamps",
				 leaf_sf_layout.ts_bits, leaf_sf_layout.unit_ms);
}
