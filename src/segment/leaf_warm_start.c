/*-------------------------------------------------------------------------
 *
 * leaf_warm_start.c
 *	  Warm start of segment mode: the tags in use are written to a file in
 *	  the data directory, and after a restart their first segments are
 *	  asked for before any caller does.
 *
 * After a restart, a crash or a promotion, every tag starts with empty
 * buffers, and the first caller of each waits for its first load.  With
 * leaf.warm_start on, a static background worker (the "leader", started
 * once the server accepts writes) does what autoprewarm does for buffers:
 *
 *	- at start it reads LEAF_WARM_FILE and, one database at a time, starts
 *	  a worker connected to that database (leaf_warm_start_db_main), which
 *	  asks for the first segment of each tag listed for it that was used
 *	  within leaf.warm_start_max_age, through the path a caller's first
 *	  call takes (leaf_segment_warm): the tag's slot is made and the
 *	  database's allocator is woken, or started, to load it.  So every
 *	  check of a caller's load applies unchanged: a copy of the database
 *	  (LF006), a new timeline (LF007), a logical replica (LF012), fleet
 *	  mode; what a caller could not load is not loaded, and the refusal
 *	  waits in the tag's slot for the first caller, as it would have.
 *	- then, every second, it looks at the tags that have a slot, and
 *	  writes the file again when one came or went, and every
 *	  leaf.warm_start_interval when one was used (IDs handed out) since;
 *	  and once more when it is stopped (a clean shutdown).
 *
 * The file lists, for each tag with a slot, its database's OID, the last
 * time IDs of it were seen handed out (or, for a tag preloaded and not
 * used since, the time the file said) and the tag, in hex.  It ends with
 * the number of entries and a CRC-32C of what came before, and is written
 * to a temporary file first, then renamed durably.  A file that is
 * missing, damaged or truncated is ignored with a LOG line; a database
 * that no longer exists, or no longer has the extension, and a tag that
 * is no longer in leaf_alloc are skipped, each with a LOG line.  Nothing
 * of this is an error for callers.
 *
 * The leader is not started in recovery (a standby loads nothing), nor in
 * binary upgrade mode.  After a promotion it starts, and reads whatever
 * file the data directory holds (the primary's, if the base backup
 * copied one); the timeline check of each load decides, as for callers.
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
#include "segment/leaf_segment_shmem.h"

PGDLLEXPORT void leaf_warm_start_main(Datum main_arg);
PGDLLEXPORT void leaf_warm_start_db_main(Datum main_arg);

/* The file in the data directory, and its temporary file. */
#define LEAF_WARM_FILE			"leaf_warm_start.tags"
#define LEAF_WARM_TMP			"leaf_warm_start.tags.tmp"

/* The first line of the file: its format. */
#define LEAF_WARM_HEADER		"leaf warm start 1"

/* How often the leader looks at the tags that have a slot, in ms. */
#define LEAF_WARM_CHECK_MS		1000

/*
 * Longest wait for the worker of one database, in ms: a database whose
 * connection waits on a lock (an ALTER DATABASE left open, a long CREATE
 * DATABASE ... TEMPLATE) must not hold up the others, nor the file.
 */
#define LEAF_WARM_DB_TIMEOUT_MS	30000

/* How often the leader looks whether that worker has exited, in ms. */
#define LEAF_WARM_DB_POLL_MS	100

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

/*
 * Read the file into a new hash of LeafWarmEntry (in the current memory
 * context): every entry, or none if the file is missing or damaged (with
 * a LOG line that says why).
 */
