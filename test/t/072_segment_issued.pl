# When a segment ID was issued: leaf_segment_log gets one row per load,
# in the load's own transaction (a load whose transaction fails leaves
# none, here and on a fleet's allocation database), pruned after
# leaf.segment_log_retention, off at 0; and the window of an ID taken at
# a known instant holds that instant.  A shard whose role may not write
# the allocation database's record loads without it.
use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# a commit that fails after the load's statements ran: a deferred
# constraint trigger on leaf_alloc, for one tag
my $refuse_commit = q[
	CREATE FUNCTION public.refuse_commit() RETURNS trigger LANGUAGE plpgsql AS
	  $$BEGIN RAISE EXCEPTION 'commit of % refused by the test', NEW.biz_tag; END$$;
	CREATE CONSTRAINT TRIGGER refuse_commit AFTER UPDATE ON leaf_alloc
	  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
	  WHEN (NEW.biz_tag = 'fails') EXECUTE FUNCTION public.refuse_commit();
];

sub loader
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT system_identifier::text || '.' || data_directory || '/postgres' FROM leaf_copy_identity");
}

my $node = LeafTest::new_node('local',
	"leaf.segment_log_retention = '1d'", "leaf.wait_timeout = '2s'");
my $me = loader($node);

# ---- the row is written in the transaction of the load
$node->safe_psql('postgres',
	"SELECT leaf_segment_create('fails', 10); $refuse_commit");
my ($state, $err) = LeafTest::sqlstate($node, 'postgres',
	"SELECT leaf_segment_nextval('fails')");
like($err, qr/refused by the test/, 'the load of a tag fails at its commit');
is($node->safe_psql('postgres', q[
	SELECT a.max_id || ' ' || (SELECT count(*) FROM leaf_segment_log l
	                            WHERE l.biz_tag = 'fails')
	  FROM leaf_alloc a WHERE a.biz_tag = 'fails']),
	'1 0', 'a load whose transaction failed raised no max_id and wrote no row');
$node->safe_psql('postgres', 'DROP TRIGGER refuse_commit ON leaf_alloc');
ok( LeafTest::wait_until(
		sub {
			my ($ret, $out) = $node->psql('postgres',
				"SELECT leaf_segment_nextval('fails')");
			return $ret == 0 && $out eq '1';
		},
		'the load of "fails" once its commit is let through'),
	'the tag serves once its commit succeeds');
is($node->safe_psql('postgres', q[
	SELECT string_agg(first_id || '-' || last_id || ' ' || loaded_by, ',')
	  FROM leaf_segment_log WHERE biz_tag = 'fails' AND first_id < 11]),
	"1-10 $me", 'the committed load wrote its row, naming this database');

# ---- an ID taken at a known instant lies in its window
$node->safe_psql('postgres', q[
	SELECT leaf_segment_create('known', 3);
	SELECT leaf_segment_nextval('known');
	CREATE TABLE taken AS
	SELECT clock_timestamp() AS before, leaf_segment_nextval('known') AS id,
	       clock_timestamp() AS after
	  FROM generate_series(1, 40)]);
is($node->safe_psql('postgres', q[
	SELECT count(*) FILTER (WHERE i.earliest <= t.after
	                          AND (i.latest IS NULL OR i.latest >= t.before)),
	       count(*) FILTER (WHERE i.latest IS NOT NULL)
	         > 0
	  FROM taken t, leaf_segment_issued('known', t.id) i]),
	'40|t', 'every ID\'s window holds the instant it was taken, some closed');
is($node->safe_psql('postgres', q[
	SELECT b.min_id <= min(t.id) AND b.max_id >= max(t.id)
	  FROM taken t,
	       leaf_segment_id_bounds('known', (SELECT min(before) FROM taken),
	                              (SELECT max(after) FROM taken)) b
	 GROUP BY b.min_id, b.max_id]),
	't', 'the bounds of the interval hold every ID taken in it');

# ---- pruning: this loader's rows older than the retention go, at a load
# (its preload may add the segment from 1010)
$node->safe_psql('postgres', qq[
	SELECT leaf_segment_create('prune', 10, 1000);
	INSERT INTO leaf_segment_log VALUES
	  ('prune', 1, 10, now() - interval '2 days', '$me', NULL),
	  ('prune', 11, 20, now() - interval '2 days', 'other/postgres', NULL),
	  ('prune', 21, 30, now() - interval '1 hour', '$me', 11)]);
