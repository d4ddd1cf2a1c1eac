#!/usr/bin/ruby
# orm_activerecord.rb -- ActiveRecord 6.1's optimistic locking (lock_version)
# on a table fence protects, against the same program on an unprotected one
# (tests/orm/test_orm.sh runs it for each; read by it, not by hand).
#
#   orm_activerecord.rb --backend pg --db CONNINFO --mode plain|fenced|migrated|old_retrofit [--impl plpgsql|c] --table T
#   orm_activerecord.rb --backend sqlite --db FILE --ext build/fence_sqlite_ext --mode ... --table T
#
# It makes table T (id, title, lock_version: the ORM's counter) with rows
# 1..9 and, with --mode fenced, protects it (fence.protect(T, 'fence_token',
# false, IMPL); fence_protect(T) in SQLite): fence stamps a column of its
# own, fence_token, and never writes lock_version.  With --mode migrated
# (PostgreSQL) it is first retrofitted the way fence.sql before version 6
# did, lock_version the token column (a bigint, marked as fence's), then
# moved by fence.migrate_version_column(T): the same outcomes are expected
# as with --mode fenced.  --mode old_retrofit is that retrofit not moved (the
# flaw of issue 26): its outcomes are printed, not judged here (test_orm.sh
# compares them with the issue's table).  Then it runs every
# scenario of SCENARIOS below, each write in a transaction that carries the
# lease's token (as docs/languages.md shows), and checks what the ORM did
# (saved, destroyed, its StaleObjectError, or fence's refusal), the rows
# after and (fenced) their stamps.  The outcomes are the same with and
# without fence but for the stale holder, which only fence refuses.  Prints
# TAP lines, and for each scenario "# outcome SCENARIO: OUTCOMES | ROWS",
# which test_orm.sh compares between the modes.  Exit status: 0 all as
# expected, 1 not, 2 setup error.
require 'optparse'
require 'active_record'

HOLDER = 100              # the lease's token in most scenarios: one holder writing
OLDER = 150               # the stale holder's token
NEWER = 200               # the newer holder's

opts = { impl: 'plpgsql' }
OptionParser.new do |o|
  o.on('--backend B', %w[pg sqlite]) { |v| opts[:backend] = v }
  o.on('--db D') { |v| opts[:db] = v }
  o.on('--ext E') { |v| opts[:ext] = v }
  o.on('--mode M', %w[plain fenced migrated old_retrofit]) { |v| opts[:mode] = v }
  o.on('--impl I', %w[plpgsql c]) { |v| opts[:impl] = v }
  o.on('--table T') { |v| opts[:table] = v }
end.parse!
abort('orm_activerecord: --backend, --db, --mode and --table are needed') unless
  opts[:backend] && opts[:db] && opts[:mode] && opts[:table]
abort('orm_activerecord: --ext is needed with --backend sqlite') if opts[:backend] == 'sqlite' && !opts[:ext]
abort("orm_activerecord: --mode #{opts[:mode]} is PostgreSQL's") if
  opts[:backend] == 'sqlite' && %w[migrated old_retrofit].include?(opts[:mode])
ON_PG = opts[:backend] == 'pg'
FENCED = %w[fenced migrated].include?(opts[:mode])
OLD = opts[:mode] == 'old_retrofit'
LABEL = "activerecord #{ActiveRecord.version} #{opts[:backend]}/#{opts[:mode]}" \
        "#{ON_PG && opts[:mode] != 'plain' ? ":#{opts[:impl]}" : ''}"

# A libpq conninfo ("host=... port=... user=... dbname=...") as
# ActiveRecord's settings.
def pg_config(conninfo)
  kv = conninfo.scan(/(\w+)=(\S+)/).to_h
  { adapter: 'postgresql', host: kv['host'], port: kv['port']&.to_i, username: kv['user'],
    database: kv['dbname'], pool: 1 }
end

# The lease's token for one transaction: every write goes through this.
def with_token(token)
  ActiveRecord::Base.transaction do
    if ON_PG
      ActiveRecord::Base.connection.exec_query('SELECT fence.use_token($1)', 'fence', [token])
    else
      ActiveRecord::Base.connection.exec_query('SELECT fence_set_token(?)', 'fence', [token])
    end
    yield
  end
