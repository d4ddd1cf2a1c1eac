-- inspect.lua: read a lease's state without changing it.
-- KEYS[1] owner key, KEYS[2] counter
-- Returns {owner value or false, pttl, last token or false}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
