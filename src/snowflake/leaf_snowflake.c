/*-------------------------------------------------------------------------
 *
 * leaf_snowflake.c
 *	  Snowflake mode: settings, shared state, the lock-free generator and
 *	  the SQL functions.
 *
 * An ID is, from the top, zero bits, the time since leaf.snowflake_epoch,
 * the worker ID and a sequence; leaf.snowflake_layout sets the widths and
 * the unit of time (leaf_sf_layout.c), by default 1 zero sign bit, 41
 * bits of milliseconds, 10 bits of worker ID and 12 bits of sequence.
 * One generator serves every backend of the instance.  Its whole state is
 * the last ID handed out, kept in one 64-bit atomic: a caller reads it,
 * reads the clock, computes the next ID (or a run of IDs within one
 * unit of time) and installs it with compare-and-swap.  There is no lock on
 * that path, and since each ID is larger than the last one installed, the
 * IDs of one instance are unique and increase in the order they are
 * handed out.
 *
 * The worker ID and the right to serve come from the snowflake worker
 * (leaf_sf_worker.c), which publishes them here:
 *	- "serving" holds the worker ID and a flag telling backends they may
 *	  generate;
 *	- "lease_ms" is the largest timestamp (ms since 1970) an ID may carry.
 *	  The worker raises it only after that value has been made durable, in
 *	  $PGDATA/leaf_snowflake.state and, with ZooKeeper, in the node's
 *	  forever node.  Hence every timestamp this instance ever used is at
 *	  or below the last recorded high-water mark, and a restarted node that
 *	  waits until its clock passes that mark cannot repeat an ID, however
 *	  its clock moved while it was down.
 *
 * Locking: the generator fields are atomics.  The descriptive fields read
 * by leaf_snowflake_status and written by the worker are protected by
 * the spinlock "mutex".  Waits in backends use their own latch with a
 * timeout; no lock is held while waiting.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "access/htup_details.h"
#include "access/xlog.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "leaf.h"
#include "common/leaf_common.h"
#include "common/leaf_errcodes.h"
#include "snowflake/leaf_sf_layout.h"
#include "snowflake/leaf_sf_lease.h"
#include "snowflake/leaf_sf_time.h"
#include "snowflake/leaf_snowflake.h"



#define LEAF_SF_RANDOM_START	100		/* a new unit starts at 0..99 */
#define LEAF_SF_SERVING_FLAG	0x80000000U

/*
 * Set in last_id while the generator may not serve.  IDs never have the
 * sign bit, so a compare-and-swap against a value read before the fence
 * was raised fails: once the worker has stopped the generator, no backend
 * that read the state before can still install an ID.
 */
#define LEAF_SF_FENCE			(UINT64CONST(1) << 63)

/* largest number of IDs generated before they are put in the result */
#define LEAF_SF_NEXTVALS_CHUNK	(8 * 1024 * 1024)

/* settings */
int			leaf_sf_worker_id = -1;

/* leaf.worker_id_source: read here, by the worker and by leaf_sf_db.c */
int			leaf_sf_id_source = LEAF_SF_SOURCE_AUTO;

static const struct config_enum_entry leaf_sf_id_source_options[] = {
	{"auto", LEAF_SF_SOURCE_AUTO, false},
	{"zookeeper", LEAF_SF_SOURCE_ZOOKEEPER, false},
	{"database", LEAF_SF_SOURCE_DATABASE, false},
	{"setting", LEAF_SF_SOURCE_SETTING, false},
	{NULL, 0, false}
};

/* leaf.worker_id_lease: read here, by the worker and by leaf_sf_db.c */
int			leaf_sf_lease_mode = LEAF_SF_LEASE_EXPIRING;

static const struct config_enum_entry leaf_sf_lease_mode_options[] = {
	{"expiring", LEAF_SF_LEASE_EXPIRING, false},
	{"bound", LEAF_SF_LEASE_BOUND, false},
	{NULL, 0, false}
};

char	   *leaf_sf_zk_hosts = NULL;
char	   *leaf_sf_zk_auth = NULL;
int64		leaf_sf_epoch_ms = INT64CONST(1288834974657);
int			leaf_sf_max_backward_ms = 5;

/*
 * Settings that more than one part of the snowflake worker reads, defined
 * here, where none of those parts depends on another for them (as the
 * allocator's are in leaf_alloc.c): leaf.heartbeat_interval (the worker,
 * registration through leaf_sf_margin_ms, and the client for the session
 * timeout), leaf.max_clock_drift_ms and leaf.worker_id_reclaim_after (the
 * worker and registration).
 */
int			leaf_sf_heartbeat_ms = 3000;
int			leaf_sf_max_clock_drift_ms = 5000;
int			leaf_sf_reclaim_after_ms = 0;
static char *leaf_sf_epoch_string = NULL;
static char *leaf_sf_layout_string = NULL;

/*
 * Test hooks: a build for the test suite (make LEAF_TEST_HOOKS=1, which
 * ./install.sh test and test/majors.sh use) has three leaf.test_* settings
 * here that shift the clocks and stall a call (and two in
 * leaf_zk_assign.c, which stall a registration and lose the reply to a
 * give-up).  The default build has none of them: there the hooks are
 * constants, and the settings do not exist.
 */
#ifdef LEAF_TEST_HOOKS
static int	leaf_sf_test_clock_offset_ms = 0;	/* this session's clock */
static int	leaf_sf_test_reserve_pause_ms = 0;	/* stall before the CAS */
static int	leaf_sf_test_node_clock_offset_ms = 0;	/* every process's clock */
#else
#define leaf_sf_test_clock_offset_ms 0
#define leaf_sf_test_reserve_pause_ms 0
#define leaf_sf_test_node_clock_offset_ms 0
#endif

typedef struct LeafSfShared
{
	pg_atomic_uint64 last_id;	/* atomic: last ID handed out (0 if none),
								 * | LEAF_SF_FENCE while not serving */
	pg_atomic_uint64 lease_ms;	/* atomic: largest timestamp (ms since
								 * 1970) an ID may carry, as persisted */
	pg_atomic_uint32 serving;	/* atomic: worker ID | LEAF_SF_SERVING_FLAG
								 * while IDs may be generated */
	pg_atomic_uint64 backward_waits;	/* atomic: waits for a clock that
										 * went back a little */
	pg_atomic_uint64 backward_errors;	/* atomic: errors for a clock that
										 * went back */
	pg_atomic_uint64 units_exhausted;	/* atomic: units of time whose
										 * sequence ran out */
	pg_atomic_uint64 last_exhausted;	/* atomic: the last such unit */

	slock_t		mutex;			/* protects all fields below */
	LeafSfPhase phase;			/* where the worker stands */
	char		reason[LEAF_SF_REASON_LEN];	/* why not ready, or "" */
	int			worker_id;		/* worker ID, -1 if not known yet */
	char		source[16];		/* name of the source of worker_id
								 * (leaf_sf_lease.h) */
	char		zk_state[32];	/* ZooKeeper connection state */
	char		node_address[LEAF_SF_ADDR_LEN];	/* this node's address */
	char		zk_node[LEAF_SF_ADDR_LEN * 2];	/* our forever node */
	int64		last_heartbeat_ms;	/* last high-water mark recorded, when */
	int64		not_before_ms;	/* clock must pass this before serving */
	int			npeers;			/* running peers at the last clock check */
	int64		peer_offset_ms; /* our clock minus the peers' average */
	bool		new_id_requested;	/* leaf_snowflake_new_worker_id() was
									 * called, the worker has not acted */
	pid_t		worker_pid;		/* snowflake worker, 0 if none */
	Latch	   *worker_latch;	/* its latch, NULL if none */
} LeafSfShared;

