/*-------------------------------------------------------------------------
 *
 * leaf_copy.c
 *	  Where a piece of leaf's state lives, and which copy of it this is.
 *
 * leaf keeps state in a database (the counters in leaf_alloc and what
 * leaf_alloc_source records of their home, the worker-ID leases in the
 * allocation database), in a data directory (the snowflake state file,
 * the warm-start file) and in ZooKeeper (the holder of a worker ID).
 * PostgreSQL copies the first two many ways, and a copy that served from
 * its original's state would hand out the original's IDs.  Every piece of
 * state answers "is this the copy I was written in?" with what this file
 * says of the place it is read in:
 *
 *	- the cluster (its system identifier), the database and the extension,
 *	  the data directory (its inode) and the timeline: leaf_copy_here(),
 *	  and, for a server reached over libpq, the view leaf_copy_identity
 *	  there (leaf_copy_status());
 *	- whether logical replication writes leaf's tables into the database,
 *	  or has written them since the last cut-over: leaf_copy_subscribed()
 *	  and leaf_copy_replicated(); leaf's own writes never count as such
 *	  (leaf_copy_own_writes()).
 *
 * What each piece of state records of it, and how it judges a change, is
 * its own (leaf_alloc_source.c for the counters, leaf_sf_db.c for the
 * leases, leaf_sf_state.c for the state file); docs/copies.md lists every
 * copy operation against every piece of state, and test/copy_matrix
 * enumerates them for the tests.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "segment/leaf_alloc.h"
#include "common/leaf_copy.h"

PG_FUNCTION_INFO_V1(leaf_copy_status);

/* The inode of this server's data directory, 0 if unknown. */
uint64
leaf_copy_data_directory(void)
{
	struct stat st;

	if (stat(DataDir, &st) != 0)
		return 0;
	return (uint64) st.st_ino;
}

/*
 * This database of this server, in this data directory, on the timeline
 * it writes (0 in recovery).
 */
void
leaf_copy_here(LeafCopyIdent *here)
{
	memset(here, 0, sizeof(*here));
	here->remote = false;
	here->sysid = (int64) GetSystemIdentifier();
	here->dboid = MyDatabaseId;
	if (!RecoveryInProgress())
		here->timeline = GetWALInsertionTimeLine();
	here->datadir = leaf_copy_data_directory();
}

/*
 * The name of this data directory as a holder of a worker ID (in the
 * leases, in ZooKeeper and in the state file): the system identifier,
 * shared by every physical copy, and the inode, which differs in each
 * copy but a volume clone.
 */
void
leaf_copy_holder_name(char *buf, size_t len)
{
	snprintf(buf, len, UINT64_FORMAT ":" UINT64_FORMAT,
			 GetSystemIdentifier(), leaf_copy_data_directory());
}

/*
 * The enabled subscription of this database that holds a table of the
 * extension extoid, if any: its name and publications into detail.  Only
 * a subscription whose owner may write the table counts: another one's
 * apply cannot write it (and a role that may create subscriptions does
 * not stop the allocator that way).
 */
bool
leaf_copy_subscribed(Oid extoid, char *detail, size_t len)
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
 * Has logical replication written one of leaf's tables (in schema nsp)
 * since the last cut-over?  What wrote it last into detail.  The trigger
 * leaf_alloc_replicated_mark records it, for leaf_alloc and for the
 * worker-ID leases.
 */
bool
leaf_copy_replicated(Oid nsp, char *detail, size_t len)
{
	char	   *pubs;

	if (!OidIsValid(leaf_extension_relid(nsp, "leaf_alloc_replicated")))
		return false;			/* before 1.4: none of leaf's */
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
			 "Logical replication (%s%s%s) wrote leaf's tables, last at %s.",
			 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
			 pubs ? ", publications " : "", pubs ? pubs : "",
			 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3));
	return true;
}

/*
 * Is leaf's state in this database written by logical replication, by a
 * subscription or since the last cut-over?  Asked as the bootstrap
 * superuser (leaf_alloc_replicated is not for the caller to read), in a
 * connection to SPI of its own; what says so into detail.
 */
bool
leaf_copy_written_by_replication(Oid nsp, Oid extoid, char *detail,
								 size_t len)
{
	volatile bool written = false;
	Oid			save_userid;
	int			save_sec_context;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		written = leaf_copy_subscribed(extoid, detail, len) ||
			leaf_copy_replicated(nsp, detail, len);
		SPI_finish();
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
	return written;
}

/*
 * leaf's own writes are never logical replication: a process of leaf's
 * writes with session_replication_role = origin, whatever the
 * configuration (postgresql.conf, ALTER DATABASE or ALTER ROLE ... SET)
 * gives its sessions.  Under 'replica', leaf_alloc_replicated_mark would
 * take such a write for an apply where the session set the role itself
 * (a superuser's SET before leaf_alloc_cutover()), and the triggers of
 * leaf_alloc that keep its counters from moving back would not fire.
 *
 * leaf_copy_own_writes(): for the rest of a background worker's life, as
 * an override, which a reload of postgresql.conf does not undo.
 */
void
leaf_copy_own_writes(void)
{
	SetConfigOption("session_replication_role", "origin",
					PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * leaf_copy_own_writes_begin(): in a backend, for leaf's writes in the
 * caller's transaction, until AtEOXact_GUC(true, level) with the level it
 * returns (or the end of the transaction, if an error comes first).
 */
int
leaf_copy_own_writes_begin(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("session_replication_role", "origin",
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	return level;
}

/*
 * leaf_copy_status(): which copy of the database this is, for a node that
 * keeps state in it over libpq (the worker-ID leases, which read it
 * through the view leaf_copy_identity): the system identifier, the inode
 * of the data directory, the timeline (NULL in recovery), the database,
 * whether it is in recovery, when the server started and its clock (ms
 * since 1970), and, if logical replication writes leaf's tables here or
 * has written them since the last cut-over, what says so.
 */
Datum
leaf_copy_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[8];
	bool		nulls[8] = {0};
	LeafCopyIdent here;
	Oid			extoid;
	Oid			nsp;
	char		detail[512];
	const int64 unix_epoch_ms = (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
		(int64) SECS_PER_DAY * 1000;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	leaf_copy_here(&here);
	values[0] = Int64GetDatum(here.sysid);
	values[1] = Int64GetDatum((int64) here.datadir);
	values[2] = Int64GetDatum((int64) here.timeline);
	nulls[2] = here.timeline == 0;
	values[3] = ObjectIdGetDatum(here.dboid);
	values[4] = BoolGetDatum(RecoveryInProgress());
	values[5] = Int64GetDatum(PgStartTime / 1000 + unix_epoch_ms);
	values[6] = Int64GetDatum(GetCurrentTimestamp() / 1000 + unix_epoch_ms);
	nsp = leaf_extension_namespace(&extoid);
	if (OidIsValid(extoid) &&
		leaf_copy_written_by_replication(nsp, extoid, detail, sizeof(detail)))
		values[7] = CStringGetTextDatum(detail);
	else
		nulls[7] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
