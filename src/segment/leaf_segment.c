/*-------------------------------------------------------------------------
 *
 * leaf_segment.c
 *	  Segment mode: leaf_segment_nextval() on double-buffered segments in
 *	  shared memory.
 *
 * Each (database, biz_tag) in use has a LeafTagSlot with two segment
 * buffers.  Callers take IDs from the current buffer under the slot's
 * spinlock.  Once leaf.preload_percent of it is used, they ask the
 * database's allocator worker (leaf_alloc_worker.c) to load the other
 * buffer; when the current one runs out and the other is ready, they
 * switch.  A caller sleeps only when both buffers are empty, on the
 * slot's condition variable, which the worker broadcasts after every load
 * of the tag, and never longer than leaf.wait_timeout.
 *
 * The worker commits each allocation in its own transaction before the
 * segment is published here, so no caller's rollback can make an ID be
 * handed out twice, and after a crash every new segment lies above every
 * ID handed out before.
 *
 * Slots sit in a fixed array rather than in the hash table itself, so a
 * backend may cache a pointer to its slot in fn_extra and skip the hash
 * lookup: the slot's generation, read under its spinlock, tells whether
 * it still holds the same tag.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "common/leaf_common.h"
#include "segment/leaf_alloc.h"
#include "segment/leaf_alloc_replica.h"
#include "segment/leaf_alloc_slots.h"
#include "common/leaf_compat.h"
#include "common/leaf_errcodes.h"
#include "segment/leaf_segment.h"
#include "segment/leaf_segment_shmem.h"

/*
 * After a tag's load was refused for the database as a whole (a copy, a
 * replica, a fence), a backend that was told so is told it again at once
 * for this long, and starts no allocator (leaf_wake_for).
 */
#define LEAF_REFUSAL_HOLD_MS	1000

PG_FUNCTION_INFO_V1(leaf_segment_nextval);
PG_FUNCTION_INFO_V1(leaf_segment_nextvals);
PG_FUNCTION_INFO_V1(leaf_segments);
PG_FUNCTION_INFO_V1(leaf_segment_errors);
PG_FUNCTION_INFO_V1(leaf_segment_refills);
PG_FUNCTION_INFO_V1(leaf_segment_discard);
PG_FUNCTION_INFO_V1(leaf_alloc_local);

/* Key of the tag hash. */
typedef struct LeafTagKey
{
	Oid			dboid;
	Oid			extoid;
	char		tag[LEAF_TAG_MAXLEN + 1];
} LeafTagKey;

typedef struct LeafTagEntry
{
	LeafTagKey	key;			/* hash key; must be first */
	int			slotno;			/* index into leaf_seg->slots */
} LeafTagEntry;

/* What a call site remembers between calls (in fn_extra). */
typedef struct LeafCallCache
{
	int			len;			/* length of tag, 0 if nothing cached */
	char		tag[LEAF_TAG_MAXLEN + 1];
	Oid			fnoid;			/* the calling function */
	LeafTagSlot *slot;
	uint64		generation;
} LeafCallCache;

/*
 * What a backend remembers between statements: the slot of each tag it
 * used.  The key holds the OID of the calling function, which changes
 * when the extension is dropped and created again; the slot's generation
 * tells whether the tag was deleted since.
 */
typedef struct LeafBackendKey
{
	Oid			fnoid;
	char		tag[LEAF_TAG_MAXLEN + 1];
} LeafBackendKey;

typedef struct LeafBackendEntry
{
	LeafBackendKey key;			/* hash key; must be first */
	LeafTagSlot *slot;
	uint64		generation;
} LeafBackendEntry;

static HTAB *leaf_backend_tags = NULL;

LeafSegShared *leaf_seg = NULL;
static HTAB *leaf_tag_hash = NULL;

/* leaf.max_tags */
int			leaf_max_tags = 1024;

/* Define the settings of the tag slots. */
void
leaf_segment_init_settings(void)
{
	DefineCustomIntVariable("leaf.max_tags",
							"Sets the number of biz_tags held in shared memory, over all databases.",
							NULL,
							&leaf_max_tags,
							1024, 16, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
	leaf_tag_share_init_settings();
}

static Size
leaf_segment_shmem_size(void)
{
	Size		size;

	size = MAXALIGN(sizeof(LeafSegShared));
	size = add_size(size, mul_size(leaf_max_tags, sizeof(LeafTagSlot)));
	size = add_size(size, hash_estimate_size(leaf_max_tags,
											 sizeof(LeafTagEntry)));
	return size;
}

void
leaf_segment_shmem_request(void)
{
	RequestAddinShmemSpace(leaf_segment_shmem_size());
	RequestNamedLWLockTranche("leaf", 1);
}

/*
 * Called with AddinShmemInitLock held.
 */
void
leaf_segment_shmem_startup(void)
{
	bool		found;
	HASHCTL		info;
	Size		size;

	leaf_seg = NULL;
	leaf_tag_hash = NULL;

	size = MAXALIGN(sizeof(LeafSegShared));
	size = add_size(size, mul_size(leaf_max_tags, sizeof(LeafTagSlot)));

	leaf_seg = ShmemInitStruct("leaf segment state", size, &found);
	if (!found)
	{
		char	   *p = (char *) leaf_seg;
		int			i;

		memset(leaf_seg, 0, size);
		leaf_seg->lock = &(GetNamedLWLockTranche("leaf"))->lock;
		SpinLockInit(&leaf_seg->mutex);
		leaf_seg->next_generation = 1;

		p += MAXALIGN(sizeof(LeafSegShared));
		leaf_seg->slots = (LeafTagSlot *) p;

		for (i = 0; i < leaf_max_tags; i++)
		{
			SpinLockInit(&leaf_seg->slots[i].mutex);
			ConditionVariableInit(&leaf_seg->slots[i].cv);
		}
		pg_atomic_init_u32(&leaf_seg->nslots_used, 0);
	}

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(LeafTagKey);
	info.entrysize = sizeof(LeafTagEntry);
	leaf_tag_hash = ShmemInitHash("leaf tag hash", leaf_max_tags,
								  &info, HASH_ELEM | HASH_BLOBS);
}

static void
leaf_segment_check_ready(void)
{
	leaf_require_preload();
	if (leaf_seg == NULL || leaf_tag_hash == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("leaf shared memory is not initialized")));
}

/*
 * Free a tag slot, if it still holds the given generation.  Callers that
 * cached a pointer to it see the generation change and look the tag up
 * again; those waiting for a load of it are woken to do so (by the
 * caller of the _locked form, once it released the lock).
 */
static bool
leaf_free_slot_locked(int slotno, uint64 generation)
{
	LeafTagSlot *slot = &leaf_seg->slots[slotno];
	LeafTagKey	key;
	bool		freed = false;

	Assert(LWLockHeldByMeInMode(leaf_seg->lock, LW_EXCLUSIVE));
	SpinLockAcquire(&slot->mutex);
	if (slot->generation != 0 && slot->generation == generation)
	{
		slot->generation = 0;
		freed = true;
	}
	SpinLockRelease(&slot->mutex);
	if (freed)
	{
		memset(&key, 0, sizeof(key));
		key.dboid = slot->dboid;
		key.extoid = slot->extoid;
		memcpy(key.tag, slot->tag, sizeof(key.tag));
		(void) hash_search(leaf_tag_hash, &key, HASH_REMOVE, NULL);
	}
	return freed;
}

void
leaf_free_slot(int slotno, uint64 generation)
{
	bool		freed;

	LWLockAcquire(leaf_seg->lock, LW_EXCLUSIVE);
	freed = leaf_free_slot_locked(slotno, generation);
	LWLockRelease(leaf_seg->lock);
	if (freed)
		ConditionVariableBroadcast(&leaf_seg->slots[slotno].cv);
}

/*
 * Free every slot of a database (a dropped one, or one whose extension is
 * gone), or, if keep_extoid is valid, only those of other incarnations of
 * the extension there (dropped and created again).
 */
void
leaf_free_slots(Oid dboid, Oid keep_extoid)
{
	int			i;

	for (i = 0; i < leaf_tag_slots_in_use(); i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];
		uint64		gen = 0;

		SpinLockAcquire(&slot->mutex);
		if (slot->generation != 0 && slot->dboid == dboid &&
			slot->extoid != keep_extoid)
			gen = slot->generation;
		SpinLockRelease(&slot->mutex);
		if (gen != 0)
			leaf_free_slot(i, gen);
	}
}

