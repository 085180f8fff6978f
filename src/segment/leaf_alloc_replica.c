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
 * Make *res the refusal (LF012) of a load of tag from a leaf_alloc written
 * by logical replication, with what was found in res->msg.
 */
static void
leaf_replica_refusal(const char *tag, LeafLoadResult *res)
{
	LeafRefusal *r = &res->refusal;

	res->status = LEAF_LOAD_FINAL;
	res->sqlstate = ERRCODE_LEAF_ALLOC_REPLICATED;
	snprintf(r->message, sizeof(r->message),
			 "refusing to allocate a segment for biz_tag \"%s\": leaf_alloc is written by logical replication",
			 tag);
	strlcpy(r->detail, res->msg, sizeof(r->detail));
	strlcpy(r->detail_public,
			"The counters in leaf_alloc are a publisher's, which hands out the same IDs.",
			sizeof(r->detail_public));
	strlcpy(r->hint,
			"Once the publisher hands out no more IDs, a superuser disables the subscription and takes the counters over with SELECT * FROM leaf_alloc_cutover('subscription'); see docs/copies.md.",
			sizeof(r->hint));
}

/*
 * In a local load's transaction (SPI connected): may this database load
 * tag from its own leaf_alloc, or is it written by logical replication?
 * Returns false, with the refusal LF012 in *res, if it is.
 */
bool
leaf_replica_check(Oid nsp, Oid extoid, const char *tag, LeafLoadResult *res)
{
	if (!leaf_copy_subscribed(extoid, res->msg, sizeof(res->msg)) &&
		!leaf_copy_replicated(nsp, res->msg, sizeof(res->msg)))
		return true;
	leaf_replica_refusal(tag, res);
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
	LeafLoadResult res;

	(void) leaf_extension_namespace(&extoid);
	if (!OidIsValid(extoid) || leaf_remote_enabled())
		return;
	memset(&res, 0, sizeof(res));
	if (leaf_copy_written_by_replication(nsp, extoid, res.msg, sizeof(res.msg)))
	{
		leaf_replica_refusal(tag, &res);
		leaf_report_refusal(res.sqlstate, &res.refusal);
	}
}