static LeafSfShared *leaf_sf = NULL;

/*
 * IDs handed out since the server started, counted per process (indexed
 * by the process's number, its index in ProcGlobal->allProcs, so that
 * each counter is written only by its own process and needs no locked
 * instruction) and summed by leaf_snowflake_status.
 * A process reusing a PGPROC adds to what its predecessor counted.  Each
 * counter has a cache line of its own.
 */
typedef union LeafSfIssued
{
	pg_atomic_uint64 n;			/* atomic: written by one process only */
	char		pad[PG_CACHE_LINE_SIZE];
} LeafSfIssued;

static LeafSfIssued *leaf_sf_issued = NULL;

static int
leaf_sf_issued_slots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS;
}

static inline void
leaf_sf_count_issued(int n)
{
	if (likely(MyProc != NULL &&
			   GetNumberFromPGProc(MyProc) < leaf_sf_issued_slots()))
	{
		pg_atomic_uint64 *c = &leaf_sf_issued[GetNumberFromPGProc(MyProc)].n;

		pg_atomic_write_u64(c, pg_atomic_read_u64(c) + (uint64) n);
	}
}

static bool leaf_sf_configured(void);

/* ---------------------------------------------------------------------
 * Settings, shared memory, worker registration
 * ---------------------------------------------------------------------
 */

static bool
leaf_sf_check_epoch(char **newval, void **extra, GucSource source)
{
	char	   *end;
	long long	v;

	errno = 0;
	v = strtoll(*newval, &end, 10);
	if (errno != 0 || end == *newval || *end != '\0' ||
		v < -(INT64CONST(1) << 42) || v > (INT64CONST(1) << 42))
	{
		GUC_check_errdetail("\"leaf.snowflake_epoch\" must be a whole number of milliseconds since 1970-01-01 00:00:00 UTC.");
		return false;
	}
	return true;
}

static void
leaf_sf_assign_epoch(const char *newval, void *extra)
{
	leaf_sf_epoch_ms = strtoll(newval, NULL, 10);
}

static bool
leaf_sf_check_layout(char **newval, void **extra, GucSource source)
{
	LeafSfLayout l;
	LeafSfLayout *copy;
	const char *problem;

	if (!leaf_sf_layout_parse(*newval, &l, &problem))
	{
		GUC_check_errdetail("%s", problem);
		return false;
	}
	copy = (LeafSfLayout *) guc_malloc(LOG, sizeof(LeafSfLayout));
	if (copy == NULL)
		return false;
	*copy = l;
	*extra = copy;
	return true;
}

static void
leaf_sf_assign_layout(const char *newval, void *extra)
{
	leaf_sf_layout = *(LeafSfLayout *) extra;
}

static bool
leaf_sf_check_zk_auth(char **newval, void **extra, GucSource source)
{
	const char *colon = strchr(*newval, ':');

	if ((*newval)[0] != '\0' && (colon == NULL || colon == *newval))
	{
		/* never repeat the value: it holds a password */
		GUC_check_errdetail("\"leaf.zk_auth\" must be user:password.");
		return false;
	}
	return true;
}

/* The value of leaf.zk_auth is never shown, not even to superusers. */
static const char *
leaf_sf_show_zk_auth(void)
{
	return (leaf_sf_zk_auth && leaf_sf_zk_auth[0] != '\0') ? "(set)" : "";
}

/*
 * The settings of worker IDs: by hand, or from ZooKeeper.  leaf.node_address,
 * which fleet mode reads too, is defined with leaf.wait_timeout in
 * leaf_common.c; leaf.zk_root by the worker (leaf_sf_worker.c) and
 * leaf.zk_auth_file by the ZooKeeper client (leaf_zk_client.c), which
 * read them.
 */
