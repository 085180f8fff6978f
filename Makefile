# leaf: Meituan's Leaf ID generator as a PostgreSQL extension.
#
#   make && make install          build and install (PGXS)
#   make LEAF_TEST_HOOKS=1        the build the tests need (then install)
#   make installcheck             the FF1 known-answer test
#                                 (test/ff1_vectors.c), pg_regress (sql/,
#                                 expected/) on a temporary instance, then
#                                 the TAP tests (test/t/); run as a
#                                 non-root user
#   make dist                     leaf-VERSION.zip for PGXN (META.json)
#
EXTENSION = leaf
MODULE_big = leaf
OBJS = $(patsubst %.c,%.o,$(wildcard src/*.c src/*/*.c))
PGFILEDESC = "leaf - distributed ID generator"

# Versions, as pg_stat_statements ships them: the install script of
# release 1.0 (src/leaf--1.0.sql) and one upgrade script per later
# release (src/leaf--X--Y.sql).  CREATE EXTENSION leaf installs 1.0 and
# follows the upgrade scripts to default_version, so a new installation
# and an upgraded one run the same statements.  A release is a new upgrade
# script, default_version in leaf.control and an entry in CHANGELOG.md;
# released scripts never change (CHANGELOG.md records their md5, which
# test/t/024_extension_upgrade.pl checks).
DATA = $(sort $(wildcard src/leaf--*.sql))
# PGXS removes pg_regress's and prove's files itself
EXTRA_CLEAN = tmp_check_regress

