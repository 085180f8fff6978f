/*-------------------------------------------------------------------------
 *
 * leaf_metrics.c
 *	  leaf_segment_errors(): the failed loads of each tag slot, for the
 *	  view leaf_tag_metrics.
 *
 * leaf_segments shows the text of a tag's last failed load, but neither
 * its SQLSTATE nor how many loads failed: a monitoring system needs both,
 * to tell a refusal that only a person can mend (LF005, LF006, LF007,
 * LF012), which stops a tag once its buffers run dry, from a failure the
 * allocator retries, and to see refusals while the buffers still serve.
 * This file only reads the slots (leaf_segment_shmem.h), as leaf_segments
 * does, under each slot's spinlock; it changes nothing of segment mode.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/tuplestore.h"

#include "leaf.h"
#include "leaf_segment_shmem.h"

PG_FUNCTION_INFO_V1(leaf_segment_errors);

/*
 * leaf_segment_errors(): one row per tag slot in use, as leaf_segments:
 * database, biz_tag, failed_loads (loads that failed since the slot was
 * taken), last_error_code (SQLSTATE of the last failed load, NULL if none
 * failed), error_current (no load worked since it) and error_final
 * (retrying cannot mend it: waiting callers get it at once).
 */
Datum
leaf_segment_errors(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	leaf_require_preload();
	if (leaf_seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("leaf shared memory is not initialized")));
	InitMaterializedSRF(fcinfo, 0);

	for (i = 0; i < leaf_slots_in_use(); i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];
		Oid			dboid;
		char		tag[LEAF_TAG_MAXLEN + 1];
		uint64		fail_count;
		int			sqlstate;
		bool		current;
		bool		final;
		char	   *dbname;
		NameData	dbnamedata;
		Datum		values[6];
		bool		nulls[6];

		SpinLockAcquire(&slot->mutex);
		if (slot->generation == 0)
		{
			SpinLockRelease(&slot->mutex);
			continue;
		}
		dboid = slot->dboid;
		memcpy(tag, slot->tag, sizeof(tag));
		fail_count = slot->fail_count;
		sqlstate = slot->fail_sqlstate;
		current = slot->fail_current;
		final = slot->fail_final;
		SpinLockRelease(&slot->mutex);

		/* slots of a dropped database wait for a worker to free them */
		dbname = get_database_name(dboid);
		if (dbname == NULL)
			continue;
		namestrcpy(&dbnamedata, dbname);

		memset(nulls, 0, sizeof(nulls));
		values[0] = NameGetDatum(&dbnamedata);
		values[1] = CStringGetTextDatum(tag);
		values[2] = Int64GetDatum((int64) fail_count);
		if (fail_count > 0 && sqlstate != 0)
			values[3] = CStringGetTextDatum(unpack_sql_state(sqlstate));
		else
			nulls[3] = true;
		values[4] = BoolGetDatum(fail_count > 0 && current);
		values[5] = BoolGetDatum(fail_count > 0 && current && final);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
							 values, nulls);
	}

	return (Datum) 0;
}
