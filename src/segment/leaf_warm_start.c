/*-------------------------------------------------------------------------
 *
 * leaf_warm_start.c
 *	  Warm start of segment mode: the tags in use are written to a file in
 *	  the data directory, and after a restart their first segments are
 *	  asked for before any caller does.
 *
 * After a restart, a crash or a promotion, every tag starts with empty
 * buffers, and the first caller of each waits for its first load.  With
 * leaf.warm_start on, this does what autoprewarm does for buffers:
 *
 *	- each allocator (leaf_alloc_worker.c), when it starts, reads
 *	  LEAF_WARM_FILE and asks for the first segment of each tag listed
 *	  for its database that was used within leaf.warm_start_max_age and
 *	  has no slot yet (leaf_warm_start_database), through the path a
 *	  caller's first call takes (leaf_segment_warm): the tag's slot is
 *	  made, and the allocator loads it next.  So every check of a caller's
 *	  load applies unchanged: a copy of the database (LF006), a new
 *	  timeline (LF007), a logical replica (LF012), fleet mode; what a
 *	  caller could not load is not loaded, and the refusal waits in the
 *	  tag's slot for the first caller, as it would have.  Databases warm
 *	  side by side, each in its own allocator: a lock on leaf_alloc in one
 *	  holds up that database only, and only for one wait of the warm
 *	  start's lock_timeout, after which its allocator exits.
 *	- a static background worker (the "leader", started once the server
 *	  accepts writes) reads the file at start and starts the allocators of
 *	  its databases, the most recently used first, without waiting for
 *	  them, as long as half of leaf.max_databases (the places) is not
 *	  taken by allocators still warming or warmed; an allocator that exits
 *	  before it is seen warmed (leaf_alloc locked) gives its place to the
 *	  next database, which the leader starts at its next look, every
 *	  LEAF_WARM_LAUNCH_MS while one waits.  Every second, it looks at the
 *	  tags that have a slot, and writes the file again when one came or
 *	  went, and every leaf.warm_start_interval when one was used (IDs
 *	  handed out) since; and once more when it is stopped (a clean
 *	  shutdown).  A tag of the file stays listed while its database waits
 *	  for a place, or its allocator is starting or has not asked for it
 *	  yet, so that the file the allocator reads still holds it.
 *
 * The file lists, for each tag with a slot, its database's OID, the last
 * time IDs of it were seen handed out (or, for a tag preloaded and not
 * used since, the time the file said) and the tag, in hex.  It ends with
 * the number of entries and a CRC-32C of what came before, and is written
 * durably (leaf_durable.c).  A file that is missing, damaged or truncated
 * is ignored with a LOG line; a database that no longer exists, or no
 * longer has the extension, and a tag that is no longer in leaf_alloc
 * are skipped, each with a LOG line.  Nothing of this is an error for
 * callers.
 *
 * The leader is not started in recovery (a standby loads nothing), nor in
 * binary upgrade mode, and an allocator does no warm start then either.
 * After a promotion the leader starts, and the allocators read whatever
 * file the data directory holds (the primary's, if the base backup copied
 * one); the timeline check of each load decides, as for callers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <unistd.h>

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "lib/stringinfo.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "segment/leaf_alloc.h"
#include "segment/leaf_alloc_slots.h"
#include "common/leaf_compat.h"
#include "common/leaf_durable.h"
#include "segment/leaf_segment_shmem.h"
#include "segment/leaf_warm_start.h"

PGDLLEXPORT void leaf_warm_start_main(Datum main_arg);

/* The file in the data directory, and its temporary file. */
#define LEAF_WARM_FILE			"leaf_warm_start.tags"
#define LEAF_WARM_TMP			"leaf_warm_start.tags.tmp"

/* The first line of the file: its format. */
#define LEAF_WARM_HEADER		"leaf warm start 1"

/* How often the leader looks at the tags that have a slot, in ms. */
#define LEAF_WARM_CHECK_MS		1000

/* How often it looks for a free place while a database waits, in ms. */
#define LEAF_WARM_LAUNCH_MS		50

