-- token_raise.lua: raise the counter to at least a floor; never lowers it.
-- KEYS[1] counter; ARGV[1] floor (decimal, 0..2^63-1)
-- Returns the counter's value afterwards, as a decimal string.
-- Compared as strings of digits (length first) to stay exact past 2^53.
local cur = redis.call('GET', KEYS[1]) or '0'
local f = ARGV[1]
if #f > #cur or (#f == #cur and f > cur) then
  redis.call('SET', KEYS[1], f)
  return f
end
return cur
