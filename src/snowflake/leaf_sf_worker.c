/*-------------------------------------------------------------------------
 *
 * leaf_sf_worker.c
 *	  The snowflake worker: its main loop, and the lease on its worker ID.
 *
 * One static background worker per instance, with shared memory access
 * but no database connection.  It
 *	- takes a worker ID from one source (leaf_sf_lease.h): set by hand or
 *	  from a pod ordinal (leaf_sf_source_setting.c), ZooKeeper with the
 *	  state file $PGDATA/leaf_snowflake.state standing in while it is
 *	  unreachable (leaf_sf_source_zk.c), or the allocation database
 *	  (leaf_sf_source_db.c);
 *	- checks the clock before serving: it must be past the high-water mark
 *	  recorded for the worker ID, and past what an earlier holder of a new
 *	  worker ID may still use;
 *	- every leaf.heartbeat_interval records a new high-water mark (now plus
 *	  a margin) in the state file (leaf_sf_state.c) and at the source, and
 *	  only then lets the generator use timestamps up to what both allow
 *	  (the "lease", see leaf_snowflake.c);
 *	- gives the worker ID up on request (leaf_snowflake_new_worker_id())
 *	  and, on a clean shutdown, ends the lease at what was used.
 *
 * The lease goes through the phases of LeafSfLeasePhase: configuring (no
 * source can serve as configured), taking, waiting past the floor,
 * serving.  The main loop runs once per heartbeat, or sooner when a step
 * asks for it: each turn lets the source watch its connection, handles a
 * request for a new worker ID, lets the source take a worker ID if it
 * needs one, then starts serving once the clock has passed the floor, or,
 * while serving, renews the lease.  Requests to a source block, so a
 * termination request or a reload is acted on between requests.
 *
 * Everything the worker knows is in one LeafSfWorker, which lives in
 * leaf_snowflake_worker_main and is passed to every function here and to
 * the source.  What other backends see of it goes through
 * leaf_snowflake.c's reports.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/procsignal.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "common/leaf_compat.h"
#include "common/leaf_copy.h"
#include "snowflake/leaf_snowflake.h"
#include "snowflake/leaf_sf_db.h"	/* the check of leaf.worker_id_source */
#include "snowflake/leaf_sf_lease.h"
#include "snowflake/leaf_sf_state.h"

/* leaf.zk_root */
static char *leaf_sf_zk_root = NULL;

/*
 * No source: a configuration that gives no worker ID.  The worker stays
 * configuring and says why (leaf_sf_start).
 */
const LeafSfSource leaf_sf_source_none = {
	.name = "",
};

/* every source, by the name the state file and the status give it */
static const LeafSfSource *const leaf_sf_sources[] = {
	&leaf_sf_source_setting,
	&leaf_sf_source_zk,
	&leaf_sf_source_cache_file,
	&leaf_sf_source_db,
	&leaf_sf_source_db_file,
};

/* The source of that name, or NULL. */
const LeafSfSource *
leaf_sf_source_named(const char *name)
{
	int			i;

	for (i = 0; i < lengthof(leaf_sf_sources); i++)
		if (strcmp(leaf_sf_sources[i]->name, name) == 0)
			return leaf_sf_sources[i];
	return NULL;
}

/* ---------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------
 */

/* Do two reasons differ only in their numbers? (then log only once) */
bool
leaf_sf_same_reason(const char *a, const char *b)
{
	for (;;)
	{
		while (*a >= '0' && *a <= '9')
			a++;
		while (*b >= '0' && *b <= '9')
			b++;
		if (*a != *b)
			return false;
		if (*a == '\0')
			return true;
		a++;
		b++;
	}
}

/*
 * Stop serving (if we were) and publish why.  Logged when the reason
 * changes.
 */
void
leaf_sf_not_ready(LeafSfWorker *w, const char *fmt,...)
{
	char		buf[LEAF_SF_REASON_LEN];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	if (!leaf_sf_same_reason(buf, w->reason))
	{
		ereport(LOG,
				(errmsg("leaf snowflake generator not ready: %s", buf)));
		strlcpy(w->reason, buf, sizeof(w->reason));
	}
	if (w->phase == LEAF_SF_SERVING)
		w->phase = LEAF_SF_WAITING;
	w->lease_out = false;
	leaf_sf_report(LEAF_SF_NOT_READY, buf);
}

