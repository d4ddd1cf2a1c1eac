-- fence redis contract 1.0 (docs/contract.md)
-- token_raise.lua: raise the counter to at least a floor; never lowers it.
-- KEYS[1] counter (a hash: n = last token, run = run_id; acquire.lua);
-- ARGV[1] floor (decimal, 0..2^63-1)
-- Returns the counter's value afterwards, as a decimal string.
-- Compared as strings of digits (length first) to stay exact past 2^53.
-- A fence 0.1 string counter is turned into the hash (run '').
local h = redis.pcall('HMGET', KEYS[1], 'n', 'run')
if h.err then
  local old = redis.call('GET', KEYS[1])
  if old ~= '0' and not string.match(old, '^[1-9]%d*$') then
    return error({err = 'ERR fence: ' .. KEYS[1] .. ' is not a fence token counter'})
  end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'n', old, 'run', '')
  h = {old, ''}
end
local cur = h[1] or '0'
local f = ARGV[1]
if #f > #cur or (#f == #cur and f > cur) then
  redis.call('HSET', KEYS[1], 'n', f)
  -- An expiry set for the lower n would come before the clock reaches f:
  -- kept until the next clock token sets one from its own value.
  redis.call('PERSIST', KEYS[1])
  return f
end
return cur