static void
leaf_sf_define_worker_id_settings(void)
{
	DefineCustomIntVariable("leaf.worker_id",
							"Sets the snowflake worker ID of this node (0-1023 in the default layout, -1 = not set).",
							"When set, ZooKeeper is not used.",
							&leaf_sf_worker_id,
							-1, INT_MIN, INT_MAX,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("leaf.zk_hosts",
							   "Sets the ZooKeeper servers (host:port,...) that assign snowflake worker IDs.",
							   NULL,
							   &leaf_sf_zk_hosts,
							   "",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("leaf.zk_auth",
							   "Sets the ZooKeeper digest credentials (user:password) of the snowflake worker.",
							   "When set, every node leaf creates in ZooKeeper is readable and writable by these credentials only.",
							   &leaf_sf_zk_auth,
							   "",
							   PGC_POSTMASTER,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   leaf_sf_check_zk_auth, NULL, leaf_sf_show_zk_auth);

	DefineCustomEnumVariable("leaf.worker_id_source",
							 "Sets where the snowflake worker ID comes from.",
							 "\"auto\": leaf.worker_id if set, else ZooKeeper if leaf.zk_hosts is set; "
							 "\"database\": a lease in the allocation database of leaf.alloc_conninfo.",
							 &leaf_sf_id_source,
							 LEAF_SF_SOURCE_AUTO,
							 leaf_sf_id_source_options,
							 PGC_POSTMASTER,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("leaf.worker_id_lease",
							 "Sets how a worker ID held in the allocation database is kept.",
							 "\"expiring\": a lease of a few seconds, taken over once it ended; "
							 "\"bound\": the node's until it gives it up (or after leaf.worker_id_reclaim_after without renewal), "
							 "so that it serves through an outage of the allocation database.",
							 &leaf_sf_lease_mode,
							 LEAF_SF_LEASE_EXPIRING,
							 leaf_sf_lease_mode_options,
							 PGC_POSTMASTER,
							 0,
							 NULL, NULL, NULL);
}

/* The settings of the IDs themselves and of the clock checks. */
static void
leaf_sf_define_id_settings(void)
{
	DefineCustomStringVariable("leaf.snowflake_epoch",
							   "Sets the epoch of snowflake IDs, in milliseconds since 1970-01-01 UTC.",
							   NULL,
							   &leaf_sf_epoch_string,
							   "1288834974657",
							   PGC_POSTMASTER,
							   0,
							   leaf_sf_check_epoch, leaf_sf_assign_epoch, NULL);

	DefineCustomStringVariable("leaf.snowflake_layout",
							   "Sets the layout of snowflake IDs: \"default\" (41+10+12), \"js53\" (41+6+6, below 2^53), or timestamp+worker+sequence bits.",
							   "An optional unit of time follows a slash, such as 38+12+13/10ms.  The state file and the ZooKeeper root record the layout; a node refuses to serve under another.",
							   &leaf_sf_layout_string,
							   "default",
							   PGC_POSTMASTER,
							   0,
							   leaf_sf_check_layout, leaf_sf_assign_layout, NULL);

	DefineCustomIntVariable("leaf.heartbeat_interval",
							"Sets how often the snowflake worker records its time.",
							NULL,
							&leaf_sf_heartbeat_ms,
							3000, 100, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.max_backward_ms",
							"Sets how far the clock may go back at run time before snowflake IDs fail instead of waiting.",
							NULL,
							&leaf_sf_max_backward_ms,
							5, 0, 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.max_clock_drift_ms",
							"Sets how far this node's clock may differ from its running peers' at registration.",
							"0 disables the check.",
							&leaf_sf_max_clock_drift_ms,
							5000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.worker_id_reclaim_after",
							"Sets after how long without heartbeat a worker ID may be taken over by a new node.",
							"0 never takes over a worker ID.",
							&leaf_sf_reclaim_after_ms,
							0, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

#ifdef LEAF_TEST_HOOKS
/* The leaf.test_* settings of a test build. */
static void
leaf_sf_define_test_settings(void)
{
	DefineCustomIntVariable("leaf.test_clock_offset_ms",
							"Shifts this session's snowflake clock (for tests only).",
							NULL,
							&leaf_sf_test_clock_offset_ms,
							0, -10000, 10000,
							PGC_SUSET,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.test_reserve_pause_ms",
							"Pauses this session's snowflake calls between reading the state and installing the new ID (for tests only).",
							NULL,
							&leaf_sf_test_reserve_pause_ms,
							0, 0, 60000,
							PGC_SUSET,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("leaf.test_node_clock_offset_ms",
							"Shifts the snowflake clock of the whole instance (for tests only).",
							NULL,
							&leaf_sf_test_node_clock_offset_ms,
							0, -60000, 60000,
							PGC_POSTMASTER,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
}
#endif

/* Register the snowflake worker with the postmaster. */
static void
leaf_sf_register_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	/*
	 * The worker connects to no database, but as a backend it shows in
	 * pg_stat_activity, where pg_terminate_backend can find it.  It starts
	 * once recovery has finished: a standby does not generate (see
	 * leaf_sf_reserve), and a promoted one starts its worker then.  It
	 * exits with a non-zero code whenever it stops, so the postmaster
	 * starts it again.
	 */
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "leaf");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "leaf_snowflake_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "leaf snowflake worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "leaf snowflake worker");
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

void
leaf_snowflake_init(void)
{
	leaf_sf_define_worker_id_settings();
	leaf_sf_ordinal_define_settings();
	leaf_sf_define_id_settings();
#ifdef LEAF_TEST_HOOKS
	leaf_sf_define_test_settings();
#endif
	leaf_sf_ordinal_resolve(leaf_sf_worker_id);

	if (!leaf_sf_configured())
		return;

	/*
	 * pg_upgrade runs the old and the new server in binary-upgrade mode
	 * (-b), with its own port and no TCP.  No ID is taken then, and a
	 * worker would rewrite the old data directory's state file and, with
	 * ZooKeeper, register under the address of pg_upgrade's port.
	 */
	if (IsBinaryUpgrade)
		return;

	leaf_sf_register_worker();
}

/*
 * Snowflake mode is on when a worker ID (by hand or from a pod ordinal) or
 * ZooKeeper is configured.
 */
static bool
leaf_sf_configured(void)
{
	return leaf_sf_worker_id != -1 || leaf_sf_ordinal_configured() ||
		(leaf_sf_zk_hosts != NULL && leaf_sf_zk_hosts[0] != '\0') ||
		leaf_sf_id_source != LEAF_SF_SOURCE_AUTO;
}

void
leaf_snowflake_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(LeafSfShared)));
	RequestAddinShmemSpace(mul_size(leaf_sf_issued_slots(), sizeof(LeafSfIssued)));
}

void
leaf_snowflake_shmem_startup(void)
{
	bool		found;

	leaf_sf_issued = ShmemInitStruct("leaf snowflake IDs issued",
									 mul_size(leaf_sf_issued_slots(), sizeof(LeafSfIssued)),
									 &found);
	if (!found)
	{
		int			i;

		for (i = 0; i < leaf_sf_issued_slots(); i++)
			pg_atomic_init_u64(&leaf_sf_issued[i].n, 0);
	}

	leaf_sf = ShmemInitStruct("leaf snowflake", sizeof(LeafSfShared), &found);
	if (found)
		return;

	memset(leaf_sf, 0, sizeof(LeafSfShared));
	pg_atomic_init_u64(&leaf_sf->last_id, LEAF_SF_FENCE);
	pg_atomic_init_u64(&leaf_sf->lease_ms, 0);
	pg_atomic_init_u32(&leaf_sf->serving, 0);
	pg_atomic_init_u64(&leaf_sf->backward_waits, 0);
	pg_atomic_init_u64(&leaf_sf->backward_errors, 0);
	pg_atomic_init_u64(&leaf_sf->units_exhausted, 0);
	pg_atomic_init_u64(&leaf_sf->last_exhausted, 0);
	SpinLockInit(&leaf_sf->mutex);
	leaf_sf->worker_id = -1;
	strlcpy(leaf_sf->zk_state, "not used", sizeof(leaf_sf->zk_state));
	if (leaf_sf_configured())
		leaf_sf->phase = LEAF_SF_STARTING;
	else
	{
		leaf_sf->phase = LEAF_SF_NOT_READY;
		strlcpy(leaf_sf->reason,
				"snowflake mode is not configured: neither \"leaf.worker_id\" nor \"leaf.zk_hosts\" is set",
				sizeof(leaf_sf->reason));
	}
}

/* ---------------------------------------------------------------------
 * Reports from the snowflake worker
 * ---------------------------------------------------------------------
 */

/* Wall clock in ms since 1970, as the worker sees it. */
int64
leaf_sf_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000 +
		leaf_sf_test_node_clock_offset_ms;
}

/*
 * Called by the worker when it starts.  Returns the timestamp of the last
 * ID handed out since the server started, or 0.
 */
int64
leaf_sf_attach_worker(void)
{
	SpinLockAcquire(&leaf_sf->mutex);
	leaf_sf->worker_pid = MyProcPid;
	leaf_sf->worker_latch = MyLatch;
	SpinLockRelease(&leaf_sf->mutex);

	return leaf_sf_last_issued_ms();
}

void
leaf_sf_detach_worker(void)
{
	SpinLockAcquire(&leaf_sf->mutex);
	leaf_sf->worker_pid = 0;
	leaf_sf->worker_latch = NULL;
	SpinLockRelease(&leaf_sf->mutex);
}

/*
 * Set the phase and its reason.  Leaving the ready phase stops generation
 * at once.
 */
void
leaf_sf_report(LeafSfPhase phase, const char *reason)
{
	if (phase != LEAF_SF_READY)
	{
		pg_atomic_write_u32(&leaf_sf->serving, 0);
		(void) pg_atomic_fetch_or_u64(&leaf_sf->last_id, LEAF_SF_FENCE);
	}

	SpinLockAcquire(&leaf_sf->mutex);
	leaf_sf->phase = phase;
	strlcpy(leaf_sf->reason, reason ? reason : "", sizeof(leaf_sf->reason));
	SpinLockRelease(&leaf_sf->mutex);
}

void
leaf_sf_report_zk(const char *state)
{
	SpinLockAcquire(&leaf_sf->mutex);
	strlcpy(leaf_sf->zk_state, state, sizeof(leaf_sf->zk_state));
	SpinLockRelease(&leaf_sf->mutex);
}

void
leaf_sf_report_identity(int worker_id, const char *source,
						const char *node_address, const char *zk_node)
{
	SpinLockAcquire(&leaf_sf->mutex);
	leaf_sf->worker_id = worker_id;
	strlcpy(leaf_sf->source, source ? source : "", sizeof(leaf_sf->source));
	strlcpy(leaf_sf->node_address, node_address ? node_address : "",
			sizeof(leaf_sf->node_address));
	strlcpy(leaf_sf->zk_node, zk_node ? zk_node : "", sizeof(leaf_sf->zk_node));
	SpinLockRelease(&leaf_sf->mutex);
}

void
leaf_sf_report_heartbeat(int64 ms)
{
	SpinLockAcquire(&leaf_sf->mutex);
	leaf_sf->last_heartbeat_ms = ms;
	SpinLockRelease(&leaf_sf->mutex);
}

void
leaf_sf_report_peers(int npeers, int64 offset_ms)
{
	SpinLockAcquire(&leaf_sf->mutex);
	leaf_sf->npeers = npeers;
	leaf_sf->peer_offset_ms = offset_ms;
	SpinLockRelease(&leaf_sf->mutex);
}

void
leaf_sf_report_not_before(int64 ms)
{
	SpinLockAcquire(&leaf_sf->mutex);
	leaf_sf->not_before_ms = ms;
	SpinLockRelease(&leaf_sf->mutex);
}

/* The first ms (since 1970) of the unit of time of an ID. */
static inline int64
leaf_sf_id_ms(uint64 id)
{
	return leaf_sf_ts_to_ms(leaf_sf_id_ts(id), leaf_sf_epoch_ms);
}

/* Timestamp (ms since 1970) of the last ID handed out, or 0. */
int64
leaf_sf_last_issued_ms(void)
{
	uint64		last = pg_atomic_read_u64(&leaf_sf->last_id) & ~LEAF_SF_FENCE;

	if (last == 0)
		return 0;
	return leaf_sf_id_ms(last);
}

/*
 * Start generating with the given worker ID.  No ID will carry a
 * timestamp at or below floor_ms, nor (unless new_id) below anything
 * handed out before.
 * The caller has set the lease already.  Returns false, without serving,
 * for a worker ID out of range.
 */
bool
leaf_sf_start_serving(int worker_id, int64 floor_ms, bool new_id)
{
	uint64		old;
	int64		floor_ts = leaf_sf_ms_to_ts(floor_ms, leaf_sf_epoch_ms);
	uint64		newval;

	if (worker_id < 0 || worker_id > leaf_sf_max_worker_id())
	{
		leaf_sf_report(LEAF_SF_NOT_READY, "no valid worker ID");
		return false;
	}

	if (floor_ts < 0)
		floor_ts = 0;
	if (floor_ts > leaf_sf_max_ts())
		floor_ts = leaf_sf_max_ts();

	pg_atomic_write_u32(&leaf_sf->serving, 0);
	(void) pg_atomic_fetch_or_u64(&leaf_sf->last_id, LEAF_SF_FENCE);

	/*
	 * Make the last ID the final one of the floor's unit of time for this
	 * worker ID, unless something later was handed out already.  This
	 * also lifts the fence.
	 */
	old = pg_atomic_read_u64(&leaf_sf->last_id);
	for (;;)
	{
		int64		ts = leaf_sf_id_ts(old & ~LEAF_SF_FENCE);

		/*
		 * A worker ID taken on request (the clock was far ahead, then set
		 * right) starts at its own floor: its IDs cannot equal those of the
		 * worker ID before, but they are lower.
		 */
		if (ts < floor_ts || new_id)
			ts = floor_ts;
		newval = leaf_sf_make_id(ts, (uint64) worker_id, leaf_sf_seq_mask());
		if (pg_atomic_compare_exchange_u64(&leaf_sf->last_id, &old, newval))
			break;
	}

	SpinLockAcquire(&leaf_sf->mutex);
	leaf_sf->worker_id = worker_id;
	leaf_sf->phase = LEAF_SF_READY;
	leaf_sf->reason[0] = '\0';
	leaf_sf->not_before_ms = 0;
	SpinLockRelease(&leaf_sf->mutex);

	pg_memory_barrier();
	pg_atomic_write_u32(&leaf_sf->serving,
						(uint32) worker_id | LEAF_SF_SERVING_FLAG);
	return true;
}

/*
 * Publish a new lease.  The caller has made lease_ms durable.  The lease
 * may also go down, which stops generation above it.
 */
void
leaf_sf_set_lease(int64 lease_ms)
{
	pg_write_barrier();
	pg_atomic_write_u64(&leaf_sf->lease_ms, (uint64) Max(lease_ms, 0));
}

int64
leaf_sf_get_lease(void)
{
	return (int64) pg_atomic_read_u64(&leaf_sf->lease_ms);
}

/* ---------------------------------------------------------------------
 * The generator
 * ---------------------------------------------------------------------
 */

/* This session's clock, in ms since 1970. */
static inline int64
leaf_sf_now_ms(void)
{
	return leaf_sf_clock_ms() + leaf_sf_test_clock_offset_ms;
}

/*
 * Wait for ms milliseconds (measured on the monotonic clock), still
 * answering interrupts.
 */
static void
leaf_sf_sleep_ms(long ms)
{
	instr_time	start;
	instr_time	now;
	long		left = ms;

	INSTR_TIME_SET_CURRENT(start);
	while (left > 0)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		INSTR_TIME_SET_CURRENT(now);
		INSTR_TIME_SUBTRACT(now, start);
		left = ms - (long) INSTR_TIME_GET_MILLISEC(now);
	}
}

