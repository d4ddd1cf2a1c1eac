-- inspect.lua: read a lease's state without changing it.
-- KEYS[1] owner key, KEYS[2] counter (a hash, field n; a fence 0.1 string
-- counter is read as it is, not migrated)
-- Returns {owner value or false, pttl, last token or false}.
local n = redis.pcall('HGET', KEYS[2], 'n')
if type(n) == 'table' and n.err then
  n = redis.call('GET', KEYS[2])
end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), n}
