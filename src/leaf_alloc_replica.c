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

#include "leaf_alloc.h"
#include "leaf_alloc_replica.h"
#include "leaf_alloc_source.h"
#include "leaf_errcodes.h"

/*
 * The enabled subscription of this database that holds a table of the
 * extension extoid, if any: its name and publications into detail.  Only
 * a subscription whose owner may write the table counts: another one's
 * apply cannot write it (and a role that may create subscriptions does
 * not stop the allocator that way).
 */
bool
leaf_replica_subscribed(Oid extoid, char *detail, size_t len)
{
	Oid			argtypes[3] = {OIDOID, OIDOID, OIDOID};
	Datum		values[3];

	values[0] = ObjectIdGetDatum(extoid);
	values[1] = ObjectIdGetDatum(MyDatabaseId);
	values[2] = ObjectIdGetDatum(RelationRelationId);
	if (SPI_execute_with_args("SELECT s.subname::pg_catalog.text, "
							  "pg_catalog.array_to_string(s.subpublications, ', '), "
							  "c.relname::pg_catalog.text "
							  "FROM pg_catalog.pg_subscription s "
							  "JOIN pg_catalog.pg_subscription_rel r ON r.srsubid OPERATOR(pg_catalog.=) s.oid "
							  "JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) r.srrelid "
							  "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.srrelid "
							  "WHERE d.classid OPERATOR(pg_catalog.=) $3 "
							  "AND d.refobjid OPERATOR(pg_catalog.=) $1 "
							  "AND d.deptype OPERATOR(pg_catalog.=) 'e' "
							  "AND s.subdbid OPERATOR(pg_catalog.=) $2 AND s.subenabled "
							  "AND pg_catalog.has_table_privilege(s.subowner, r.srrelid, 'INSERT, UPDATE, DELETE') "
							  "ORDER BY c.relname OPERATOR(pg_catalog.<>) 'leaf_alloc', 1, 3 LIMIT 1",
							  3, argtypes, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_subscription");
	if (SPI_processed == 0)
		return false;
	snprintf(detail, len,
			 "Subscription \"%s\" (publications %s) replicates %s into this database.",
			 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
			 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2),
			 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3));
	return true;
}

/*
 * Has logical replication written leaf_alloc (in schema nsp) since the
 * last cut-over?  What wrote it last into detail.
 */
bool
leaf_replica_replicated(Oid nsp, char *detail, size_t len)
{
	char	   *pubs;

	if (!OidIsValid(get_relname_relid("leaf_alloc_replicated", nsp)))
		return false;			/* before 1.4 */
	if (SPI_execute(psprintf("SELECT origin, publications, last_applied "
							 "FROM %s.leaf_alloc_replicated "
							 "ORDER BY last_applied DESC LIMIT 1",
							 quote_identifier(get_namespace_name(nsp))),
					false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_alloc_replicated");
	if (SPI_processed == 0)
		return false;
	pubs = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	snprintf(detail, len,
			 "Logical replication (%s%s%s) wrote leaf_alloc, last at %s.",
			 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
			 pubs ? ", publications " : "", pubs ? pubs : "",
			 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3));
	return true;
}

/*
 * In a local load's transaction (SPI connected): may this database load
 * from its own leaf_alloc, or is it written by logical replication?
 * Returns false, with LF012 in *res, if it is.
 */
bool
leaf_replica_check(Oid nsp, Oid extoid, LeafLoadResult *res)
{
	if (!leaf_replica_subscribed(extoid, res->msg, sizeof(res->msg)) &&
		!leaf_replica_replicated(nsp, res->msg, sizeof(res->msg)))
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
	LeafLoadResult res;
	volatile bool ok = true;
	Oid			save_userid;
	int			save_sec_context;

	(void) leaf_extension_namespace(&extoid);
	if (!OidIsValid(extoid) || leaf_remote_enabled())
		return;
	memset(&res, 0, sizeof(res));

	/* leaf_alloc_replicated is not for the caller to read: as the allocator */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		ok = leaf_replica_check(nsp, extoid, &res);
		SPI_finish();
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
	if (!ok)
		leaf_report_replicated(tag, res.msg);
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