/* Restart of a leader that failed, in s. */
#define LEAF_WARM_RESTART_S		10

/* Longest line of the file: OID, time, the tag in hex, spaces. */
#define LEAF_WARM_LINE_LEN		(2 * LEAF_TAG_MAXLEN + 64)

/* leaf.warm_start, leaf.warm_start_interval (ms), leaf.warm_start_max_age (s) */
static bool leaf_warm_start = true;
static int	leaf_warm_interval_ms = 60 * 1000;
static int	leaf_warm_max_age_s = 24 * 3600;

/* A tag of the file, or one the leader has seen with a slot. */
typedef struct LeafWarmKey
{
	Oid			dboid;
	char		tag[LEAF_TAG_MAXLEN + 1];
} LeafWarmKey;

typedef struct LeafWarmEntry
{
	LeafWarmKey key;			/* hash key; must be first */
	pg_time_t	last_used;		/* when IDs were last seen handed out */
	uint64		generation;		/* of its slot when last seen, 0: none yet */
	int64		ids_issued;		/* of its slot when last seen */
	bool		seen;			/* has a slot at this look */
	bool		listed;			/* to be listed in the file */
	bool		in_file;		/* listed in the file as last written (or
								 * read) */
	bool		pending;		/* read from the file; the allocator of its
								 * database has not asked for it yet */
	bool		queued;			/* read from the file; its database waits
								 * for a place of the warm start */
} LeafWarmEntry;

/* Define the settings of the warm start. */
void
leaf_warm_start_init_settings(void)
{
	DefineCustomBoolVariable("leaf.warm_start",
							 "Loads the first segments of the biz_tags in use before the restart when the server starts.",
							 "The biz_tags are written to " LEAF_WARM_FILE " in the data directory.",
							 &leaf_warm_start,
							 true,
							 PGC_POSTMASTER,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.warm_start_interval",
							"Sets how often the last use of each biz_tag is written for the warm start.",
							"A biz_tag that comes or goes is written within a second.",
							&leaf_warm_interval_ms,
							60 * 1000, 1000, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.warm_start_max_age",
							"Sets how recently a biz_tag must have been used for the warm start to load it.",
							NULL,
							&leaf_warm_max_age_s,
							24 * 3600, 1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

/*
 * Register the leader, when leaf.warm_start is on.  Called by module load
 * at server start, after the settings are defined.
 */
void
leaf_warm_start_register(void)
{
	BackgroundWorker worker;

	/* pg_upgrade's servers must not load: see the file's comment */
	if (!leaf_warm_start || IsBinaryUpgrade)
		return;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = LEAF_WARM_RESTART_S;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "leaf");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "leaf_warm_start_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "leaf warm start");
	snprintf(worker.bgw_type, BGW_MAXLEN, "leaf warm start");
	RegisterBackgroundWorker(&worker);
}

/* ---------- the file ---------- */

/* Hex of a tag, NUL-terminated, into out (2 * LEAF_TAG_MAXLEN + 1). */
static void
leaf_warm_hex(const char *tag, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *) tag;

	for (; *p != '\0'; p++)
	{
		*out++ = digits[*p >> 4];
		*out++ = digits[*p & 0x0f];
	}
	*out = '\0';
}

static int
leaf_warm_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * A tag from its hex, into tag (LEAF_TAG_MAXLEN + 1); false if hex is not
 * the hex of a tag (1 to LEAF_TAG_MAXLEN bytes, none of them 0).
 */
static bool
leaf_warm_unhex(const char *hex, char *tag)
{
	size_t		len = strlen(hex);
	size_t		i;

	if (len == 0 || len % 2 != 0 || len / 2 > LEAF_TAG_MAXLEN)
		return false;
	for (i = 0; i < len / 2; i++)
	{
		int			hi = leaf_warm_hex_digit(hex[2 * i]);
		int			lo = leaf_warm_hex_digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
			return false;
		tag[i] = (char) (hi * 16 + lo);
	}
	tag[len / 2] = '\0';
	return true;
}

