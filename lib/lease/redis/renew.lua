-- fence redis contract 1.0 (docs/contract.md)
-- renew.lua: extend the TTL only while we still own the lease.
-- KEYS[1] owner key, KEYS[2] (optional) its holder description "<owner
-- key>:info" (same hash slot); ARGV[1] owner value "<owner id>:<token>",
-- ARGV[2] ttl ms, negative when the lease has a holder description, which
-- then gets the same TTL: it lives exactly as long as the lease.  Leases
-- without one cost no extra command.  A Redis Cluster client declares the
-- description as KEYS[2] (so that during a slot migration Redis answers
-- TRYAGAIN / ASK before the script runs, instead of aborting it midway);
-- one server needs no declaration: KEYS[1] .. ':info' is used then.
-- Returns 1 when renewed, 0 when the key is gone or holds another owner.
local ttl = tonumber(ARGV[2])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if ttl < 0 then
    ttl = -ttl
    redis.call('PEXPIRE', KEYS[2] or (KEYS[1] .. ':info'), ttl)
  end
  return redis.call('PEXPIRE', KEYS[1], ttl)
end
return 0