REGRESS = $(sort $(patsubst sql/%.sql,%,$(wildcard sql/*.sql)))
# The test database is UTF8 whatever the caller's locale: pg_regress drops
# LC_ALL, and without LANG (a new minimal Debian root has none) the
# instance would be SQL_ASCII, where a multibyte biz_tag counts otherwise.
REGRESS_OPTS = --temp-config=$(srcdir)/test/leaf.conf \
	--temp-instance=$(CURDIR)/tmp_check_regress --encoding=UTF8
TAP_TESTS = 1
# test/t/036_pg_upgrade_majors.pl upgrades from the older major that
# LEAF_UPGRADE_FROM names (test/majors.sh sets it in the chroots that have
# one); without it the file is left out here, and fails if named.
PROVE_TESTS = $(sort $(filter-out $(if $(LEAF_UPGRADE_FROM),,test/t/036_pg_upgrade_majors.pl), \
	$(wildcard test/t/*.pl)))

# make installcheck LEAF_INSTALLCHECK=package: pg_regress alone, against
# an installed default build such as a Debian package's
# (debian/tests/installcheck).  It leaves out the sql/ files that set
# leaf.test_* settings, which only the test build has, the FF1 program,
# which tests the sources rather than what is installed, and the TAP
# files.  Without it, installcheck runs everything and refuses an
# installed leaf that is not a test build.
ifeq ($(LEAF_INSTALLCHECK),package)
REGRESS := $(filter-out $(patsubst sql/%.sql,%,$(shell grep -l 'leaf\.test_' sql/*.sql)),$(REGRESS))
TAP_TESTS =
endif

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)

# ZooKeeper C client (multi-threaded build), libpq (fleet mode draws
# segments from another server) and OpenSSL's libcrypto (AES for public
# IDs).  THREADED, which the client's sync API needs, is set below for
# the files that include <zookeeper/zookeeper.h> only.
PG_CPPFLAGS = -I$(srcdir)/src -I$(shell $(PG_CONFIG) --includedir)
SHLIB_LINK = -lzookeeper_mt -lpq -lcrypto

# LEAF_TEST_HOOKS=1: the build the test suite needs, with the leaf.test_*
# settings that shift clocks and stall calls (src/snowflake/leaf_snowflake.c).  The
# default build has none of them.  Objects built one way are not rebuilt
# the other way: make clean in between.
ifeq ($(LEAF_TEST_HOOKS),1)
PG_CPPFLAGS += -DLEAF_TEST_HOOKS
endif

include $(PGXS)

# after PGXS, which resets PROVE_FLAGS.  --timer: each file's time in
# prove's output, which test/lib/run.sh compares with the file's budget.
# LEAF_TEST_JOBS=N runs N TAP files at once (each has its own data
# directories, and its ports and ZooKeeper servers come from
# PostgreSQL::Test::Cluster's port reservations).
PROVE_FLAGS += -I $(srcdir)/test/lib --timer $(if $(LEAF_TEST_JOBS),-j$(LEAF_TEST_JOBS))

# The files that include <zookeeper/zookeeper.h> (through leaf_zk_client.h)
# are compiled with THREADED, for the client's sync API; no other file
# is.  After PGXS, which sets CPPFLAGS from PG_CPPFLAGS.
LEAF_ZK_OBJS = $(addprefix src/snowflake/,leaf_sf_source_setting.o leaf_sf_source_zk.o leaf_zk_assign.o leaf_zk_client.o)
$(LEAF_ZK_OBJS) $(LEAF_ZK_OBJS:.o=.bc): override CPPFLAGS += -DTHREADED

# The fault-injection run on its own, as long as asked (after make install):
#   make chaos CHAOS_SEED=7 CHAOS_SECONDS=1200
# A 60-second run with a fixed seed is part of installcheck
# (test/t/900_chaos_fleet.pl).
CHAOS_SEED ?= 1
CHAOS_SECONDS ?= 60
CHAOS_FAULT_EVERY ?= 3
CHAOS_SETTLE ?= 20
CHAOS_LAYOUT ?= default
CHAOS_ZK_TAKEN ?= 0
CHAOS_WORKER_IDS ?= zookeeper
export CHAOS_SEED CHAOS_SECONDS CHAOS_FAULT_EVERY CHAOS_SETTLE CHAOS_LAYOUT CHAOS_ZK_TAKEN CHAOS_WORKER_IDS

chaos: PROVE_TESTS = test/chaos/chaos.pl
chaos: test-build-check
	$(prove_installcheck)
.PHONY: chaos

# The FF1 known-answer test, before pg_regress and TAP: NIST's sample
# vectors through a general FF1 that exists only in test/ff1_vectors.c,
# and the 63-bit FF1 that leaf.so runs (src/public_id/leaf_ff1.c, which needs no
# PostgreSQL header) against it.  Built and run by installcheck only.
test/ff1_vectors: test/ff1_vectors.c src/public_id/leaf_ff1.c src/public_id/leaf_ff1.h
	$(CC) $(CFLAGS) -I$(srcdir)/src -o $@ $(srcdir)/test/ff1_vectors.c $(srcdir)/src/public_id/leaf_ff1.c -lcrypto

# Its TAP output goes to test/ff1_vectors.out, and into make's output with
# a prefix, so that it is not taken for pg_regress's.
ff1check: test/ff1_vectors
	@test/ff1_vectors >test/ff1_vectors.out 2>&1; rc=$$?; \
	sed 's/^/ff1_vectors: /' test/ff1_vectors.out; exit $$rc

# The tests need the installed leaf to be a test build (LEAF_TEST_HOOKS=1).
test-build-check:
	@grep -q -a 'leaf.test_clock_offset_ms' '$(DESTDIR)$(pkglibdir)/leaf$(DLSUFFIX)' || { \
	  echo "the installed leaf$(DLSUFFIX) is not a test build: make clean && make LEAF_TEST_HOOKS=1 && make install" >&2; \
	  exit 1; }

ifneq ($(LEAF_INSTALLCHECK),package)
installcheck: test-build-check ff1check
endif
.PHONY: ff1check test-build-check

# make dist: the archive of the committed tree (HEAD) that PGXN takes,
# leaf-VERSION.zip with every file under leaf-VERSION/, VERSION being
# leaf.control's default_version (META.json has the same, which
# test/t/031_versions_agree.pl checks).
LEAF_VERSION = $(shell sed -n "s/^default_version = '\(.*\)'$$/\1/p" $(srcdir)/leaf.control)
dist:
	git archive --format=zip --prefix=leaf-$(LEAF_VERSION)/ -o leaf-$(LEAF_VERSION).zip HEAD
.PHONY: dist
EXTRA_CLEAN += test/ff1_vectors test/ff1_vectors.out