/* A new, empty hash of LeafWarmEntry, in the current memory context. */
static HTAB *
leaf_warm_new_hash(void)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(LeafWarmKey);
	ctl.entrysize = sizeof(LeafWarmEntry);
	ctl.hcxt = CurrentMemoryContext;
	return hash_create("leaf warm start tags", 64, &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * Enter the entry of one line of the file (without its end) into entries.
 * Returns NULL, or what is wrong with the line.
 */
static const char *
leaf_warm_read_entry(HTAB *entries, const char *line)
{
	unsigned int dboid;
	long long	used;
	char		hex[LEAF_WARM_LINE_LEN + 2];
	char		rest;
	LeafWarmKey key;
	LeafWarmEntry *e;
	bool		found;

	memset(&key, 0, sizeof(key));
	if (sscanf(line, "%u %lld %s %c", &dboid, &used, hex, &rest) != 3 ||
		dboid == InvalidOid || !leaf_warm_unhex(hex, key.tag))
		return "an entry cannot be read";
	key.dboid = dboid;
	e = hash_search(entries, &key, HASH_ENTER, &found);
	if (!found)
	{
		e->last_used = (pg_time_t) used;
		e->generation = 0;
		e->ids_issued = 0;
		e->seen = false;
		e->listed = false;
		e->in_file = true;
		e->pending = false;
		e->queued = false;
	}
	return NULL;
}

/*
 * The last line of the file, against the n entries read and the CRC of
 * the lines before it.  Returns NULL, or what is wrong.
 */
static const char *
leaf_warm_read_end(const char *line, int n, pg_crc32c crc)
{
	int			count;
	unsigned int sum;
	char		rest;

	if (sscanf(line, "end %d %x %c", &count, &sum, &rest) != 2)
		return "its last line cannot be read";
	if (count != n)
		return "it holds another number of entries than its last line says";
	if (sum != (unsigned int) crc)
		return "its checksum does not match";
	return NULL;
}

/*
 * Read the lines of f into entries.  Returns NULL, or what is wrong with
 * the file, and the number of the line read last in *lineno.
 */
static const char *
leaf_warm_read_lines(FILE *f, HTAB *entries, int *lineno)
{
	char		line[LEAF_WARM_LINE_LEN + 2];
	pg_crc32c	crc;
	int			n = 0;
	bool		ended = false;

	INIT_CRC32C(crc);
	while (fgets(line, sizeof(line), f) != NULL)
	{
		size_t		len = strlen(line);
		const char *damage = NULL;

		(*lineno)++;
		if (len == 0 || line[len - 1] != '\n')
			return "a line is too long or has no end";
		if (ended)
			return "there is more after the last line";
		if (*lineno == 1)
		{
			if (strcmp(line, LEAF_WARM_HEADER "\n") != 0)
				return "the first line is not \"" LEAF_WARM_HEADER "\"";
			COMP_CRC32C(crc, line, len);
			continue;
		}
		if (strncmp(line, "end ", 4) == 0)
		{
			FIN_CRC32C(crc);
			damage = leaf_warm_read_end(line, n, crc);
			ended = true;
		}
		else
		{
			COMP_CRC32C(crc, line, len);
			damage = leaf_warm_read_entry(entries, line);
			n++;
		}
		if (damage != NULL)
			return damage;
	}
	if (ferror(f))
		return "it could not be read";
	if (!ended)
		return "it ends before its last line";
	return NULL;
}

/*
 * Read the file into a new hash of LeafWarmEntry (in the current memory
 * context): every entry, or none if the file is missing or damaged (with
 * a line at elevel that says why).
 */
static HTAB *
leaf_warm_read(int elevel)
{
	HTAB	   *entries = leaf_warm_new_hash();
	FILE	   *f;
	int			lineno = 0;
	const char *damage;

	f = AllocateFile(LEAF_WARM_FILE, "r");
	if (f == NULL)
	{
		if (errno != ENOENT)
			ereport(elevel,
					(errcode_for_file_access(),
					 errmsg("leaf warm start could not open file \"%s\": %m",
							LEAF_WARM_FILE)));
		return entries;
	}
	damage = leaf_warm_read_lines(f, entries, &lineno);
	FreeFile(f);

	if (damage != NULL)
	{
		ereport(elevel,
				(errmsg("leaf warm start ignores file \"%s\": %s (line %d)",
						LEAF_WARM_FILE, damage, lineno),
				 errdetail("No biz_tag is loaded before its first call; the file is written again while the server runs.")));
		hash_destroy(entries);
		entries = leaf_warm_new_hash();
	}
	return entries;
}

/*
 * Write the entries to be listed, durably (leaf_durable.c).  Returns false
 * (with a LOG line) if it could not.
 */
static bool
leaf_warm_write(HTAB *entries)
{
	StringInfoData buf;
	HASH_SEQ_STATUS seq;
	LeafWarmEntry *e;
	pg_crc32c	crc;
	int			n = 0;
	bool		ok;

	initStringInfo(&buf);
	appendStringInfoString(&buf, LEAF_WARM_HEADER "\n");
	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		char		hex[2 * LEAF_TAG_MAXLEN + 1];

		if (!e->listed)
			continue;
		leaf_warm_hex(e->key.tag, hex);
		appendStringInfo(&buf, "%u %lld %s\n", e->key.dboid,
						 (long long) e->last_used, hex);
		n++;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf.data, buf.len);
	FIN_CRC32C(crc);
	appendStringInfo(&buf, "end %d %08x\n", n, (unsigned int) crc);

	ok = leaf_durable_write(LEAF_WARM_FILE, LEAF_WARM_TMP, buf.data, buf.len,
							LOG, "leaf warm start ");
	pfree(buf.data);
	if (!ok)
		return false;
	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
		e->in_file = e->listed;
	return true;
}

