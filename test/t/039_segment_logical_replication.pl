
# Copyright (c) leaf contributors

# A database whose leaf tables are written by logical replication has the
# counters of the publisher: were it to serve beside it, both would hand
# out the same IDs.  It never serves on its own (LF012, naming the
# subscription, pointing to leaf_alloc_cutover), also once the
# subscription is dropped without a leaf call in between, also after a
# restart.  leaf_alloc_cutover(), on the subscriber with its subscription
# disabled, fences the publisher's leaf (it serves what it holds in memory,
# then is refused with LF006), raises the subscriber's counters to at
# least the publisher's and lets the subscriber serve: no ID is handed out
# by both, and inserts on the subscriber collide with no replicated row.
# With only the user's table published, the subscriber has no tag until
# the cut-over creates it above the publisher's counter.  The cut-over is
# refused while the subscription is enabled (55000) and to a non-superuser
# (42501).
# copy-matrix: segment logical_sub
# copy-matrix: segment logical_cutover

use strict;
use warnings;

use LeafTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# a segment duration this short keeps the dynamic step at the tag's step
# (100), so what the publisher holds in memory after the fence is small
my $pub = LeafTest::new_node('publisher',
	"leaf.segment_duration = '1ms'",
	'wal_level = logical',
	'max_replication_slots = 20',
	'max_wal_senders = 20');
my $sub = LeafTest::new_node('subscriber',
	"leaf.segment_duration = '1ms'",
	'max_logical_replication_workers = 8');
$sub->safe_psql('postgres', 'CREATE ROLE app_user LOGIN');

my $orders_ddl =
  q[CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT leaf_segment_nextval('order'), note text)];

# On the publisher: a database that serves tag 'order' into its table
# orders, its publication, and a function that takes IDs until the first
# refusal.  The subscriber's database has the same OID: a check of the
# database OID alone takes the replicated leaf_alloc_source for its own.
sub publisher_db
{
	my ($db, $oid, $publication) = @_;
	$pub->safe_psql('postgres', "CREATE DATABASE $db OID $oid");
	$pub->safe_psql($db, qq[CREATE EXTENSION leaf;
		SELECT leaf_segment_create('order', step => 100);
		$orders_ddl;
		INSERT INTO orders (note) SELECT 'pub' FROM generate_series(1, 200);
		$publication;
		CREATE FUNCTION take_until_refused(tag text, n int)
		RETURNS TABLE (id bigint, refused text)
		LANGUAGE plpgsql AS \$\$
		BEGIN
			FOR i IN 1 .. n LOOP
				BEGIN
					id := leaf_segment_nextval(tag);
				EXCEPTION WHEN others THEN
					id := NULL;
					refused := SQLSTATE || ' ' || SQLERRM;
					RETURN NEXT;
					RETURN;
				END;
				RETURN NEXT;
			END LOOP;
		END
		\$\$;]);
}

# On the subscriber: the database, leaf, the table, the subscription, and
# the wait until every table is synchronised
sub subscriber_db
{
	my ($db, $oid, $subname, $publication) = @_;
	$sub->safe_psql('postgres', "CREATE DATABASE $db OID $oid");
	$sub->safe_psql($db, "CREATE EXTENSION leaf; $orders_ddl;");
	$sub->safe_psql($db,
		"CREATE SUBSCRIPTION $subname CONNECTION '" . $pub->connstr . " dbname=$db' PUBLICATION $publication");
	ok( $sub->poll_query_until(
			$db, qq[SELECT count(*) > 0 AND bool_and(r.srsubstate = 'r')
			  FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid
			 WHERE s.subname = '$subname']),
		"$subname: the tables are synchronised");
	$pub->wait_for_catchup($subname);
}

sub disable_subscription
{
	my ($db, $subname) = @_;
	$sub->safe_psql($db, "ALTER SUBSCRIPTION $subname DISABLE");
	ok( $sub->poll_query_until(
			$db, qq[SELECT count(*) = 0 FROM pg_stat_subscription
			 WHERE subname = '$subname' AND pid IS NOT NULL]),
		"$subname: disabled, its apply worker gone");
}