/* The worker's own setting: the root it registers under. */
void
leaf_sf_worker_init_settings(void)
{
	DefineCustomStringVariable("leaf.zk_root",
							   "Sets the ZooKeeper path under which snowflake nodes register.",
							   NULL,
							   &leaf_sf_zk_root,
							   "",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);
}

/* the wait event of the worker between its steps, once named */
static uint32 leaf_sf_wait_event = 0;

/* Wait on our latch; false if shutdown was requested. */
bool
leaf_sf_wait(long ms)
{
	if (leaf_sf_wait_event == 0)
		leaf_sf_wait_event = WaitEventExtensionNew("LeafSnowflakeMain");
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 Max(ms, 1), leaf_sf_wait_event);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
	return !ShutdownRequestPending;
}

/* Is host a name or address that every machine has (loopback, wildcard)? */
static bool
leaf_sf_host_not_unique(const char *host)
{
	return host[0] == '\0' || strcmp(host, "*") == 0 ||
		strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 ||
		pg_strcasecmp(host, "localhost") == 0 ||
		pg_strncasecmp(host, "localhost.", 10) == 0 ||
		strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0;
}

/*
 * The default node address: the first entry of listen_addresses that is
 * neither loopback nor a wildcard, else the host name, plus the port.  It
 * stays empty if neither is unique to this host.
 */
static void
leaf_sf_compute_address(LeafSfNode *node)
{
	char		host[LEAF_SF_ADDR_LEN];
	const char *p = ListenAddresses ? ListenAddresses : "";

	node->addr[0] = '\0';
	if (leaf_sf_node_address && leaf_sf_node_address[0] != '\0')
	{
		strlcpy(node->addr, leaf_sf_node_address, sizeof(node->addr));
		return;
	}

	host[0] = '\0';
	for (;;)
	{
		size_t		len;

		while (*p == ' ' || *p == ',')
			p++;
		len = strcspn(p, " ,");
		if (len == 0)
			break;
		if (len < sizeof(host))
		{
			memcpy(host, p, len);
			host[len] = '\0';
			if (!leaf_sf_host_not_unique(host))
				break;
		}
		host[0] = '\0';
		p += len;
	}
	if (host[0] == '\0')
	{
		if (gethostname(host, sizeof(host)) != 0)
			host[0] = '\0';
		host[sizeof(host) - 1] = '\0';
		if (leaf_sf_host_not_unique(host))
			return;
	}
	snprintf(node->addr, sizeof(node->addr), "%s:%d", host, PostPortNumber);
}

/* The identity of this data directory, as a holder of a worker ID. */
static void
leaf_sf_compute_identity(LeafSfNode *node)
{
	leaf_copy_holder_name(node->identity, sizeof(node->identity));
}

/* Is the clock within the range of timestamps an ID can hold? */
static bool
leaf_sf_clock_in_range(void)
{
	return leaf_sf_ms_in_range(leaf_sf_clock_ms(), leaf_sf_epoch_ms);
}

/* The worker ID has a floor: serving may start once the clock passed it. */
void
leaf_sf_floor_known(LeafSfWorker *w)
{
	if (w->phase < LEAF_SF_WAITING)
		w->phase = LEAF_SF_WAITING;
}

/* The floor is no longer known (the generator was stopped first). */
void
leaf_sf_floor_lost(LeafSfWorker *w)
{
	if (w->phase != LEAF_SF_CONFIGURING)
		w->phase = LEAF_SF_TAKING;
}

/*
 * The root names the fleet: nodes under different roots get worker IDs
 * from separate numberings.  It has no default, so that a node whose
 * configuration lost the line does not join another fleet.  A node that
 * registers in ZooKeeper (registers) and registered under a root before
 * keeps it.
 */