/* ---------- the leader ---------- */

/* The OIDs of the databases that exist, from pg_database. */
static List *
leaf_warm_databases(void)
{
	List	   *dbs = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	MemoryContext cxt = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext old = MemoryContextSwitchTo(cxt);

		dbs = lappend_oid(dbs, db->oid);
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	return dbs;
}

/* Is a listed tag recent enough to be loaded at start? */
static bool
leaf_warm_recent(const LeafWarmEntry *e, pg_time_t now)
{
	/* (a time after now, as after a clock step, counts as now) */
	return e->last_used >= now - (pg_time_t) leaf_warm_max_age_s;
}

/*
 * Start the allocator of database dboid (or wake the one it has), which
 * asks for the first segments of its tags when it starts; the leader does
 * not wait for it.  Returns false, with a LOG line, if it could not.
 */
static bool
leaf_warm_launch(Oid dboid)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		leaf_wake_worker(dboid);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(LOG,
				(errcode(edata->sqlerrcode),
				 errmsg("leaf warm start could not start the allocator of the database with OID %u: %s",
						dboid, edata->message),
				 errdetail("Its biz_tags are loaded at their first call."),
				 edata->hint != NULL ? errhint("%s", edata->hint) : 0));
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/* Where a database of the file is in the warm start. */
typedef enum LeafWarmDbState
{
	LEAF_WARM_DB_QUEUED,		/* waits for a place */
	LEAF_WARM_DB_WARMING,		/* launched: holds a place while its
								 * allocator asks for its tags */
	LEAF_WARM_DB_WARMED,		/* seen done and running: keeps its place */
	LEAF_WARM_DB_OUT			/* holds no place: not launched, or its
								 * allocator went before it was seen done */
} LeafWarmDbState;

/* A database of the file, and the last use of its most recent tag. */
typedef struct LeafWarmDbUse
{
	Oid			dboid;
	pg_time_t	last_used;
	LeafWarmDbState state;
} LeafWarmDbUse;

/* The leader's warm start: the databases of the file, and the places. */
typedef struct LeafWarmLaunch
{
	LeafWarmDbUse *dbs;			/* the most recently used first */
	int			ndbs;
	int			places;			/* half of leaf.max_databases */
	pg_time_t	read_at;		/* when the file was read */
} LeafWarmLaunch;

