-- renew.lua: extend the TTL only while we still own the lease.
-- KEYS[1] owner key; ARGV[1] owner value "<owner id>:<token>", ARGV[2] ttl ms
-- Returns 1 when renewed, 0 when the key is gone or holds another owner.
-- The holder description "<owner key>:info" (same hash slot), if any, gets
-- the same TTL: it lives exactly as long as the lease.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1] .. ':info', ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
