/*-------------------------------------------------------------------------
 *
 * leaf_sf_state.c
 *	  The snowflake worker's state file, $PGDATA/leaf_snowflake.state.
 *
 * The file lets a node serve when ZooKeeper is down, is the only record
 * of a worker ID set by hand (leaf.worker_id), and names the lease a node
 * holds in the allocation database.  It holds the worker ID in use, the
 * name of its source ("source", see leaf_sf_lease.h), this node's address
 * and root, the source's reference of the lease and the holder's token
 * ("lease_ref", "lease_token": a forever node and a ZooKeeper session, a
 * table of worker IDs and the token drawn there), and a high-water mark
 * for every worker ID this data directory ever served with: no ID of that
 * worker ID carries a later timestamp.  It is text, one "key value" per
 * line, and names the data directory it belongs to ("bound_to"), so that
 * a copy can tell the worker IDs in it are not its own.  The keys
 * "zk_node" and "session" of earlier releases are read as "lease_ref" and
 * "lease_token".
 *
 * Reading never fails: a missing file is no file, a damaged one is
 * reported as such and its content ignored.  A write replaces the whole
 * file durably (temporary file, fsync, rename, fsync of the directory)
 * before the worker lets the generator use what it records.  A file that
 * cannot be written is retried at every heartbeat, and its errors logged
 * once a minute.
 *
 * Only the snowflake worker (leaf_sf_worker.c) and its sources of worker
 * IDs (leaf_sf_source_*.c) call this, in the worker's process; nothing
 * here touches shared memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "lib/stringinfo.h"
#include "storage/fd.h"
#include "utils/timestamp.h"

#include "common/leaf_durable.h"
#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_sf_state.h"

#define LEAF_SF_STATE_TMP		"leaf_snowflake.state.tmp"

/*
 * One line of the state file, "key value", into *file; *version and
 * *file_epoch take the lines that describe the file.  Lines of unknown
 * keys are ignored; the keys of earlier releases are read as the keys
 * that replaced them.
 */
static void
leaf_sf_state_line(LeafSfStateFile *file, char *line, int *version,
				   int64 *file_epoch)
{
	char	   *val = strchr(line, ' ');

	line[strcspn(line, "\n")] = '\0';
	if (val == NULL)
		return;
	*val++ = '\0';
	if (strcmp(line, "version") == 0)
		*version = atoi(val);
	else if (strcmp(line, "worker_id") == 0)
		file->worker_id = atoi(val);
	else if (strcmp(line, "source") == 0)
		strlcpy(file->source, val, sizeof(file->source));
	else if (strcmp(line, "node_address") == 0)
		strlcpy(file->node_address, val, sizeof(file->node_address));
	else if (strcmp(line, "zk_root") == 0)
		strlcpy(file->zk_root, val, sizeof(file->zk_root));
	else if (strcmp(line, "lease_ref") == 0 || strcmp(line, "zk_node") == 0)
		strlcpy(file->lease_ref, val, sizeof(file->lease_ref));
	else if (strcmp(line, "claimed_in") == 0)
		strlcpy(file->claimed_in, val, sizeof(file->claimed_in));
	else if (strcmp(line, "recyclable") == 0)
		file->declared = atoi(val) != 0;
	else if (strcmp(line, "high_water_ms") == 0)
		file->hwm_ms = strtoll(val, NULL, 10);
	else if (strcmp(line, "written_ms") == 0)
		file->written_ms = strtoll(val, NULL, 10);
	else if (strcmp(line, "bound_to") == 0)
		strlcpy(file->bound_to, val, sizeof(file->bound_to));
	else if (strcmp(line, "lease_token") == 0 || strcmp(line, "session") == 0)
		file->lease_token = strtoll(val, NULL, 16);
	else if (strcmp(line, "epoch_ms") == 0)
		*file_epoch = strtoll(val, NULL, 10);
	else if (strcmp(line, "epoch_moved_from") == 0)
		file->epoch_moved_from = strtoll(val, NULL, 10);
	else if (strcmp(line, "layout") == 0)
	{
		const char *problem;

		/* a layout this release cannot read is none it can serve under */
		if (!leaf_sf_layout_parse(val, &file->layout, &problem))
			file->layout.ts_bits = 0;
	}
	else if (strcmp(line, "mark") == 0)
	{
		int			wid;
		long long	hwm;

		if (sscanf(val, "%d %lld", &wid, &hwm) == 2 &&
			wid >= 0 && wid <= leaf_sf_max_worker_id())
			file->marks[wid] = Max(file->marks[wid], (int64) hwm);
	}
}