/* qsort: the most recently used database first */
static int
leaf_warm_db_cmp(const void *a, const void *b)
{
	pg_time_t	ua = ((const LeafWarmDbUse *) a)->last_used;
	pg_time_t	ub = ((const LeafWarmDbUse *) b)->last_used;

	return (ua < ub) ? 1 : (ua > ub) ? -1 : 0;
}

/*
 * The databases of the file that have a tag used within
 * leaf.warm_start_max_age, into a new array of *ndbs, the most recently
 * used first.
 */
static LeafWarmDbUse *
leaf_warm_recent_databases(HTAB *entries, pg_time_t now, int *ndbs)
{
	HASH_SEQ_STATUS seq;
	LeafWarmEntry *e;
	LeafWarmDbUse *dbs;
	int			n = 0;
	int			i;

	dbs = palloc(sizeof(LeafWarmDbUse) * Max(hash_get_num_entries(entries), 1));
	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (!leaf_warm_recent(e, now))
			continue;
		for (i = 0; i < n; i++)
			if (dbs[i].dboid == e->key.dboid)
				break;
		if (i == n)
		{
			dbs[n].dboid = e->key.dboid;
			dbs[n].last_used = e->last_used;
			dbs[n].state = LEAF_WARM_DB_QUEUED;
			n++;
		}
		else
			dbs[i].last_used = Max(dbs[i].last_used, e->last_used);
	}
	qsort(dbs, n, sizeof(LeafWarmDbUse), leaf_warm_db_cmp);
	*ndbs = n;
	return dbs;
}

/*
 * Mark the recent entries of database dboid: queued for a place, or
 * pending, waiting for its allocator to ask for them.
 */
static void
leaf_warm_mark(HTAB *entries, Oid dboid, pg_time_t now, bool queued,
			   bool pending)
{
	HASH_SEQ_STATUS seq;
	LeafWarmEntry *e;

	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (e->key.dboid == dboid && leaf_warm_recent(e, now))
		{
			e->queued = queued;
			e->pending = pending;
		}
}

/*
 * The places held now: by each database launched whose allocator is
 * still asking for its tags, and by each seen done with them and running.
 * One whose allocator went before it was seen done gives its place back:
 * an allocator that found leaf_alloc locked exits at once (see
 * leaf_warm_start_database).  Sets *warming if an allocator still asks.
 */
static int
leaf_warm_places_held(LeafWarmLaunch *launch, bool *warming)
{
	int			held = 0;
	int			i;

	*warming = false;
	for (i = 0; i < launch->ndbs; i++)
	{
		LeafWarmDbUse *db = &launch->dbs[i];

		if (db->state == LEAF_WARM_DB_WARMING)
		{
			LeafWarmState state = leaf_alloc_slot_warm_state(db->dboid);

			if (state == LEAF_WARM_DONE)
				db->state = LEAF_WARM_DB_WARMED;
			else if (state == LEAF_WARM_NONE)
				db->state = LEAF_WARM_DB_OUT;
			else
				*warming = true;
		}
		if (db->state == LEAF_WARM_DB_WARMING ||
			db->state == LEAF_WARM_DB_WARMED)
			held++;
	}
	return held;
}

/*
 * Launch the allocators of the queued databases, in their order, while
 * a place is free.  When none is, and no allocator still asks for its
 * tags (which could give its place back), the databases still queued are
 * skipped.  Returns true while a database is queued.
 */
