-- renew.lua: extend the TTL only while we still own the lease.
-- KEYS[1] owner key; ARGV[1] owner value "<owner id>:<token>", ARGV[2] ttl ms,
-- negative when the lease has a holder description "<owner key>:info" (same
-- hash slot), which then gets the same TTL: it lives exactly as long as the
-- lease.  Leases without one cost no extra command.
-- Returns 1 when renewed, 0 when the key is gone or holds another owner.
local ttl = tonumber(ARGV[2])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if ttl < 0 then
    ttl = -ttl
    redis.call('PEXPIRE', KEYS[1] .. ':info', ttl)
  end
  return redis.call('PEXPIRE', KEYS[1], ttl)
end
return 0