void
leaf_sf_choose_root(LeafSfWorker *w, bool registers)
{
	LeafSfStateFile *file = &w->file;

	strlcpy(w->node.root, leaf_sf_zk_root ? leaf_sf_zk_root : "",
			sizeof(w->node.root));
	if (w->node.root[0] == '\0' && registers && file->valid &&
		!file->foreign && file->zk_root[0] != '\0')
	{
		strlcpy(w->node.root, file->zk_root, sizeof(w->node.root));
		ereport(LOG,
				(errmsg("\"leaf.zk_root\" is not set, using \"%s\", where this node registered before",
						w->node.root),
				 errhint("Set \"leaf.zk_root\" to '%s' in the configuration of this node.",
						 w->node.root)));
	}
}

/* ---------------------------------------------------------------------
 * The state file
 * ---------------------------------------------------------------------
 */

/* What the state file records of most leases: the reference and token. */
void
leaf_sf_record_plain(LeafSfWorker *w, LeafSfStateRecord *rec)
{
	rec->lease_ref = w->lease.ref;
	rec->lease_token = w->lease.token;
	rec->claimed_in = "";
}

/*
 * Write the state file and, if that worked, note the mark it now holds.
 * Returns false (after logging) on failure.  Whether another node may
 * take the worker ID over while this one is down (recyclable) decides
 * whether the file may stand in at the next start: it depends on what
 * this node declared, not on the setting of that day.
 */
bool
leaf_sf_file_write(LeafSfWorker *w, int64 hwm_ms)
{
	LeafSfStateRecord rec;
	bool		stands_in = w->lease.from->stand_in != NULL;

	rec.worker_id = w->lease.worker_id;
	rec.source = w->lease.from->name;
	/*
	 * A worker ID the file was written as superseded for stays so while
	 * this node still serves with it (until the registration in progress
	 * ends): the file must not stand in with it again.
	 */
	if (w->lease.worker_id == w->superseded_wid && stands_in)
	{
		rec.source = LEAF_SF_SOURCE_SUPERSEDED;
		stands_in = false;
	}
	rec.hwm_ms = hwm_ms;
	rec.recyclable = w->source->recyclable(w);
	w->source->record(w, &rec);
	if (!leaf_sf_state_write(&w->file, &w->node, &rec))
		return false;
	w->file_hwm = hwm_ms;
	/* the file now holds a worker ID the source confirmed */
	if (stands_in)
		w->file_refuted = false;
	return true;
}

/*
 * Did this node declare its worker ID recyclable, when it last wrote to
 * its source?  Then another node may have taken it over while this one
 * was down, whatever leaf.worker_id_reclaim_after says today.  A file of
 * an older release does not say: as if it did.
 */
static bool
leaf_sf_file_declared_recyclable(LeafSfWorker *w)
{
	return w->file.declared != 0;
}

/*
 * The source is about to give another worker ID than the one the state
 * file may stand in with, or this node is about to give its worker ID up:
 * first write the file so that it no longer stands in with worker ID wid
 * (source "superseded", with mark hwm and the marks of the other worker
 * IDs kept), should this node crash before it names the new one and
 * start with the source unreachable.  A file that cannot be written stops
 * standing in for this run only; returns whether it was written (a
 * registration waits until it was).
 */
bool
leaf_sf_file_supersede(LeafSfWorker *w, int wid, int64 hwm)
{
	LeafSfStateRecord rec;
	bool		written;

	rec.worker_id = wid;
	rec.source = LEAF_SF_SOURCE_SUPERSEDED;
	rec.hwm_ms = Max(hwm, 1);
	rec.lease_ref = "";
	rec.lease_token = 0;
	rec.recyclable = leaf_sf_file_declared_recyclable(w);
	rec.claimed_in = "";
	written = leaf_sf_state_write(&w->file, &w->node, &rec);
	if (written)
		w->superseded_wid = wid;
	w->file_refuted = true;
	return written;
}

/*
 * On a clean shutdown: bring the file's mark down to hwm, if it is lower.
 * Returns whether the file now holds it.
 */
bool
leaf_sf_file_lower(LeafSfWorker *w, int64 hwm)
{
	if (hwm >= w->file_hwm)
		return false;
	return leaf_sf_file_write(w, hwm);
}