static bool
leaf_warm_launch_more(HTAB *entries, LeafWarmLaunch *launch)
{
	bool		warming;
	int			held = leaf_warm_places_held(launch, &warming);
	bool		queued = false;
	int			i;

	for (i = 0; i < launch->ndbs; i++)
	{
		LeafWarmDbUse *db = &launch->dbs[i];

		if (db->state != LEAF_WARM_DB_QUEUED)
			continue;
		if (held < launch->places)
		{
			bool		ok = leaf_warm_launch(db->dboid);

			db->state = ok ? LEAF_WARM_DB_WARMING : LEAF_WARM_DB_OUT;
			leaf_warm_mark(entries, db->dboid, launch->read_at, false, ok);
			if (ok)
			{
				held++;
				warming = true;
			}
		}
		else if (warming)
			queued = true;
		else
		{
			ereport(LOG,
					(errmsg("leaf warm start skips the database with OID %u: it warmed as many databases as half of \"leaf.max_databases\" (%d)",
							db->dboid, launch->places),
					 errdetail("Its biz_tags are loaded at their first call.")));
			db->state = LEAF_WARM_DB_OUT;
			leaf_warm_mark(entries, db->dboid, launch->read_at, false, false);
		}
	}
	if (!queued)
	{
		/* every database is launched or skipped: nothing more to track */
		pfree(launch->dbs);
		launch->dbs = NULL;
		launch->ndbs = 0;
	}
	return queued;
}

/*
 * The warm start proper: the allocators of the databases of the file that
 * have a tag used within leaf.warm_start_max_age and still exist are
 * started, the most recently used first, and each warms its own database
 * (leaf_warm_start_database).  Each stays until leaf.alloc_idle_timeout,
 * so they take at most half of leaf.max_databases (the places), leaving
 * the other allocators free for the databases whose callers come first.
 * A database whose allocator found leaf_alloc locked gives its place back
 * at once, to the next database: the leader launches more, without
 * waiting, each time it looks (leaf_warm_launch_more), while a database
 * waits for a place.  Returns true while one does.
 */
static bool
leaf_warm_start_databases(HTAB *entries, LeafWarmLaunch *launch)
{
	List	   *exist = leaf_warm_databases();
	int			i;

	launch->read_at = timestamptz_to_time_t(GetCurrentTimestamp());
	launch->places = Max(leaf_alloc_slots_max() / 2, 1);
	launch->dbs = leaf_warm_recent_databases(entries, launch->read_at,
											 &launch->ndbs);
	for (i = 0; i < launch->ndbs; i++)
	{
		LeafWarmDbUse *db = &launch->dbs[i];

		if (list_member_oid(exist, db->dboid))
			leaf_warm_mark(entries, db->dboid, launch->read_at, true, false);
		else
		{
			ereport(LOG,
					(errmsg("leaf warm start skips the database with OID %u: it no longer exists",
							db->dboid)));
			db->state = LEAF_WARM_DB_OUT;
		}
	}
	list_free(exist);
	return leaf_warm_launch_more(entries, launch);
}

/*
 * Take the tags that have a slot now into the entries (marking them
 * seen).  Sets *used if IDs of a tag were handed out since the last look.
 */
static void
leaf_warm_see_slots(HTAB *entries, pg_time_t now, bool *used)
{
	LeafTagInUse *tags;
	int			ntags;
	int			i;

	tags = leaf_segment_tags_in_use(&ntags);
	for (i = 0; i < ntags; i++)
	{
		LeafWarmKey key;
		LeafWarmEntry *e;
		bool		found;

		memset(&key, 0, sizeof(key));
		key.dboid = tags[i].dboid;
		strlcpy(key.tag, tags[i].tag, sizeof(key.tag));
		e = hash_search(entries, &key, HASH_ENTER, &found);
		if (!found)
		{
			/* a new tag: a caller asked for it just now */
			e->last_used = now;
			e->in_file = false;
		}
		else if (e->generation == 0)
		{
			/* a tag of the file with a slot now: preloaded, or called */
			if (tags[i].ids_issued > 0)
			{
				e->last_used = now;
				*used = true;
			}
		}
		else if (e->generation != tags[i].generation ||
				 e->ids_issued != tags[i].ids_issued)
		{
			e->last_used = now;
			*used = true;
		}
		e->generation = tags[i].generation;
		e->ids_issued = tags[i].ids_issued;
		e->seen = true;
		e->pending = false;
		e->queued = false;
	}
	pfree(tags);
}

