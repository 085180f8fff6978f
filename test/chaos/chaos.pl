
# Copyright (c) leaf contributors

# The fault-injection run, as long as you like:
#
#   make chaos CHAOS_SEED=7 CHAOS_SECONDS=1200
#
# CHAOS_LAYOUT sets the shards' leaf.snowflake_layout (js53, 41+13+9...);
# CHAOS_ZK_TAKEN=N starts ZooKeeper's numbering at N (see seed_zk in
# LeafChaos.pm), past 1023 under a layout with more worker bits.
# CHAOS_WORKER_IDS=database takes the shards' worker IDs from the
# allocation database (leaf.worker_id_source = 'database') instead of
# ZooKeeper, which is then not started.
#
# (as the user that runs the tests, after make install).  See
# test/chaos/LeafChaos.pm for the topology and the faults, and
# test/chaos/check.pl for what is checked.
use strict;
use warnings;

use lib 'test/chaos';    # prove runs from the top of the tree

use Test::More;
use LeafChaos;

LeafChaos::tap_run(
	seed => $ENV{CHAOS_SEED} // 1,
	seconds => $ENV{CHAOS_SECONDS} // 60,
	every => $ENV{CHAOS_FAULT_EVERY} // 3,
	settle => $ENV{CHAOS_SETTLE} // 20,
	worker_ids => $ENV{CHAOS_WORKER_IDS} // 'zookeeper');
done_testing();