/* ---------------------------------------------------------------------
 * The lease
 * ---------------------------------------------------------------------
 */

/*
 * The highest timestamp this or an earlier run may have used with our
 * worker ID: the mark it keeps when it is given up.
 */
int64
leaf_sf_given_up_mark(LeafSfWorker *w)
{
	int64		hwm = Max(leaf_sf_get_lease(), w->lease.mark);

	hwm = Max(hwm, w->file_hwm);
	hwm = Max(hwm, w->lease.taken_mark);
	hwm = Max(hwm, leaf_sf_state_mark(&w->file, w->lease.worker_id));
	hwm = Max(hwm, leaf_sf_last_issued_ms() + 1);
	return hwm;
}

/*
 * A worker ID new to this node: its floor waits out what an earlier holder
 * may still use, on its lease and its clock.
 */
void
leaf_sf_wait_out_earlier_holder(LeafSfWorker *w)
{
	w->floor_ms = Max(w->floor_ms,
					  leaf_sf_clock_ms() + w->source->earlier_holder_ms());
	w->fresh_floor = true;
}

/*
 * While serving, the lease may run out because the mark could not be
 * recorded: calls then wait and fail with LF102.  Say why, once, in the
 * log and in the status (the generator stays "ready" to its callers, who
 * wait for the next heartbeat), and say when the lease is extended again.
 */
static void
leaf_sf_lease_report(LeafSfWorker *w, int64 now, const char *why)
{
	char		buf[LEAF_SF_REASON_LEN];

	if (w->phase != LEAF_SF_SERVING)
		return;
	if (why != NULL && !w->lease_out)
	{
		snprintf(buf, sizeof(buf), "the lease ran out: %s", why);
		ereport(LOG,
				(errmsg("leaf snowflake generator not ready: %s", buf),
				 errdetail("Calls fail with LF102 until a new high-water mark is recorded.")));
		leaf_sf_report(LEAF_SF_READY, why);
		w->lease_out = true;
		w->lease_out_since = now;
	}
	else if (why == NULL && w->lease_out)
	{
		ereport(LOG,
				(errmsg("leaf snowflake lease extended again after " INT64_FORMAT " ms, generator ready with worker ID %d",
						now - w->lease_out_since, w->lease.worker_id)));
		leaf_sf_report(LEAF_SF_READY, NULL);
		w->lease_out = false;
	}
}

/*
 * Record a new high-water mark and extend the lease: the mark goes into
 * the state file, then to the source (the heartbeat), and the lease goes
 * up to what both allow.  A source whose mark bounds the lease (another
 * node may take the worker ID over past it) is waited for; one that does
 * not lets the file alone extend the lease first, as the source may
 * block for seconds.
 */
static void
leaf_sf_record(LeafSfWorker *w)
{
	const LeafSfSource *src = w->source;
	int64		now = leaf_sf_clock_ms();
	int64		hwm = now + leaf_sf_margin_ms();
	int64		lease;

	/* never lower a mark that may have been used */
	hwm = Max(hwm, leaf_sf_get_lease());
	hwm = Max(hwm, w->file_hwm);

	if (!leaf_sf_file_write(w, hwm))
	{
		if (leaf_sf_get_lease() <= now)
			leaf_sf_lease_report(w, now, "could not write \"" LEAF_SF_STATE_FILE "\", see the errors above");
		return;
	}
	if (src->file_first(w))
		leaf_sf_set_lease(w->file_hwm);

	w->lease.renewed = src->renew(w, now, hwm);
	lease = src->bound(w, now);
	if (w->lease.worker_id < 0 || lease < 0)
		return;

	lease = Min(lease, w->file_hwm);
	leaf_sf_set_lease(lease);
	if (w->lease.renewed || !src->heartbeat_is_renewal)
		leaf_sf_report_heartbeat(now);

	if (lease > now)
		leaf_sf_lease_report(w, now, NULL);
	else
	{
		char		why[LEAF_SF_REASON_LEN];

		src->lease_out(w, why, sizeof(why));
		leaf_sf_lease_report(w, now, why);
	}
}

/*
 * Has the clock passed the floor of the worker ID, within the range of
 * the layout?  Else say why not.
 */