/*
 * Bring the entries up to date with the tags that have a slot now.
 * Returns true if the file would list other tags than it does; sets
 * *used if IDs of a tag were handed out since the last look.
 */
static bool
leaf_warm_update(HTAB *entries, bool *used)
{
	bool		changed = false;
	pg_time_t	now = timestamptz_to_time_t(GetCurrentTimestamp());
	HASH_SEQ_STATUS seq;
	LeafWarmEntry *e;

	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
		e->seen = false;
	leaf_warm_see_slots(entries, now, used);

	/*
	 * The file lists the tags that have a slot and were used within
	 * leaf.warm_start_max_age, and those of the file that the allocator
	 * of their database has yet to ask for, or that wait for a place.
	 * Other tags without a slot are forgotten; those with one are kept
	 * with their last use, even when it is too old.
	 */
	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->pending &&
			leaf_alloc_slot_warm_state(e->key.dboid) != LEAF_WARM_WARMING)
			e->pending = false;
		e->listed = (e->seen || e->pending || e->queued) &&
			leaf_warm_recent(e, now);
		if (e->listed != e->in_file)
			changed = true;
		if (!e->seen && !e->pending && !e->queued)
			(void) hash_search(entries, &e->key, HASH_REMOVE, NULL);
	}
	return changed;
}

void
leaf_warm_start_main(Datum main_arg)
{
	HTAB	   *entries;
	LeafWarmLaunch launch;
	bool		launching = false;
	bool		dirty;
	bool		used = false;
	bool		failed = false;
	TimestampTz last_write = 0;
	uint32		wait_event;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	/* no database: pg_database is read, and the file */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("leaf warm start");

	entries = leaf_warm_read(LOG);
	if (hash_get_num_entries(entries) > 0)
	{
		ereport(LOG,
				(errmsg("leaf warm start read %ld biz_tags from file \"%s\"",
						hash_get_num_entries(entries), LEAF_WARM_FILE)));
		launching = leaf_warm_start_databases(entries, &launch);
	}

	wait_event = WaitEventExtensionNew("LeafWarmStartMain");

	/* written once at start, which also replaces a damaged file */
	dirty = true;
	for (;;)
	{
		bool		stop;
		bool		due;
		TimestampTz now;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		stop = ShutdownRequestPending;

		if (launching && !stop)
			launching = leaf_warm_launch_more(entries, &launch);
		if (leaf_warm_update(entries, &used))
			dirty = true;
		now = GetCurrentTimestamp();
		due = TimestampDifferenceExceeds(last_write, now,
										 leaf_warm_interval_ms);
		/* a failed write is tried again after leaf.warm_start_interval */
		if ((dirty && (!failed || due)) || (used && due) ||
			(stop && (dirty || used)))
		{
			last_write = now;
			failed = !leaf_warm_write(entries);
			if (!failed)
				dirty = used = false;
		}
		if (stop)
			proc_exit(0);
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 launching ? LEAF_WARM_LAUNCH_MS : LEAF_WARM_CHECK_MS,
						 wait_event);
	}
}

/* ---------- in the allocator of one database ---------- */

/* The tags of database dboid that the file lists as used recently. */
static List *
leaf_warm_tags_of(Oid dboid)
{
	HTAB	   *entries;
	HASH_SEQ_STATUS seq;
	LeafWarmEntry *e;
	List	   *tags = NIL;
	pg_time_t	now = timestamptz_to_time_t(GetCurrentTimestamp());

	/* a damaged file is the leader's to report */
	entries = leaf_warm_read(DEBUG1);
	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (e->key.dboid == dboid && leaf_warm_recent(e, now))
			tags = lappend(tags, pstrdup(e->key.tag));
	hash_destroy(entries);
	return tags;
}

static void
leaf_warm_check_extension(void *arg)
{
	Oid			extoid;

	(void) leaf_extension_namespace(&extoid);
	*(bool *) arg = OidIsValid(extoid);
}