/*
 * Drop every segment a database holds, as leaf_segment_discard() does for
 * one tag (leaf_alloc_cutover(), whose counters have just been raised).
 */
void
leaf_discard_database_segments(Oid dboid)
{
	/* callers waiting for a load of a freed slot look the tag up again */
	leaf_free_slots(dboid, InvalidOid);
}

/*
 * How many slots to look at when scanning for slots in use: the ones past
 * this have never been taken.
 */
int
leaf_tag_slots_in_use(void)
{
	uint32		n = pg_atomic_read_u32(&leaf_seg->nslots_used);

	pg_read_barrier();
	return Min((int) n, leaf_max_tags);
}

/*
 * Does a tag slot wait for a load by the allocator of database dboid?
 * Caller holds the slot's mutex.
 */
static inline bool
leaf_slot_wants_load(const LeafTagSlot *slot, Oid dboid)
{
	return slot->generation != 0 && slot->dboid == dboid &&
		slot->loading && !slot->next_ready;
}

/*
 * Does a slot of database dboid wait for a load (now or after a pause)?
 */
bool
leaf_loads_wanted(Oid dboid)
{
	bool		pending = false;
	int			i;

	for (i = 0; i < leaf_tag_slots_in_use() && !pending; i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];

		SpinLockAcquire(&slot->mutex);
		pending = leaf_slot_wants_load(slot, dboid);
		SpinLockRelease(&slot->mutex);
	}
	return pending;
}

/*
 * Is every slot of database dboid refused (leaf_slot_refused), and there
 * is one at least?  Its allocator then has nothing to stay for.
 */
bool
leaf_loads_refused(Oid dboid)
{
	bool		any = false;
	bool		refused = true;
	int			i;

	for (i = 0; i < leaf_tag_slots_in_use() && refused; i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];

		SpinLockAcquire(&slot->mutex);
		if (slot->generation != 0 && slot->dboid == dboid)
		{
			any = true;
			refused = leaf_slot_refused(slot);
		}
		SpinLockRelease(&slot->mutex);
	}
	return any && refused;
}

/*
 * Pick up, into jobs, up to maxjobs of the loads that the callers of
 * database dboid asked for and that are due at now; returns how many.  A
 * load that waits for its retry shortens *next_retry (-1: none) to the
 * time in ms until it is due.
 */
int
leaf_collect_loads(Oid dboid, TimestampTz now, LeafLoadJob *jobs,
				   int maxjobs, long *next_retry)
{
	int			njobs = 0;
	int			i;

	for (i = 0; i < leaf_tag_slots_in_use() && njobs < maxjobs; i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];
		LeafLoadJob *job = &jobs[njobs];

		SpinLockAcquire(&slot->mutex);
		if (leaf_slot_wants_load(slot, dboid))
		{
			if (slot->retry_at > now)
			{
				long		ms = TimestampDifferenceMilliseconds(now, slot->retry_at) + 1;

				if (*next_retry < 0 || ms < *next_retry)
					*next_retry = ms;
			}
			else
			{
				job->slotno = i;
				job->generation = slot->generation;
				job->extoid = slot->extoid;
				memcpy(job->tag, slot->tag, sizeof(job->tag));
				job->want = slot->want;
				job->step = slot->step;
				job->min_step = slot->min_step;
				job->db_max_id = slot->db_max_id;
				job->last_load = slot->last_load;
				job->nloads = slot->nloads;
				job->asked = slot->refill.asked_at;
				job->collected = now;
				job->collected_no = ++slot->loads_collected;
				/* the segment that may still be served after this load */
				job->serving = slot->seg[slot->cur].next < slot->seg[slot->cur].max;
				job->serving_first = slot->seg[slot->cur].start;
				njobs++;
			}
		}
		SpinLockRelease(&slot->mutex);
	}
	return njobs;
}

/*
 * From which ID of the segment just loaded (res) its callers ask for the
 * next one.  Once preload_percent of it is used, as configured; earlier
 * if the rest would not last the lead at the rate the tag's IDs went
 * since its last load: twice the tail of its refill times (the longest
 * refill, from a caller's ask to its segment, halving every minute), and
 * never less than preload_floor_ms (leaf_refill_lead); at the latest
 * when the segment comes into use: a refill longer than a whole segment
 * lasts still makes callers wait, and only a bigger step helps it.  A
 * preload_percent of 100 keeps the load for when the segment is used up:
 * the double buffer off, as configured.  Called holding the slot's
 * mutex, after the refill's time was recorded.
 */
static int64
leaf_preload_at(LeafTagSlot *slot, const LeafLoadResult *res,
				TimestampTz now, int preload_percent, int preload_floor_ms)
{
	int64		at = res->start +
		(int64) ((double) res->size * preload_percent / 100.0);
	double		rate;
	int64		lead;

	if (preload_percent >= 100 || slot->last_load == 0 ||
		now <= slot->last_load)
		return at;
	rate = (double) (slot->ids_issued - slot->ids_at_load) /
		((double) (now - slot->last_load) / 1000.0);
	lead = leaf_refill_lead(&slot->refill, now, rate, preload_floor_ms);
	if (lead >= res->size)
		at = res->start;
	else if (lead > res->start + res->size - at)
		at = res->start + res->size - lead;
	return at;
}

/*
 * Record the outcome of a load of database dboid in leaf_seg->refused:
 * a refusal of the database as a whole enters it (in a free entry, or the
 * oldest), a load that worked takes it out.
 */
static void
leaf_note_refused_database(Oid dboid, bool refused, TimestampTz now)
{
	LeafRefusedDb *e = NULL;
	int			i;

	SpinLockAcquire(&leaf_seg->mutex);
	for (i = 0; i < LEAF_REFUSED_DBS; i++)
	{
		LeafRefusedDb *r = &leaf_seg->refused[i];

		if (r->dboid == dboid)
		{
			e = r;
			break;
		}
		if (e == NULL || (OidIsValid(e->dboid) &&
						  (!OidIsValid(r->dboid) || r->refused_at < e->refused_at)))
			e = r;
	}
	if (refused)
	{
		e->dboid = dboid;
		e->refused_at = now;
	}
	else if (e->dboid == dboid)
		e->dboid = InvalidOid;
	SpinLockRelease(&leaf_seg->mutex);
}

/*
 * Was a load of database dboid refused, for the database as a whole, in
 * the last LEAF_REFUSED_DB_MS, and none worked since?
 */
bool
leaf_database_refused(Oid dboid)
{
	TimestampTz since = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													-LEAF_REFUSED_DB_MS);
	bool		refused = false;
	int			i;

	SpinLockAcquire(&leaf_seg->mutex);
	for (i = 0; i < LEAF_REFUSED_DBS && !refused; i++)
		refused = leaf_seg->refused[i].dboid == dboid &&
			leaf_seg->refused[i].refused_at > since;
	SpinLockRelease(&leaf_seg->mutex);
	return refused;
}

/*
 * Publish the outcome of the load of job in its slot, unless the slot was
 * freed meanwhile: a segment goes into the buffer not in use, the callers
 * asking for a load once preload_percent of it is used, or earlier
 * (leaf_preload_at); a failure that retrying may mend is retried after
 * retry_ms.  Then wake the callers waiting for a load of the slot.
 */