static HTAB *
leaf_warm_read(void)
{
	HASHCTL		ctl;
	HTAB	   *entries;
	FILE	   *f;
	char		line[LEAF_WARM_LINE_LEN + 2];
	pg_crc32c	crc;
	int			lineno = 0;
	int			n = 0;
	bool		ended = false;
	const char *damage = NULL;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(LeafWarmKey);
	ctl.entrysize = sizeof(LeafWarmEntry);
	ctl.hcxt = CurrentMemoryContext;
	entries = hash_create("leaf warm start tags", 64, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	f = AllocateFile(LEAF_WARM_FILE, "r");
	if (f == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("leaf warm start could not open file \"%s\": %m",
							LEAF_WARM_FILE)));
		return entries;
	}

	INIT_CRC32C(crc);
	while (damage == NULL && fgets(line, sizeof(line), f) != NULL)
	{
		size_t		len = strlen(line);
		unsigned int dboid;
		long long	used;
		char		hex[LEAF_WARM_LINE_LEN + 2];
		char		rest;
		LeafWarmKey key;
		LeafWarmEntry *e;
		bool		found;

		lineno++;
		if (len == 0 || line[len - 1] != '\n')
		{
			damage = "a line is too long or has no end";
			break;
		}
		if (ended)
		{
			damage = "there is more after the last line";
			break;
		}
		if (lineno == 1)
		{
			if (strcmp(line, LEAF_WARM_HEADER "\n") != 0)
				damage = "the first line is not \"" LEAF_WARM_HEADER "\"";
			COMP_CRC32C(crc, line, len);
			continue;
		}
		if (strncmp(line, "end ", 4) == 0)
		{
			int			count;
			unsigned int sum;

			FIN_CRC32C(crc);
			if (sscanf(line, "end %d %x %c", &count, &sum, &rest) != 2)
				damage = "its last line cannot be read";
			else if (count != n)
				damage = "it holds another number of entries than its last line says";
			else if (sum != (unsigned int) crc)
				damage = "its checksum does not match";
			ended = true;
			continue;
		}
		COMP_CRC32C(crc, line, len);
		memset(&key, 0, sizeof(key));
		if (sscanf(line, "%u %lld %s %c", &dboid, &used, hex, &rest) != 3 ||
			dboid == InvalidOid || !leaf_warm_unhex(hex, key.tag))
		{
			damage = "an entry cannot be read";
			break;
		}
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
		}
		n++;
	}
	if (damage == NULL && ferror(f))
		damage = "it could not be read";
	if (damage == NULL && !ended)
		damage = "it ends before its last line";
	FreeFile(f);

	if (damage != NULL)
	{
		ereport(LOG,
				(errmsg("leaf warm start ignores file \"%s\": %s (line %d)",
						LEAF_WARM_FILE, damage, lineno),
				 errdetail("No biz_tag is loaded before its first call; the file is written again while the server runs.")));
		hash_destroy(entries);
		entries = hash_create("leaf warm start tags", 64, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	return entries;
}

/*
 * Write the entries that have a slot now, durably: the temporary file,
 * fsync, rename, fsync of the directory.  Returns false (with a LOG line)
 * if it could not.
 */
static bool
leaf_warm_write(HTAB *entries)
{
	StringInfoData buf;
	HASH_SEQ_STATUS seq;
	LeafWarmEntry *e;
	pg_crc32c	crc;
	int			n = 0;
	int			fd;

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

	fd = OpenTransientFile(LEAF_WARM_TMP, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("leaf warm start could not create file \"%s\": %m",
						LEAF_WARM_TMP)));
		pfree(buf.data);
		return false;
	}
	errno = 0;
	if (write(fd, buf.data, buf.len) != buf.len)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		errno = save_errno ? save_errno : ENOSPC;
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("leaf warm start could not write file \"%s\": %m",
						LEAF_WARM_TMP)));
		pfree(buf.data);
		return false;
	}
	pfree(buf.data);
	if (pg_fsync(fd) != 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("leaf warm start could not fsync file \"%s\": %m",
						LEAF_WARM_TMP)));
		return false;
	}
	if (CloseTransientFile(fd) != 0)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("leaf warm start could not close file \"%s\": %m",
						LEAF_WARM_TMP)));
		return false;
	}
	if (durable_rename(LEAF_WARM_TMP, LEAF_WARM_FILE, LOG) != 0)
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
 * Start the worker that asks for the first segments of database dboid,
 * and wait until it has exited, LEAF_WARM_DB_TIMEOUT_MS at most.
 */