static bool
leaf_sf_floor_passed(LeafSfWorker *w, int64 now)
{
	int64		floor_ms = w->floor_ms;

	if (!leaf_sf_ms_in_range(now, leaf_sf_epoch_ms))
	{
		char		range[64];

		leaf_sf_layout_describe_range(range, sizeof(range));
		leaf_sf_not_ready(w, "the clock is outside the %s since \"leaf.snowflake_epoch\"",
						  range);
		return false;
	}
	if (now <= floor_ms && w->fresh_floor)
	{
		char		buf[LEAF_SF_REASON_LEN];

		/* expected at every new worker ID: callers wait */
		snprintf(buf, sizeof(buf),
				 "new worker ID %d is used only from " INT64_FORMAT " ms from now, past the longest lease an earlier holder could still use",
				 w->lease.worker_id, floor_ms - now + 1);
		leaf_sf_report_not_before(floor_ms);
		leaf_sf_report(LEAF_SF_STARTING, buf);
		return false;
	}
	if (now <= floor_ms && w->file.epoch_moved_from > 0)
	{
		/* not the clock: the same IDs now stand for later times */
		leaf_sf_report_not_before(floor_ms);
		leaf_sf_not_ready(w, "\"leaf.snowflake_epoch\" was moved later, from " INT64_FORMAT " to " INT64_FORMAT ", since worker ID %d recorded its last mark, so its IDs stay above those it issued only from " INT64_FORMAT " ms from now; to serve sooner, set \"leaf.snowflake_epoch\" back to " INT64_FORMAT " and restart%s",
						  w->file.epoch_moved_from, leaf_sf_epoch_ms,
						  w->lease.worker_id, floor_ms - now + 1,
						  w->file.epoch_moved_from, w->source->epoch_hint);
		return false;
	}
	if (now <= floor_ms)
	{
		leaf_sf_report_not_before(floor_ms);
		leaf_sf_not_ready(w, "clock is " INT64_FORMAT " ms behind the last time recorded for this node, waiting for it to pass",
						  floor_ms - now + 1);
		return false;
	}
	return true;
}

/*
 * Serve with the worker ID once the clock has passed its floor, and the
 * first mark is recorded.  Returns false while still waiting.
 */
static bool
leaf_sf_try_serve(LeafSfWorker *w)
{
	int64		now = leaf_sf_clock_ms();

	if (!leaf_sf_floor_passed(w, now))
		return false;
	/* past every mark: a moved epoch no longer holds this node back */
	w->file.epoch_moved_from = 0;

	leaf_sf_record(w);

	/* the first heartbeat may have found our worker ID taken over */
	if (w->lease.worker_id < 0)
		return false;

	/*
	 * A worker ID is used only once the source has recorded its first
	 * mark, or confirmed it as taken (see the sources' confirmed).
	 */
	if (w->source->confirmed != NULL && !w->source->confirmed(w))
		return false;
	if (leaf_sf_get_lease() <= now)
	{
		leaf_sf_not_ready(w, "could not record the high-water mark of issued timestamps");
		return false;
	}
	if (!leaf_sf_start_serving(w->lease.worker_id, w->floor_ms, w->new_id))
		return false;
	w->new_id = false;
	w->serving_wid = w->lease.worker_id;
	w->phase = LEAF_SF_SERVING;
	w->reason[0] = '\0';
	ereport(LOG,
			(errmsg("leaf snowflake generator ready with worker ID %d from %s",
					w->lease.worker_id, w->lease.from->name)));
	return true;
}

/* On a clean shutdown, bring the recorded mark down to what was used. */
static void
leaf_sf_shutdown(LeafSfWorker *w)
{
	int64		t1;
	int64		hwm;

	if (w->phase != LEAF_SF_SERVING || w->lease.worker_id < 0)
		return;

	leaf_sf_report(LEAF_SF_STARTING, NULL);
	t1 = leaf_sf_clock_ms();
	leaf_sf_set_lease(t1);
	pg_memory_barrier();

	/*
	 * A backend that read the old lease read its clock before we lowered
	 * it, so its timestamp is at most t1 + 1 (the clock read may straddle
	 * a millisecond boundary); anything later is below the new lease.
	 */
	hwm = Max(leaf_sf_last_issued_ms(), t1 + 1);
	if (w->source->release != NULL)
		w->source->release(w, hwm);
}