static void
leaf_sf_wake_worker(void)
{
	Latch	   *latch;

	SpinLockAcquire(&leaf_sf->mutex);
	latch = leaf_sf->worker_latch;
	SpinLockRelease(&leaf_sf->mutex);
	if (latch)
		SetLatch(latch);
}

/*
 * The generator may not serve.  While the worker is still starting, or
 * the lease is about to be renewed, wait up to leaf.wait_timeout; else
 * raise the reason.  *waited_ms accumulates the time spent here over one
 * call.
 */
static void
leaf_sf_wait_or_fail(bool lease_expired, int *waited_ms)
{
	LeafSfPhase phase;
	char		reason[LEAF_SF_REASON_LEN];

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot generate snowflake IDs during recovery"),
				 errdetail("A standby has no worker ID of its own: snowflake IDs are generated only by a primary."),
				 errhint("Call leaf_snowflake() on the primary.")));

	SpinLockAcquire(&leaf_sf->mutex);
	phase = leaf_sf->phase;
	strlcpy(reason, leaf_sf->reason, sizeof(reason));
	SpinLockRelease(&leaf_sf->mutex);

	if ((phase == LEAF_SF_STARTING || phase == LEAF_SF_READY) &&
		*waited_ms < leaf_wait_timeout_ms)
	{
		if (lease_expired)
			leaf_sf_wake_worker();
		leaf_sf_sleep_ms(10);
		*waited_ms += 10;
		return;
	}

	/*
	 * The primary message is the same whatever the reason, which is the
	 * worker's and goes into the detail.  It begins with a lowercase word
	 * or a setting's name, so the detail quotes it rather than start with
	 * it.
	 */

	if (phase == LEAF_SF_STARTING && reason[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_SNOWFLAKE_NOT_READY),
				 errmsg("snowflake generator is not ready"),
				 errdetail("The snowflake worker says: %s.  It did not start serving within \"leaf.wait_timeout\" (%d ms).",
						   reason, leaf_wait_timeout_ms),
				 errhint("See the server log and the view leaf_snowflake_status.")));
	if (phase == LEAF_SF_STARTING)
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_SNOWFLAKE_NOT_READY),
				 errmsg("snowflake generator is not ready"),
				 errdetail("The snowflake worker has not registered within \"leaf.wait_timeout\" (%d ms).",
						   leaf_wait_timeout_ms),
				 errhint("See the server log and the view leaf_snowflake_status.")));
	if (phase == LEAF_SF_READY)
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_SNOWFLAKE_NOT_READY),
				 errmsg("snowflake generator is not ready"),
				 reason[0] ?
				 errdetail("The high-water mark of issued timestamps was not recorded in time.  The snowflake worker says: %s.",
						   reason) :
				 errdetail("The high-water mark of issued timestamps was not recorded in time."),
				 errhint("See the server log and the view leaf_snowflake_status.")));
	ereport(ERROR,
			(errcode(ERRCODE_LEAF_SNOWFLAKE_NOT_READY),
			 errmsg("snowflake generator is not ready"),
			 reason[0] ? errdetail("The snowflake worker says: %s.", reason) : 0,
			 errhint("See the server log and the view leaf_snowflake_status.")));
}

