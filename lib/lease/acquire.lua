-- acquire.lua: take the lease if it is free, and issue a fencing token.
-- KEYS[1] owner key "<prefix>{NAME}", KEYS[2] counter "<prefix>{NAME}:token"
-- ARGV[1] owner id (32 hex), ARGV[2] ttl in ms
-- Returns {1, token} (token as a decimal string: Lua numbers are doubles,
-- so past 2^53 the counter is read back with GET to keep all 64 bits), or
-- {0, pttl} when another owner holds it.
-- The owner key's value is "<owner id>:<token>".  A retried call from the
-- same owner (its reply was lost on a broken connection) returns the token
-- it was given instead of issuing another.
local v = redis.call('GET', KEYS[1])
if v then
  local mine = ARGV[1] .. ':'
  if string.sub(v, 1, #mine) == mine then
    return {1, string.sub(v, #mine + 1)}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
-- INCR first: if the counter is not an integer this fails before anything
-- is written, so no owner key is left behind without a token.
local n = redis.call('INCR', KEYS[2])
local token
if n < 9007199254740992 then
  -- below 2^53 the double is exact, and so is its %.0f text
  token = string.format('%.0f', n)
else
  token = redis.call('GET', KEYS[2])
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
return {1, token}