void
leaf_publish_load(const LeafLoadJob *job, const LeafLoadResult *res,
				  const char *source, int preload_percent,
				  int preload_floor_ms, int retry_ms)
{
	LeafTagSlot *slot = &leaf_seg->slots[job->slotno];
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&slot->mutex);
	if (slot->generation == job->generation)
	{
		strlcpy(slot->source, source, sizeof(slot->source));
		if (res->status == LEAF_LOAD_OK)
		{
			LeafSegment *seg = &slot->seg[1 - slot->cur];

			seg->start = res->start;
			seg->next = res->start;
			seg->max = res->start + res->size;
			leaf_refill_record(&slot->refill, job, res, now);
			seg->preload_at = leaf_preload_at(slot, res, now, preload_percent,
											  preload_floor_ms);
			slot->ids_at_load = slot->ids_issued;
			slot->next_ready = true;
			slot->loading = false;
			slot->want = 0;
			slot->retry_at = 0;
			slot->step = res->step;
			slot->min_step = res->min_step;
			slot->db_max_id = res->db_max_id;
			slot->last_load = now;
			slot->nloads++;
			slot->refills++;
			slot->last_success = now;
			slot->fail_current = false;
			slot->refill_timeline = res->timeline;
			strlcpy(slot->refill_server, res->server, sizeof(slot->refill_server));
		}
		else
		{
			slot->fail_count++;
			slot->fail_load = job->collected_no;
			slot->fail_current = true;
			slot->fail_final = (res->status == LEAF_LOAD_FINAL);
			slot->hold_until = TimestampTzPlusMilliseconds(now,
														   LEAF_REFUSAL_HOLD_MS);
			slot->fail_sqlstate = res->sqlstate;
			strlcpy(slot->fail_msg, res->msg, sizeof(slot->fail_msg));
			if (slot->fail_final)
				slot->fail_refusal = res->refusal;
			else
				slot->fail_refusal.message[0] = '\0';
			slot->last_failure = now;
			if (slot->fail_final)
			{
				slot->loading = false;
				slot->refill.asked_at = 0;
			}
			else
				slot->retry_at = TimestampTzPlusMilliseconds(now, retry_ms);
		}
	}
	SpinLockRelease(&slot->mutex);
	if (res->status == LEAF_LOAD_OK)
		leaf_note_refused_database(MyDatabaseId, false, now);
	else if (res->status == LEAF_LOAD_FINAL && res->refusal.message[0] != '\0')
		leaf_note_refused_database(MyDatabaseId, true, now);
	/* a slot freed meanwhile has woken its callers already: harmless */
	ConditionVariableBroadcast(&slot->cv);
}

/*
 * Free the slots that no longer stand for a tag: those of database dboid
 * whose tag is not in tags (keys of LEAF_TAG_MAXLEN + 1 bytes; NULL when
 * the list could not be read, and every slot is kept), and those of
 * databases that were dropped.  In a transaction, to read pg_database.
 */
void
leaf_free_stale_slots(Oid dboid, HTAB *tags)
{
	int			i;

	for (i = 0; i < leaf_tag_slots_in_use(); i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];
		char		tag[LEAF_TAG_MAXLEN + 1];
		uint64		gen = 0;
		Oid			slot_dboid = InvalidOid;

		SpinLockAcquire(&slot->mutex);
		if (slot->generation != 0)
		{
			gen = slot->generation;
			slot_dboid = slot->dboid;
			memcpy(tag, slot->tag, sizeof(tag));
		}
		SpinLockRelease(&slot->mutex);
		if (gen == 0)
			continue;
		if (slot_dboid != dboid)
		{
			/* any worker frees the slots of dropped databases */
			if (!SearchSysCacheExists1(DATABASEOID,
									   ObjectIdGetDatum(slot_dboid)))
				leaf_free_slot(i, gen);
			continue;
		}
		if (tags != NULL && hash_search(tags, tag, HASH_FIND, NULL) == NULL)
		{
			leaf_free_slot(i, gen);
			ereport(DEBUG1,
					(errmsg("leaf allocator dropped biz_tag \"%s\", deleted from leaf_alloc",
							tag)));
		}
	}
}

/*
 * Validate a tag given as text and copy it, NUL-terminated, into buf.
 */
static int
leaf_tag_from_text(text *t, char *buf)
{
	int			len = VARSIZE_ANY_EXHDR(t);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_INVALID_TAG),
				 errmsg("biz_tag must not be empty")));
	if (len > LEAF_TAG_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_INVALID_TAG),
				 errmsg("biz_tag \"%.*s...\" is too long",
						pg_mbcliplen(VARDATA_ANY(t), len, 32), VARDATA_ANY(t)),
				 errdetail("A biz_tag is at most %d bytes; this one has %d.",
						   LEAF_TAG_MAXLEN, len)));
	memcpy(buf, VARDATA_ANY(t), len);
	buf[len] = '\0';
	return len;
}

/*
 * Does the tag exist in this database's leaf_alloc?  Asked as the
 * bootstrap superuser, so callers need no privilege on leaf_alloc, with
 * the tag as a parameter and every name qualified.
 */
static bool
leaf_tag_exists(Oid nsp, const char *tag)
{
	Oid			save_userid;
	int			save_sec_context;
	int			guc_nestlevel;
	bool		exists = false;
	char	   *sql;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];

	sql = psprintf("SELECT 1 FROM %s.leaf_alloc "
				   "WHERE biz_tag OPERATOR(pg_catalog.=) $1::pg_catalog.varchar",
				   quote_identifier(get_namespace_name(nsp)));
	args[0] = CStringGetTextDatum(tag);

	/*
	 * A caller waits for a tag no longer than leaf.wait_timeout, even on
	 * a lock on leaf_alloc (ALTER TABLE, LOCK TABLE): for this query,
	 * lock_timeout is at most that.  The setting goes back when the query
	 * is done, or with the (sub)transaction on an error.
	 */
	guc_nestlevel = NewGUCNestLevel();
	if (LockTimeout == 0 || LockTimeout > leaf_wait_timeout_ms)
	{
		char		timeout[32];

		snprintf(timeout, sizeof(timeout), "%d", leaf_wait_timeout_ms);
		(void) set_config_option("lock_timeout", timeout, PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
								 false);
	}

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		if (SPI_execute_with_args(sql, 1, argtypes, args, NULL,
								  true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up biz_tag");
		exists = (SPI_processed > 0);
		SPI_finish();
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, guc_nestlevel);

	return exists;
}

/*
 * The hint of an unknown tag: how to add it.  Where a column of a table
 * takes its default from the tag, it may hold IDs already (a restored or
 * replicated table, a tag deleted and its mark lost): the tag must start
 * above them, and the hint's statement does that.  The columns are found
 * by their defaults, as pg_get_expr() prints them.
 */
static char *
leaf_unknown_tag_hint(const char *tag, bool committed)
{
	char	   *call = psprintf("leaf_segment_nextval(%s::text)", quote_literal_cstr(tag));
	char	   *hint = NULL;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];

	args[0] = CStringGetTextDatum(call);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' "
							  "OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname), "
							  "pg_catalog.quote_ident(a.attname) "
							  "FROM pg_catalog.pg_attrdef d "
							  "JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.adrelid "
							  "AND a.attnum OPERATOR(pg_catalog.=) d.adnum "
							  "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.adrelid "
							  "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
							  "WHERE pg_catalog.strpos(pg_catalog.pg_get_expr(d.adbin, d.adrelid), $1) "
							  "OPERATOR(pg_catalog.>) 0 AND c.relkind OPERATOR(pg_catalog.<>) 'p' "
							  "ORDER BY 1, 2 LIMIT 1",
							  1, argtypes, args, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed > 0)
	{
		char	   *rel = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		char	   *col = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);

		hint = psprintf("Column %s.%s takes its IDs from it: add it above them with SELECT leaf_segment_create(%s, start => (SELECT COALESCE(max(%s), 0) + 1 FROM %s))%s. A database that took over from another (a restore, a logical replica) takes that one's counters with leaf_alloc_cutover() instead.",
						rel, col, quote_literal_cstr(tag), col, rel,
						committed ? "" : ", and commit before taking IDs");
	}
	SPI_finish();
	if (hint == NULL)
		hint = psprintf("Add it with SELECT leaf_segment_create(%s), or INSERT a row into leaf_alloc%s.",
						quote_literal_cstr(tag),
						committed ? "" : ", and commit before taking IDs");
	return hint;
}

static void
leaf_report_unknown_tag(const char *tag)
{
	char	   *hint = leaf_unknown_tag_hint(tag, true);

	ereport(ERROR,
			(errcode(ERRCODE_LEAF_UNKNOWN_TAG),
			 errmsg("biz_tag \"%s\" does not exist", tag),
			 errhint("%s", hint)));
}

/* The allocator did not find the tag, although the caller may see it. */
static void
leaf_report_tag_not_visible(const char *tag)
{
	char	   *hint = leaf_unknown_tag_hint(tag, false);

	ereport(ERROR,
			(errcode(ERRCODE_LEAF_UNKNOWN_TAG),
			 errmsg("biz_tag \"%s\" does not exist", tag),
			 errdetail("The allocator found no committed row for it in leaf_alloc."),
			 errhint("%s", hint)));
}