/*
 * Raise LF103: the clock reading now_ms (ms since 1970) is outside the
 * timestamps of the layout.
 */
pg_noreturn static void
leaf_sf_range_error(int64 now_ms)
{
	char		span[32];

	if (now_ms < leaf_sf_epoch_ms)
		ereport(ERROR,
				(errcode(ERRCODE_LEAF_TIMESTAMP_OVERFLOW),
				 errmsg("snowflake timestamp out of range: the clock is before \"leaf.snowflake_epoch\"")));
	leaf_sf_layout_describe_span(span, sizeof(span));
	ereport(ERROR,
			(errcode(ERRCODE_LEAF_TIMESTAMP_OVERFLOW),
			 errmsg("snowflake timestamp out of range: more than %s since \"leaf.snowflake_epoch\"",
					span),
			 errdetail("The %d-bit timestamp field ran out " INT64_FORMAT " ms after the epoch.",
					   leaf_sf_layout.ts_bits,
					   leaf_sf_ts_to_ms(leaf_sf_max_ts(), 0)),
			 errhint("Use a later \"leaf.snowflake_epoch\", or another ID scheme.")));
}

/* The timestamp of the clock reading now_ms; LF103 if it has none. */
static inline int64
leaf_sf_checked_ts(int64 now_ms)
{
	int64		ts = leaf_sf_ms_to_ts(now_ms, leaf_sf_epoch_ms);

	if (unlikely(ts < 0 || ts > leaf_sf_max_ts()))
		leaf_sf_range_error(now_ms);
	return ts;
}

/*
 * A new unit of time starts its sequence at random below this, to spread
 * the low bits; at most 100, and 1 (always 0) for sequences under 80.
 */
static inline int
leaf_sf_random_start(void)
{
	return (int) Max(Min((int64) LEAF_SF_RANDOM_START,
						 (int64) ((leaf_sf_seq_mask() + 1) / 40)), 1);
}

/*
 * Count the unit of time ts as one whose sequence ran out, once however
 * many callers find it so: each of them spins until the next unit, and
 * only the first moves last_exhausted on to ts.
 */
static inline void
leaf_sf_count_exhausted(int64 ts)
{
	uint64		seen = pg_atomic_read_u64(&leaf_sf->last_exhausted);

	while (seen < (uint64) ts)
	{
		if (pg_atomic_compare_exchange_u64(&leaf_sf->last_exhausted, &seen,
										   (uint64) ts))
		{
			pg_atomic_fetch_add_u64(&leaf_sf->units_exhausted, 1);
			break;
		}
	}
}

/*
 * The unit of time ts is used up: wait for the next one.  A unit longer
 * than 1 ms is slept through up to its last ms; the rest is spun, as a
 * unit of 1 ms is.
 */
