-- fence redis contract 1.0 (docs/contract.md)
-- inspect.lua: read a lease's state without changing it.
-- KEYS[1] owner key, KEYS[2] counter (a hash, field n; a fence 0.1 string
-- counter is read as it is, not migrated), KEYS[3] (optional) the holder
-- description "<prefix>{NAME}:info"
-- Returns {owner value or false, pttl, last token or false} and, with
-- KEYS[3], its value ("<owner id>:<description>") or false as a fourth.
local n = redis.pcall('HGET', KEYS[2], 'n')
if type(n) == 'table' and n.err then
  n = redis.call('GET', KEYS[2])
end
local out = {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), n}
if KEYS[3] then
  out[4] = redis.call('GET', KEYS[3])
end
return out
