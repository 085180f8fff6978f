/*-------------------------------------------------------------------------
 *
 * leaf_tag_share.c
 *	  Who may take a tag slot: the shares of databases and of their
 *	  owners in the one pool of leaf.max_tags slots that every database of
 *	  the server draws from.
 *
 * Three rules make the pool fair whatever the other databases do:
 *	- a database holds at most leaf.max_tags_per_database slots, and the
 *	  databases of one role (their owner, pg_database.datdba) at most
 *	  leaf.max_tags_per_owner; databases owned by superusers count for no
 *	  owner;
 *	- a slot whose tag is refused (its last load failed for good, as in a
 *	  copy of a database, and it has no ID left to hand out) counts for
 *	  nothing, and is the first taken over when the pool is full;
 *	- each database is owed leaf.max_tags / leaf.max_databases slots, its
 *	  guaranteed share: when the pool is full, a database below it takes
 *	  over the slot of a database above its own, the one whose last load
 *	  is the oldest.  That tag's cached IDs are skipped, as at a restart,
 *	  and it takes a slot again at its next call, if there is room.  A
 *	  database whose loads were refused lately (a copy) takes none so: it
 *	  could not serve from it.
 * So no database is refused a slot within its guaranteed share while
 * fewer than leaf.max_databases databases hold theirs.
 *
 * Runs under the exclusive LeafSegShared->lock (leaf_segment.c), which
 * is released before an error, and reads each slot under its mutex.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"

#include "leaf.h"
#include "segment/leaf_alloc_slots.h"
#include "segment/leaf_segment_shmem.h"

/* leaf.max_tags_per_database and leaf.max_tags_per_owner */
static int	leaf_max_tags_per_database = -1;
static int	leaf_max_tags_per_owner = -1;

/* What one scan of the slots found, for the database asking for one. */
typedef struct LeafShareScan
{
	int			free_slot;		/* a free slot, or -1 */
	int			refused_slot;	/* a slot of a refused tag, or -1 */
	int			in_database;	/* slots the database holds */
	int			of_owner;		/* slots the databases of its owner hold */
} LeafShareScan;

/* Define the settings of the shares. */
void
leaf_tag_share_init_settings(void)
{
	DefineCustomIntVariable("leaf.max_tags_per_database",
							"Sets the number of biz_tags one database may hold in shared memory.",
							"-1 means half of leaf.max_tags; 0 means all of them.  "
							"ALTER DATABASE ... SET gives one database another share.",
							&leaf_max_tags_per_database,
							-1, -1, 1000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.max_tags_per_owner",
							"Sets the number of biz_tags the databases of one owner may hold in shared memory.",
							"-1 means half of leaf.max_tags; 0 means all of them.  "
							"Databases owned by superusers count for no owner.",
							&leaf_max_tags_per_owner,
							-1, -1, 1000000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
}

/* A limit as set: -1 is half of the pool, 0 (or all of it) none. */
static int
leaf_share_limit(int setting)
{
	int			limit = setting < 0 ? leaf_max_tags / 2 : setting;

	return (limit == 0 || limit >= leaf_max_tags) ? 0 : limit;
}

/* Each database's guaranteed share of the pool. */
int
leaf_tag_share_guaranteed(void)
{
	return Max(leaf_max_tags / leaf_alloc_slots_max(), 1);
}

/* Look at every slot once, for database dboid of owner. */
static void
leaf_share_scan(Oid dboid, Oid owner, LeafShareScan *scan)
{
	int			nslots = leaf_tag_slots_in_use();
	int			i;

	scan->free_slot = nslots < leaf_max_tags ? nslots : -1;
	scan->refused_slot = -1;
	scan->in_database = 0;
	scan->of_owner = 0;
	for (i = 0; i < nslots; i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];

		SpinLockAcquire(&slot->mutex);
		if (slot->generation == 0)
		{
			if (scan->free_slot < 0 || i < scan->free_slot)
				scan->free_slot = i;
		}
		else if (leaf_slot_refused(slot))
		{
			if (scan->refused_slot < 0)
				scan->refused_slot = i;
		}
		else
		{
			if (slot->dboid == dboid)
				scan->in_database++;
			if (OidIsValid(owner) && slot->owner == owner)
				scan->of_owner++;
		}
		SpinLockRelease(&slot->mutex);
	}
}

/* One database's counted slots, in leaf_share_overdrawn_slot's table. */
typedef struct LeafShareCount
{
	Oid			dboid;			/* hash key */
	int			n;
} LeafShareCount;

