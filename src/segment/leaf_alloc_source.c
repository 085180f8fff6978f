/*-------------------------------------------------------------------------
 *
 * leaf_alloc_source.c
 *	  Which allocation database segments come from: recorded, checked
 *	  before loads from it, confirmed by a superuser when it changes.
 *
 * Each database that uses segment mode records, in its leaf_alloc_source
 * table, the allocation database it draws segments from (state
 * 'current'), in a committed transaction before the first segment from it
 * is used.  A load from any other source is refused (LF006), and the
 * source is written there as 'pending', until a superuser runs
 * leaf_alloc_source_confirm(), which makes the pending source current.
 *
 * The reason: a shard remembers the max_id of the tags it has used (and
 * refuses one that moved backwards, LF005), but not of those it has not
 * used yet, and another allocation database, or the local leaf_alloc, may
 * hold lower values for them.
 *
 * A local source is this database of this cluster: its OID and the
 * cluster's system identifier (recorded since 1.4), so that a copy in
 * another cluster, whose database may have the same OID (the first one
 * created in a new cluster), is told from the original.  A copy is
 * refused like a change of allocation database.  pg_upgrade makes a new
 * cluster too, and the old one can be started again in copy mode: it is
 * confirmed like any copy (docs/copies.md).
 *
 * The check serves both sources of segments: this database's own
 * leaf_alloc (leaf_alloc_local.c, on this server's timeline) and
 * another server's in fleet mode (leaf_alloc_remote.c).  The same
 * source on a new timeline was promoted or restored, unless it is the
 * local leaf_alloc on a lower one (pg_upgrade): see
 * leaf_source_check_txn.  A refusal (LF006, LF007) carries the error
 * that the callers waiting for the segment get (leaf_source_refuse_*).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"


#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "segment/leaf_alloc.h"
#include "segment/leaf_alloc_source.h"
#include "common/leaf_errcodes.h"

/*
 * leaf.alloc_failover: what a load on a new timeline of the allocation
 * database does
 */
typedef enum LeafAllocFailover
{
	LEAF_FAILOVER_CONFIRM,		/* refused (LF007) until a superuser confirms */
	LEAF_FAILOVER_SYNCHRONOUS	/* recorded, and loads go on */
} LeafAllocFailover;

static const struct config_enum_entry leaf_alloc_failover_options[] = {
	{"confirm", LEAF_FAILOVER_CONFIRM, false},
	{"synchronous", LEAF_FAILOVER_SYNCHRONOUS, false},
	{NULL, 0, false}
};

static int	leaf_alloc_failover = LEAF_FAILOVER_CONFIRM;

/* the last source found to be the recorded one, for this extension */
static LeafCopyIdent leaf_checked_ident;
static Oid	leaf_checked_extoid = InvalidOid;
static bool leaf_checked = false;
static bool leaf_refused = false;	/* the last check refused the source */
static bool leaf_refused_timeline = false;	/* ... for its new timeline */
static bool leaf_checked_tl = false;	/* the check saw the timeline column */
static TimestampTz leaf_checked_at = 0; /* when the check last ran */

static void leaf_source_refuse_promoted(const char *tag, LeafLoadResult *res);

#ifdef LEAF_TEST_HOOKS
static int	leaf_test_source_pause_ms = 0;
#endif

