-- renew_batch.lua: renew many leases in one call (the heartbeat's pass).
-- KEYS[i] owner keys; ARGV[2i-1] owner value, ARGV[2i] ttl ms
-- Returns an array: 1 renewed, 0 lost, for each key in order.
-- As renew.lua: "<owner key>:info" (same hash slot), if any, gets the TTL too.
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[2 * i - 1] then
    redis.call('PEXPIRE', KEYS[i] .. ':info', ARGV[2 * i])
    out[i] = redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
  else
    out[i] = 0
  end
end
return out