/*
 * In fleet mode a tag takes a slot before anyone knows whether the
 * allocation database has it, so unknown tags could fill leaf.max_tags
 * for every database.  Slots whose tag has never been loaded are
 * therefore limited per database; a tag that loads once no longer counts,
 * and the slots of unknown tags are freed at the next refresh of the tag
 * list.  Caller holds the exclusive leaf_seg->lock (and releases it if we
 * throw: LWLocks are released at error exit).
 */
static void
leaf_check_unverified(const LeafTagKey *key)
{
	int			limit = Max(4, leaf_max_tags / 8);	/* per database */
	int			n = 0;
	int			i;

	Assert(LWLockHeldByMeInMode(leaf_seg->lock, LW_EXCLUSIVE));
	for (i = 0; i < leaf_tag_slots_in_use(); i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];

		SpinLockAcquire(&slot->mutex);
		if (slot->generation != 0 && slot->dboid == key->dboid &&
			slot->nloads == 0)
			n++;
		SpinLockRelease(&slot->mutex);
	}
	if (n >= limit)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("too many new biz_tags in this database wait for their first segment"),
				 errdetail("A database may hold %d biz_tags that the allocation database has not served yet.",
						   limit),
				 errhint("Check the names of the biz_tags in use; slots of unknown biz_tags are freed within \"leaf.tag_refresh_interval\".")));
}

/*
 * The hash key of a tag in this database, for the extension as installed
 * now; returns the extension's schema.  Errors if leaf is not installed.
 */
static Oid
leaf_tag_key(LeafTagKey *key, const char *tag)
{
	Oid			nsp;

	memset(key, 0, sizeof(*key));
	key->dboid = MyDatabaseId;
	nsp = leaf_extension_namespace(&key->extoid);
	if (!OidIsValid(key->extoid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"leaf\" is not installed in this database")));
	strlcpy(key->tag, tag, sizeof(key->tag));
	return nsp;
}

/*
 * The slot of a tag that has one, and its generation; NULL if it has
 * none.  Takes leaf_seg->lock in shared mode.
 */
static LeafTagSlot *
leaf_find_slot(const LeafTagKey *key, uint64 *generation)
{
	LeafTagEntry *entry;
	LeafTagSlot *slot = NULL;

	LWLockAcquire(leaf_seg->lock, LW_SHARED);
	entry = hash_search(leaf_tag_hash, key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		slot = &leaf_seg->slots[entry->slotno];
		/* generation cannot change while we hold the lock */
		*generation = slot->generation;
	}
	LWLockRelease(leaf_seg->lock);
	return slot;
}

/*
 * Make a free slot the slot of the tag of key, with a new generation:
 * empty, its first load wanted at once.  Caller holds the exclusive
 * leaf_seg->lock.
 */
static void
leaf_init_slot(LeafTagSlot *slot, const LeafTagKey *key, Oid owner,
			   uint64 generation)
{
	Assert(LWLockHeldByMeInMode(leaf_seg->lock, LW_EXCLUSIVE));

	SpinLockAcquire(&slot->mutex);
	slot->dboid = key->dboid;
	slot->extoid = key->extoid;
	memcpy(slot->tag, key->tag, sizeof(slot->tag));
	slot->owner = owner;
	memset(slot->seg, 0, sizeof(slot->seg));
	slot->cur = 0;
	slot->next_ready = false;
	slot->loading = true;		/* the first load is wanted at once */
	slot->want = 0;
	slot->step = 0;
	slot->min_step = 0;
	slot->db_max_id = PG_INT64_MIN;
	slot->last_load = 0;
	slot->nloads = 0;
	slot->ids_at_load = 0;
	memset(&slot->refill, 0, sizeof(slot->refill));
	slot->refill.asked_at = GetCurrentTimestamp();
	slot->retry_at = 0;
	slot->ids_issued = 0;
	slot->refills = 0;
	slot->waits = 0;
	slot->max_wait_us = 0;
	slot->last_success = 0;
	slot->last_failure = 0;
	slot->refill_timeline = 0;
	slot->refill_server[0] = '\0';
	slot->source[0] = '\0';
	slot->hold_until = 0;
	slot->loads_collected = 0;
	slot->fail_load = 0;
	slot->fail_count = 0;
	slot->fail_current = false;
	slot->fail_final = false;
	slot->fail_sqlstate = 0;
	slot->fail_msg[0] = '\0';
	memset(&slot->fail_refusal, 0, sizeof(slot->fail_refusal));
	slot->generation = generation;
	SpinLockRelease(&slot->mutex);
}

/*
 * Take a slot for the tag of key, which has none, in the database of
 * owner (leaf_alloc_share_owner), and enter it in the tag hash; returns
 * the slot, its new generation in *generation.  The slot is a free one,
 * or one taken over as the shares allow (leaf_tag_share.c), whose callers
 * are woken to look their tag up again.  Caller holds the exclusive
 * leaf_seg->lock, which is released before the error if there is no
 * room.
 */
static LeafTagSlot *
leaf_new_slot(const LeafTagKey *key, Oid owner, uint64 *generation)
{
	LeafTagEntry *entry;
	LeafTagSlot *slot;
	uint64		evict;
	bool		found;
	int			slotno;

	Assert(LWLockHeldByMeInMode(leaf_seg->lock, LW_EXCLUSIVE));

	slotno = leaf_tag_share_pick(key->dboid, owner, &evict);
	slot = &leaf_seg->slots[slotno];
	if (evict != 0 && leaf_free_slot_locked(slotno, evict))
		ConditionVariableBroadcast(&slot->cv);
	/* the hash is sized for every slot: an entry for a free one fits */
	entry = hash_search(leaf_tag_hash, key, HASH_ENTER, &found);
	Assert(!found);
	entry->slotno = slotno;
	if (slotno >= (int) pg_atomic_read_u32(&leaf_seg->nslots_used))
		pg_atomic_write_u32(&leaf_seg->nslots_used, slotno + 1);

	SpinLockAcquire(&leaf_seg->mutex);
	*generation = leaf_seg->next_generation++;
	SpinLockRelease(&leaf_seg->mutex);

	leaf_init_slot(slot, key, owner, *generation);
	return slot;
}

/*
 * Find or create the slot of a tag in the current database.  Returns the
 * slot and its generation.  Unknown tags never take a slot.
 */
static LeafTagSlot *
leaf_lookup_slot(const char *tag, uint64 *generation)
{
	LeafTagKey	key;
	LeafTagEntry *entry;
	LeafTagSlot *slot;
	Oid			nsp;
	Oid			owner;

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot allocate IDs of biz_tag \"%s\" during recovery", tag),
				 errdetail("Segment allocation needs a primary server."),
				 errhint("Call leaf_segment_nextval on the primary.")));

	nsp = leaf_tag_key(&key, tag);

	slot = leaf_find_slot(&key, generation);
	if (slot != NULL)
		return slot;

	/*
	 * With a local leaf_alloc, unknown tags never take a slot.  With a
	 * remote one, the worker finds out, and the slot is freed at the next
	 * refresh of the tag list.
	 */
	if (!leaf_remote_enabled() && !leaf_tag_exists(nsp, tag))
		leaf_report_unknown_tag(tag);
	owner = leaf_alloc_share_owner(MyDatabaseId);

	LWLockAcquire(leaf_seg->lock, LW_EXCLUSIVE);
	entry = hash_search(leaf_tag_hash, &key, HASH_FIND, NULL);
	if (entry == NULL && leaf_remote_enabled())
		leaf_check_unverified(&key);
	if (entry == NULL)
		slot = leaf_new_slot(&key, owner, generation);
	else
	{
		slot = &leaf_seg->slots[entry->slotno];
		*generation = slot->generation;
	}
	LWLockRelease(leaf_seg->lock);

	leaf_wake_worker(MyDatabaseId);
	return slot;
}

/*
 * The warm start (leaf_warm_start.c): ask for the first segment of a tag
 * of the current database as its first caller would, so that every check
 * of that path and of the load applies.  Returns false, doing nothing, if
 * the tag has a slot already; errors as a first call would (an unknown
 * tag, no room).
 */