static inline void
leaf_sf_wait_next_unit(int64 ts, int64 now, uint32 *spins)
{
	if (leaf_sf_layout.unit_ms > 1)
	{
		int64		left = leaf_sf_ts_to_ms(ts + 1, leaf_sf_epoch_ms) - now;

		if (left > 1)
			leaf_sf_sleep_ms((long) (left - 1));
	}
	if ((++(*spins) & 1023) == 0)
		CHECK_FOR_INTERRUPTS();
}

/*
 * The clock is offset ms behind the last ID.  Wait once for a small step
 * (up to leaf.max_backward_ms), so that the caller tries again; else, or
 * if it already waited, raise LF101.
 */
static void
leaf_sf_clock_behind(int64 offset, bool *backward_waited)
{
	if (offset <= leaf_sf_max_backward_ms && !*backward_waited)
	{
		pg_atomic_fetch_add_u64(&leaf_sf->backward_waits, 1);
		*backward_waited = true;
		leaf_sf_sleep_ms((long) (offset * 2));
		return;
	}
	pg_atomic_fetch_add_u64(&leaf_sf->backward_errors, 1);
	ereport(ERROR,
			(errcode(ERRCODE_LEAF_CLOCK_BACKWARDS),
			 errmsg("clock moved backwards by " INT64_FORMAT " ms, refusing to generate snowflake IDs",
					offset),
			 *backward_waited ?
			 errdetail("The clock was still behind the last ID after waiting.") :
			 errdetail("\"leaf.max_backward_ms\" is %d ms.", leaf_sf_max_backward_ms),
			 errhint("Calls succeed again once the clock is past the last ID issued.  If the clock was set back for good, leaf_snowflake_new_worker_id() makes a node with a worker ID from ZooKeeper serve at once with a new one.")));
}

/*
 * Read the last ID handed out, if the generator serves.  Else wait or
 * fail (leaf_sf_wait_or_fail), and return false for the caller to try
 * again.
 */
static inline bool
leaf_sf_read_last(uint64 *old, int *waited_ms)
{
	if ((pg_atomic_read_u32(&leaf_sf->serving) & LEAF_SF_SERVING_FLAG) == 0)
	{
		/* a clock outside the ID's range is the better reason */
		(void) leaf_sf_checked_ts(leaf_sf_now_ms());

		leaf_sf_wait_or_fail(false, waited_ms);
		return false;
	}
	pg_read_barrier();

	*old = pg_atomic_read_u64(&leaf_sf->last_id);
	pg_read_barrier();
	if (*old & LEAF_SF_FENCE)
	{
		/* stopped (or restarted) since "serving" was read */
		leaf_sf_wait_or_fail(false, waited_ms);
		return false;
	}
	return true;
}

/*
 * Reserve up to "want" (>= 1) consecutive IDs, all in one unit of time.
 * Returns the first one and sets *count to how many were reserved.
 */
static int64
leaf_sf_reserve(int want, int *count)
{
	int			waited_ms = 0;
	bool		backward_waited = false;
	bool		paused = false;
	uint32		spins = 0;

	for (;;)
	{
		uint64		worker_id;
		uint64		old;
		uint64		newval;
		int64		now;
		int64		ts;
		int64		old_ts;
		int64		seq;
		int			n;

		/* the last ID before the clock, so a later clock reads later */
		if (!leaf_sf_read_last(&old, &waited_ms))
			continue;

		/*
		 * Every field of the new ID comes from the value the
		 * compare-and-swap checks: a worker-ID change installs a new last
		 * ID, so a caller that read the old one cannot use its worker ID.
		 */
		worker_id = (uint64) leaf_sf_id_worker(old);
		now = leaf_sf_now_ms();

		if (now > (int64) pg_atomic_read_u64(&leaf_sf->lease_ms))
		{
			leaf_sf_wait_or_fail(true, &waited_ms);
			continue;
		}

		ts = leaf_sf_checked_ts(now);

		old_ts = leaf_sf_id_ts(old);
		if (ts > old_ts)
		{
			/* a new unit of time: start at a random sequence 0..99 */
			seq = (int64) pg_prng_uint64_range(&pg_global_prng_state, 0,
											   leaf_sf_random_start() - 1);
			n = (int) Min((uint64) want, leaf_sf_seq_mask() + 1 - (uint64) seq);
			newval = leaf_sf_make_id(ts, worker_id, (uint64) seq);
		}
		else if (ts == old_ts)
		{
			seq = (int64) (old & leaf_sf_seq_mask()) + 1;
			if ((uint64) seq > leaf_sf_seq_mask())
			{
				leaf_sf_count_exhausted(ts);
				leaf_sf_wait_next_unit(ts, now, &spins);
				continue;
			}
			n = (int) Min((uint64) want, leaf_sf_seq_mask() + 1 - (uint64) seq);
			newval = old + 1;
		}
		else
		{
			/* how far the clock is behind the unit of the last ID */
			leaf_sf_clock_behind(leaf_sf_ts_to_ms(old_ts, leaf_sf_epoch_ms) - now,
								 &backward_waited);
			continue;
		}

		if (unlikely(leaf_sf_test_reserve_pause_ms > 0) && !paused)
		{
			/* a backend stalled right before its compare-and-swap */
			paused = true;
			leaf_sf_sleep_ms(leaf_sf_test_reserve_pause_ms);
		}

		if (pg_atomic_compare_exchange_u64(&leaf_sf->last_id, &old,
										   newval + (uint64) (n - 1)))
		{
			leaf_sf_count_issued(n);
			*count = n;
			return (int64) newval;
		}
	}
}

/* ---------------------------------------------------------------------
 * SQL functions
 * ---------------------------------------------------------------------
 */

PG_FUNCTION_INFO_V1(leaf_snowflake);
PG_FUNCTION_INFO_V1(leaf_snowflake_nextvals);
PG_FUNCTION_INFO_V1(leaf_snowflake_decode);
PG_FUNCTION_INFO_V1(leaf_snowflake_status);
PG_FUNCTION_INFO_V1(leaf_snowflake_new_worker_id);
PG_FUNCTION_INFO_V1(leaf_snowflake_layout);
PG_FUNCTION_INFO_V1(leaf_snowflake_units_exhausted);

/*
 * leaf_snowflake_units_exhausted() returns bigint: the units of time whose
 * sequence ran out since the server started, so that callers waited for
 * the next unit (leaf_node_metrics).
 */
Datum
leaf_snowflake_units_exhausted(PG_FUNCTION_ARGS)
{
	leaf_require_preload();
	PG_RETURN_INT64((int64) pg_atomic_read_u64(&leaf_sf->units_exhausted));
}

/*
 * leaf_snowflake() returns bigint
 */
Datum
leaf_snowflake(PG_FUNCTION_ARGS)
{
	int			n;

	leaf_require_preload();
	PG_RETURN_INT64(leaf_sf_reserve(1, &n));
}

