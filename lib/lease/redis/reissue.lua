-- reissue.lua (after issue.lua): while ARGV[2] (an owner value) still holds
-- the lease, raise the counter to at least ARGV[7] and give the lease a new
-- token: the owner value becomes "<owner id>:<new token>", TTL kept.  The
-- holder description is left alone (the owner id does not change).
-- KEYS[1] owner key, KEYS[2] counter.
-- ARGV[1] owner id, ARGV[2] owner value, ARGV[3] 'clock' or 'dense',
-- ARGV[4] jump us, ARGV[5] clock-behind limit us, ARGV[6] counter idle ms
-- (as acquire.lua's), ARGV[7] the floor (decimal).
-- Returns acquire.lua's {1, token[, behind]}, {2, behind} or {3, mode}, or
-- {0} when ARGV[2] no longer holds the lease (nothing written).
if redis.call('GET', KEYS[1]) ~= ARGV[2] then
  return {0}
end
local token, behind, mode = issue(KEYS[2], ARGV[3], ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0,
                                  ARGV[7])
if token then
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. token, 'KEEPTTL')
end
return granted(token, behind, mode)