bool
leaf_segment_warm(const char *tag)
{
	LeafTagKey	key;
	uint64		generation;

	leaf_segment_check_ready();
	(void) leaf_tag_key(&key, tag);
	if (leaf_find_slot(&key, &generation) != NULL)
		return false;
	(void) leaf_lookup_slot(tag, &generation);
	return true;
}

/*
 * The tags that have a slot, over all databases, into a new array (in the
 * current memory context) of *ntags entries.
 */
LeafTagInUse *
leaf_segment_tags_in_use(int *ntags)
{
	int			nslots = leaf_tag_slots_in_use();
	LeafTagInUse *tags = palloc(sizeof(LeafTagInUse) * Max(nslots, 1));
	int			n = 0;
	int			i;

	for (i = 0; i < nslots; i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];

		SpinLockAcquire(&slot->mutex);
		if (slot->generation != 0)
		{
			tags[n].dboid = slot->dboid;
			memcpy(tags[n].tag, slot->tag, sizeof(tags[n].tag));
			tags[n].generation = slot->generation;
			tags[n].ids_issued = slot->ids_issued;
			n++;
		}
		SpinLockRelease(&slot->mutex);
	}
	*ntags = n;
	return tags;
}

/*
 * Take up to n consecutive IDs from a slot, switching buffers when the
 * current one is used up and the other is ready.  Returns how many were
 * taken (the first in *first), 0 when both buffers are empty, or -1 when
 * the slot no longer holds this generation.  Sets *wake when the worker
 * must be told to load the other buffer; "want" asks for a segment of at
 * least that many IDs.
 */
static inline int64
leaf_take(LeafTagSlot *slot, uint64 generation, int64 n, int64 want,
		  int64 *first, bool *wake, uint64 *collected)
{
	LeafSegment *seg;
	int64		take;

	SpinLockAcquire(&slot->mutex);
	if (unlikely(slot->generation != generation))
	{
		SpinLockRelease(&slot->mutex);
		return -1;
	}
	seg = &slot->seg[slot->cur];
	if (seg->next >= seg->max && slot->next_ready)
	{
		slot->cur = 1 - slot->cur;
		slot->next_ready = false;
		seg = &slot->seg[slot->cur];
	}
	take = Min(n, seg->max - seg->next);
	if (take > 0)
	{
		*first = seg->next;
		seg->next += take;
		slot->ids_issued += take;
	}
	else
		take = 0;

	if (unlikely(seg->next >= seg->preload_at || take < n) &&
		!slot->next_ready && !slot->loading)
	{
		/* a refused tag's load is asked for by leaf_wake_for, if at all */
		if (!leaf_slot_refusal_current(slot))
		{
			slot->loading = true;
			slot->want = Max(want - take, 0);
			leaf_refill_asked(&slot->refill, GetCurrentTimestamp());
		}
		*wake = true;
	}
	if (collected)
		*collected = slot->loads_collected;
	SpinLockRelease(&slot->mutex);

	return take;
}

/*
 * The refusals this backend told its callers lately, by slot, generation
 * and failure: within LEAF_REFUSAL_HOLD_MS of one, the next call of that
 * tag here is told it again at once, and starts no allocator.  A backend
 * that was not told it yet asks for a load, and so sees a refusal lifted
 * since (a confirmation); so does one that committed a write since it
 * was told, or is in a transaction that writes (it may have lifted the
 * refusal itself: leaf_alloc_source_confirm(), ALTER TABLE leaf_alloc).
 */
#define LEAF_SEEN_REFUSALS		32

typedef struct LeafSeenRefusal
{
	const LeafTagSlot *slot;
	uint64		generation;
	uint64		fail_count;
	XLogRecPtr	commit_end;		/* XactLastCommitEnd when told */
} LeafSeenRefusal;

static LeafSeenRefusal leaf_seen_refusals[LEAF_SEEN_REFUSALS];
static int	leaf_seen_next = 0;

static bool
leaf_refusal_seen(const LeafTagSlot *slot, uint64 generation, uint64 fail_count)
{
	int			i;

	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return false;
	for (i = 0; i < LEAF_SEEN_REFUSALS; i++)
		if (leaf_seen_refusals[i].slot == slot &&
			leaf_seen_refusals[i].generation == generation &&
			leaf_seen_refusals[i].fail_count == fail_count &&
			leaf_seen_refusals[i].commit_end == XactLastCommitEnd)
			return true;
	return false;
}

static void
leaf_refusal_note(const LeafTagSlot *slot, uint64 generation, uint64 fail_count)
{
	LeafSeenRefusal *e;

	if (leaf_refusal_seen(slot, generation, fail_count))
		return;
	e = &leaf_seen_refusals[leaf_seen_next];
	leaf_seen_next = (leaf_seen_next + 1) % LEAF_SEEN_REFUSALS;
	e->slot = slot;
	e->generation = generation;
	e->fail_count = fail_count;
	e->commit_end = XactLastCommitEnd;
}

/*
 * Is the last load of a slot a refusal of the database as a whole that
 * this backend was told less than LEAF_REFUSAL_HOLD_MS ago, with no load
 * asked for since?  Caller holds the slot's mutex.
 */
static bool
leaf_refusal_held(const LeafTagSlot *slot, uint64 generation, TimestampTz now)
{
	return slot->generation == generation &&
		leaf_slot_refusal_current(slot) && !slot->loading &&
		now < slot->hold_until &&
		leaf_refusal_seen(slot, generation, slot->fail_count);
}

/*
 * Wake the allocator of the current database for a load of a slot, or
 * start one.  The load of a tag refused for its database (a copy, a
 * replica: leaf_take asks for none) is asked for here, unless this
 * backend was told that refusal less than LEAF_REFUSAL_HOLD_MS ago: then
 * the caller is told it again (leaf_wait_for_load).  Within that time no
 * allocator is started for the tag, only one that runs is woken: a caller
 * that asked for a load waits for the time to pass (its wait calls this
 * again).  So calls to a refused database do not keep an allocator alive,
 * while a refusal lifted meanwhile (a confirmation) is seen by the next
 * load.  want is the size a bulk caller asks for, or 0.
 *
 * A caller waiting for a load passes the loads picked up before its wait
 * (collected_before): a refusal of one picked up since is what it is
 * about to be told, and asks for no load again.  Asking then would leave
 * the slot waiting for a load no allocator may come for, counted in its
 * database's share.  Callers not waiting pass LEAF_NOT_WAITING.
 */
#define LEAF_NOT_WAITING	PG_UINT64_MAX

static void
leaf_wake_for(LeafTagSlot *slot, uint64 generation, int64 want,
			  uint64 collected_before)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		held;
	bool		fresh = false;

	SpinLockAcquire(&slot->mutex);
	held = leaf_refusal_held(slot, generation, now);
	if (!held && slot->generation == generation &&
		leaf_slot_refusal_current(slot) &&
		slot->fail_load <= collected_before)
	{
		fresh = now < slot->hold_until;
		if (!slot->loading && !slot->next_ready)
		{
			slot->loading = true;
			slot->want = Max(want, 0);
			leaf_refill_asked(&slot->refill, now);
		}
	}
	SpinLockRelease(&slot->mutex);
	if (held || fresh)
		leaf_wake_running_worker(MyDatabaseId);
	else
		leaf_wake_worker(MyDatabaseId);
}

/*
 * Count a caller's wait for a segment, however it ended, in leaf_segments.
 */
static void
leaf_count_wait(LeafTagSlot *slot, uint64 generation, TimestampTz wait_start)
{
	long		secs;
	int			usecs;
	int64		us;

	TimestampDifference(wait_start, GetCurrentTimestamp(), &secs, &usecs);
	us = (int64) secs * 1000000 + usecs;
	SpinLockAcquire(&slot->mutex);
	if (slot->generation == generation)
	{
		slot->waits++;
		if (us > slot->max_wait_us)
			slot->max_wait_us = us;
	}
	SpinLockRelease(&slot->mutex);
}

/* the wait event of a caller waiting for a segment, once named */
static uint32 leaf_segment_wait_event = 0;

/*
 * Wait, after finding both buffers of a slot empty, until something
 * changes: a load ends, the worker reports a failure that callers should
 * see, or the timeout passes.
 */