/*
 * leaf_snowflake_nextvals(n integer) returns setof bigint
 *
 * Reserves whole runs of a millisecond's sequence per compare-and-swap.
 * The IDs are generated into an array first and only then put into the
 * result, so that a bulk request uses up each millisecond before the
 * clock moves on.
 */
Datum
leaf_snowflake_nextvals(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		want = PG_GETARG_INT32(0);
	int64	   *buf;
	int			chunk;

	leaf_require_preload();
	if (want < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("number of snowflake IDs must not be negative"),
				 errdetail("%d IDs were asked for.", want),
				 errhint("Ask for 0 to %d IDs in one call.", LEAF_MAX_NEXTVALS)));
	/* as for leaf_segment_nextvals: the IDs are materialised */
	if (want > LEAF_MAX_NEXTVALS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot take more than %d snowflake IDs in one call",
						LEAF_MAX_NEXTVALS),
				 errdetail("%d IDs were asked for.", want),
				 errhint("Call leaf_snowflake_nextvals several times.")));

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	chunk = Min(want, LEAF_SF_NEXTVALS_CHUNK);
	/* touch the buffer now, so that page faults do not spread the IDs */
	buf = chunk > 0 ? palloc0(sizeof(int64) * chunk) : NULL;

	while (want > 0)
	{
		int			filled = 0;
		int			todo = Min(want, chunk);
		int			i;

		while (filled < todo)
		{
			int			n;
			int64		first = leaf_sf_reserve(todo - filled, &n);

			for (i = 0; i < n; i++)
				buf[filled++] = first + i;
		}

		for (i = 0; i < todo; i++)
		{
			Datum		value = Int64GetDatum(buf[i]);
			bool		isnull = false;

			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
								 &value, &isnull);
		}
		want -= todo;
		CHECK_FOR_INTERRUPTS();
	}

	return (Datum) 0;
}

/* ms since 1970 to timestamptz */
static TimestampTz
leaf_sf_ms_to_timestamptz(int64 ms)
{
	return (ms - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000) * 1000;
}

/*
 * leaf_snowflake_decode(id bigint, OUT ts timestamptz, OUT worker_id int,
 *						 OUT sequence int)
 */