/* Define the setting of the timeline check. */
void
leaf_alloc_source_init_settings(void)
{
	DefineCustomEnumVariable("leaf.alloc_failover",
							 "Sets what segment loads do once the allocation database is on a new timeline.",
							 "A new timeline means a promotion or a restore, which may have lost the last "
							 "allocations: \"confirm\" refuses loads until a superuser confirms, "
							 "\"synchronous\" goes on (the promoted server was a synchronous standby).",
							 &leaf_alloc_failover,
							 LEAF_FAILOVER_CONFIRM,
							 leaf_alloc_failover_options,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
#ifdef LEAF_TEST_HOOKS
	DefineCustomIntVariable("leaf.test_source_pause_ms",
							"Makes the allocator sleep this long after it read leaf_alloc_source in a check (for tests only).",
							NULL,
							&leaf_test_source_pause_ms,
							0, 0, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
#endif
}

/* A comparison of a source with the recorded one. */
typedef struct LeafSourceCheck
{
	const LeafCopyIdent *cur; /* the source to be used */
	bool		write;			/* record it, as current or pending */
	Oid			extoid;			/* out: this database's leaf extension */
	bool		recorded;		/* out: a source was recorded */
	bool		same;			/* out: and it is cur (or none was) */
	bool		promoted;		/* out: the same, but on a timeline that
								 * is not confirmed */
	bool		have_tl;		/* out: leaf_alloc_source has a timeline
								 * column (release 1.1) */
	bool		have_dir;		/* out: a local source records its
								 * cluster and data directory (1.4) */
	bool		fill_dboid;		/* out: the local source is recorded
								 * without its database (before 1.2) or
								 * its cluster (before 1.4), in a database
								 * not yet updated to 1.4 */
	bool		copied;			/* out: the local source is recorded for
								 * another database: this one is a copy */
	bool		taken_over;		/* out: copied, and the recorded database's
								 * counters were taken over by another one */
	char		detail[LEAF_ERRMSG_LEN];	/* out: if not the same, or
											 * promoted */
} LeafSourceCheck;

bool
leaf_same_source(const LeafCopyIdent *a, const LeafCopyIdent *b)
{
	if (a->remote != b->remote)
		return false;
	/*
	 * local: the same database (1.1 recorded none: taken as the same) of
	 * the same cluster (none before 1.4: leaf_source_read decides)
	 */
	if (!a->remote)
		return (!OidIsValid(a->dboid) || !OidIsValid(b->dboid) ||
				a->dboid == b->dboid) &&
			(a->sysid == 0 || b->sysid == 0 || a->sysid == b->sysid);
	return a->sysid == b->sysid && a->dboid == b->dboid &&
		a->extoid == b->extoid;
}

static void
leaf_describe_source(const LeafCopyIdent *id, char *buf, size_t len)
{
	if (!id->remote && id->sysid == 0)
		snprintf(buf, len, "the local leaf_alloc (database %u of a system not recorded)",
				 id->dboid);
	else if (!id->remote)
		snprintf(buf, len, "the local leaf_alloc (database %u of system " UINT64_FORMAT ")",
				 id->dboid, (uint64) id->sysid);
	else
		snprintf(buf, len, "%s (system " INT64_FORMAT ", database %u, extension %u)",
				 id->address, id->sysid, id->dboid, id->extoid);
}

/*
 * Does leaf_alloc_source (relid) have the columns of 1.4, so that a local
 * source records its cluster and data directory?
 */
bool
leaf_source_has_dir(Oid relid)
{
	return OidIsValid(relid) &&
		get_attnum(relid, "data_directory") != InvalidAttrNumber;
}

/*
 * The description of a source that leaf_alloc_cutover() wrote into the
 * database it fenced, without its prefix; NULL for any other.
 */
const char *
leaf_source_moved(const char *desc)
{
	size_t		len = strlen(LEAF_SOURCE_MOVED);

	return desc != NULL && strncmp(desc, LEAF_SOURCE_MOVED, len) == 0 ?
		desc + len : NULL;
}

/*
 * What leaf_source_read found in leaf_alloc_source, besides what it put
 * into the LeafSourceCheck.
 */
typedef struct LeafSourceRows
{
	bool		have_pending;	/* a pending row */
	bool		pending_same;	/* ... for cur's source, on cur's timeline
								 * where the table has one */
	uint32		rec_timeline;	/* of the current row */
	uint64		rec_datadir;	/* of the current row, 0 if not recorded */
	bool		rec_cluster;	/* the current row is local and records its
								 * cluster (1.4) */
	uint32		pend_timeline;	/* of a pending row for cur's source */
	char		recorded_desc[LEAF_ERRMSG_LEN]; /* of the current row */
} LeafSourceRows;

/*
 * Read a row of leaf_alloc_source, as selected by leaf_source_read, into
 * *rec, and whether it is the current one into *current.  Returns false
 * for a remote row without its system identifier, which is skipped.
 */
bool
leaf_source_parse_row(HeapTuple tup, TupleDesc desc, LeafCopyIdent *rec,
					  bool *current)
{
	bool		isnull;
	Datum		tl;

	memset(rec, 0, sizeof(*rec));
	*current = DatumGetBool(SPI_getbinval(tup, desc, 1, &isnull));
	rec->remote = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull));
	if (rec->remote)
	{
		rec->sysid = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		if (isnull)
			return false;
		rec->dboid = DatumGetObjectId(SPI_getbinval(tup, desc, 4, &isnull));
		rec->extoid = DatumGetObjectId(SPI_getbinval(tup, desc, 5, &isnull));
	}
	else
	{
		/* the database the counters belong to; NULL before 1.2 */
		rec->dboid = DatumGetObjectId(SPI_getbinval(tup, desc, 4, &isnull));
		if (isnull)
			rec->dboid = InvalidOid;
		/* and its cluster; NULL before 1.4 */
		rec->sysid = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		if (isnull)
			rec->sysid = 0;
	}
	tl = SPI_getbinval(tup, desc, 7, &isnull);
	if (!isnull)
		rec->timeline = (uint32) DatumGetInt64(tl);
	if (desc->natts >= 8)
	{
		Datum		dir = SPI_getbinval(tup, desc, 8, &isnull);

		if (!isnull)
			rec->datadir = (uint64) DatumGetInt64(dir);
	}
	return true;
}