static void
leaf_wait_for_load(LeafTagSlot *slot, uint64 generation, const char *tag,
				   TimestampTz wait_start, TimestampTz deadline,
				   uint64 collected_before)
{
	int			sqlstate = 0;
	char		msg[LEAF_ERRMSG_LEN];
	LeafRefusal refusal;
	bool		failed = false;
	long		remaining;

	TimestampTz now = GetCurrentTimestamp();
	uint64		fail_count = 0;

	SpinLockAcquire(&slot->mutex);
	if (slot->generation == generation && slot->fail_final &&
		(slot->fail_load > collected_before ||
		 leaf_refusal_held(slot, generation, now)))
	{
		/*
		 * Only failures that retrying cannot mend end the wait early, and
		 * a refusal this backend was just told, which it is told again.
		 */
		failed = true;
		sqlstate = slot->fail_sqlstate;
		strlcpy(msg, slot->fail_msg, sizeof(msg));
		refusal = slot->fail_refusal;
		fail_count = slot->fail_count;
	}
	SpinLockRelease(&slot->mutex);

	if (failed)
	{
		ConditionVariableCancelSleep();
		if (refusal.message[0] != '\0')
			leaf_refusal_note(slot, generation, fail_count);
		leaf_count_wait(slot, generation, wait_start);
		if (sqlstate == ERRCODE_LEAF_UNKNOWN_TAG)
			leaf_report_tag_not_visible(tag);
		/* a refusal says itself what callers are told */
		if (refusal.message[0] != '\0')
			leaf_report_refusal(sqlstate, &refusal);
		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("could not allocate a segment for biz_tag \"%s\"", tag),
				 errdetail_internal("%s", msg)));
	}

	remaining = TimestampDifferenceMilliseconds(now, deadline);
	if (remaining <= 0)
	{
		ConditionVariableCancelSleep();
		leaf_count_wait(slot, generation, wait_start);
		SpinLockAcquire(&slot->mutex);
		msg[0] = '\0';
		if (slot->generation == generation && slot->fail_count != 0)
			strlcpy(msg, slot->fail_msg, sizeof(msg));
		SpinLockRelease(&slot->mutex);
		/*
		 * The reason may name the allocation server and its user (fleet
		 * mode), which only superusers may see; others get it in the
		 * server log only, as leaf_segments shows it to privileged roles.
		 */
		if (msg[0] != '\0' && superuser())
			ereport(ERROR,
					(errcode(ERRCODE_LEAF_ALLOC_TIMEOUT),
					 errmsg("timed out waiting for a segment of biz_tag \"%s\"", tag),
					 errdetail_internal("The last allocation failed: %s", msg),
					 errhint("Check the server log; \"leaf.wait_timeout\" sets how long callers wait.")));
		if (msg[0] != '\0')
			ereport(ERROR,
					(errcode(ERRCODE_LEAF_ALLOC_TIMEOUT),
					 errmsg("timed out waiting for a segment of biz_tag \"%s\"", tag),
					 errdetail("The last allocation failed; the server log and the view leaf_segments give the reason."),
					 errdetail_log("The last allocation failed: %s", msg),
					 errhint("Ask an administrator to check the server log; \"leaf.wait_timeout\" sets how long callers wait.")));
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_ALLOC_TIMEOUT),
				 errmsg("timed out waiting for a segment of biz_tag \"%s\"", tag),
				 errhint("Check that the leaf allocator is running; \"leaf.wait_timeout\" sets how long callers wait.")));
	}

	/* start a worker if there is none (it may have exited or been killed) */
	leaf_wake_for(slot, generation, 0, collected_before);
	/* named once per process: the name is looked up under a lock */
	if (leaf_segment_wait_event == 0)
		leaf_segment_wait_event = WaitEventExtensionNew("LeafSegment");
	(void) ConditionVariableTimedSleep(&slot->cv, Min(remaining, 1000),
									   leaf_segment_wait_event);
}

/*
 * Look up (or create) the slot of the call site's tag, and remember it
 * for later statements of this backend.
 */
static void
leaf_cache_slot(LeafCallCache *cache)
{
	LeafBackendKey key;
	LeafBackendEntry *e;

	cache->slot = leaf_lookup_slot(cache->tag, &cache->generation);

	if (leaf_backend_tags == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(LeafBackendKey);
		ctl.entrysize = sizeof(LeafBackendEntry);
		ctl.hcxt = TopMemoryContext;
		leaf_backend_tags = hash_create("leaf backend tags", 64, &ctl,
										HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	/* a backend that used many tags starts over rather than grow */
	if (hash_get_num_entries(leaf_backend_tags) >= 1024)
	{
		hash_destroy(leaf_backend_tags);
		leaf_backend_tags = NULL;
		return;
	}
	memset(&key, 0, sizeof(key));
	key.fnoid = cache->fnoid;
	strlcpy(key.tag, cache->tag, sizeof(key.tag));
	e = hash_search(leaf_backend_tags, &key, HASH_ENTER, NULL);
	e->slot = cache->slot;
	e->generation = cache->generation;
}

/*
 * Take n IDs of a tag, in runs of consecutive IDs, calling emit for each
 * run.  The slot comes from (and goes back to) *cache.
 */
typedef void (*leaf_emit_fn) (int64 first, int64 count, void *arg);

static void
leaf_take_ids(LeafCallCache *cache, int64 n, leaf_emit_fn emit, void *arg)
{
	bool		waited = false;
	TimestampTz wait_start = 0;
	TimestampTz deadline = 0;
	uint64		collected_before = 0;	/* loads picked up before the wait */
	int64		want = n;

	while (n > 0)
	{
		int64		first = 0;
		int64		got;
		bool		wake = false;
		uint64		collected = 0;

		if (cache->slot == NULL)
			leaf_cache_slot(cache);

		got = leaf_take(cache->slot, cache->generation, n, want,
						&first, &wake, &collected);
		if (wake)
			leaf_wake_for(cache->slot, cache->generation, want - Max(got, 0),
						  waited ? collected_before : LEAF_NOT_WAITING);
		if (got < 0)
		{
			/* the slot was freed (tag deleted): look it up again */
			if (waited)
				ConditionVariableCancelSleep();
			cache->slot = NULL;
			waited = false;
			continue;
		}
		if (got > 0)
		{
			emit(first, got, arg);
			n -= got;
			want -= got;
			continue;
		}

		/* both buffers are empty */
		if (!waited)
		{
			/*
			 * Only the failure of a load picked up after this point ends
			 * the wait early: one picked up before may have read what a
			 * statement of this session changed since (a confirmation
			 * of leaf_alloc_source).  Its failure frees the slot for a
			 * new load, which the next leaf_take() asks for.
			 */
			waited = true;
			collected_before = collected;
			wait_start = GetCurrentTimestamp();
			deadline = TimestampTzPlusMilliseconds(wait_start,
												   leaf_wait_timeout_ms);
			ConditionVariablePrepareToSleep(&cache->slot->cv);
			continue;			/* check once more before sleeping */
		}
		leaf_wait_for_load(cache->slot, cache->generation, cache->tag,
						   wait_start, deadline, collected_before);
		CHECK_FOR_INTERRUPTS();
	}

	if (waited)
	{
		ConditionVariableCancelSleep();
		leaf_count_wait(cache->slot, cache->generation, wait_start);
	}
}

static LeafCallCache *
leaf_call_cache(FunctionCallInfo fcinfo, text *tagtext)
{
	LeafCallCache *cache = (LeafCallCache *) fcinfo->flinfo->fn_extra;
	int			len = VARSIZE_ANY_EXHDR(tagtext);

	if (likely(cache != NULL) && cache->len == len &&
		memcmp(cache->tag, VARDATA_ANY(tagtext), len) == 0)
		return cache;

	leaf_segment_check_ready();
	if (cache == NULL)
	{
		cache = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt,
									   sizeof(LeafCallCache));
		fcinfo->flinfo->fn_extra = cache;
	}
	cache->len = 0;
	cache->slot = NULL;
	(void) leaf_tag_from_text(tagtext, cache->tag);
	cache->len = len;
	cache->fnoid = fcinfo->flinfo->fn_oid;

	/* a slot this backend already found for the tag */
	if (leaf_backend_tags != NULL)
	{
		LeafBackendKey key;
		LeafBackendEntry *e;

		memset(&key, 0, sizeof(key));
		key.fnoid = cache->fnoid;
		memcpy(key.tag, cache->tag, len);
		e = hash_search(leaf_backend_tags, &key, HASH_FIND, NULL);
		if (e != NULL)
		{
			cache->slot = e->slot;
			cache->generation = e->generation;
		}
	}
	return cache;
}

static void
leaf_emit_one(int64 first, int64 count, void *arg)
{
	*(int64 *) arg = first;
}

Datum
leaf_segment_nextval(PG_FUNCTION_ARGS)
{
	text	   *tagtext = PG_GETARG_TEXT_PP(0);
	LeafCallCache *cache = leaf_call_cache(fcinfo, tagtext);
	int64		first;
	bool		wake = false;

	/* fast path: the cached slot has an ID ready */
	if (likely(cache->slot != NULL) &&
		leaf_take(cache->slot, cache->generation, 1, 1,
				  &first, &wake, NULL) == 1)
	{
		if (unlikely(wake))
			leaf_wake_for(cache->slot, cache->generation, 0, LEAF_NOT_WAITING);
		PG_RETURN_INT64(first);
	}
	if (wake)
		leaf_wake_for(cache->slot, cache->generation, 1, LEAF_NOT_WAITING);

	leaf_take_ids(cache, 1, leaf_emit_one, &first);
	PG_RETURN_INT64(first);
}

typedef struct LeafEmitState
{
	Tuplestorestate *store;
	TupleDesc	desc;
} LeafEmitState;

static void
leaf_emit_store(int64 first, int64 count, void *arg)
{
	LeafEmitState *st = (LeafEmitState *) arg;
	int64		i;
	bool		isnull = false;

	for (i = 0; i < count; i++)
	{
		Datum		value = Int64GetDatum(first + i);

		CHECK_FOR_INTERRUPTS();
		tuplestore_putvalues(st->store, st->desc, &value, &isnull);
	}
}

Datum
leaf_segment_nextvals(PG_FUNCTION_ARGS)
{
	text	   *tagtext = PG_GETARG_TEXT_PP(0);
	int32		n = PG_GETARG_INT32(1);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LeafCallCache *cache;
	LeafEmitState st;

	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("number of IDs must not be negative"),
				 errdetail("%d IDs were asked for.", n),
				 errhint("Ask for 0 to %d IDs in one call.", LEAF_MAX_NEXTVALS)));
	if (n > LEAF_MAX_NEXTVALS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot take more than %d IDs in one call", LEAF_MAX_NEXTVALS),
				 errdetail("%d IDs were asked for.", n),
				 errhint("Call leaf_segment_nextvals several times.")));

	cache = leaf_call_cache(fcinfo, tagtext);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	st.store = rsinfo->setResult;
	st.desc = rsinfo->setDesc;
	if (n > 0)
		leaf_take_ids(cache, n, leaf_emit_store, &st);

	return (Datum) 0;
}