Datum
leaf_snowflake_decode(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	leaf_require_preload();
	/* 22023 for a negative ID; as leaf_snowflake_time(id) has it */
	values[0] = TimestampTzGetDatum(leaf_sf_id_time(&leaf_sf_layout,
													leaf_sf_epoch_ms, id));

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	values[1] = Int32GetDatum((int32) leaf_sf_id_worker((uint64) id));
	values[2] = Int32GetDatum((int32) ((uint64) id & leaf_sf_seq_mask()));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * leaf_snowflake_layout(): one row, see leaf--1.2--1.3.sql.  The largest
 * ID has every bit of the three fields set; the timestamps run out at the
 * end of the last unit of time.
 */
Datum
leaf_snowflake_layout(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[9];
	bool		nulls[9] = {false};
	char		name[LEAF_SF_LAYOUT_LEN];
	int			bits = leaf_sf_layout.ts_bits + leaf_sf_ts_shift();
	int64		end_ms;

	leaf_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	leaf_sf_layout_format(&leaf_sf_layout, name, sizeof(name));
	values[0] = CStringGetTextDatum(name);
	values[1] = Int32GetDatum(leaf_sf_layout.ts_bits);
	values[2] = Int32GetDatum(leaf_sf_layout.worker_bits);
	values[3] = Int32GetDatum(leaf_sf_layout.seq_bits);
	values[4] = Int32GetDatum(leaf_sf_layout.unit_ms);
	values[5] = Int32GetDatum(leaf_sf_max_worker_id());
	values[6] = Int32GetDatum((int32) (leaf_sf_seq_mask() + 1));
	values[7] = Int64GetDatum((int64) ((UINT64CONST(1) << bits) - 1));
	end_ms = leaf_sf_ts_to_ms(leaf_sf_max_ts() + 1, leaf_sf_epoch_ms);
	/* beyond what timestamptz holds (year 294276): none */
	if (end_ms < INT64CONST(9000000000000000))
		values[8] = TimestampTzGetDatum(leaf_sf_ms_to_timestamptz(end_ms));
	else
		nulls[8] = true;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * Why a call made now would not return an ID, or NULL if it would.  snap
 * is a copy of the descriptive fields; buf (size bytes) may take the
 * reason.
 */
static const char *
leaf_sf_not_ready_why(const LeafSfShared *snap, uint64 last_id,
					  int64 lease, char *buf, size_t size)
{
	int64		last_ms = leaf_sf_id_ms(last_id & ~LEAF_SF_FENCE);

	if (RecoveryInProgress())
		return "the server is in recovery: snowflake IDs are generated only by a primary";
	else if (snap->phase == LEAF_SF_STARTING && snap->reason[0] != '\0')
	{
		snprintf(buf, size,
				 "the snowflake worker is starting: %s", snap->reason);
		return buf;
	}
	else if (snap->phase == LEAF_SF_STARTING)
		return "the snowflake worker is starting";
	else if (snap->phase != LEAF_SF_READY)
		return snap->reason;
	else if ((last_id & LEAF_SF_FENCE) != 0 ||
			 (pg_atomic_read_u32(&leaf_sf->serving) & LEAF_SF_SERVING_FLAG) == 0)
		return "the snowflake worker is restarting the generator";
	else if (!leaf_sf_ms_in_range(leaf_sf_now_ms(), leaf_sf_epoch_ms))
	{
		char		range[64];

		leaf_sf_layout_describe_range(range, sizeof(range));
		snprintf(buf, size,
				 "the clock is outside the %s since \"leaf.snowflake_epoch\": calls fail with LF103",
				 range);
		return buf;
	}
	else if (last_ms > leaf_sf_now_ms() + leaf_sf_max_backward_ms)
	{
		int64		behind = last_ms - leaf_sf_now_ms();

		snprintf(buf, size,
				 "the clock is " INT64_FORMAT " ms behind the last ID issued, more than \"leaf.max_backward_ms\" (%d ms): calls fail with LF101 until it catches up, or until a new worker ID is taken (leaf_snowflake_new_worker_id())",
				 behind, leaf_sf_max_backward_ms);
		return buf;
	}
	else if (leaf_sf_now_ms() > lease)
	{
		/* the worker's reason, if it has found out why */
		snprintf(buf, size,
				 "the high-water mark of issued timestamps was not recorded in time: the lease ran out " INT64_FORMAT " ms ago%s%s",
				 leaf_sf_now_ms() - lease, snap->reason[0] ? "; " : "", snap->reason);
		return buf;
	}
	return NULL;
}

/*
 * leaf_snowflake_status(): one row, see leaf--1.0.sql and its upgrade scripts.
 */
Datum
leaf_snowflake_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[17];
	bool		nulls[17];
	LeafSfShared snap;
	uint64		issued = 0;
	int			ncols;
	uint64		last_id;
	int64		lease;
	bool		ready;
	const char *why = NULL;
	char		lease_reason[LEAF_SF_REASON_LEN];
	int			i = 0;

	leaf_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	/* 16 columns in release 1.0, 17 (ids_issued) from 1.1 on */
	ncols = tupdesc->natts;
	if (ncols != 16 && ncols != 17)
		elog(ERROR, "incorrect number of output arguments");

	SpinLockAcquire(&leaf_sf->mutex);
	snap.phase = leaf_sf->phase;
	memcpy(snap.reason, leaf_sf->reason, sizeof(snap.reason));
	snap.worker_id = leaf_sf->worker_id;
	memcpy(snap.source, leaf_sf->source, sizeof(snap.source));
	memcpy(snap.zk_state, leaf_sf->zk_state, sizeof(snap.zk_state));
	memcpy(snap.node_address, leaf_sf->node_address, sizeof(snap.node_address));
	memcpy(snap.zk_node, leaf_sf->zk_node, sizeof(snap.zk_node));
	snap.last_heartbeat_ms = leaf_sf->last_heartbeat_ms;
	snap.not_before_ms = leaf_sf->not_before_ms;
	snap.npeers = leaf_sf->npeers;
	snap.peer_offset_ms = leaf_sf->peer_offset_ms;
	SpinLockRelease(&leaf_sf->mutex);
	last_id = pg_atomic_read_u64(&leaf_sf->last_id);
	lease = (int64) pg_atomic_read_u64(&leaf_sf->lease_ms);

	/* ready means: a call made now would return an ID */
	why = leaf_sf_not_ready_why(&snap, last_id, lease, lease_reason,
								sizeof(lease_reason));
	ready = (why == NULL);
	last_id &= ~LEAF_SF_FENCE;

	memset(nulls, 0, sizeof(nulls));

	/* worker_id, worker_id_source */
	values[i] = Int32GetDatum(snap.worker_id);
	nulls[i++] = snap.worker_id < 0;
	values[i] = CStringGetTextDatum(snap.source);
	nulls[i++] = snap.source[0] == '\0';
	/* ready, not_ready_reason */
	values[i++] = BoolGetDatum(ready);
	if (ready)
		nulls[i++] = true;
	else
		values[i++] = CStringGetTextDatum(why);
	/* node_address, zk_state, zk_node */
	values[i] = CStringGetTextDatum(snap.node_address);
	nulls[i++] = snap.node_address[0] == '\0';
	values[i++] = CStringGetTextDatum(snap.zk_state);
	values[i] = CStringGetTextDatum(snap.zk_node);
	nulls[i++] = snap.zk_node[0] == '\0';
	/* last_heartbeat, last_timestamp, recorded_until, not_before */
	values[i] = TimestampTzGetDatum(leaf_sf_ms_to_timestamptz(snap.last_heartbeat_ms));
	nulls[i++] = snap.last_heartbeat_ms == 0;
	values[i] = TimestampTzGetDatum(leaf_sf_ms_to_timestamptz(leaf_sf_id_ms(last_id)));
	nulls[i++] = last_id == 0;
	values[i] = TimestampTzGetDatum(leaf_sf_ms_to_timestamptz(lease));
	nulls[i++] = lease == 0;
	values[i] = TimestampTzGetDatum(leaf_sf_ms_to_timestamptz(snap.not_before_ms));
	nulls[i++] = snap.not_before_ms == 0;
	/* peers, peer_clock_offset_ms */
	values[i++] = Int32GetDatum(snap.npeers);
	values[i++] = Int64GetDatum(snap.peer_offset_ms);
	/* backward_waits, backward_errors */
	values[i++] = Int64GetDatum((int64) pg_atomic_read_u64(&leaf_sf->backward_waits));
	values[i++] = Int64GetDatum((int64) pg_atomic_read_u64(&leaf_sf->backward_errors));
	/* epoch */
	values[i++] = Int64GetDatum(leaf_sf_epoch_ms);
	/* ids_issued */
	if (ncols == 17)
	{
		int			p;

		for (p = 0; p < leaf_sf_issued_slots(); p++)
			issued += pg_atomic_read_u64(&leaf_sf_issued[p].n);
		values[i++] = Int64GetDatum((int64) issued);
	}

	Assert(i == ncols);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* Called by the worker: was a new worker ID requested?  Clears it. */
bool
leaf_sf_new_id_requested(void)
{
	bool		requested;

	SpinLockAcquire(&leaf_sf->mutex);
	requested = leaf_sf->new_id_requested;
	leaf_sf->new_id_requested = false;
	SpinLockRelease(&leaf_sf->mutex);
	return requested;
}

/*
 * leaf_snowflake_new_worker_id(): give up the worker ID from ZooKeeper and
 * register a new one.  The way out when the clock ran far ahead and was
 * set right: the old worker ID cannot serve until the clock passes its
 * mark again, a new one can at once.  The old forever node stays, marked
 * abandoned, with its mark; recycling takes it once its mark has passed.
 * Execution is revoked from PUBLIC.
 */
Datum
leaf_snowflake_new_worker_id(PG_FUNCTION_ARGS)
{
	char		source[16];
	const LeafSfSource *from;
	bool		gives_up;
	pid_t		pid;

	leaf_require_preload();
	if (leaf_sf_worker_id != -1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("\"leaf.worker_id\" is set by hand (%d): a new worker ID comes only from ZooKeeper",
						leaf_sf_worker_id),
				 errhint("Set \"leaf.worker_id\" to a worker ID that no node ever used, and restart the server.")));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot take a new worker ID during recovery")));

	SpinLockAcquire(&leaf_sf->mutex);
	strlcpy(source, leaf_sf->source, sizeof(source));
	pid = leaf_sf->worker_pid;
	from = leaf_sf_source_named(source);
	/* only a source that can give its worker ID up */
	gives_up = from != NULL && from->give_up != NULL;
	if (gives_up && pid != 0)
		leaf_sf->new_id_requested = true;
	SpinLockRelease(&leaf_sf->mutex);

	if (pid == 0 || !gives_up)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the snowflake worker holds no worker ID from ZooKeeper or from the allocation database"),
				 errdetail("The worker ID is from \"%s\"; a new one can only be had from ZooKeeper or the allocation database.",
						   source[0] ? source : "nowhere yet"),
				 errhint("See leaf_snowflake_status.")));
	leaf_sf_wake_worker();
	ereport(LOG,
			(errmsg("a new snowflake worker ID was requested")));
	PG_RETURN_VOID();
}