# $n calls of leaf_segment_nextval('order') in $db of $node, one a
# statement, going on after errors; returns (\@ids, \@sqlstates, $stderr)
sub take
{
	my ($node, $db, $n) = @_;
	my $h = LeafTest::start_psql_script($node, $db,
		"\\set VERBOSITY verbose\n" . ("SELECT leaf_segment_nextval('order');\n" x $n));
	my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
	return ([ map { 0 + $_ } ($out =~ /^(\d+)$/mg) ],
		[ $err =~ /ERROR:\s+([0-9A-Z]{5}):/g ], $err);
}

# $n rows inserted into orders of $db on $node, one a statement, going on
# after errors; returns (\@ids, \@sqlstates)
sub insert_orders
{
	my ($node, $db, $note, $n) = @_;
	my $h = LeafTest::start_psql_script($node, $db,
		"\\set VERBOSITY verbose\n"
		  . ("INSERT INTO orders (note) VALUES ('$note') RETURNING id;\n" x $n));
	my ($rc, $out, $err) = LeafTest::finish_psql_script($h);
	return ([ map { 0 + $_ } ($out =~ /^(\d+)$/mg) ],
		[ $err =~ /ERROR:\s+([0-9A-Z]{5}):/g ]);
}

# A stream of $n inserts into orders on the publisher
sub start_pub_inserts
{
	my ($db, $n) = @_;
	return LeafTest::start_psql_script($pub, $db,
		"INSERT INTO orders (note) VALUES ('pub') RETURNING id;\n" x $n);
}

# The publisher's IDs after a cut-over: what it still holds in memory,
# until the first refusal.  Returns (\@ids, the refusal or '').
sub drain_publisher
{
	my ($db) = @_;
	my $out = $pub->safe_psql($db,
		q[SELECT coalesce(id::text, ''), coalesce(refused, '') FROM take_until_refused('order', 1000)]);
	my (@ids, $refused);
	for (split /\n/, $out)
	{
		my ($id, $r) = split /\|/, $_, 2;
		push @ids, 0 + $id if $id ne '';
		$refused = $r if defined $r && $r ne '';
	}
	return (\@ids, $refused // '');
}

sub distinct { my %s = map { $_ => 1 } @_; return [ sort keys %s ]; }

# $sql in $db of $node as $user: (SQLSTATE or undef, stderr)
sub sqlstate_as
{
	my ($node, $db, $user, $sql) = @_;
	my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $user ]);
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ($state, $err);
}