/*
 * Where the segments of a slot's database come from, as its worker last
 * said, or, with no worker (an allocator whose every tag was refused
 * exits), as it said at the slot's last load; else the kind of source
 * and, from the slot's refusal, what is not confirmed.
 */
static const char *
leaf_source_of(const LeafTagSlot *slot)
{
	static char source[LEAF_SOURCE_LEN];
	const char *why = "";

	leaf_alloc_slot_source(slot->dboid, source, sizeof(source));
	if (source[0] == '\0')
		strlcpy(source, slot->source, sizeof(source));
	if (source[0] != '\0')
		return source;
	if (leaf_slot_refusal_current(slot) &&
		slot->fail_sqlstate == ERRCODE_LEAF_ALLOC_PROMOTED)
		why = " (new timeline not confirmed)";
	else if (leaf_slot_refusal_current(slot) &&
			 slot->fail_sqlstate == ERRCODE_LEAF_ALLOC_SOURCE_CHANGED)
		why = " (change not confirmed)";
	snprintf(source, sizeof(source), "%s%s",
			 leaf_remote_enabled() ? "remote" : "local", why);
	return source;
}

/*
 * What a call for the tag would do now, from a copy of its slot:
 *	ok		an ID is ready in one of the buffers;
 *	loading	both buffers are empty and a load is under way or due;
 *	failing	both are empty and the last load failed;
 *	refused	both are empty and the last load was refused (LF005, LF006,
 *			LF007), which only a person can mend.
 * A failure that a later load mended no longer counts: last_error keeps
 * its text, but the state is that of the segments.
 */
static const char *
leaf_slot_state(const LeafTagSlot *slot)
{
	const LeafSegment *cur = &slot->seg[slot->cur];

	if (cur->next < cur->max || slot->next_ready)
		return "ok";
	if (!slot->fail_current)
		return "loading";
	if (slot->fail_sqlstate == ERRCODE_LEAF_MAX_ID_BACKWARDS ||
		slot->fail_sqlstate == ERRCODE_LEAF_ALLOC_SOURCE_CHANGED ||
		slot->fail_sqlstate == ERRCODE_LEAF_ALLOC_PROMOTED ||
		leaf_slot_refused(slot))
		return "refused";
	return "failing";
}

/*
 * A slot in use as leaf_segments and leaf_segment_errors show it: a copy
 * of the slot, and its database's name, its tag and its last error as
 * text of this database (leaf_display_text).
 */
typedef struct LeafSlotView
{
	LeafTagSlot slot;
	NameData	dbname;
	char	   *tag;
	char	   *fail_msg;
} LeafSlotView;

/*
 * Fill values and nulls with the row of leaf_segments for view, a slot in
 * use; returns the number of columns filled.
 */
static int
leaf_segments_row(const LeafSlotView *view, Datum *values, bool *nulls)
{
	const LeafTagSlot *copy = &view->slot;
	const LeafSegment *cur = &copy->seg[copy->cur];
	const LeafSegment *nxt = &copy->seg[1 - copy->cur];
	int			j = 0;

	values[j++] = NameGetDatum(&view->dbname);
	values[j++] = CStringGetTextDatum(view->tag);
	if (cur->max > cur->start)
	{
		values[j++] = Int64GetDatum(cur->start);
		values[j++] = Int64GetDatum(cur->max - 1);
		values[j++] = Int64GetDatum(Min(cur->next, cur->max));
	}
	else
	{
		nulls[j++] = true;
		nulls[j++] = true;
		nulls[j++] = true;
	}
	values[j++] = BoolGetDatum(copy->next_ready);
	if (copy->next_ready)
	{
		values[j++] = Int64GetDatum(nxt->start);
		values[j++] = Int64GetDatum(nxt->max - 1);
	}
	else
	{
		nulls[j++] = true;
		nulls[j++] = true;
	}
	values[j++] = Int64GetDatum(copy->step);
	values[j++] = Int64GetDatum(copy->refills);
	values[j++] = Int64GetDatum(copy->waits);
	values[j++] = Float8GetDatum(copy->max_wait_us / 1000.0);
	values[j++] = CStringGetTextDatum(leaf_source_of(copy));
	if (copy->last_success)
		values[j++] = TimestampTzGetDatum(copy->last_success);
	else
		nulls[j++] = true;
	if (copy->last_failure)
		values[j++] = TimestampTzGetDatum(copy->last_failure);
	else
		nulls[j++] = true;
	if (view->fail_msg[0])
		values[j++] = CStringGetTextDatum(view->fail_msg);
	else
		nulls[j++] = true;
	/* 1.1 */
	values[j++] = CStringGetTextDatum(leaf_slot_state(copy));
	values[j++] = Int64GetDatum(copy->ids_issued);
	if (copy->refill_server[0])
		values[j++] = CStringGetTextDatum(copy->refill_server);
	else
		nulls[j++] = true;
	if (copy->refill_timeline != 0)
		values[j++] = Int64GetDatum((int64) copy->refill_timeline);
	else
		nulls[j++] = true;
	return j;
}

/*
 * Text that came from the database of a slot (its biz_tag, the message of
 * its last failed load, the database's name), which is in that database's
 * encoding, as text of this database.  It is kept as it is where the
 * encodings are the same, or where this database is SQL_ASCII, which
 * takes any bytes.  Otherwise each byte outside ASCII is written \xNN
 * and each backslash \\: a tag of a LATIN1 database, say, is then valid
 * text here as well, whose conversion to the client's encoding cannot
 * fail, and which a collector that needs UTF-8 takes (raw, it made the
 * whole view fail for a client of another encoding, and
 * prometheus-postgres-exporter stop); two tags of one database still
 * differ.
 */