$node->safe_psql('postgres', "SELECT leaf_segment_nextval('prune')");
is($node->safe_psql('postgres', q[
	SELECT string_agg(first_id::text, ',' ORDER BY first_id)
	  FROM leaf_segment_log WHERE biz_tag = 'prune' AND first_id <= 1000]),
	'11,21,1000',
	'a load pruned its loader\'s row older than the retention, no other');

# ---- 0 turns the record off
$node->append_conf('postgresql.conf', "leaf.segment_log_retention = 0");
$node->restart;
$node->safe_psql('postgres', q[
	SELECT leaf_segment_create('off', 5);
	SELECT leaf_segment_nextval('off') FROM generate_series(1, 12)]);
is($node->safe_psql('postgres',
	"SELECT count(*) FROM leaf_segment_log WHERE biz_tag = 'off'"),
	'0', 'leaf.segment_log_retention = 0 records no load');
$node->stop;

# ---- fleet mode: the row goes to the allocation database, in the load's
# remote transaction
my $alloc = LeafTest::new_node('alloc', "listen_addresses = '127.0.0.1'");
my $aport = $alloc->port;
my $user = $alloc->safe_psql('postgres', 'SELECT current_user');
$alloc->safe_psql('postgres', qq[
	SELECT leaf_segment_create('fleet', 5);
	SELECT leaf_segment_create('fails', 10);
	$refuse_commit]);
my $shard = LeafTest::new_node('shard',
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=$user'",
	"leaf.wait_timeout = '2s'");
my $shard_me = loader($shard);
$shard->safe_psql('postgres',
	"SELECT leaf_segment_nextval('fleet') FROM generate_series(1, 12)");
is($alloc->safe_psql('postgres', q[
	SELECT string_agg(first_id || '-' || last_id, ',' ORDER BY first_id)
	  FROM leaf_segment_log WHERE biz_tag = 'fleet' AND first_id <= 12]),
	'1-5,6-10,11-20', 'the shard\'s loads are recorded on the allocation database');
is($alloc->safe_psql('postgres', qq[
	SELECT bool_and(loaded_by = '$shard_me')
	  FROM leaf_segment_log WHERE biz_tag = 'fleet']),
	't', 'each names the shard\'s system, data directory and database');
is($shard->safe_psql('postgres', 'SELECT count(*) FROM leaf_segment_log'),
	'0', 'the shard\'s own leaf_segment_log stays empty');
($state, $err) = LeafTest::sqlstate($shard, 'postgres',
	"SELECT leaf_segment_nextval('fails')");
like($err, qr/refused by the test|allocation database/,
	'a remote load that fails at its commit fails the call');
is($alloc->safe_psql('postgres', q[
	SELECT a.max_id || ' ' || (SELECT count(*) FROM leaf_segment_log l
	                            WHERE l.biz_tag = 'fails')
	  FROM leaf_alloc a WHERE a.biz_tag = 'fails']),
	'1 0', 'and leaves neither max_id raised nor a row on the allocation database');

# ---- a shard whose role may not write the record loads without it
$alloc->safe_psql('postgres', q[
	CREATE ROLE leaf_fleet LOGIN;
	GRANT SELECT, UPDATE ON leaf_alloc TO leaf_fleet;
	SELECT leaf_segment_create('ungranted', 5)]);
my $plain = LeafTest::new_node('plain',
	"leaf.alloc_conninfo = 'host=127.0.0.1 port=$aport dbname=postgres user=leaf_fleet'");
is($plain->safe_psql('postgres', "SELECT leaf_segment_nextval('ungranted')"),
	'1', 'a shard whose role lacks the grants of the record still loads');
is($alloc->safe_psql('postgres',
	"SELECT count(*) FROM leaf_segment_log WHERE biz_tag = 'ungranted'"),
	'0', 'and records nothing');
ok( LeafTest::wait_until(
		sub {
			slurp_file($plain->logfile) =~
			  /leaf_segment_log is missing or not writable/;
		},
		'the shard\'s log line on the record'),
	'the shard\'s log says why');

$plain->stop;
$shard->stop;
$alloc->stop;
done_testing();