static void
leaf_warm_database(Oid dboid)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	pid_t		pid;
	TimestampTz start;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "leaf");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "leaf_warm_start_db_main");
	snprintf(worker.bgw_name, BGW_MAXLEN,
			 "leaf warm start for database with OID %u", dboid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "leaf warm start");
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(LOG,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("leaf warm start could not start a worker for the database with OID %u",
						dboid),
				 errhint("Consider increasing configuration parameter \"max_worker_processes\"."),
				 errdetail("Its biz_tags are loaded at their first call.")));
		return;
	}
	if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED)
		return;
	start = GetCurrentTimestamp();
	while (GetBackgroundWorkerPid(handle, &pid) != BGWH_STOPPED)
	{
		if (ShutdownRequestPending ||
			TimestampDifferenceExceeds(start, GetCurrentTimestamp(),
									   LEAF_WARM_DB_TIMEOUT_MS))
		{
			if (!ShutdownRequestPending)
				ereport(LOG,
						(errmsg("leaf warm start stopped its worker for the database with OID %u after %d ms",
								dboid, LEAF_WARM_DB_TIMEOUT_MS),
						 errdetail("The biz_tags not asked for yet are loaded at their first call.")));
			TerminateBackgroundWorker(handle);
			return;
		}
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 LEAF_WARM_DB_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* A database of the file, and the last use of its most recent tag. */
typedef struct LeafWarmDbUse
{
	Oid			dboid;
	pg_time_t	last_used;
} LeafWarmDbUse;

/* qsort: the most recently used database first */
static int
leaf_warm_db_cmp(const void *a, const void *b)
{
	pg_time_t	ua = ((const LeafWarmDbUse *) a)->last_used;
	pg_time_t	ub = ((const LeafWarmDbUse *) b)->last_used;

	return (ua < ub) ? 1 : (ua > ub) ? -1 : 0;
}

/*
 * The warm start proper: the databases of the file that have a tag used
 * within leaf.warm_start_max_age and still exist, one after the other,
 * the most recently used first.  Each gets its allocator started, which
 * stays until leaf.alloc_idle_timeout, so at most half of
 * leaf.max_databases are warmed: the other allocators stay free for the
 * databases whose callers come first.
 */
static void
leaf_warm_start_databases(HTAB *entries)
{
	List	   *exist = leaf_warm_databases();
	HASH_SEQ_STATUS seq;
	LeafWarmEntry *e;
	pg_time_t	now = timestamptz_to_time_t(GetCurrentTimestamp());
	LeafWarmDbUse *dbs;
	int			ndbs = 0;
	int			warmed = 0;
	int			budget = Max(leaf_alloc_slots_max() / 2, 1);
	int			i;

	dbs = palloc(sizeof(LeafWarmDbUse) * Max(hash_get_num_entries(entries), 1));
	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (!leaf_warm_recent(e, now))
			continue;
		for (i = 0; i < ndbs; i++)
			if (dbs[i].dboid == e->key.dboid)
				break;
		if (i == ndbs)
		{
			dbs[ndbs].dboid = e->key.dboid;
			dbs[ndbs].last_used = e->last_used;
			ndbs++;
		}
		else
			dbs[i].last_used = Max(dbs[i].last_used, e->last_used);
	}
	qsort(dbs, ndbs, sizeof(LeafWarmDbUse), leaf_warm_db_cmp);

	for (i = 0; i < ndbs; i++)
	{
		Oid			dboid = dbs[i].dboid;

		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			break;
		if (!list_member_oid(exist, dboid))
			ereport(LOG,
					(errmsg("leaf warm start skips the database with OID %u: it no longer exists",
							dboid)));
		else if (warmed >= budget)
			ereport(LOG,
					(errmsg("leaf warm start skips the database with OID %u: it warmed as many databases as half of \"leaf.max_databases\" (%d)",
							dboid, budget),
					 errdetail("Its biz_tags are loaded at their first call.")));
		else
		{
			leaf_warm_database(dboid);
			warmed++;
		}
	}
	pfree(dbs);
}

/*
 * Bring the entries up to date with the tags that have a slot now.
 * Returns true if the file would list other tags than it does; sets
 * *used if IDs of a tag were handed out since the last look.
 */
static bool
leaf_warm_update(HTAB *entries, bool *used)
{
	LeafTagInUse *tags;
	int			ntags;
	int			i;
	bool		changed = false;
	pg_time_t	now = timestamptz_to_time_t(GetCurrentTimestamp());
	HASH_SEQ_STATUS seq;
	LeafWarmEntry *e;

	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
		e->seen = false;

	tags = leaf_segment_tags_in_use(&ntags);
	for (i = 0; i < ntags; i++)
	{
		LeafWarmKey key;
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
	}
	pfree(tags);

	/*
	 * The file lists the tags that have a slot and were used within
	 * leaf.warm_start_max_age.  Tags without a slot are forgotten; those
	 * with one are kept with their last use, even when it is too old.
	 */
	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		e->listed = e->seen && leaf_warm_recent(e, now);
		if (e->listed != e->in_file)
			changed = true;
		if (!e->seen)
			(void) hash_search(entries, &e->key, HASH_REMOVE, NULL);
	}
	return changed;
}

