-- fence redis contract 1.0 (docs/contract.md)
-- renew_batch.lua: renew many leases in one call (the heartbeat's pass).
-- n leases: KEYS[1..n] owner keys; ARGV[2i-1] owner value, ARGV[2i] ttl ms
-- (negative: the lease's holder description "<owner key>:info" gets the
-- TTL too, as in renew.lua).  KEYS[n+1..] (Redis Cluster): those
-- descriptions, declared, one per negative ttl in order (so that during a
-- slot migration Redis answers TRYAGAIN / ASK before the script runs);
-- with none declared, KEYS[i] .. ':info' is used (one server).
-- Returns an array: 1 renewed, 0 lost, for each owner key in order.
local out = {}
local n = #ARGV / 2
local j = n
for i = 1, n do
  local ttl = tonumber(ARGV[2 * i])
  local info = nil
  if ttl < 0 then
    ttl = -ttl
    if #KEYS > n then
      j = j + 1
      info = KEYS[j]
    else
      info = KEYS[i] .. ':info'
    end
  end
  if redis.call('GET', KEYS[i]) == ARGV[2 * i - 1] then
    if info then
      redis.call('PEXPIRE', info, ttl)
    end
    out[i] = redis.call('PEXPIRE', KEYS[i], ttl)
  else
    out[i] = 0
  end
end
return out
