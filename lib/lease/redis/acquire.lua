-- acquire.lua (after issue.lua): take the lease if it is free, with a new
-- token.
-- KEYS[1] owner key "<prefix>{NAME}", KEYS[2] counter "<prefix>{NAME}:token",
-- KEYS[3] (with a holder description) "<owner key>:info" (the same {NAME}
-- hash slot; declared: Redis Cluster checks every key a script touches
-- before running it).
-- ARGV[1] owner id (32 hex), ARGV[2] ttl ms, ARGV[3] 'clock' or 'dense',
-- ARGV[4] the jump in microseconds (clock), ARGV[5] the clock-behind limit
-- in microseconds (clock; '0': none), ARGV[6] the counter's idle time in
-- milliseconds (clock; '-1': never expires), ARGV[7] (optional) the holder
-- description: "<owner id>:<description>" goes to KEYS[3] with the owner
-- key's TTL, in this same call.
-- Returns {1, token} (token as a decimal string) or {1, token, behind};
-- {1, token} also when this owner id already holds it (a retried acquire
-- whose reply was lost: nothing issued); {0, pttl} when another owner holds
-- it; {2, behind} over the clock-behind limit, {3, mode} when the counter
-- is another token mode's (nothing written).
local v = redis.call('GET', KEYS[1])
if v then
  local mine = ARGV[1] .. ':'
  if string.sub(v, 1, #mine) == mine then
    return {1, string.sub(v, #mine + 1)}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local token, behind, mode = issue(KEYS[2], ARGV[3], ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0, nil)
if token then
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'PX', ARGV[2])
  if ARGV[7] then
    redis.call('SET', KEYS[3] or (KEYS[1] .. ':info'), ARGV[1] .. ':' .. ARGV[7], 'PX', ARGV[2])
  end
end
return granted(token, behind, mode)
