/*-------------------------------------------------------------------------
 *
 * leaf_compat.h
 *	  What differs between the PostgreSQL major versions leaf builds
 *	  against (15 to 19).
 *
 * The code is written against the newest API; for older majors this file
 * supplies it in terms of what they have.  Every PG_VERSION_NUM test of
 * leaf is here, and nowhere else.  The macros are expanded where they are
 * used, so this file needs no headers beyond postgres.h, which every .c
 * file includes first: a caller includes what the underlying function
 * needs (named with each macro).
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEAF_COMPAT_H
#define LEAF_COMPAT_H

/*
 * 18 replaced pg_attribute_noreturn(), written after the declarator, by
 * pg_noreturn, written before the declaration.  GCC and Clang accept the
 * attribute in front as well, so older majors get pg_noreturn as that.
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

#if PG_VERSION_NUM < 160000

/*
 * 16: get_guc_variables() also returns the number of variables, and
 * GetNumConfigOptions() is gone (utils/guc_tables.h).  The inner call is
 * not expanded again, so it is 15's own get_guc_variables().
 */
#define get_guc_variables(num_vars) \
	(*(num_vars) = GetNumConfigOptions(), get_guc_variables())

/*
 * 16: one object_ownercheck() instead of a function per catalog
 * (utils/acl.h, catalog/pg_database.h).  leaf asks only about databases.
 */
#define object_ownercheck(classid, objectid, roleid) \
	(AssertMacro((classid) == DatabaseRelationId), \
	 pg_database_ownercheck((objectid), (roleid)))

/*
 * 16: the "extra" of a setting's check hook is allocated with guc_malloc()
 * (utils/guc.h), in the settings' memory context, and freed with pfree;
 * before, it was malloc()'d and freed with free().
 */
#define guc_malloc(elevel, size) malloc(size)

#endif							/* PG_VERSION_NUM < 160000 */

#if PG_VERSION_NUM < 170000

/*
 * 17: PGPROC has no pgprocno any more; a process's number is its index
 * in ProcGlobal->allProcs, as before (storage/proc.h).
 */
#define GetNumberFromPGProc(proc) ((proc)->pgprocno)

/*
 * 17: an extension names its wait events (utils/wait_event.h), which
 * pg_stat_activity.wait_event shows; before, every wait of an extension
 * is the one event "Extension".
 */
#define WaitEventExtensionNew(wait_event_name) PG_WAIT_EXTENSION

#endif							/* PG_VERSION_NUM < 170000 */

#if PG_VERSION_NUM < 190000

/*
 * 19: ShmemInitHash() takes one size, the number of entries
 * (storage/shmem.h); before, an initial and a largest size, which leaf
 * gave the same.
 */
#define ShmemInitHash(name, nelems, infoP, hash_flags) \
	ShmemInitHash((name), (nelems), (nelems), (infoP), (hash_flags))

/*
 * 19: table_beginscan() takes flags as well (access/tableam.h); leaf
 * passes none.
 */
#define table_beginscan(rel, snapshot, nkeys, key, flags) \
	table_beginscan((rel), (snapshot), (nkeys), (key))

#endif							/* PG_VERSION_NUM < 190000 */

/*
 * 19: a signal handler gets what is known of the signal's sender as well
 * (SIGNAL_ARGS); a handler that hands the signal on to another passes
 * LEAF_SIGNAL_ARGS, all it got.
 */
#if PG_VERSION_NUM >= 190000
#define LEAF_SIGNAL_ARGS postgres_signal_arg, pg_siginfo
#else
#define LEAF_SIGNAL_ARGS postgres_signal_arg
#endif

#endif							/* LEAF_COMPAT_H */