end

$fails = 0
def check(good, what)
  puts "#{good ? 'ok' : 'not ok'} - #{LABEL}: #{what}"
  $fails += 1 unless good
end

begin
  if ON_PG
    ActiveRecord::Base.establish_connection(pg_config(opts[:db]))
  else
    ActiveRecord::Base.establish_connection(adapter: 'sqlite3', database: opts[:db], pool: 1, timeout: 5000)
    raw = ActiveRecord::Base.connection.raw_connection
    raw.enable_load_extension(true)
    raw.load_extension(opts[:ext])
    raw.enable_load_extension(false)
  end
  conn = ActiveRecord::Base.connection
  t = conn.quote_table_name(opts[:table])
  conn.execute("DROP TABLE IF EXISTS #{t}")
  conn.execute("CREATE TABLE #{t} (id INTEGER PRIMARY KEY, title TEXT NOT NULL," \
               ' lock_version INTEGER NOT NULL DEFAULT 0)')
  (1..9).each { |i| conn.execute("INSERT INTO #{t} VALUES (#{i}, 'row #{i}', 0)") }
  if %w[migrated old_retrofit].include?(opts[:mode])
    # The old retrofit, as fence.sql before 6 left it (its install of 6
    # marks the guarded column): lock_version holds the stamps.
    conn.execute("ALTER TABLE #{t} ALTER COLUMN lock_version TYPE bigint")
    conn.execute("SELECT fence.mark_token_column(#{conn.quote(opts[:table])}, 'lock_version')")
    conn.execute("SELECT fence.protect(#{conn.quote(opts[:table])}, 'lock_version', false, #{conn.quote(opts[:impl])})")
    conn.execute("SELECT fence.migrate_version_column(#{conn.quote(opts[:table])})") if opts[:mode] == 'migrated'
  elsif FENCED && ON_PG
    conn.execute("SELECT fence.protect(#{conn.quote(opts[:table])}, 'fence_token', false, #{conn.quote(opts[:impl])})")
  elsif FENCED
    conn.execute('SELECT fence_init()')
    conn.execute("SELECT fence_protect(#{conn.quote(opts[:table])})")
  end
  protected = if ON_PG
                conn.select_value("SELECT count(*) FROM fence.protected WHERE tbl = #{conn.quote(opts[:table])}::regclass").to_i
              else
                conn.select_value("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'" \
                                  " AND tbl_name = #{conn.quote(opts[:table])}").to_i
              end
  cols = conn.columns(opts[:table]).map(&:name)
rescue StandardError => e
  puts "not ok - #{LABEL}: setup: #{e.class}: #{e.message.lines.first}"
  exit 2
end
check((protected > 0) == (FENCED || OLD) && cols.include?('fence_token') == FENCED,
      "the table is #{protected > 0 ? 'protected' : 'unprotected'} (columns #{cols.join(', ')})")

Post = Class.new(ActiveRecord::Base) { self.table_name = opts[:table] }
Post.reset_column_information

# One save: 'saved', or the refusal (ActiveRecord's or fence's), after which
# the transaction is rolled back.
def attempt(token, done = 'saved')
  with_token(token) { yield }
  done
rescue ActiveRecord::StaleObjectError
  'StaleObjectError'
rescue ActiveRecord::StatementInvalid => e
  cause = e.cause
  state = cause.respond_to?(:result) && cause.result ? cause.result.error_field(PG::PG_DIAG_SQLSTATE) : nil
  return 'refused as stale' if state == '23Q01' || e.message.include?('fence:stale ')

  "error #{state}: #{e.message.lines.first.strip}"
end

# A request that loads row id (in a transaction carrying token).
def load(token, id)
  row = nil
  with_token(token) { row = Post.find(id) }
  row
end

def rows(ids)
  got = Post.where(id: ids).order(:id).map { |p| "#{p.id}:#{p.title}:#{p.lock_version}" }
  got.empty? ? '-' : got.join(' ')
end

