-- acquire.lua: issue fencing tokens.  One issuance rule, two operations:
--   ARGV[1] 'a' (acquire): take the lease if it is free, with a new token.
--   ARGV[1] 'r' (reissue): while ARGV[3] (an owner value) still holds the
--   lease, raise the counter to at least ARGV[8] and give the lease a new
--   token (the owner value becomes "<owner id>:<new token>", TTL kept).
-- KEYS[1] owner key "<prefix>{NAME}", KEYS[2] counter "<prefix>{NAME}:token"
-- ARGV[2] owner id (32 hex), ARGV[3] ttl ms ('a') or owner value ('r'),
-- ARGV[4] 'clock' or 'dense', ARGV[5] the jump in microseconds (clock),
-- ARGV[6] the clock-behind limit in microseconds (clock; '0': none),
-- ARGV[7] the counter's idle time in milliseconds (clock; '-1': never
-- expires), ARGV[8] floor ('r'; decimal).
-- 'a' with ARGV[8], a holder description: KEYS[3] "<owner key>:info" (the
-- same {NAME} hash slot; declared: Redis Cluster checks every key a script
-- touches before running it) is set
-- to "<owner id>:<description>" with the owner key's TTL, in this same
-- call.  'r' leaves it alone: the owner id does not change.
-- Returns {1, token} (token as a decimal string) or {1, token, behind},
-- {0, pttl} when another owner holds it ('a'), {0} when ARGV[3] no longer
-- holds it ('r'), {2, behind} when the clock is behind by more than the
-- limit (nothing written).
--
-- The counter is a hash: n = the last token issued, run = the incarnation
-- of the server that wrote it (its run_id and master_replid), t = that
-- server's TIME when it did (clock tokens).  Clock tokens: max(n + 1, now in microseconds from TIME), plus
-- the jump when the counter is missing or was written by another server
-- incarnation (failover, restart, flush, eviction): a replica promoted
-- with a counter that missed the last tokens still issues above them while
-- it lagged by less than the jump, whatever its clock (docs/redis.md,
-- "Clocks").  behind = t - now, in microseconds, when this server's clock
-- reads earlier than the one that issued the last token (another server's
-- clock ahead of this one, or this one stepped back): it is returned, and
-- past a non-zero limit the token is refused.  Dense tokens: n + 1.  Past
-- 2^53 (where Lua's doubles stop being exact) the token comes from
-- HINCRBY and is read back as text.  A fence 0.1 string counter is turned
-- into the hash first (run '' so the jump applies).
--
-- Expiry (clock tokens): a clock token is an instant (microseconds since
-- 1970), so the counter expires at the instant its last token names plus
-- the idle time (PEXPIREAT, by this server's clock): a server whose clock
-- has passed that instant issues at least that instant plus the jump, above
-- every token issued from the counter or within the jump of it.  Only a
-- counter whose token leads this server's clock by at most the jump gets an
-- expiry, so losing it any earlier (volatile-* eviction) costs no more than
-- the jump covers: the next token, clock + jump, is still above it.  A
-- counter further ahead (raised, several jumps in a row), dense counters,
-- counters past 2^53 and an idle time of -1: no expiry (PERSIST: one
-- another client gave an expiry is kept too).
local TWO53 = 9007199254740992

local function gt(a, b) -- digit strings, exact at any length
  return #a > #b or (#a == #b and a > b)
end

local function read_counter(key)
  local h = redis.pcall('HMGET', key, 'n', 'run', 't')
  if h.err then -- not a hash: a fence 0.1 string counter, migrated here
    local old = redis.call('GET', key)
    if old ~= '0' and not string.match(old, '^[1-9]%d*$') then
      return error({err = 'ERR fence: ' .. key .. ' is not a fence token counter'})
    end
    redis.call('DEL', key)
    redis.call('HSET', key, 'n', old, 'run', '')
    return old, '', nil
  end
  return h[1] or '0', h[2], h[3]
end

-- This server incarnation, "<run_id>:<master_replid>": run_id is new at
-- every start; master_replid at every promotion (a master cut off, resynced
-- as a replica and promoted again keeps its run_id, and its copy of a
-- counter it wrote before would get no jump: docs/model.md).
-- The fields are found with a plain search and an anchored match of the
-- hex digits only: a pattern scan over the whole reply cost about 7 µs
-- (tests/bench/bench_redis_cost.c).
local function info_field(s, name)
  local i = string.find(s, '\n' .. name .. ':', 1, true)
  return i and string.match(s, '^%x+', i + #name + 2) or ''
end

-- The incarnation, given the counter's run: run itself when it names this
-- server's master_replid and this server is a master, read from the small
-- INFO replication alone; else read in full (INFO server for run_id: once
-- per counter after each restart, promotion or migration).  Exact: a
-- master's master_replid is random at its start and at every promotion
-- (shiftReplicationId), and a server takes another's master_replid only as
-- its replica (Redis 4.0.2 on; 4.0.0-4.0.1 also restored it on a master
-- from an RDB file), so the master that has run's master_replid is the
-- process that wrote run (docs/redis.md, "What the scripts cost the
-- server"; tests/lease/test_incarnation.sh).  A writable replica
-- (role:slave) shares its master's: it reads in full.
local function incarnation(run)
  local s = redis.call('INFO', 'replication')
  local replid = info_field(s, 'master_replid')
  if run and replid ~= '' and string.sub(run, -#replid - 1) == ':' .. replid and
     string.find(s, '\nrole:master\r', 1, true) then
    return run
  end
  return info_field(redis.call('INFO', 'server'), 'run_id') .. ':' .. replid
end

-- The next token for counter key: its decimal string and how far behind
-- the clock was (0 when not), or nil and behind when over the limit.
local function issue(key, mode, jump_us, limit_us, idle_ms, floor)
  local n, run, last_t = read_counter(key)
  local raised = floor and gt(floor, n)
  if raised then
    n = floor
  end
  local nn = n + 0 -- a number (Lua's coercion: one conversion, tonumber's two)
  local inc = 1 -- the token is n + inc
  local id, now, behind = nil, 0, 0
  if mode == 'clock' then
    id = incarnation(run)
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
    local lt = last_t and tonumber(last_t)
    if lt and lt > now then
      behind = lt - now
      if limit_us > 0 and behind > limit_us then
        return nil, behind
      end
    end
    if nn + 1 < now then -- both exact: n is below now < 2^53
      inc = now - nn
    end
    if run ~= id then
      inc = inc + jump_us
    end
  end
  local s
  local token = nn + inc
  if token >= TWO53 then
    if raised then redis.call('HSET', key, 'n', n) end
    redis.call('HINCRBY', key, 'n', inc) -- fails past 2^63-1: n stays
    s = redis.call('HGET', key, 'n')
    if id then redis.call('HSET', key, 'run', id, 't', string.format('%.0f', now)) end
    redis.call('PERSIST', key)
  elseif id then
    s = string.format('%d', token) -- %d: exact below 2^53, cheaper than %.0f
    if run == id then -- the same incarnation: run stays as it is
      redis.call('HSET', key, 'n', s, 't', string.format('%d', now))
    else
      redis.call('HSET', key, 'n', s, 'run', id, 't', string.format('%d', now))
    end
    if idle_ms >= 0 and token - now <= jump_us then
      redis.call('PEXPIREAT', key, string.format('%d', math.floor(token / 1000) + 1 + idle_ms))
    else
      redis.call('PERSIST', key)
    end
  else
    s = string.format('%d', token)
    redis.call('HSET', key, 'n', s)
    redis.call('PERSIST', key)
  end
  return s, behind
end

local function granted(token, behind)
  if behind > 0 then
    return {1, token, string.format('%.0f', behind)}
  end
  return {1, token}
end

local v = redis.call('GET', KEYS[1])
if ARGV[1] == 'r' then
  if v ~= ARGV[3] then
    return {0}
  end
  local token, behind = issue(KEYS[2], ARGV[4], ARGV[5] + 0, ARGV[6] + 0, ARGV[7] + 0,
                              ARGV[8])
  if not token then
    return {2, string.format('%.0f', behind)}
  end
  redis.call('SET', KEYS[1], ARGV[2] .. ':' .. token, 'KEEPTTL')
  return granted(token, behind)
end
if v then
  local mine = ARGV[2] .. ':'
  if string.sub(v, 1, #mine) == mine then
    return {1, string.sub(v, #mine + 1)}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local token, behind = issue(KEYS[2], ARGV[4], ARGV[5] + 0, ARGV[6] + 0, ARGV[7] + 0, nil)
if not token then
  return {2, string.format('%.0f', behind)}
end
redis.call('SET', KEYS[1], ARGV[2] .. ':' .. token, 'PX', ARGV[3])
if ARGV[8] then
  redis.call('SET', KEYS[3] or (KEYS[1] .. ':info'), ARGV[2] .. ':' .. ARGV[8], 'PX', ARGV[3])
end
return granted(token, behind)