# leaf_alloc_cutover(...) in $db of the subscriber; returns (SQLSTATE or
# undef, stderr, { biz_tag => [ max_id_before, max_id, publisher_max_id ] })
sub cutover
{
	my ($db, $args) = @_;
	my ($state, $err, $out) = LeafTest::sqlstate($sub, $db,
		"SELECT biz_tag, max_id_before, max_id, publisher_max_id FROM leaf_alloc_cutover($args)");
	my %rows;
	for (split /\n/, $out // '')
	{
		my ($tag, @v) = split /\|/, $_, -1;
		$rows{$tag} = \@v if @v == 3;
	}
	return ($state, $err, \%rows);
}

sub max_id
{
	my ($node, $db) = @_;
	return $node->safe_psql($db, q[SELECT max_id FROM leaf_alloc WHERE biz_tag = 'order']);
}

# After a cut-over: the subscriber serves and inserts without a collision;
# the publisher is fenced (its counter stays at $pub_max); no ID comes
# from both.  @$before are the IDs the subscriber handed out before the
# cut-over (none where it was refused).
sub after_cutover
{
	my ($db, $case, $pub_max, $before) = @_;

	my ($ids, $states, $err) = take($sub, $db, 300);
	is(scalar(@$ids), 300, "$case: the subscriber serves after the cut-over")
	  or diag $err;
	my ($rows, $istates) = insert_orders($sub, $db, 'sub', 100);
	is(scalar(@$rows), 100, "$case: inserts into orders on the subscriber succeed");
	is(scalar(grep { $_ eq '23505' } @$istates), 0,
		"$case: no duplicate key among them");

	my ($pids, $refused) = drain_publisher($db);
	like($refused, qr/^LF006 /,
		"$case: the publisher, fenced, is refused once its segments run out")
	  or diag 'it handed out ' . scalar(@$pids) . " IDs after the cut-over, refused: '$refused'";
	note "$case: the publisher handed out " . scalar(@$pids)
	  . " IDs from memory after the cut-over";
	is(max_id($pub, $db), $pub_max, "$case: the publisher loaded no segment after the cut-over");

	my @pub_ids = (split(/\n/, $pub->safe_psql($db, 'SELECT id FROM orders')), @$pids);
	my @sub_ids = (@$before, @$ids,
		split(/\n/, $sub->safe_psql($db, q[SELECT id FROM orders WHERE note = 'sub'])));
	my $repeats = LeafTest::count_repeats([ @pub_ids, @sub_ids ]);
	diag sprintf('%s: the publisher handed out %d IDs, the subscriber %d; repeated: %d',
		$case, scalar(@pub_ids), scalar(@sub_ids), $repeats);
	is($repeats, 0, "$case: 0 IDs handed out by both");
}

############################################################################
# (a) serving beside the publisher, (b) the cut-over
############################################################################

publisher_db('app', 16390, 'CREATE PUBLICATION pub FOR ALL TABLES');
subscriber_db('app', 16390, 'sub', 'pub');
is($sub->safe_psql('app', 'SELECT count(*) FROM orders'), 200,
	'(a) the subscriber has the publisher\'s rows');

# the publisher serves while the subscriber is asked for IDs
my $stream = start_pub_inserts('app', 2000);
ok(LeafTest::wait_until(sub { LeafTest::id_stream_count($stream) > 0 }, 'the publisher to serve'),
	'(a) the publisher serves');
my ($ids, $states, $err) = take($sub, 'app', 20);
my @sub_before = @$ids;
is(scalar(@$ids), 0, '(a) the subscriber hands out no ID while the publisher serves')
  or diag 'the subscriber handed out ' . scalar(@$ids) . ' IDs';
is_deeply(distinct(@$states), ['LF012'], '(a) it is refused with LF012');
like($err,
	qr/refusing to allocate a segment for biz_tag "order": leaf_alloc is written by logical replication/,
	'(a) the message says why');
like($err, qr/^DETAIL:.*subscription "sub"/mi, '(a) the detail names the subscription');
like($err, qr/^HINT:.*leaf_alloc_cutover/m, '(a) the hint names leaf_alloc_cutover');
# leaf_unadopt raises a sequence to a tag's max_id through
# leaf_segment_discard: not to a counter that lags behind the publisher
my ($dstate) = LeafTest::sqlstate($sub, 'app', q[SELECT leaf_segment_discard('order')]);
is($dstate, 'LF012', '(a) leaf_segment_discard (and so leaf_unadopt) is refused too');

my ($state) = cutover('app', q['sub']);
is($state, '55000', '(b) leaf_alloc_cutover is refused while the subscription is enabled');

# the application stops calling leaf on the publisher
my @streamed = LeafTest::finish_id_stream($stream);
is(scalar(@streamed), 2000, '(a) the publisher served its stream');
$pub->wait_for_catchup('sub');
is($sub->safe_psql('app', q[SELECT count(*) FROM orders WHERE note = 'pub']),
	$pub->safe_psql('app', q[SELECT count(*) FROM orders WHERE note = 'pub']),
	'(b) the subscriber caught up');
disable_subscription('app', 'sub');

($state, $err) = sqlstate_as($sub, 'app', 'app_user',
	q[SELECT * FROM leaf_alloc_cutover('sub')]);
is($state, '42501', '(b) leaf_alloc_cutover is refused to a non-superuser');

my $sub_max_before = max_id($sub, 'app');
my $cut;
($state, $err, $cut) = cutover('app', q['sub']);
is($state, undef, '(b) leaf_alloc_cutover(\'sub\') with the subscription disabled') or diag $err;
my $pub_max = max_id($pub, 'app');
my $sub_max = max_id($sub, 'app');
is_deeply([ sort keys %$cut ], ['order'], '(b) it returns a row for tag order');
my ($before, $after, $pubmax) = @{ $cut->{order} // [] };
is($before, $sub_max_before, '(b) max_id_before is the subscriber\'s counter before');
is($pubmax, $pub_max, '(b) publisher_max_id is the publisher\'s counter');
ok(defined $after && $after >= $pub_max, '(b) max_id is at least the publisher\'s')
  or diag 'max_id: ' . ($after // 'none') . ", the publisher's: $pub_max";
cmp_ok($sub_max, '>=', $pub_max, '(b) the subscriber\'s counter lies at least at the publisher\'s');

after_cutover('app', '(b)', $pub_max, \@sub_before);

############################################################################
# (c) the subscription dropped without a leaf call
############################################################################

publisher_db('appc', 16391, 'CREATE PUBLICATION pub_c FOR ALL TABLES');
subscriber_db('appc', 16391, 'sub_c', 'pub_c');
$sub->safe_psql('appc', 'DROP SUBSCRIPTION sub_c');
# what leaf recorded survives a restart
$sub->restart;

# the publisher goes on
$stream = start_pub_inserts('appc', 500);
is(scalar(LeafTest::finish_id_stream($stream)), 500, '(c) the publisher serves');

($ids, $states, $err) = take($sub, 'appc', 20);
@sub_before = @$ids;
is(scalar(@$ids), 0, '(c) the former subscriber hands out no ID')
  or diag 'the former subscriber handed out ' . scalar(@$ids) . ' IDs';
is_deeply(distinct(@$states), ['LF012'], '(c) it is refused with LF012');
like($err, qr/leaf_alloc is written by logical replication/, '(c) the message says why');

($state, $err, $cut) = cutover('appc',
	q['sub_c', publisher => '] . $pub->connstr . q[ dbname=appc']);
is($state, undef, '(c) leaf_alloc_cutover(\'sub_c\', publisher => ...)') or diag $err;
$pub_max = max_id($pub, 'appc');
($before, $after, $pubmax) = @{ $cut->{order} // [] };
is($pubmax, $pub_max, '(c) publisher_max_id is the publisher\'s counter');
ok(defined $after && $after >= $pub_max, '(c) max_id is at least the publisher\'s')
  or diag 'max_id: ' . ($after // 'none') . ", the publisher's: $pub_max";
cmp_ok(max_id($sub, 'appc'), '>=', $pub_max,
	'(c) the subscriber\'s counter lies at least at the publisher\'s');

after_cutover('appc', '(c)', $pub_max, \@sub_before);

############################################################################
# (d) only the user's table published: no tag on the subscriber
############################################################################

publisher_db('appd', 16392, 'CREATE PUBLICATION pub_orders FOR TABLE orders');
subscriber_db('appd', 16392, 'sub_d', 'pub_orders');
$stream = start_pub_inserts('appd', 500);
is(scalar(LeafTest::finish_id_stream($stream)), 500, '(d) the publisher serves');
$pub->wait_for_catchup('sub_d');
is($sub->safe_psql('appd', 'SELECT count(*) FROM orders'), 700,
	'(d) the subscriber has the publisher\'s rows');

($state, $err) = LeafTest::sqlstate($sub, 'appd', q[SELECT leaf_segment_nextval('order')]);
is($state, 'LF001', '(d) before the cut-over the subscriber has no tag order');

disable_subscription('appd', 'sub_d');
($state, $err, $cut) = cutover('appd', q['sub_d']);
is($state, undef, '(d) leaf_alloc_cutover(\'sub_d\')') or diag $err;
$pub_max = max_id($pub, 'appd');
($before, $after, $pubmax) = @{ $cut->{order} // [] };
is($pubmax, $pub_max, '(d) publisher_max_id is the publisher\'s counter');
ok(defined $after && $after >= $pub_max, '(d) max_id is at least the publisher\'s')
  or diag 'max_id: ' . ($after // 'none') . ", the publisher's: $pub_max";
cmp_ok(max_id($sub, 'appd') || 0, '>=', $pub_max,
	'(d) the subscriber has tag order, at least at the publisher\'s counter');

after_cutover('appd', '(d)', $pub_max, []);

# (e) a publisher gone for good: no fence, every counter raised by
# raise_by, which is required.  Replication from another origin that wrote
# leaf_alloc as well still refuses the loads after this cut-over, naming
# it.  (The rows are written by hand here, as the apply would write them.)
$sub->safe_psql('postgres', 'CREATE DATABASE appe');
$sub->safe_psql('appe', q[CREATE EXTENSION leaf;
	SELECT leaf_segment_create('order', step => 100);
	UPDATE leaf_alloc SET max_id = 5000;
	INSERT INTO leaf_alloc_replicated (origin, publications) VALUES
		('subscription gone_sub (90001)', 'pub_gone'), ('subscription other_sub (90002)', 'pub_other');]);
($state, $err) = cutover('appe', q['gone_sub', publisher => '']);
is($state, '22023', '(e) a cut-over without a publisher needs raise_by');
($state, $err, $cut) = cutover('appe', q['gone_sub', publisher => '', raise_by => 100000]);
is($state, undef, '(e) leaf_alloc_cutover(\'gone_sub\', publisher => \'\', raise_by => 100000)')
  or diag $err;
like($err, qr/WARNING:.*the publisher is not fenced/, '(e) it warns that nothing was fenced');
is(join(',', @{ $cut->{order} // [] }), '5000,105000,', '(e) the counter is raised by raise_by');
is($sub->safe_psql('appe', 'SELECT origin FROM leaf_alloc_replicated'), 'subscription other_sub (90002)',
	'(e) the other origin stays recorded');
($state, $err) = LeafTest::sqlstate($sub, 'appe', q[SELECT leaf_segment_nextval('order')]);
is($state, 'LF012', '(e) and still refuses the loads');
like($err, qr/subscription other_sub \(90002\)/, '(e) naming it');
($state, $err) = cutover('appe', q['other_sub', publisher => '', raise_by => 100000]);
is($state, undef, '(e) the cut-over from the other origin') or diag $err;
is($sub->safe_psql('appe', q[SELECT leaf_segment_nextval('order')]), '205000',
	'(e) then the database serves, above both raises');

# (f) the publisher of (b), fenced, is refused a confirmation of its own,
# and a second subscriber of it is refused a cut-over: its counters
# belong to the first one now
($state, $err) = LeafTest::sqlstate($pub, 'app', 'SELECT leaf_alloc_source_confirm()');
is($state, '55000', '(f) the fenced publisher cannot confirm itself back');
like($err, qr/taken over by another database/, '(f) it says why');
$sub->safe_psql('postgres', 'CREATE DATABASE app_f');
$sub->safe_psql('app_f', "CREATE EXTENSION leaf; $orders_ddl;");
$sub->safe_psql('app_f',
	"CREATE SUBSCRIPTION sub_f CONNECTION '" . $pub->connstr . " dbname=app' PUBLICATION pub WITH (copy_data = false)");
disable_subscription('app_f', 'sub_f');
($state, $err) = cutover('app_f', q['sub_f']);
is($state, '55000', '(f) a second cut-over from the fenced publisher is refused');
like($err, qr/the publisher's counters belong to another database/, '(f) it says why');

# (g) a subscriber that handed out IDs from counters of its own before
# it subscribed: the apply does not move its counter back, and the
# cut-over keeps the higher one
$pub->safe_psql('postgres', 'CREATE DATABASE appg OID 16396');
$pub->safe_psql('appg', q[CREATE EXTENSION leaf;
	SELECT leaf_segment_create('order', step => 100);
	CREATE PUBLICATION pub_g FOR TABLE leaf_alloc;]);
$sub->safe_psql('postgres', 'CREATE DATABASE appg OID 16396');
$sub->safe_psql('appg', q[CREATE EXTENSION leaf;
	SELECT leaf_segment_create('order', step => 100, start => 3000);]);
my @own = split /\n/,
  $sub->safe_psql('appg', q[SELECT leaf_segment_nextval('order') FROM generate_series(1, 200)]);
$sub->safe_psql('appg',
	"CREATE SUBSCRIPTION sub_g CONNECTION '" . $pub->connstr . " dbname=appg' PUBLICATION pub_g WITH (copy_data = false)");
$pub->safe_psql('appg', q[SELECT leaf_segment_nextval('order') FROM generate_series(1, 250)]);
$pub->wait_for_catchup('sub_g');
my $own_max = max_id($sub, 'appg');
cmp_ok($own_max, '>=', 3200, '(g) the apply did not move the subscriber\'s counter back');
ok($sub->poll_query_until('appg', q[SELECT count(*) > 0 FROM leaf_alloc_replicated]),
	'(g) the apply is recorded');
disable_subscription('appg', 'sub_g');
($state, $err, $cut) = cutover('appg', q['sub_g']);
is($state, undef, '(g) leaf_alloc_cutover(\'sub_g\')') or diag $err;
cmp_ok(max_id($sub, 'appg'), '>=', $own_max, '(g) the cut-over keeps the higher counter');
my @after_g = split /\n/,
  $sub->safe_psql('appg', q[SELECT leaf_segment_nextval('order') FROM generate_series(1, 200)]);
is(LeafTest::count_repeats([ @own, @after_g ]), 0, '(g) no ID of its own is handed out again');

done_testing();
