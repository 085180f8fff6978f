/*-------------------------------------------------------------------------
 *
 * leaf_alloc_replica.c
 *	  Segment mode in a logical replica: no segment while leaf_alloc is
 *	  written by logical replication (LF012).
 *
 * A subscriber's leaf_alloc holds the publisher's counters as they were
 * when the apply last wrote them.  Loading from it would hand out what
 * the publisher hands out too, now (it goes on serving) or before (the
 * apply lags).  So a local load is refused while an enabled subscription
 * of this database holds one of leaf's tables, and while
 * leaf_alloc_replicated has a row: the trigger of that name writes one
 * whenever an apply writes leaf_alloc, and only leaf_alloc_cutover()
 * (leaf_alloc_cutover.c) takes it away, so that a subscription dropped
 * before the first load does not make the publisher's counters this
 * database's own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "segment/leaf_alloc.h"
#include "segment/leaf_alloc_replica.h"
#include "segment/leaf_alloc_source.h"
#include "common/leaf_copy.h"
#include "common/leaf_errcodes.h"

/*
 * In a local load's transaction (SPI connected): may this database load
 * from its own leaf_alloc, or is it written by logical replication?
 * Returns false, with LF012 in *res, if it is.
 */
bool
leaf_replica_check(Oid nsp, Oid extoid, LeafLoadResult *res)
{
	if (!leaf_copy_subscribed(extoid, res->msg, sizeof(res->msg)) &&
		!leaf_copy_replicated(nsp, res->msg, sizeof(res->msg)))
		return true;
	res->status = LEAF_LOAD_FINAL;
	res->sqlstate = ERRCODE_LEAF_ALLOC_REPLICATED;
	return false;
}

/*
 * In a backend: refuse (LF012) what would act on the counters of tag as
 * this database's own, while leaf_alloc is written by logical replication
 * (leaf_segment_discard(), and so leaf_adopt()).
 */
void
leaf_replica_refuse(Oid nsp, const char *tag)
{
	Oid			extoid;
	char		detail[sizeof(((LeafLoadResult *) NULL)->msg)];

	(void) leaf_extension_namespace(&extoid);
	if (!OidIsValid(extoid) || leaf_remote_enabled())
		return;
	if (leaf_copy_written_by_replication(nsp, extoid, detail, sizeof(detail)))
		leaf_report_replicated(tag, detail);
}

/*
 * Raise the error of a load refused because leaf_alloc is written by
 * logical replication, for a caller waiting for a segment of tag.
 */
void
leaf_report_replicated(const char *tag, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_LEAF_ALLOC_REPLICATED),
			 errmsg("refusing to allocate a segment for biz_tag \"%s\": leaf_alloc is written by logical replication",
					tag),
			 superuser() ?
			 errdetail_internal("%s", detail) :
			 errdetail("The counters in leaf_alloc are a publisher's, which hands out the same IDs."),
			 errhint("Once the publisher hands out no more IDs, a superuser disables the subscription and takes the counters over with SELECT * FROM leaf_alloc_cutover('subscription'); see docs/copies.md.")));
}
