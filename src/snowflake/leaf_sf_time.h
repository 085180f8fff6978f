/*-------------------------------------------------------------------------
 *
 * leaf_sf_time.h
 *	  The time of a snowflake ID under a layout and an epoch
 *	  (leaf_sf_time.c), for leaf_snowflake_decode.
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_SF_TIME_H
#define LEAF_SF_TIME_H

#include "datatype/timestamp.h"

#include "snowflake/leaf_sf_layout.h"

extern TimestampTz leaf_sf_id_time(const LeafSfLayout *layout,
								   int64 epoch_ms, int64 id);

#endif							/* LEAF_SF_TIME_H */
