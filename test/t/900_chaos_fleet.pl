
# Copyright (c) leaf contributors

# A whole fleet (allocation primary and synchronous standby, three shards,
# a 3-node ZooKeeper ensemble) under load for 60 seconds while faults are
# injected on a schedule drawn from a fixed seed; every ID a client
# received is checked.  See test/chaos/.
use strict;
use warnings;

use lib 'test/chaos';    # prove runs from the top of the tree

use Test::More;
use LeafChaos;

LeafChaos::tap_run(seed => 20261130, seconds => 60, every => 3);
done_testing();