/*
 * The marks bound timestamps counted from the file's epoch.  What must
 * not repeat is the ID, so under another epoch a mark moves by the
 * difference: a later epoch makes the same ID later on the clock.
 */
static void
leaf_sf_state_rebase(LeafSfStateFile *file, int64 file_epoch)
{
	int			i;

	for (i = 0; i <= leaf_sf_max_worker_id(); i++)
		if (file->marks[i] > 0)
			file->marks[i] += leaf_sf_epoch_ms - file_epoch;
	file->hwm_ms = file->marks[file->worker_id];
	file->epoch_changed = true;
	/*
	 * The earliest epoch a mark that binds may have been written under:
	 * the one to set back to, to serve at once.  A mark of an earlier move
	 * (the epoch moved later twice while the node waited) keeps its own.
	 */
	if (file_epoch < leaf_sf_epoch_ms &&
		(file->epoch_moved_from == 0 || file_epoch < file->epoch_moved_from))
		file->epoch_moved_from = file_epoch;
	ereport(LOG,
			(errmsg("\"leaf.snowflake_epoch\" changed from " INT64_FORMAT " to " INT64_FORMAT " since \"%s\" was written",
					file_epoch, leaf_sf_epoch_ms, LEAF_SF_STATE_FILE),
			 errdetail("The recorded high-water marks are kept in ID space: they move by " INT64_FORMAT " ms.",
					   leaf_sf_epoch_ms - file_epoch)));
}

/*
 * Read the state file into *file.  identity is this data directory's: a
 * file of another data directory of the same cluster (this one is a copy)
 * is marked foreign, one of another cluster is taken as this one's (see
 * below).  A missing file leaves *file not valid; an unreadable or invalid
 * one also marks it damaged (and is logged).
 */
void
leaf_sf_state_read(LeafSfStateFile *file, const char *identity)
{
	FILE	   *f;
	char		line[2048];
	int			version = 0;
	int64		file_epoch = leaf_sf_epoch_ms;

	memset(file, 0, sizeof(*file));
	file->worker_id = -1;
	file->declared = -1;
	file->layout = leaf_sf_layout_default();
	file->marks = palloc0(sizeof(int64) * (leaf_sf_max_worker_id() + 1));

	f = AllocateFile(LEAF_SF_STATE_FILE, "r");
	if (f == NULL)
	{
		if (errno != ENOENT)
		{
			file->damaged = true;
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not open file \"%s\": %m", LEAF_SF_STATE_FILE)));
		}
		return;
	}
	while (fgets(line, sizeof(line), f) != NULL)
		leaf_sf_state_line(file, line, &version, &file_epoch);
	FreeFile(f);

	/* the worker ID is within the file's layout, perhaps not within ours */
	if ((version == 1 || version == 2) && file->worker_id >= 0 &&
		file->worker_id < (1 << file->layout.worker_bits) &&
		file->hwm_ms > 0)
		file->valid = true;
	else
	{
		file->damaged = true;
		ereport(LOG,
				(errmsg("ignoring invalid snowflake state file \"%s\"",
						LEAF_SF_STATE_FILE)));
		return;
	}

	if (file->worker_id <= leaf_sf_max_worker_id())
	{
		file->marks[file->worker_id] = Max(file->marks[file->worker_id],
											 file->hwm_ms);
		if (file_epoch != leaf_sf_epoch_ms)
			leaf_sf_state_rebase(file, file_epoch);
		if (file->epoch_moved_from >= leaf_sf_epoch_ms)
			file->epoch_moved_from = 0;
	}

	/*
	 * A file of version 1 belongs to whoever reads it first.  A copy of
	 * this data directory (a standby, a restored backup, a copied
	 * directory) has its system identifier and another inode: its file is
	 * the original's.  A file bound to another system identifier was put
	 * here by hand from another cluster, since no copy of a data directory
	 * changes that identifier: pg_upgrade gives the new cluster one of its
	 * own and leaves the state file behind, to be copied over.  That file
	 * is taken as this data directory's, marks and ZooKeeper node with it.
	 */
	if (file->bound_to[0] != '\0' && strcmp(file->bound_to, identity) != 0)
	{
		size_t		sys = strcspn(identity, ":");

		if (strncmp(file->bound_to, identity, sys) == 0 &&
			file->bound_to[sys] == ':')
			file->foreign = true;
		else
			strlcpy(file->moved_from, file->bound_to, sizeof(file->moved_from));
	}
}

