# Copyright (c) leaf contributors

# The copy matrix (test/copy_matrix), its second part: the cells of the
# promotions of a standby (synchronous and not), of a copied data
# directory started beside the original, and of pg_upgrade followed by a
# promotion, which test/t/301_copy_matrix.pl runs when
# $copy_matrix_part says so.  A file of its own, so that the two parts
# run side by side.
use strict;
use warnings;

# loaded here, at compile time: their INIT blocks set up the test's
# directories and ports, which a file run by "do" is too late for
use Cwd;
use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

our $copy_matrix_part = 'promotions';
my $file = 'test/t/301_copy_matrix.pl';
do "./$file";
die "$file: $@" if $@;