/*
 * Read the recorded source, and any pending one, from tbl (SPI is
 * connected): compare the current row with c->cur into c, and what else
 * the table holds into *rows.
 */
static void
leaf_source_read(LeafSourceCheck *c, const char *tbl, bool have_tl,
				 LeafSourceRows *rows)
{
	uint64		i;

	rows->have_pending = false;
	rows->pending_same = false;
	rows->rec_timeline = 0;
	rows->rec_datadir = 0;
	rows->rec_cluster = false;
	rows->pend_timeline = 0;
	if (SPI_execute(psprintf("SELECT state OPERATOR(pg_catalog.=) 'current', "
							 "kind OPERATOR(pg_catalog.=) 'remote', "
							 "system_identifier, database_oid, extension_oid, "
							 "description, %s, %s FROM %s",
							 have_tl ? "timeline" : "NULL::pg_catalog.int8",
							 c->have_dir ? "data_directory" : "NULL::pg_catalog.int8",
							 tbl),
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read leaf_alloc_source");
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		LeafCopyIdent rec;
		bool		current;
		char	   *d;

		if (!leaf_source_parse_row(tup, desc, &rec, &current))
			continue;
		if (current)
		{
			bool		no_sysid = !rec.remote && rec.sysid == 0;

			c->recorded = true;
			c->same = leaf_same_source(&rec, c->cur);

			/*
			 * A local row without its cluster in a database at 1.4 was not
			 * written here (1.4 records it, and its update fills it in):
			 * it comes from a dump of an older release, a copy.
			 */
			if (no_sysid && c->have_dir && !c->cur->remote)
				c->same = false;
			c->fill_dboid = !rec.remote && !c->cur->remote && c->same &&
				(!OidIsValid(rec.dboid) || no_sysid ||
				 (c->have_dir && rec.datadir == 0));
			c->copied = !rec.remote && !c->cur->remote && !c->same;
			rows->rec_timeline = rec.timeline;
			rows->rec_datadir = rec.datadir;
			rows->rec_cluster = !rec.remote && rec.sysid != 0;
			d = SPI_getvalue(tup, desc, 6);
			strlcpy(rows->recorded_desc, d ? d : "?",
					sizeof(rows->recorded_desc));
		}
		else
		{
			rows->have_pending = true;
			rows->pending_same = leaf_same_source(&rec, c->cur) &&
				(!have_tl || rec.timeline == c->cur->timeline);
			if (leaf_same_source(&rec, c->cur))
				rows->pend_timeline = rec.timeline;
		}
	}
}

/*
 * Decide whether the use of c->cur is refused, as another source
 * (c->same false) or as a timeline that is not confirmed (c->promoted),
 * and say why in c->detail.  tl_changed and restarted are as worked out
 * by leaf_source_check_txn.
 */
static void
leaf_source_judge(LeafSourceCheck *c, bool have_tl, const char *cur_desc,
				  LeafSourceRows *rows, bool tl_changed, bool restarted)
{
	uint32		last_timeline = 0;	/* of a new timeline refused */

	if (c->copied && leaf_source_moved(rows->recorded_desc) != NULL)
	{
		c->taken_over = true;
		snprintf(c->detail, sizeof(c->detail),
				 "The counters in leaf_alloc were taken over by another database (%s). Confirming here would hand out IDs that it hands out as well.",
				 leaf_source_moved(rows->recorded_desc));
	}
	else if (c->copied)
		snprintf(c->detail, sizeof(c->detail),
				 "The counters in leaf_alloc are those of %s, and this is database %u of system " UINT64_FORMAT ": a copy (CREATE DATABASE ... TEMPLATE, a restored dump, a clone in another cluster, pg_upgrade) would hand out the IDs of the original again.",
				 rows->recorded_desc, c->cur->dboid, (uint64) c->cur->sysid);
	else if (c->recorded && c->same && !c->cur->remote && tl_changed &&
			 rows->rec_cluster && c->cur->timeline < rows->rec_timeline)
	{
		/*
		 * A timeline never goes back in the cluster that recorded it (a
		 * promotion or an archive recovery raises it): these counters were
		 * copied here from a server on a later timeline of the same
		 * cluster (a dump restored over a database of the same OID, say).
		 * pg_upgrade, which starts again on timeline 1, changes the
		 * cluster.
		 */
		c->same = false;
		c->copied = true;
		snprintf(c->detail, sizeof(c->detail),
				 "Segments were last loaded on timeline %u of this cluster, and this server is on timeline %u: a copy (a dump of a promoted server restored into its former primary, an older backup) would hand out the IDs of the original again.",
				 rows->rec_timeline, c->cur->timeline);
	}
	else if (c->recorded && c->same && !c->cur->remote && !tl_changed &&
			 rows->rec_datadir != 0 && c->cur->datadir != 0 &&
			 rows->rec_datadir != c->cur->datadir)
	{
		/*
		 * The same cluster and timeline in another data directory: a clone
		 * (pg_basebackup, a file system copy) started as a primary, which
		 * stays on its original's timeline.  A promoted standby is on a
		 * new timeline, and the rules for those apply.
		 */
		c->same = false;
		c->copied = true;
		snprintf(c->detail, sizeof(c->detail),
				 "Segments were last loaded in the data directory with inode " UINT64_FORMAT " on timeline %u, and this is the data directory with inode " UINT64_FORMAT " on the same timeline: a clone of the data directory (pg_basebackup, a file system copy) started as a primary would hand out the IDs of the original again.",
				 rows->rec_datadir, c->cur->timeline, c->cur->datadir);
	}
	else if (c->recorded && !c->same)
		snprintf(c->detail, sizeof(c->detail),
				 "Segments came from %s; \"leaf.alloc_conninfo\" now leads to %s.",
				 rows->recorded_desc, cur_desc);
	else if (c->recorded && have_tl && !c->cur->remote &&
			 rows->pend_timeline != 0 && c->cur->timeline != 0 &&
			 c->cur->timeline < rows->pend_timeline)
	{
		c->promoted = true;
		/* the pending row is the evidence: kept as it is */
		rows->pending_same = true;
		last_timeline = rows->pend_timeline;
	}
	else if (tl_changed && !restarted &&
			 leaf_alloc_failover != LEAF_FAILOVER_SYNCHRONOUS)
	{
		c->promoted = true;
		last_timeline = rows->rec_timeline;
	}

	/* the detail of LF007 (leaf_source_refuse_promoted) */
	if (c->promoted)
		snprintf(c->detail, sizeof(c->detail),
				 "Segments were last loaded on timeline %u, and the allocation database is on timeline %u now.",
				 last_timeline, c->cur->timeline);
}

/*
 * Record this database's OID, this cluster's system identifier and this
 * data directory in the current row of tbl, which a local source recorded
 * before 1.2 (all) or 1.4 (the cluster and the data directory) lacks, or
 * one recorded by leaf_alloc_cutover() or a confirmation in SQL (the data
 * directory).
 */
static void
leaf_source_fill_dboid(LeafSourceCheck *c, const char *tbl)
{
	Oid			argtypes[3] = {OIDOID, INT8OID, INT8OID};
	Datum		values[3];

	values[0] = ObjectIdGetDatum(c->cur->dboid);
	values[1] = Int64GetDatum(c->cur->sysid);
	values[2] = Int64GetDatum((int64) c->cur->datadir);
	if (SPI_execute_with_args(psprintf("UPDATE %s SET "
									   "database_oid = COALESCE(database_oid, $1), "
									   "system_identifier = COALESCE(system_identifier, $2)%s "
									   "WHERE state OPERATOR(pg_catalog.=) 'current'", tbl,
									   c->have_dir ? ", data_directory = COALESCE(data_directory, $3)" : ""),
							  c->have_dir ? 3 : 2, argtypes, values, NULL,
							  false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update leaf_alloc_source");
}

/*
 * Insert c->cur into tbl, as the current source if none is recorded, else
 * as the pending one.
 */
static void
leaf_source_insert(LeafSourceCheck *c, const char *tbl, bool have_tl,
				   const char *cur_desc)
{
	Oid			argtypes[8] = {TEXTOID, TEXTOID, INT8OID, OIDOID, OIDOID, TEXTOID, INT8OID, INT8OID};
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

	values[0] = CStringGetTextDatum(c->recorded ? "pending" : "current");
	values[1] = CStringGetTextDatum(c->cur->remote ? "remote" : "local");
	values[2] = Int64GetDatum(c->cur->sysid);
	values[3] = ObjectIdGetDatum(c->cur->dboid);
	values[4] = ObjectIdGetDatum(c->cur->extoid);
	values[5] = CStringGetTextDatum(cur_desc);
	values[6] = Int64GetDatum((int64) c->cur->timeline);
	values[7] = Int64GetDatum((int64) c->cur->datadir);
	if (!c->cur->remote)
		nulls[4] = 'n';
	if (c->cur->timeline == 0)
		nulls[6] = 'n';
	if (c->cur->datadir == 0)
		nulls[7] = 'n';
	/* the data directory (1.4) comes with the timeline (1.1) */
	if (SPI_execute_with_args(psprintf("INSERT INTO %s (state, kind, system_identifier, "
									   "database_oid, extension_oid, description%s%s) "
									   "VALUES ($1, $2, $3, $4, $5, $6%s%s)", tbl,
									   have_tl ? ", timeline" : "",
									   c->have_dir ? ", data_directory" : "",
									   have_tl ? ", $7" : "",
									   c->have_dir ? ", $8" : ""),
							  c->have_dir ? 8 : have_tl ? 7 : 6, argtypes, values, nulls,
							  false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not update leaf_alloc_source");
}

/*
 * Record c->cur's timeline in the current row of tbl, which was recorded
 * on rec_timeline, and log why it was taken.
 */
static void
leaf_source_update_timeline(LeafSourceCheck *c, const char *tbl,
							const char *cur_desc, uint32 rec_timeline,
							bool restarted)
{
	Oid			argtypes[2] = {INT8OID, INT8OID};
	Datum		values[2];
	char		nulls[2] = {' ', ' '};

	/*
	 * 1.0 recorded no timeline; or leaf.alloc_failover = synchronous, where
	 * the promoted standby's data directory is the one loads go on in
	 */
	values[0] = Int64GetDatum((int64) c->cur->timeline);
	values[1] = Int64GetDatum((int64) c->cur->datadir);
	if (c->cur->datadir == 0)
		nulls[1] = 'n';
	if (SPI_execute_with_args(psprintf("UPDATE %s SET timeline = $1, recorded_at = pg_catalog.now()%s "
									   "WHERE state OPERATOR(pg_catalog.=) 'current'", tbl,
									   c->have_dir ? ", data_directory = $2" : ""),
							  c->have_dir ? 2 : 1, argtypes, values, nulls,
							  false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update leaf_alloc_source");
	if (restarted)
		ereport(LOG,
				(errmsg("leaf allocator took timeline %u of %s for database \"%s\", where segments were last loaded on timeline %u",
						c->cur->timeline, cur_desc,
						get_database_name(MyDatabaseId), rec_timeline),
				 errdetail("A lower timeline comes from no promotion or recovery: the server's WAL history began again, as pg_upgrade does, and leaf_alloc is the one segments were loaded from.")));
	else if (rec_timeline != 0)
		ereport(LOG,
				(errmsg("leaf allocator accepted timeline %u of %s for database \"%s\", where segments were last loaded on timeline %u",
						c->cur->timeline, cur_desc,
						get_database_name(MyDatabaseId), rec_timeline),
				 errdetail("\"leaf.alloc_failover\" is \"synchronous\": the promoted server is taken to have every allocation its former primary acknowledged.")));
}

/*
 * Write what the check found into tbl, durably: c->cur as the current
 * source if none is recorded, or as the pending one if its use is
 * refused (want_pending); otherwise no pending row, and c->cur's
 * timeline in the current one.
 */
static void
leaf_source_record(LeafSourceCheck *c, const char *tbl, bool have_tl,
				   const char *cur_desc, const LeafSourceRows *rows,
				   bool want_pending, bool restarted)
{
	/* durable before any segment from this source is used */
	(void) set_config_option("synchronous_commit", "on", PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0,
							 false);
	if (SPI_execute(psprintf("DELETE FROM %s WHERE state OPERATOR(pg_catalog.=) 'pending'",
							 tbl), false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not update leaf_alloc_source");
	if (!c->recorded || want_pending)
		leaf_source_insert(c, tbl, have_tl, cur_desc);
	else if (have_tl && c->cur->timeline != 0 &&
			 rows->rec_timeline != c->cur->timeline)
		leaf_source_update_timeline(c, tbl, cur_desc, rows->rec_timeline,
									restarted);
	if (!c->recorded)
		ereport(LOG,
				(errmsg("leaf allocator recorded %s as the source of segments for database \"%s\"",
						cur_desc, get_database_name(MyDatabaseId))));
}

/*
 * Compare cur with the recorded source, in the current transaction.  With
 * c->write, also record cur if nothing is recorded yet, or record it as
 * the pending source if it differs.  A database without the extension
 * (c->extoid invalid) is left alone.
 *
 * The same source on another timeline than the recorded one was promoted
 * or restored since segments were last loaded from it, and may have lost
 * the last of them (asynchronous replication, an older backup).  With
 * leaf.alloc_failover = 'confirm' that is refused like a change of source
 * (c->promoted, and cur with its timeline is written as pending); with
 * 'synchronous' the new timeline is recorded and loads go on.  Before
 * ALTER EXTENSION leaf UPDATE to 1.1 the table has no timeline column and
 * timelines are not checked.
 */
static void
leaf_source_check_txn(LeafSourceCheck *c)
{
	Oid			nsp;
	Oid			relid;
	char	   *tbl;
	bool		have_tl;
	bool		want_pending;
	bool		tl_changed;
	bool		restarted;
	LeafSourceRows rows;
	char		cur_desc[LEAF_ERRMSG_LEN];

	c->recorded = false;
	c->same = true;
	c->promoted = false;
	c->detail[0] = '\0';
	nsp = leaf_extension_namespace(&c->extoid);
	if (!OidIsValid(c->extoid))
		return;
	leaf_describe_source(c->cur, cur_desc, sizeof(cur_desc));
	relid = get_relname_relid("leaf_alloc_source", nsp);
	have_tl = OidIsValid(relid) &&
		get_attnum(relid, "timeline") != InvalidAttrNumber;
	c->have_tl = have_tl;
	c->have_dir = leaf_source_has_dir(relid);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	tbl = psprintf("%s.leaf_alloc_source",
				   quote_identifier(get_namespace_name(nsp)));
	leaf_source_read(c, tbl, have_tl, &rows);
#ifdef LEAF_TEST_HOOKS
	if (leaf_test_source_pause_ms > 0 && c->write)
	{
		/* a wait that pg_stat_activity shows (wait event "Extension") */
		TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														leaf_test_source_pause_ms);
		long		left;
		bool		woken = false;

		while ((left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													   until)) > 0)
		{
			if (WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						  left, PG_WAIT_EXTENSION) & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				woken = true;
			}
		}
		/* the requests that came meanwhile are the worker's to see */
		if (woken)
			SetLatch(MyLatch);
	}
#endif

	/*
	 * A promotion or an archive recovery only ever raises the timeline.
	 * A lower one means that the server's WAL history began again, which
	 * pg_upgrade does: the new cluster starts on timeline 1 with the old
	 * cluster's relation files, so the local leaf_alloc is the one the
	 * segments were loaded from, on the timeline recorded.  That is taken
	 * without a confirmation, unless a change was waiting for one: the old
	 * cluster had refused its own new timeline (or another source), and
	 * its pending row still says so.  For the same reason a pending
	 * timeline above the current one stays refused even where the
	 * current row's timeline matches (an upgraded cluster on timeline 1
	 * whose confirmed row is of timeline 1).  Not seen: an old cluster
	 * promoted or restored that loaded nothing since, as on timeline 1.
	 *
	 * Since 1.4 a local row records its cluster, and pg_upgrade's new
	 * system identifier makes the upgraded database a copy, confirmed as
	 * any copy is (the old cluster may be started again).  What is left
	 * for this rule is a row recorded before 1.4, without its cluster,
	 * in a database not yet updated: there a lower timeline is all that
	 * tells a pg_upgrade, as in 1.3.
	 */
	tl_changed = c->recorded && c->same && have_tl && rows.rec_timeline != 0 &&
		c->cur->timeline != 0 && rows.rec_timeline != c->cur->timeline;
	restarted = tl_changed && !c->cur->remote && !rows.rec_cluster &&
		c->cur->timeline < rows.rec_timeline && !rows.have_pending;

	leaf_source_judge(c, have_tl, cur_desc, &rows, tl_changed, restarted);

	want_pending = (!c->same || c->promoted);
	if (c->write && c->recorded && c->fill_dboid)
		leaf_source_fill_dboid(c, tbl);
	if (c->write &&
		(!c->recorded || (want_pending && !rows.pending_same) ||
		 (!want_pending && rows.have_pending) ||
		 (!want_pending && have_tl && c->cur->timeline != 0 &&
		  rows.rec_timeline != c->cur->timeline)))
		leaf_source_record(c, tbl, have_tl, cur_desc, &rows, want_pending,
						   restarted);
	SPI_finish();
}

static void
leaf_source_check_fn(void *arg)
{
	leaf_source_check_txn((LeafSourceCheck *) arg);
}

/*
 * leaf_source_check_txn() in a transaction of its own.  Returns false,
 * with the error in *res, if that failed.
 */
static bool
leaf_source_run(LeafSourceCheck *c, LeafLoadResult *res)
{
	char		msg[LEAF_ERRMSG_LEN];

	if (leaf_in_transaction(leaf_source_check_fn, c,
							"leaf: checking the source of segments",
							&res->sqlstate, msg, sizeof(msg)))
		return true;
	snprintf(res->msg, sizeof(res->msg),
			 "could not check the source of segments: %s", msg);
	return false;
}

/*
 * May segments for job come from cur?  Returns true if cur is the
 * recorded source (recording it first if there is none) on a timeline
 * that may be used; otherwise fills *res with the failure: LF006 for
 * another source, LF007 for an unconfirmed new timeline.
 */
bool
leaf_source_check(const LeafCopyIdent *cur, const LeafLoadJob *job,
				  LeafLoadResult *res)
{
	LeafSourceCheck c;

	/*
	 * Checked already.  Before ALTER EXTENSION leaf UPDATE to 1.1 there is
	 * no timeline to record; check again now and then, so that it is
	 * recorded soon after the update.
	 */
	if (leaf_checked && leaf_checked_extoid == job->extoid &&
		leaf_same_source(&leaf_checked_ident, cur) &&
		leaf_checked_ident.timeline == cur->timeline &&
		(leaf_checked_tl ||
		 !TimestampDifferenceExceeds(leaf_checked_at, GetCurrentTimestamp(),
									 leaf_tag_refresh_ms)))
		return true;

	memset(&c, 0, sizeof(c));
	c.cur = cur;
	c.write = true;
	if (!leaf_source_run(&c, res))
	{
		res->status = LEAF_LOAD_FAILED;
		return false;
	}
	if (c.extoid != job->extoid)
	{
		res->status = LEAF_LOAD_EXT_GONE;
		return false;
	}
	if (!c.same || c.promoted)
	{
		leaf_checked = false;
		leaf_refused = true;
		leaf_refused_timeline = c.same;
		strlcpy(res->msg, c.detail, sizeof(res->msg));
		if (c.same)
			leaf_source_refuse_promoted(job->tag, res);
		else
			leaf_source_refuse_changed(job->tag,
									   c.taken_over ? LEAF_SOURCE_TAKEN_OVER :
									   c.copied ? LEAF_SOURCE_COPY : LEAF_SOURCE_OTHER,
									   res);
		return false;
	}
	leaf_checked_ident = *cur;
	leaf_checked_extoid = c.extoid;
	leaf_checked = true;
	leaf_checked_tl = c.have_tl;
	leaf_checked_at = GetCurrentTimestamp();
	leaf_refused = false;
	leaf_refused_timeline = false;
	return true;
}

/*
 * Forget the last check, so that the next load checks the source in full
 * (and records it as pending): the local source found that the recorded
 * one changed under it (leaf_alloc_local.c).
 */
void
leaf_source_forget(void)
{
	leaf_checked = false;
}

/*
 * May the tags of cur decide which slots to free?  Not those of an
 * allocation database whose use is not (yet) confirmed.  This runs in the
 * caller's transaction, so it only reads what is recorded.  Returns
 * false, with the reason in errbuf, if they may not.
 */
bool
leaf_source_recorded_ok(const LeafCopyIdent *cur, char *errbuf,
						size_t errlen)
{
	LeafSourceCheck c;

	if (leaf_checked && leaf_same_source(&leaf_checked_ident, cur) &&
		leaf_checked_ident.timeline == cur->timeline)
		return true;

	memset(&c, 0, sizeof(c));
	c.cur = cur;
	leaf_source_check_txn(&c);
	if (c.recorded && !c.same)
	{
		snprintf(errbuf, errlen,
				 "the allocation database changed and the change is not confirmed: %s",
				 c.detail);
		return false;
	}
	if (c.promoted)
	{
		snprintf(errbuf, errlen,
				 "the allocation database was promoted or restored and its timeline is not confirmed: %s",
				 c.detail);
		return false;
	}
	return true;
}

/*
 * What to add to the description of the source in leaf_segments: whether
 * the last check refused it, and for a change or for a new timeline.
 */
const char *
leaf_source_refusal(void)
{
	return !leaf_refused ? "" :
		leaf_refused_timeline ? " (new timeline not confirmed)" :
		" (change not confirmed)";
}

/*
 * Make *res the refusal (LF006) of a load of tag from another source of
 * segments than the recorded one, with what the check found in res->msg.
 * The message says which change it is: a restored dump or a template
 * draws from no other allocation database, it is a copy of the database
 * that did.
 */
void
leaf_source_refuse_changed(const char *tag, LeafSourceChange change,
						   LeafLoadResult *res)
{
	LeafRefusal *r = &res->refusal;
	const char *detail_public;
	const char *hint;

	switch (change)
	{
		case LEAF_SOURCE_COPY:
			snprintf(r->message, sizeof(r->message),
					 "refusing to draw segments of biz_tag \"%s\" in a copy of the database that drew them", tag);
			detail_public = "This database is a copy (a restored dump, CREATE DATABASE ... TEMPLATE, a clone) of a database that handed out IDs from the same counters.";
			hint = "Once every max_id in this database's leaf_alloc lies above every ID the original handed out, a superuser confirms the copy with SELECT leaf_alloc_source_confirm(); the table leaf_alloc_source shows both.";
			break;
		case LEAF_SOURCE_TAKEN_OVER:
			snprintf(r->message, sizeof(r->message),
					 "refusing to draw segments of biz_tag \"%s\": its counters were taken over by another database", tag);
			detail_public = "leaf_alloc_cutover() in another database took over the counters of this one.";
			hint = "Do not confirm here: this database would hand out the IDs of the other one again. To switch back, run leaf_alloc_cutover() in this database.";
			break;
		default:
			snprintf(r->message, sizeof(r->message),
					 "refusing to draw segments of biz_tag \"%s\" from another allocation database", tag);
			detail_public = "This database drew its segments from another allocation database before.";
			hint = "Once every max_id in the new leaf_alloc lies above every ID handed out before, a superuser confirms the change with SELECT leaf_alloc_source_confirm(); the table leaf_alloc_source shows both.";
			break;
	}
	res->status = LEAF_LOAD_FINAL;
	res->sqlstate = ERRCODE_LEAF_ALLOC_SOURCE_CHANGED;
	strlcpy(r->detail, res->msg, sizeof(r->detail));
	strlcpy(r->detail_public, detail_public, sizeof(r->detail_public));
	strlcpy(r->hint, hint, sizeof(r->hint));
}

/*
 * Make *res the refusal (LF007) of a load of tag from an allocation
 * database on a timeline that is not confirmed; res->msg names both
 * timelines.
 */
static void
leaf_source_refuse_promoted(const char *tag, LeafLoadResult *res)
{
	LeafRefusal *r = &res->refusal;

	res->status = LEAF_LOAD_FINAL;
	res->sqlstate = ERRCODE_LEAF_ALLOC_PROMOTED;
	strlcpy(r->message,
			"allocation database was promoted or restored; segments are not loaded until confirmed",
			sizeof(r->message));
	snprintf(r->detail, sizeof(r->detail),
			 "%s biz_tag \"%s\" has no segment left, and the last allocations before the promotion or restore may be missing from leaf_alloc.",
			 res->msg, tag);
	r->detail_public[0] = '\0';
	strlcpy(r->hint,
			"Once every max_id in leaf_alloc lies above every ID handed out before, a superuser confirms with SELECT leaf_alloc_source_confirm(); see \"leaf.alloc_failover\".",
			sizeof(r->hint));
}
