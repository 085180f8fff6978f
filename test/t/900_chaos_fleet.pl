
# Copyright (c) leaf contributors

# A whole fleet (allocation primary and synchronous standby, three shards,
# a 3-node ZooKeeper ensemble) under load for 60 seconds while faults are
# injected on a schedule drawn from a fixed seed; every ID a client
# received is checked.  See test/chaos/.  The seed's first three faults
# are partitions (from the allocation database, from one ZooKeeper server,
# from both), so that they are drawn even where a slow machine fits fewer
# faults than planned into the 60 s.
use strict;
use warnings;

use lib 'test/chaos';    # prove runs from the top of the tree

use Test::More;
use LeafChaos;

LeafChaos::tap_run(seed => 20264593, seconds => 60, every => 3);
done_testing();