static char *
leaf_display_text(const char *s, int src_encoding)
{
	int			cur_encoding = GetDatabaseEncoding();
	StringInfoData buf;
	const unsigned char *p;

	if (src_encoding == cur_encoding || cur_encoding == PG_SQL_ASCII)
		return pstrdup(s);
	initStringInfo(&buf);
	for (p = (const unsigned char *) s; *p != '\0'; p++)
	{
		if (*p == '\\')
			appendStringInfoString(&buf, "\\\\");
		else if (IS_HIGHBIT_SET(*p))
			appendStringInfo(&buf, "\\x%02x", (unsigned int) *p);
		else
			appendStringInfoChar(&buf, (char) *p);
	}
	return buf.data;
}

/*
 * A copy of slot i, taken under its mutex, with its database's name, tag
 * and last error as this database shows them: false if the slot is free
 * or its database was dropped (its slots wait for a worker to free them).
 * For leaf_segments, leaf_segment_errors and leaf_segment_refills.
 */
static bool
leaf_slot_snapshot(int i, LeafSlotView *view)
{
	LeafTagSlot *slot = &leaf_seg->slots[i];
	LeafTagSlot *copy = &view->slot;
	HeapTuple	tup;
	Form_pg_database db;
	char	   *name;

	SpinLockAcquire(&slot->mutex);
	if (slot->generation == 0)
	{
		SpinLockRelease(&slot->mutex);
		return false;
	}
	memcpy(copy, slot, sizeof(*copy));
	SpinLockRelease(&slot->mutex);
	/* in case a slot's text was torn: it is read as a C string below */
	copy->tag[sizeof(copy->tag) - 1] = '\0';
	copy->fail_msg[sizeof(copy->fail_msg) - 1] = '\0';

	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(copy->dboid));
	if (!HeapTupleIsValid(tup))
		return false;
	db = (Form_pg_database) GETSTRUCT(tup);
	name = leaf_display_text(NameStr(db->datname), db->encoding);
	view->tag = leaf_display_text(copy->tag, db->encoding);
	view->fail_msg = leaf_display_text(copy->fail_msg, db->encoding);
	ReleaseSysCache(tup);
	/* a name column is NAMEDATALEN bytes, whatever the name's length */
	namestrcpy(&view->dbname, name);
	pfree(name);
	return true;
}

/*
 * leaf_segments(): one row per tag slot in use.  The columns after
 * last_error came with release 1.1; under the SQL definition of 1.0 (a
 * new library before ALTER EXTENSION leaf UPDATE) only the first ones are
 * returned.
 */
Datum
leaf_segments(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	leaf_segment_check_ready();
	InitMaterializedSRF(fcinfo, 0);

	for (i = 0; i < leaf_tag_slots_in_use(); i++)
	{
		LeafSlotView view;
		Datum		values[20];
		bool		nulls[20];
		int			j;

		if (!leaf_slot_snapshot(i, &view))
			continue;
		memset(nulls, 0, sizeof(nulls));
		j = leaf_segments_row(&view, values, nulls);
		Assert(j <= lengthof(values));
		if (rsinfo->setDesc->natts > j)
			elog(ERROR, "leaf_segments() returns %d columns, but %d were expected",
				 j, rsinfo->setDesc->natts);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
							 values, nulls);
	}

	return (Datum) 0;
}

/*
 * leaf_segment_errors(): one row per tag slot in use, as leaf_segments,
 * with what leaf_segments does not show and leaf_tag_metrics needs:
 * failed_loads (loads that failed since the slot was taken),
 * last_error_code (SQLSTATE of the last failed load, NULL if none
 * failed), error_current (no load worked since it) and error_final
 * (retrying cannot mend it: waiting callers get it at once).  So a
 * refusal that only a person can mend (LF005, LF006, LF007, LF012) is
 * seen, and told from a failure the allocator retries, while the buffers
 * still serve.
 */
Datum
leaf_segment_errors(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	leaf_segment_check_ready();
	InitMaterializedSRF(fcinfo, 0);

	for (i = 0; i < leaf_tag_slots_in_use(); i++)
	{
		LeafSlotView view;
		const LeafTagSlot *copy = &view.slot;
		Datum		values[6];
		bool		nulls[6];
		bool		failed;

		if (!leaf_slot_snapshot(i, &view))
			continue;
		failed = copy->fail_count > 0;
		memset(nulls, 0, sizeof(nulls));
		values[0] = NameGetDatum(&view.dbname);
		values[1] = CStringGetTextDatum(view.tag);
		values[2] = Int64GetDatum((int64) copy->fail_count);
		if (failed && copy->fail_sqlstate != 0)
			values[3] = CStringGetTextDatum(unpack_sql_state(copy->fail_sqlstate));
		else
			nulls[3] = true;
		values[4] = BoolGetDatum(failed && copy->fail_current);
		values[5] = BoolGetDatum(failed && copy->fail_current && copy->fail_final);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
							 values, nulls);
	}

	return (Datum) 0;
}

/*
 * leaf_segment_refills(): one row per tag slot in use, as leaf_segments,
 * with how long its refills took, from the moment a caller asked for one
 * to the moment its segment was published (leaf_refill_time.c).
 */
Datum
leaf_segment_refills(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	leaf_segment_check_ready();
	InitMaterializedSRF(fcinfo, 0);

	for (i = 0; i < leaf_tag_slots_in_use(); i++)
	{
		LeafSlotView view;
		Datum		values[2 + LEAF_REFILL_COLUMNS];
		bool		nulls[2 + LEAF_REFILL_COLUMNS];

		if (!leaf_slot_snapshot(i, &view))
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = NameGetDatum(&view.dbname);
		values[1] = CStringGetTextDatum(view.tag);
		(void) leaf_refill_row(&view.slot.refill, now, values + 2, nulls + 2);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
							 values, nulls);
	}

	return (Datum) 0;
}

/*
 * leaf_segment_discard(biz_tag): drop the segments of a tag that this
 * database holds in shared memory, loaded or being loaded, by freeing its
 * slot; the next call takes a new slot, whose first segment starts at the
 * max_id that leaf_alloc has then.  Raising max_id alone moves only the
 * segments loaded after the raise; with this, no ID below the new max_id
 * is handed out any more.  Nothing is handed out twice: the segments
 * dropped are a gap, as after a restart, and a load that was under way
 * for the old slot is not published.
 *
 * Whoever may raise max_id (UPDATE on leaf_alloc) may do this; returns
 * whether the tag had a slot.
 */
Datum
leaf_segment_discard(PG_FUNCTION_ARGS)
{
	LeafTagKey	key;
	LeafTagEntry *entry;
	Oid			nsp;
	Oid			relid;
	int			slotno = -1;
	uint64		generation = 0;

	leaf_segment_check_ready();
	{
		char		tag[sizeof(key.tag)];

		(void) leaf_tag_from_text(PG_GETARG_TEXT_PP(0), tag);
		nsp = leaf_tag_key(&key, tag);
	}
	relid = get_relname_relid("leaf_alloc", nsp);
	if (!OidIsValid(relid) ||
		pg_class_aclcheck(relid, GetUserId(), ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to discard the segments of biz_tag \"%s\"",
						key.tag),
				 errdetail("Discarding the segments of a tag needs UPDATE on leaf_alloc, as raising its max_id does.")));
	/* a logical replica's counters are its publisher's until the cut-over */
	leaf_replica_refuse(nsp, key.tag);

	LWLockAcquire(leaf_seg->lock, LW_SHARED);
	entry = hash_search(leaf_tag_hash, &key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		slotno = entry->slotno;
		/* generation cannot change while we hold the lock */
		generation = leaf_seg->slots[slotno].generation;
	}
	LWLockRelease(leaf_seg->lock);

	if (slotno < 0)
		PG_RETURN_BOOL(false);
	/* callers waiting for a load of the old slot look the tag up again */
	leaf_free_slot(slotno, generation);
	PG_RETURN_BOOL(true);
}

/*
 * leaf_alloc_local(): do segments come from this database's own
 * leaf_alloc (leaf.alloc_conninfo is empty)?  Callers that may not read
 * the setting may know this much.
 */
Datum
leaf_alloc_local(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(!leaf_remote_enabled());
}