/*
 * A state file that cannot be replaced (a read-only or full directory) is
 * retried at every heartbeat, and whenever a caller finds the lease run
 * out: its errors are logged once a minute, not each time.
 */
static TimestampTz leaf_write_failure_logged = 0;	/* when a failure was
														 * last logged at LOG,
														 * or 0 */
static int64 leaf_write_failures = 0;	/* failed writes since the last one
										 * that succeeded */

static bool
leaf_sf_state_write_failed(int elevel)
{
	leaf_write_failures++;
	if (elevel >= LOG)
		leaf_write_failure_logged = GetCurrentTimestamp();
	return false;
}

/* Write data as the state file, durably; see leaf_sf_state_write(). */
static bool
leaf_sf_state_write_file(const char *data, int len)
{
	int			elevel = LOG;

	if (leaf_write_failure_logged != 0 &&
		!TimestampDifferenceExceeds(leaf_write_failure_logged,
									GetCurrentTimestamp(), 60 * 1000))
		elevel = DEBUG1;

	if (!leaf_durable_write(LEAF_SF_STATE_FILE, LEAF_SF_STATE_TMP, data, len,
							elevel, ""))
		return leaf_sf_state_write_failed(elevel);
	if (leaf_write_failures > 0)
		ereport(LOG,
				(errmsg("wrote \"%s\" again, after " INT64_FORMAT " failed attempts",
						LEAF_SF_STATE_FILE, leaf_write_failures)));
	leaf_write_failures = 0;
	leaf_write_failure_logged = 0;
	return true;
}

/*
 * Write the state file durably: temporary file, fsync, rename, fsync of
 * the directory.  It records this node, rec, and the marks of *file for
 * the other worker IDs.  Returns false (after logging) on failure; on
 * success, *file holds what the file on disk now holds.
 */