/* The counted slots of each database, in a table of the current context. */
static HTAB *
leaf_share_counts(void)
{
	int			nslots = leaf_tag_slots_in_use();
	HASHCTL		ctl;
	HTAB	   *counts;
	int			i;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(LeafShareCount);
	ctl.hcxt = CurrentMemoryContext;
	counts = hash_create("leaf tag shares", 64, &ctl,
						 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (i = 0; i < nslots; i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];
		Oid			dboid = InvalidOid;
		LeafShareCount *c;
		bool		found;

		SpinLockAcquire(&slot->mutex);
		if (slot->generation != 0 && !leaf_slot_refused(slot))
			dboid = slot->dboid;
		SpinLockRelease(&slot->mutex);
		if (!OidIsValid(dboid))
			continue;
		c = hash_search(counts, &dboid, HASH_ENTER, &found);
		c->n = found ? c->n + 1 : 1;
	}
	return counts;
}

/*
 * The slot to take over for a database below its guaranteed share when
 * the pool is full: of the databases above theirs, the slot whose last
 * load is the oldest (one still waiting for its first load last).
 * Returns -1 if no database is above its share.
 */
static int
leaf_share_overdrawn_slot(int guaranteed, uint64 *generation)
{
	HTAB	   *counts = leaf_share_counts();
	int			nslots = leaf_tag_slots_in_use();
	int			best = -1;
	TimestampTz best_load = 0;
	int			i;

	for (i = 0; i < nslots; i++)
	{
		LeafTagSlot *slot = &leaf_seg->slots[i];
		LeafShareCount *c;
		Oid			dboid;
		TimestampTz load;
		uint64		gen;

		SpinLockAcquire(&slot->mutex);
		gen = slot->generation;
		dboid = slot->dboid;
		/* a slot never loaded yet is the last to go */
		load = slot->nloads > 0 ? slot->last_load : DT_NOEND;
		SpinLockRelease(&slot->mutex);
		if (gen == 0 || (best >= 0 && load >= best_load))
			continue;
		c = hash_search(counts, &dboid, HASH_FIND, NULL);
		if (c == NULL || c->n <= guaranteed)
			continue;
		best = i;
		best_load = load;
		*generation = gen;
	}
	hash_destroy(counts);
	return best;
}

/*
 * Error out, the lock released: the database (per_owner false) or the
 * databases of its owner hold their share.
 */
static void
leaf_share_refuse(bool per_owner, int limit)
{
	LWLockRelease(leaf_seg->lock);
	if (per_owner)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("too many biz_tags in use in the databases of this database's owner"),
				 errdetail("The databases of one owner may hold %d biz_tags in shared memory, of %d over all databases.",
						   limit, leaf_max_tags),
				 errhint("Increase \"leaf.max_tags_per_owner\" (and \"leaf.max_tags\"), or delete the biz_tags no longer used.")));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("too many biz_tags in use in this database"),
			 errdetail("A database may hold %d biz_tags in shared memory, of %d over all databases.",
					   limit, leaf_max_tags),
			 errhint("Increase \"leaf.max_tags_per_database\" (and \"leaf.max_tags\"), or delete the biz_tags this database no longer uses.")));
}

/*
 * Which slot the database dboid, of owner (InvalidOid: a superuser's),
 * takes for a new tag: a free one, or one to take over, whose generation
 * is set in *evict (0 if the slot is free).  Errors, the lock released,
 * if the database or its owner has its share, or the pool is full and
 * the database has its guaranteed share.  Caller holds the exclusive
 * LeafSegShared->lock.
 */
int
leaf_tag_share_pick(Oid dboid, Oid owner, uint64 *evict)
{
	LeafShareScan scan;
	int			db_limit = leaf_share_limit(leaf_max_tags_per_database);
	int			owner_limit = leaf_share_limit(leaf_max_tags_per_owner);
	int			guaranteed = leaf_tag_share_guaranteed();
	int			slotno;

	Assert(LWLockHeldByMeInMode(leaf_seg->lock, LW_EXCLUSIVE));
	*evict = 0;
	leaf_share_scan(dboid, owner, &scan);
	if (db_limit > 0 && scan.in_database >= db_limit)
		leaf_share_refuse(false, db_limit);
	if (OidIsValid(owner) && owner_limit > 0 && scan.of_owner >= owner_limit)
		leaf_share_refuse(true, owner_limit);

	if (scan.free_slot >= 0)
		return scan.free_slot;
	if (scan.refused_slot >= 0)
	{
		LeafTagSlot *slot = &leaf_seg->slots[scan.refused_slot];

		SpinLockAcquire(&slot->mutex);
		*evict = slot->generation;
		SpinLockRelease(&slot->mutex);
		return scan.refused_slot;
	}
	/* a database refused lately could not serve from another's slot */
	slotno = -1;
	if (scan.in_database < guaranteed && !leaf_database_refused(dboid))
		slotno = leaf_share_overdrawn_slot(guaranteed, evict);
	if (slotno < 0)
	{
		LWLockRelease(leaf_seg->lock);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("too many biz_tags in use"),
				 errdetail("Shared memory holds %d biz_tags over all databases; this database holds %d, and is guaranteed %d.",
						   leaf_max_tags, scan.in_database, guaranteed),
				 errhint("Increase \"leaf.max_tags\" and restart the server.")));
	}
	return slotno;
}