void
leaf_warm_start_main(Datum main_arg)
{
	HTAB	   *entries;
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

	entries = leaf_warm_read();
	if (hash_get_num_entries(entries) > 0)
	{
		ereport(LOG,
				(errmsg("leaf warm start read %ld biz_tags from file \"%s\"",
						hash_get_num_entries(entries), LEAF_WARM_FILE)));
		leaf_warm_start_databases(entries);
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
						 LEAF_WARM_CHECK_MS, wait_event);
	}
}

/* ---------- the worker of one database ---------- */

/* The tags of this database to ask for, and what became of them. */
typedef struct LeafWarmDb
{
	List	   *tags;			/* char *, in the order of the file */
	bool		ext_missing;	/* the extension is not installed */
} LeafWarmDb;

static void
leaf_warm_check_extension(void *arg)
{
	LeafWarmDb *db = (LeafWarmDb *) arg;
	Oid			extoid;

	(void) leaf_extension_namespace(&extoid);
	db->ext_missing = !OidIsValid(extoid);
}

static void
leaf_warm_one_tag(void *arg)
{
	leaf_segment_warm((const char *) arg);
}

void
leaf_warm_start_db_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	HTAB	   *entries;
	HASH_SEQ_STATUS seq;
	LeafWarmEntry *e;
	LeafWarmDb	db;
	ListCell   *lc;
	pg_time_t	now;
	char		dbname[NAMEDATALEN];
	int			asked = 0;
	int			sqlstate;
	char		err[LEAF_ERRMSG_LEN];

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/*
	 * A database that no longer allows connections may still have
	 * sessions that take IDs, as for the allocator.
	 */
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid,
											  BGWORKER_BYPASS_ALLOWCONN);
	StartTransactionCommand();
	{
		char	   *name = get_database_name(dboid);

		strlcpy(dbname, name != NULL ? name : "?", sizeof(dbname));
	}
	CommitTransactionCommand();
	{
		char		appname[NAMEDATALEN];

		snprintf(appname, sizeof(appname), "leaf warm start %s", dbname);
		pgstat_report_appname(appname);
	}

	/* the leader was started after recovery; a standby loads nothing */
	if (RecoveryInProgress())
		proc_exit(0);

	memset(&db, 0, sizeof(db));
	if (!leaf_in_transaction(leaf_warm_check_extension, &db,
							 "leaf: warm start", &sqlstate, err, sizeof(err)))
	{
		ereport(LOG,
				(errmsg("leaf warm start skips database \"%s\"", dbname),
				 errdetail_internal("%s", err)));
		proc_exit(0);
	}
	if (db.ext_missing)
	{
		ereport(LOG,
				(errmsg("leaf warm start skips database \"%s\": extension \"leaf\" is not installed there",
						dbname)));
		proc_exit(0);
	}

	entries = leaf_warm_read();
	now = timestamptz_to_time_t(GetCurrentTimestamp());
	hash_seq_init(&seq, entries);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (e->key.dboid == dboid && leaf_warm_recent(e, now))
			db.tags = lappend(db.tags, pstrdup(e->key.tag));

	foreach(lc, db.tags)
	{
		char	   *tag = (char *) lfirst(lc);

		CHECK_FOR_INTERRUPTS();
		if (leaf_in_transaction(leaf_warm_one_tag, tag, "leaf: warm start",
								&sqlstate, err, sizeof(err)))
		{
			asked++;
			continue;
		}
		ereport(LOG,
				(errmsg("leaf warm start skips biz_tag \"%s\" of database \"%s\"",
						tag, dbname),
				 errdetail_internal("%s", err)));
		/* no room for more: the others would fail the same way */
		if (sqlstate == ERRCODE_INSUFFICIENT_RESOURCES)
			break;
	}
	ereport(LOG,
			(errmsg("leaf warm start asked for the first segments of %d biz_tags of database \"%s\"",
					asked, dbname)));
	proc_exit(0);
}
