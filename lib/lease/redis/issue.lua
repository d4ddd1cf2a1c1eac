-- fence redis contract 1.0 (docs/contract.md)
-- issue.lua: the one issuance rule of fencing tokens.  Not a script of its
-- own: the Redis issuer puts it in front of acquire.lua and reissue.lua
-- (rscripts.c), which end by calling issue() and granted().
--
-- The counter is a hash: n = the last token issued, run = the incarnation
-- of the server that wrote it (its run_id and master_replid), t = that
-- server's TIME when it did (clock tokens), m = the token mode that issued
-- it ('clock' or 'dense').  A caller of the other mode is refused and
-- nothing is written: continuing a clock counter with n + 1, or a dense one
-- from the clock, would mix two rules in one name's tokens (and a dense
-- client that comes after a clock counter expired starts again at 1: the
-- stores refuse those tokens; docs/redis.md, "Tokens").  A counter written
-- by the previous scripts has no m: it is a clock counter if it has t or a
-- non-empty run (only clock issues wrote them), else it takes the mode of
-- its next issue, which records it.
--
-- Clock tokens: max(n + 1, now in microseconds from TIME), plus the jump
-- when the counter is missing or was written by another server
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
  local h = redis.pcall('HMGET', key, 'n', 'run', 't', 'm')
  if h.err then -- not a hash: a fence 0.1 string counter, migrated here
    local old = redis.call('GET', key)
    if old ~= '0' and not string.match(old, '^[1-9]%d*$') then
      return error({err = 'ERR fence: ' .. key .. ' is not a fence token counter'})
    end
    redis.call('DEL', key)
    redis.call('HSET', key, 'n', old, 'run', '')
    return old, '', nil, nil, false
  end
  local m = h[4]
  if not m and (h[3] or (h[2] and h[2] ~= '')) then
    m = 'clock' -- written by the previous scripts: only clock issues wrote t and run
  end
  return h[1] or '0', h[2], h[3], m, h[4] ~= false
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
-- the clock was (0 when not); nil and behind when over the limit; nil, 0
-- and the counter's mode when it is another mode's.
local function issue(key, mode, jump_us, limit_us, idle_ms, floor)
  local n, run, last_t, m, recorded = read_counter(key)
  if m and m ~= mode then
    return nil, 0, m
  end
  local stamp = not recorded -- record the mode with this issue
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
    if stamp then redis.call('HSET', key, 'm', mode) end
    redis.call('PERSIST', key)
  elseif id then
    s = string.format('%d', token) -- %d: exact below 2^53, cheaper than %.0f
    if run == id and not stamp then -- the same incarnation: run stays as it is
      redis.call('HSET', key, 'n', s, 't', string.format('%d', now))
    else
      redis.call('HSET', key, 'n', s, 'run', id, 't', string.format('%d', now), 'm', mode)
    end
    if idle_ms >= 0 and token - now <= jump_us then
      redis.call('PEXPIREAT', key, string.format('%d', math.floor(token / 1000) + 1 + idle_ms))
    else
      redis.call('PERSIST', key)
    end
  else
    s = string.format('%d', token)
    if stamp then
      redis.call('HSET', key, 'n', s, 'm', mode)
    else
      redis.call('HSET', key, 'n', s)
    end
    redis.call('PERSIST', key)
  end
  return s, behind
end

-- The reply for issue()'s answer: {1, token}, {1, token, behind}, {2,
-- behind} (over the limit) or {3, mode} (the counter is another mode's).
local function granted(token, behind, mode)
  if not token then
    if mode then
      return {3, mode}
    end
    return {2, string.format('%.0f', behind)}
  end
  if behind > 0 then
    return {1, token, string.format('%.0f', behind)}
  end
  return {1, token}
end