/* ---------------------------------------------------------------------
 * Start
 * ---------------------------------------------------------------------
 */

/* The source that leaf.worker_id_source and leaf.worker_id name. */
static const LeafSfSource *
leaf_sf_configured_source(void)
{
	if (leaf_sf_id_source == LEAF_SF_SOURCE_DATABASE)
		return &leaf_sf_source_db;
	if (leaf_sf_worker_id == -1)
		return &leaf_sf_source_zk;
	return &leaf_sf_source_setting;
}

/* Say that the state file is a copy's, or was brought from elsewhere. */
static void
leaf_sf_log_file_origin(LeafSfWorker *w)
{
	if (w->file.foreign)
		ereport(LOG,
				(errmsg("\"%s\" was written by another data directory (%s), this one is %s",
						LEAF_SF_STATE_FILE, w->file.bound_to, w->node.identity),
				 errdetail("This data directory is a copy (a standby, a restored backup or a copied directory): the worker IDs recorded there belong to the original.")));
	else if (w->file.moved_from[0] != '\0')
		ereport(LOG,
				(errmsg("\"%s\" was written by data directory %s of another cluster, and is taken as the state of this one (%s)",
						LEAF_SF_STATE_FILE, w->file.moved_from, w->node.identity),
				 errdetail("A copy of a data directory keeps its system identifier; a state file of another one was brought here by hand, as after pg_upgrade.")));
}

/* No worker ID from this configuration: say why, and take none. */
static void
leaf_sf_configuring(LeafSfWorker *w, const char *problem, bool all)
{
	leaf_sf_not_ready(w, "%s", problem);
	/* the allocation database checks the layouts of its holders itself */
	if (all || w->source->local_checks)
	{
		w->source = &leaf_sf_source_none;
		w->phase = LEAF_SF_CONFIGURING;
	}
}

/*
 * Set the worker up: who this node is, what the state file holds, where
 * the worker ID comes from, and whether that can work as configured.
 */
static void
leaf_sf_start(LeafSfWorker *w)
{
	const char *problem;
	char		reason[LEAF_SF_REASON_LEN];

	memset(w, 0, sizeof(*w));
	w->lease.from = &leaf_sf_source_setting;
	w->lease.worker_id = -1;
	w->serving_wid = -1;
	w->superseded_wid = -1;
	w->phase = LEAF_SF_TAKING;

	w->last_issued = leaf_sf_attach_worker();
	leaf_sf_report(LEAF_SF_STARTING, NULL);
	leaf_sf_compute_address(&w->node);
	leaf_sf_compute_identity(&w->node);
	leaf_sf_state_read(&w->file, w->node.identity);

	w->source = leaf_sf_configured_source();
	w->source->init(w);
	leaf_sf_log_file_origin(w);

	if ((problem = leaf_sf_db_config_problem()) != NULL)
		leaf_sf_configuring(w, problem, true);
	else if (leaf_sf_ordinal_problem != NULL)
	{
		/* no worker ID from the ordinal: none from anywhere else either */
		leaf_sf_configuring(w, leaf_sf_ordinal_problem, false);
	}
	else if (leaf_sf_state_layout_differs(&w->file, reason, sizeof(reason)))
	{
		/* never mix layouts: serve nothing, register nowhere */
		leaf_sf_configuring(w, reason, false);
	}
	else
		w->source->start(w);
}

/* ---------------------------------------------------------------------
 * The steps of the main loop
 * ---------------------------------------------------------------------
 */

/*
 * leaf_snowflake_new_worker_id(): give the worker ID up, with the mark of
 * everything this node may have used, and take one anew.  The state file
 * names the worker ID given up as superseded first: once the source holds
 * it given up, it may go to another node, and a crash, then a start with
 * the source unreachable, must not serve it from the file.  A file that
 * cannot be written keeps the worker ID.
 */
