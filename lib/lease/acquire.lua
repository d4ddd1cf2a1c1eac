-- acquire.lua: issue fencing tokens.  One issuance rule, two operations:
--   ARGV[1] 'a' (acquire): take the lease if it is free, with a new token.
--   ARGV[1] 'r' (reissue): while ARGV[3] (an owner value) still holds the
--   lease, raise the counter to at least ARGV[6] and give the lease a new
--   token (the owner value becomes "<owner id>:<new token>", TTL kept).
-- KEYS[1] owner key "<prefix>{NAME}", KEYS[2] counter "<prefix>{NAME}:token"
-- ARGV[2] owner id (32 hex), ARGV[3] ttl ms ('a') or owner value ('r'),
-- ARGV[4] 'clock' or 'dense', ARGV[5] the jump in microseconds (clock),
-- ARGV[6] floor ('r'; decimal).
-- 'a' with ARGV[6], a holder description: KEYS[3] "<owner key>:info" (the
-- same {NAME} hash slot; declared: Redis Cluster checks every key a script
-- touches before running it) is set
-- to "<owner id>:<description>" with the owner key's TTL, in this same
-- call.  'r' leaves it alone: the owner id does not change.
-- Returns {1, token} (token as a decimal string), {0, pttl} when another
-- owner holds it ('a'), {0} when ARGV[3] no longer holds it ('r').
--
-- The counter is a hash: n = the last token issued, run = the run_id of
-- the server that wrote it.  Clock tokens: max(n + 1, now in microseconds
-- from TIME), plus the jump when the counter is missing or was written by
-- another server incarnation (failover, restart, flush, eviction).  Dense
-- tokens: n + 1.  Past 2^53 (where Lua's doubles stop being exact) n + 1
-- comes from HINCRBY and is read back as text.  A fence 0.1 string counter
-- is turned into the hash first (run '' so the jump applies).
local TWO53 = 9007199254740992

local function gt(a, b) -- digit strings, exact at any length
  return #a > #b or (#a == #b and a > b)
end

local function read_counter(key)
  local h = redis.pcall('HMGET', key, 'n', 'run')
  if h.err then -- not a hash: a fence 0.1 string counter, migrated here
    local old = redis.call('GET', key)
    if old ~= '0' and not string.match(old, '^[1-9]%d*$') then
      return error({err = 'ERR fence: ' .. key .. ' is not a fence token counter'})
    end
    redis.call('DEL', key)
    redis.call('HSET', key, 'n', old, 'run', '')
    return old, ''
  end
  return h[1] or '0', h[2]
end

local function issue(key, mode, jump_us, floor)
  local n, run = read_counter(key)
  if floor and gt(floor, n) then
    n = floor
    redis.call('HSET', key, 'n', n)
  end
  local id
  local at_least = 0
  if mode == 'clock' then
    id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
    local t = redis.call('TIME')
    at_least = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if run ~= id then
      at_least = at_least + jump_us
    end
  end
  if tonumber(n) + 1 >= TWO53 then
    redis.call('HINCRBY', key, 'n', 1) -- fails past 2^63-1: nothing written yet
    if id then redis.call('HSET', key, 'run', id) end
    return redis.call('HGET', key, 'n')
  end
  local token = tonumber(n) + 1
  if token < at_least then token = at_least end
  local s = string.format('%.0f', token)
  if id then
    redis.call('HSET', key, 'n', s, 'run', id)
  else
    redis.call('HSET', key, 'n', s)
  end
  return s
end

local v = redis.call('GET', KEYS[1])
if ARGV[1] == 'r' then
  if v ~= ARGV[3] then
    return {0}
  end
  local token = issue(KEYS[2], ARGV[4], tonumber(ARGV[5]), ARGV[6])
  redis.call('SET', KEYS[1], ARGV[2] .. ':' .. token, 'KEEPTTL')
  return {1, token}
end
if v then
  local mine = ARGV[2] .. ':'
  if string.sub(v, 1, #mine) == mine then
    return {1, string.sub(v, #mine + 1)}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local token = issue(KEYS[2], ARGV[4], tonumber(ARGV[5]), nil)
redis.call('SET', KEYS[1], ARGV[2] .. ':' .. token, 'PX', ARGV[3])
if ARGV[6] then
  redis.call('SET', KEYS[3] or (KEYS[1] .. ':info'), ARGV[2] .. ':' .. ARGV[6], 'PX', ARGV[3])
end
return {1, token}