bool
leaf_sf_state_write(LeafSfStateFile *file, const LeafSfNode *node,
					const LeafSfStateRecord *rec)
{
	StringInfoData buf;
	int			worker_id = rec->worker_id;
	int64		hwm_ms = rec->hwm_ms;
	int			len;
	int			i;
	char		layout[LEAF_SF_LAYOUT_LEN];

	if (worker_id < 0 || worker_id > leaf_sf_max_worker_id())
		return false;

	leaf_sf_layout_format(&leaf_sf_layout, layout, sizeof(layout));
	initStringInfo(&buf);
	appendStringInfo(&buf,
					 "version 2\n"
					 "bound_to %s\n"
					 "worker_id %d\n"
					 "source %s\n"
					 "node_address %s\n"
					 "zk_root %s\n"
					 "lease_ref %s\n"
					 "lease_token %llx\n"
					 "recyclable %d\n"
					 "claimed_in %s\n"
					 "epoch_ms " INT64_FORMAT "\n"
					 "layout %s\n"
					 "high_water_ms " INT64_FORMAT "\n"
					 "written_ms " INT64_FORMAT "\n",
					 node->identity, worker_id, rec->source, node->addr,
					 node->root,
					 rec->lease_ref, (unsigned long long) rec->lease_token,
					 rec->recyclable ? 1 : 0, rec->claimed_in,
					 leaf_sf_epoch_ms, layout, hwm_ms, leaf_sf_clock_ms());
	if (file->epoch_moved_from > 0)
		appendStringInfo(&buf, "epoch_moved_from " INT64_FORMAT "\n",
						 file->epoch_moved_from);
	for (i = 0; i <= leaf_sf_max_worker_id(); i++)
	{
		int64		m = (i == worker_id) ? hwm_ms : file->marks[i];

		if (m > 0)
			appendStringInfo(&buf, "mark %d " INT64_FORMAT "\n", i, m);
	}
	len = buf.len;

	if (!leaf_sf_state_write_file(buf.data, len))
	{
		pfree(buf.data);
		return false;
	}
	pfree(buf.data);

	/*
	 * *file now holds what the file on disk holds: this data directory's
	 * marks only, and this record, which the worker reads again in its
	 * run (whether the file may stand in, and with which worker ID).
	 */
	file->valid = true;
	file->damaged = false;
	file->foreign = false;
	file->layout = leaf_sf_layout;
	file->marks[worker_id] = hwm_ms;
	strlcpy(file->bound_to, node->identity, sizeof(file->bound_to));
	file->worker_id = worker_id;
	strlcpy(file->source, rec->source, sizeof(file->source));
	strlcpy(file->node_address, node->addr, sizeof(file->node_address));
	strlcpy(file->zk_root, node->root, sizeof(file->zk_root));
	strlcpy(file->lease_ref, rec->lease_ref, sizeof(file->lease_ref));
	strlcpy(file->claimed_in, rec->claimed_in, sizeof(file->claimed_in));
	file->declared = rec->recyclable ? 1 : 0;
	file->lease_token = (int64) rec->lease_token;
	file->hwm_ms = hwm_ms;
	return true;
}

/* The recorded mark of a worker ID, or 0. */
int64
leaf_sf_state_mark(const LeafSfStateFile *file, int worker_id)
{
	if (!file->valid || worker_id < 0 || worker_id > leaf_sf_max_worker_id())
		return 0;
	return file->marks[worker_id];
}

/* Forget the marks of every worker ID (those of a copy are not ours). */
void
leaf_sf_state_forget_marks(LeafSfStateFile *file)
{
	memset(file->marks, 0, sizeof(int64) * (leaf_sf_max_worker_id() + 1));
}

/*
 * Does a valid state file of this data directory record another layout
 * than leaf.snowflake_layout?  Then reason says so, and the node must not
 * serve: an ID of one layout can equal an ID of another, and the file's
 * marks bound the old layout's IDs only.
 */
bool
leaf_sf_state_layout_differs(const LeafSfStateFile *file, char *reason,
							 size_t size)
{
	char		theirs[LEAF_SF_LAYOUT_LEN];
	char		conf[LEAF_SF_LAYOUT_LEN];

	if (!file->valid || file->foreign ||
		leaf_sf_layout_equal(&file->layout, &leaf_sf_layout))
		return false;
	if (file->layout.ts_bits == 0)
		strlcpy(theirs, "one this release cannot read", sizeof(theirs));
	else
		leaf_sf_layout_format(&file->layout, theirs, sizeof(theirs));
	leaf_sf_layout_format(&leaf_sf_layout, conf, sizeof(conf));
	snprintf(reason, size,
			 "\"%s\" records IDs of layout %s, but \"leaf.snowflake_layout\" is %s, and IDs of two layouts may be equal; set \"leaf.snowflake_layout\" back to %s, or see \"Changing the layout\" in docs/snowflake.md",
			 LEAF_SF_STATE_FILE, theirs, conf, theirs);
	return true;
}