static void
leaf_sf_handle_new_id(LeafSfWorker *w)
{
	int			wid = w->lease.worker_id;
	int64		hwm;

	if (w->source->can_give_up == NULL || !w->source->can_give_up(w))
	{
		ereport(LOG,
				(errmsg("a new snowflake worker ID was requested, but the worker is not registered in ZooKeeper now: ignored")));
		return;
	}

	leaf_sf_not_ready(w, "a new worker ID was requested, giving up worker ID %d",
					  wid);
	hwm = leaf_sf_given_up_mark(w);
	if (!leaf_sf_file_supersede(w, wid, hwm))
	{
		ereport(LOG,
				(errmsg("could not give up worker ID %d: \"%s\" could not be written",
						wid, LEAF_SF_STATE_FILE)));
		return;
	}
	if (!w->source->give_up(w, hwm))
		return;

	/* nothing of the old worker ID bounds the new one */
	leaf_sf_set_lease(0);
	w->file_hwm = 0;
	w->lease.worker_id = -1;
	leaf_sf_floor_lost(w);
	w->fresh_floor = false;
	w->floor_ms = 0;
	w->last_issued = 0;
	w->new_id = true;
}

/* Start serving once the floor allows, or, while serving, record a mark. */
static void
leaf_sf_serve_step(LeafSfWorker *w, long *delay)
{
	if (w->phase == LEAF_SF_WAITING && w->lease.worker_id >= 0 &&
		w->source->settled(w))
	{
		if (!leaf_sf_try_serve(w))
			*delay = Min(*delay, Max(w->floor_ms - leaf_sf_clock_ms() + 1, 10));
		else
			w->fresh_floor = false;
	}
	else if (w->phase == LEAF_SF_SERVING)
		leaf_sf_record(w);
}

/*
 * A clock before the epoch (or past the layout's range) cannot serve: do
 * not ask the source, which would use up a worker ID for nothing.
 * Returns whether the clock holds the worker back.
 */
static bool
leaf_sf_clock_holds_back(LeafSfWorker *w)
{
	char		range[64];
	char		span[32];

	if (w->phase == LEAF_SF_SERVING || w->source->remote == NULL ||
		!w->source->remote(w) || leaf_sf_clock_in_range())
		return false;
	leaf_sf_layout_describe_range(range, sizeof(range));
	leaf_sf_layout_describe_span(span, sizeof(span));
	leaf_sf_not_ready(w, "the clock is outside the %s since \"leaf.snowflake_epoch\" (it is before the epoch, or more than %s after it): not registering until it is inside",
					  range, span);
	return true;
}

/* ---------------------------------------------------------------------
 * Main
 * ---------------------------------------------------------------------
 */

void
leaf_snowflake_worker_main(Datum main_arg)
{
	LeafSfWorker w;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGUSR1, procsignal_sigusr1_handler);
	BackgroundWorkerUnblockSignals();

	/* no database: this only makes the worker a backend, in pg_stat_activity */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("leaf snowflake worker");

	leaf_sf_start(&w);

	while (!ShutdownRequestPending)
	{
		long		delay = leaf_sf_heartbeat_ms;

		if (w.source->watch != NULL)
			w.source->watch(&w);
		if (leaf_sf_new_id_requested())
			leaf_sf_handle_new_id(&w);
		if (leaf_sf_clock_holds_back(&w))
		{
			if (!leaf_sf_wait(1000))
				break;
			continue;
		}
		if (w.source->take != NULL && !w.source->take(&w, &delay))
			break;
		leaf_sf_serve_step(&w, &delay);

		if (!leaf_sf_wait(delay))
			break;
	}

	leaf_sf_shutdown(&w);
	if (w.source->stop != NULL)
		w.source->stop(&w);
	leaf_sf_detach_worker();

	/*
	 * Exit code 1: the postmaster starts the worker again after
	 * bgw_restart_time, unless the whole server is shutting down.  Callers
	 * meanwhile wait as for a starting worker.
	 */
	ereport(LOG,
			(errmsg("leaf snowflake worker stopping on a termination request"),
			 errdetail("Unless the server is shutting down, it is started again within a second.")));
	proc_exit(1);
}
