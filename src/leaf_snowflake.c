/*-------------------------------------------------------------------------
 *
 * leaf_snowflake.c
 *	  Snowflake mode (placeholder until the generator lands).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "leaf.h"

void
leaf_snowflake_init(void)
{
}

void
leaf_snowflake_shmem_request(void)
{
}

void
leaf_snowflake_shmem_startup(void)
{
}