def stamps(ids)
  got = Post.where(id: ids).order(:id).pluck(:fence_token)
  got.empty? ? '-' : got.join(' ')
end

# ---- the scenarios --------------------------------------------------------
# Each returns the outcomes of its saves, in order.
SCENARIOS = [
  # name, rows it touches, outcomes alone, with fence (nil: the same), rows
  # after alone, with fence (nil: the same), stamps after with fence; the
  # scenario.
  ['insert', [101], ['saved'], nil, '101:new:0', nil, HOLDER.to_s,
   -> { [attempt(HOLDER) { Post.create!(id: 101, title: 'new') }] }],
  # Two requests of one service (one lease) load the row this holder
  # already wrote; both save.
  ['two_copies', [2], %w[saved saved StaleObjectError], nil, '2:r1:2', nil, HOLDER.to_s,
   lambda {
     w = load(HOLDER, 2)
     first = attempt(HOLDER) { w.update!(title: 'written') }
     c1 = load(HOLDER, 2)
     c2 = load(HOLDER, 2)
     [first, attempt(HOLDER) { c1.update!(title: 'r1') }, attempt(HOLDER) { c2.update!(title: 'r2') }]
   }],
  # One object modified and saved twice in one transaction.
  ['saved_twice_in_one_transaction', [3], ['saved'], nil, '3:b:2', nil, HOLDER.to_s,
   lambda {
     [attempt(HOLDER) do
       p = Post.find(3)
       p.update!(title: 'a')
       p.update!(title: 'b')
     end]
   }],
  ['insert_then_update', [104], ['saved'], nil, '104:b:1', nil, HOLDER.to_s,
   lambda {
     [attempt(HOLDER) do
       p = Post.create!(id: 104, title: 'a')
       p.update!(title: 'b')
     end]
   }],
  # One object saved twice (two transactions).
  ['saved_twice', [5], %w[saved saved], nil, '5:b:2', nil, HOLDER.to_s,
   lambda {
     p = load(HOLDER, 5)
     [attempt(HOLDER) { p.update!(title: 'a') }, attempt(HOLDER) { p.update!(title: 'b') }]
   }],
  # A holder whose lease is over (OLDER) loads the row after the newer
  # holder (NEWER) wrote it, and saves.
  ['stale_holder', [6], %w[saved saved], ['saved', 'refused as stale'], '6:older:2', '6:newer:1',
   NEWER.to_s,
   lambda {
     b = load(NEWER, 6)
     newer = attempt(NEWER) { b.update!(title: 'newer') }
     a = load(OLDER, 6)
     [newer, attempt(OLDER) { a.update!(title: 'older') }]
   }],
  ['destroy', [7], ['destroyed'], nil, '-', nil, '-',
   lambda {
     p = load(HOLDER, 7)
     [attempt(HOLDER, 'destroyed') { p.destroy! }]
   }],
  # ActiveRecord's versioned DELETE of a copy loaded before another
  # request changed the row.
  ['destroy_stale_copy', [8], %w[saved StaleObjectError], nil, '8:changed:1', nil, HOLDER.to_s,
   lambda {
     c1 = load(HOLDER, 8)
     c2 = load(HOLDER, 8)
     [attempt(HOLDER) { c1.update!(title: 'changed') }, attempt(HOLDER, 'destroyed') { c2.destroy! }]
   }]
].freeze

SCENARIOS.each do |name, ids, alone, with_fence, rows_alone, rows_fence, want_stamps, scenario|
  want = FENCED && with_fence ? with_fence : alone
  want_rows = FENCED && rows_fence ? rows_fence : rows_alone
  got = scenario.call
  after = rows(ids)
  puts "# outcome #{name}: #{got.join(', ')} | #{after}"
  next if OLD

  check(got == want, "#{name}: #{got.join(', ')} (expected #{want.join(', ')})")
  check(after == want_rows, "#{name}: rows after #{after} (expected #{want_rows})")
  next unless FENCED

  s = stamps(ids)
  check(s == want_stamps, "#{name}: fence_token #{s} (expected #{want_stamps}), lock_version the ORM's")
end
exit($fails.zero? ? 0 : 1)
