-- renew_batch.lua: renew many leases in one call (the heartbeat's pass).
-- KEYS[i] owner keys; ARGV[2i-1] owner value, ARGV[2i] ttl ms (negative:
-- the lease's holder description "<owner key>:info" gets the TTL too, as in
-- renew.lua).
-- Returns an array: 1 renewed, 0 lost, for each key in order.
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[2 * i - 1] then
    local ttl = tonumber(ARGV[2 * i])
    if ttl < 0 then
      ttl = -ttl
      redis.call('PEXPIRE', KEYS[i] .. ':info', ttl)
    end
    out[i] = redis.call('PEXPIRE', KEYS[i], ttl)
  else
    out[i] = 0
  end
end
return out