/* Is the extension installed in this database?  Says why not at LOG. */
static bool
leaf_warm_extension_ok(const char *dbname)
{
	bool		installed = false;
	int			sqlstate;
	char		err[LEAF_ERRMSG_LEN];

	if (!leaf_in_transaction(leaf_warm_check_extension, &installed,
							 "leaf: warm start", &sqlstate, err, sizeof(err)))
	{
		ereport(LOG,
				(errmsg("leaf warm start skips database \"%s\"", dbname),
				 errdetail_internal("%s", err)));
		return false;
	}
	if (!installed)
		ereport(LOG,
				(errmsg("leaf warm start skips database \"%s\": extension \"leaf\" is not installed there",
						dbname)));
	return installed;
}

/* A tag to ask for, and whether it was (it had no slot yet). */
typedef struct LeafWarmAsk
{
	const char *tag;
	bool		asked;
} LeafWarmAsk;

static void
leaf_warm_one_tag(void *arg)
{
	LeafWarmAsk *ask = (LeafWarmAsk *) arg;

	ask->asked = leaf_segment_warm(ask->tag);
}

/*
 * Ask for the first segments of tags, each in a transaction of its own.
 * Returns how many were asked for; *skipped counts those that failed.
 * Stops at the first lock wait that timed out, setting *locked: a lock
 * on leaf_alloc holds up every tag alike.
 */
static int
leaf_warm_ask(List *tags, const char *dbname, int *skipped, bool *locked)
{
	ListCell   *lc;
	int			asked = 0;
	int			sqlstate;
	char		err[LEAF_ERRMSG_LEN];

	foreach(lc, tags)
	{
		LeafWarmAsk ask = {(const char *) lfirst(lc), false};

		CHECK_FOR_INTERRUPTS();
		if (leaf_alloc_stopping())
			break;				/* a database command wants the database */
		if (leaf_in_transaction(leaf_warm_one_tag, &ask, "leaf: warm start",
								&sqlstate, err, sizeof(err)))
		{
			if (ask.asked)
				asked++;
			continue;
		}
		(*skipped)++;
		ereport(LOG,
				(errmsg("leaf warm start skips biz_tag \"%s\" of database \"%s\"",
						ask.tag, dbname),
				 errdetail_internal("%s", err)));
		/* no room for more, or a lock: the others would fail the same way */
		if (sqlstate == ERRCODE_INSUFFICIENT_RESOURCES)
			break;
		if (sqlstate == ERRCODE_LOCK_NOT_AVAILABLE)
		{
			*locked = true;
			break;
		}
	}
	return asked;
}

/*
 * In the allocator of database dboid, when it starts: ask for the first
 * segments of the tags the file lists for the database, used within
 * leaf.warm_start_max_age, that have no slot yet, as their first callers
 * would.  The allocator loads them next.  A lock held on leaf_alloc makes
 * the first tag wait the lock_timeout the allocator sets for the warm
 * start, then skips it and the tags after it: their first callers load
 * them, as without the warm start.  Returns true then.
 */
bool
leaf_warm_start_database(Oid dboid, const char *dbname)
{
	MemoryContext cxt;
	MemoryContext old;
	List	   *tags;
	int			asked = 0;
	int			skipped = 0;
	bool		locked = false;

	/* as for the leader: see the file's comment */
	if (!leaf_warm_start || IsBinaryUpgrade || RecoveryInProgress())
		return false;

	cxt = AllocSetContextCreate(TopMemoryContext, "leaf warm start",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	tags = leaf_warm_tags_of(dboid);
	if (tags != NIL && leaf_warm_extension_ok(dbname))
	{
		/* leaf_in_transaction leaves another memory context current */
		MemoryContextSwitchTo(cxt);
		asked = leaf_warm_ask(tags, dbname, &skipped, &locked);
		if (asked > 0 || skipped > 0)
			ereport(LOG,
					(errmsg("leaf warm start asked for the first segments of %d biz_tags of database \"%s\"",
							asked, dbname)));
		if (locked)
			ereport(LOG,
					(errmsg("leaf warm start skips the other biz_tags of database \"%s\": a lock wait timed out",
							dbname),
					 errdetail("They are loaded at their first call.")));
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return locked;
}
