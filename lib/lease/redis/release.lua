-- fence redis contract 1.0 (docs/contract.md)
-- release.lua: compare-and-delete, then wake the waiters.
-- KEYS[1] owner key; ARGV[1] owner value, ARGV[2] release channel
-- Returns 1 when deleted, 0 when the key is gone or holds another owner
-- (which is then left untouched).  The counter is never touched.  The
-- holder description "<owner key>:info" (same hash slot; acquire.lua) goes
-- with the owner key: it is this holder's, or a stale one of a crashed
-- holder.  ARGV[3] 'n' (Redis Cluster, a lease without a description):
-- leave ":info" alone -- inside a script, a missing key of a slot being
-- migrated is an error there; a stale description expires by its own TTL.
-- KEYS[2] (Redis Cluster, a lease with a description): the description,
-- declared (so that during a slot migration Redis answers TRYAGAIN / ASK
-- before the script runs, instead of aborting it midway).
-- In a cluster one key per DEL: a multi-key command on partly migrated
-- keys is refused.  Without KEYS[2] and 'n' (one server: no migrations)
-- one DEL takes both keys, a call less (tests/bench/bench_redis_cost.c).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if KEYS[2] then
    redis.call('DEL', KEYS[1])
    redis.call('DEL', KEYS[2])
  elseif ARGV[3] ~= 'n' then
    redis.call('DEL', KEYS[1], KEYS[1] .. ':info')
  else
    redis.call('DEL', KEYS[1])
  end
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
