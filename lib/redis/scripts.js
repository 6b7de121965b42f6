'use strict'
// The Lua scripts of sabsync/redis. Every change of an object's state is
// one script, so Redis runs it whole, between any two commands of other
// clients: no interleaving can break an invariant below. ioredis's
// defineCommand sends EVALSHA, and EVAL once per connection or after a
// NOSCRIPT (a restarted server).
//
// Time is the server's (TIME), never a client's. All keys of one object
// share one hash tag, `{prefix:kind:key}`, so they live in one slot of a
// Redis Cluster; the only thing a script touches outside its keys is the
// wake channel of a waiting client (PUBLISH takes a channel, not a key).
//
// The lease queue (Mutex is nr = 1 with fences, Sema is nr tokens):
//
//   key   type    holds
//   M     hash    nr, fence (1: Mutex fences), held (how many hold), seq
//                 (last ticket), top (slots ever handed out);
//                 h:<holder id> -> "slot:fence"; w:<waiter id> -> "client-id lease-ms"
//   FL    list    slots given back, handed out again before new ones (nr > 1)
//   L     zset    holder id -> lease expiry (server ms)
//   Q     zset    waiter id -> ticket (arrival order)
//   B     zset    client id -> heartbeat expiry (server ms): waiters of a
//                 client whose heartbeat lapsed are skipped
//   F     string  the last fence: max(INCR, server clock in µs); outlives
//                 the rest by a day, so that fences keep growing after the
//                 object goes idle
//
// Invariants after every script: held = the h: fields = the members of L
// <= nr; for nr > 1, top - LLEN(FL) = held and a slot is in FL or held by
// exactly one holder; the w: fields are the members of Q; if held < nr
// then Q holds no waiter of a live client (pump() grants before anything
// else happens), so held = 0 means idle. When idle, every key but F is
// deleted. Otherwise every key expires at M's `exp` (server ms), which is
// at least a minute after every lease or heartbeat expiry recorded: a
// script that records a later one moves `exp` (and every key's TTL), and
// one that creates a key gives it the TTL `exp` says. So an object whose
// clients all died leaves nothing behind for long.
//
// A script checks the types of its keys before it writes anything: its
// first reads of M, L and Q fail on a key of another type; B, and F or FL,
// get a TYPE. A key that holds something else fails the call and changes
// nothing.
//
// Replies of take: {1, slot, fence, lease-left-ms} granted; {0} busy (try);
// {2, ms-to-next-lease-expiry or -1} queued.

const WAKE = 'sabsync:wake:' // + client id: where grants to its waiters are published

const prelude = `
local M, FL, L, Q, B, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local nowUs = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

-- The object's state, read once; w (optional): also whether w holds.
-- nr, fencing: the caller's, for an object without state (take). st.nr
-- is nil when there is no state and nothing to make it with. Returns
-- st, or nil and a WRONGTYPE message.
local function open (w, nr, fencing)
  local v = redis.call('HMGET', M, 'nr', 'fence', 'held', 'exp', 'h:' .. (w or ''))
  local st = { nr = tonumber(v[1]), fencing = v[2] == '1', held = tonumber(v[3]) or 0, exp = tonumber(v[4]) or 0,
    mine = v[5], dirty = false, created = {}, latest = 0, granted = {} }
  local n, fz = st.nr, st.fencing
  if not n then n, fz = nr, fencing end
  if not n then return st end
  local first = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')
  st.firstId, st.firstExp = first[1], tonumber(first[2])
  st.head = redis.call('ZRANGE', Q, 0, 0)[1] or false -- false: none; nil: not known
  local checks = { {B, 'zset'} }
  if fz then checks[2] = {F, 'string'} end
  if n > 1 then checks[#checks + 1] = {FL, 'list'} end
  for _, kt in ipairs(checks) do
    local got = redis.call('TYPE', kt[1]).ok
    if got ~= 'none' and got ~= kt[2] then
      return nil, 'WRONGTYPE sabsync: key ' .. kt[1] .. ' holds a ' .. got .. ', not the ' .. kt[2] .. ' sabsync keeps there'
    end
  end
  return st
end

local function later (st, at)
  if at > st.latest then st.latest = at end
end

-- Remove holder w (v: its h: field, if known) and give its slot back.
local function drop (st, w, v)
  v = v or redis.call('HGET', M, 'h:' .. w)
  if v then
    if st.nr > 1 and redis.call('RPUSH', FL, string.match(v, '^(%d+)')) == 1 then st.created[FL] = true end
    redis.call('HDEL', M, 'h:' .. w)
    st.held = st.held - 1
    st.dirty = true
  end
  redis.call('ZREM', L, w)
  if st.firstId == w then st.firstId, st.firstExp, st.firstStale = nil, nil, true end
end

-- Grant a slot to w (the caller checked st.held < st.nr). A waiter's
-- client (ctx) is told on its wake channel.
local function grant (st, w, lease, ctx)
  local slot = 0
  if st.nr > 1 then
    slot = redis.call('LPOP', FL)
    if not slot then slot = redis.call('HINCRBY', M, 'top', 1) - 1 end
  end
  local fence = 0
  if st.fencing then
    -- Never below the server's clock in µs: fences keep growing across a
    -- restart without persistence, or a failover, unless a clock steps back.
    fence = redis.call('INCR', F)
    if fence < nowUs then
      fence = nowUs
      redis.call('SET', F, string.format('%.0f', fence), 'PX', 86400000)
    else
      redis.call('PEXPIRE', F, 86400000)
    end
  end
  local f = string.format('%.0f', fence)
  redis.call('HSET', M, 'h:' .. w, slot .. ':' .. f)
  if st.held == 0 then st.created[L] = true end
  redis.call('ZADD', L, now + lease, w)
  later(st, now + lease)
  st.held = st.held + 1
  st.dirty = true
  st.granted[w] = true
  if ctx then
    redis.call('PUBLISH', '${WAKE}' .. ctx, w .. ' ' .. slot .. ' ' .. f .. ' ' .. lease)
  end
  return tonumber(slot), fence
end

-- Expire lapsed leases, then grant free slots to the queue in ticket
-- order, skipping waiters whose client stopped beating.
local function pump (st)
  if st.held > 0 then
    local first = st.firstExp
    if st.firstStale then first = tonumber(redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')[2]) end
    if first and first <= now then
      for _, w in ipairs(redis.call('ZRANGEBYSCORE', L, '-inf', now)) do drop(st, w) end
    end
  end
  local pruned = false
  while st.held < st.nr do
    local head = st.head
    if head == nil then head = redis.call('ZRANGE', Q, 0, 0)[1] or false end
    st.head = nil
    if not head then
      st.head = false
      break
    end
    if not pruned then
      redis.call('ZREMRANGEBYSCORE', B, '-inf', now)
      pruned = true
    end
    redis.call('ZREM', Q, head)
    local info = redis.call('HGET', M, 'w:' .. head)
    redis.call('HDEL', M, 'w:' .. head)
    if info then
      local ctx, lease = string.match(info, '^(%S+) (%d+)$')
      if ctx and redis.call('ZSCORE', B, ctx) then grant(st, head, tonumber(lease), ctx) end
    end
  end
end

-- Milliseconds until the first lease expires (-1: none held).
local function nextExpiry ()
  local first = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')[2]
  if not first then return -1 end
  return math.max(tonumber(first) - now, 0)
end

-- Delete an idle object's keys (F excepted); else keep every key alive
-- until M's exp (see above), and save the held count.
local function tidy (st)
  if st.held == 0 then
    redis.call('DEL', M, FL, L, Q, B)
    return
  end
  local keys = st.created
  if st.exp < st.latest + 60000 then
    st.exp = st.latest + 120000
    st.dirty = true
    if not st.created[M] then keys = { [M] = true, [FL] = true, [L] = true, [Q] = true, [B] = true } end
  end
  for k in pairs(keys) do redis.call('PEXPIRE', k, st.exp - now) end
  if st.dirty then redis.call('HSET', M, 'held', st.held, 'exp', st.exp) end
end

-- {1, slot, fence, lease left} if w holds a slot (v: its h: field), else nil.
local function holding (w, v)
  if not v then return nil end
  local slot, fence = string.match(v, '^(%d+):(%d+)$')
  local exp = tonumber(redis.call('ZSCORE', L, w))
  return { 1, tonumber(slot), tonumber(fence), math.max(exp - now, 0) }
end
`

// ARGV: id, client id, lease ms, heartbeat ms, wait (0 try / 1 queue), nr, fencing (0/1).
const take = prelude + `
local w, ctx, lease, beat, queue, nr, fencing = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1', tonumber(ARGV[6]), ARGV[7] == '1'
local st, bad = open(w, nr, fencing)
if not st then return redis.error_reply(bad) end
if st.nr then
  if st.nr ~= nr or st.fencing ~= fencing then
    return redis.error_reply('SABSYNC_MISMATCH sabsync: ' .. M .. ' is in use with nr = ' .. st.nr .. ', not ' .. nr)
  end
else
  redis.call('HSET', M, 'nr', nr, 'fence', ARGV[7])
  st.nr, st.fencing = nr, fencing
  st.created[M] = true
end
pump(st)
-- The same id again (a command resent after a reconnect) gets the same answer.
if st.mine or st.granted[w] then
  local held = holding(w, redis.call('HGET', M, 'h:' .. w))
  if held then tidy(st) return held end
end
if st.held < nr then
  -- pump() left nobody waiting: w is not queued, and takes a slot.
  local slot, fence = grant(st, w, lease, nil)
  tidy(st)
  return { 1, slot, fence, lease }
end
if redis.call('ZSCORE', Q, w) then tidy(st) return { 2, nextExpiry() } end
if not queue then tidy(st) return { 0 } end
redis.call('ZADD', Q, redis.call('HINCRBY', M, 'seq', 1), w)
redis.call('HSET', M, 'w:' .. w, ctx .. ' ' .. lease)
redis.call('ZADD', B, now + beat, ctx)
st.created[Q], st.created[B] = true, true
later(st, now + beat)
tidy(st)
return { 2, nextExpiry() }
`

// Release holder id, or take waiter id out of the queue. ARGV: id.
// 1 if it held a lease that had not expired, else 0.
const leave = prelude + `
local w = ARGV[1]
local st, bad = open(w)
if not st then return redis.error_reply(bad) end
if not st.nr then return 0 end
local r = 0
if st.mine then
  local exp = st.firstExp
  if st.firstId ~= w then exp = tonumber(redis.call('ZSCORE', L, w)) end
  if exp and exp > now then r = 1 end
  drop(st, w, st.mine)
elseif redis.call('ZREM', Q, w) == 1 then
  redis.call('HDEL', M, 'w:' .. w)
  st.head = nil
end
pump(st)
tidy(st)
return r
`

// Extend holder id's lease to lease ms from now, if it still holds one
// that has not expired. ARGV: id, lease ms. 1 renewed, 0 lost.
const renew = prelude + `
local w, lease = ARGV[1], tonumber(ARGV[2])
local st, bad = open(w)
if not st then return redis.error_reply(bad) end
if not st.nr or not st.mine then return 0 end
local exp = st.firstExp
if st.firstId ~= w then exp = tonumber(redis.call('ZSCORE', L, w)) end
if not exp or exp <= now then
  pump(st)
  tidy(st)
  return 0
end
redis.call('ZADD', L, 'XX', now + lease, w)
later(st, now + lease)
tidy(st)
return 1
`

// A waiting client's heartbeat, which also reports on its waiters.
// ARGV: client id, heartbeat ms, waiter ids...
// Reply: { ms-to-next-lease-expiry or -1, per id: {1, slot, fence, lease-left} | {2} queued | {0} gone }.
const beat = prelude + `
local ctx, hb = ARGV[1], tonumber(ARGV[2])
local st, bad = open(nil)
if not st then return redis.error_reply(bad) end
local out = { -1 }
if not st.nr then
  for i = 3, #ARGV do out[#out + 1] = { 0 } end
  return out
end
redis.call('ZADD', B, now + hb, ctx)
st.created[B] = true
later(st, now + hb)
pump(st)
for i = 3, #ARGV do
  local w = ARGV[i]
  local held = holding(w, redis.call('HGET', M, 'h:' .. w))
  if held then out[#out + 1] = held
  elseif redis.call('ZSCORE', Q, w) then out[#out + 1] = { 2 }
  else out[#out + 1] = { 0 } end
end
out[1] = nextExpiry()
tidy(st)
return out
`

// How many wait, on every client (those of clients that stopped beating
// not counted). No ARGV.
const count = prelude + `
local st, bad = open(nil)
if not st then return redis.error_reply(bad) end
if not st.nr then return 0 end
pump(st)
local n = 0
for _, w in ipairs(redis.call('ZRANGE', Q, 0, -1)) do
  local info = redis.call('HGET', M, 'w:' .. w)
  local ctx = info and string.match(info, '^(%S+) ')
  local alive = ctx and redis.call('ZSCORE', B, ctx)
  if alive and tonumber(alive) > now then n = n + 1 end
end
tidy(st)
return n
`

// The rate limiter: a log of the grant times of the last timeUnit, and of
// those still to come (reservations). KEYS: R (zset id -> µs),
// RM (hash: rps, unit). A grant at t needs t >= now, t >= the newest
// (arrival order), t >= the rps-th newest + unit (no window of unit holds
// more than rps grants) and, with uniform spacing, t >= newest + unit/rps:
// the window semantics of src/core/rate.c, with the caller sleeping until
// t instead of asking again. Removing an unused reservation (an abort)
// keeps every property above for the rest.
//
// ARGV: id, rps, unit µs, uniform (0/1), most µs the caller will wait (-1: any).
// Reply: {1, t µs as a string, wait µs} reserved; {0, wait µs} too late for the caller.
const rate = `
local R, RM = KEYS[1], KEYS[2]
for _, kt in ipairs({ {R, 'zset'}, {RM, 'hash'} }) do
  local got = redis.call('TYPE', kt[1]).ok
  if got ~= 'none' and got ~= kt[2] then
    return redis.error_reply('WRONGTYPE sabsync: key ' .. kt[1] .. ' holds a ' .. got .. ', not the ' .. kt[2] .. ' sabsync keeps there')
  end
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local id, rps, unit, uniform, most = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1', tonumber(ARGV[5])
local m = redis.call('HMGET', RM, 'rps', 'unit', 'uniform')
if m[1] then
  if tonumber(m[1]) ~= rps or tonumber(m[2]) ~= unit or m[3] ~= ARGV[4] then
    return redis.error_reply('SABSYNC_MISMATCH sabsync: ' .. R .. ' is in use with rps = ' .. m[1] .. ', timeUnit = ' .. (tonumber(m[2]) / 1000) .. ' ms, uniform = ' .. m[3])
  end
else
  redis.call('HSET', RM, 'rps', rps, 'unit', ARGV[3], 'uniform', ARGV[4])
end
-- Grants at or before now - unit constrain no grant to come. (Trimming
-- to the last rps instead would drop one that counts again once a later
-- reservation is given back.)
redis.call('ZREMRANGEBYSCORE', R, '-inf', string.format('%.0f', now - unit))
local t = now
local n = redis.call('ZCARD', R)
if n > 0 then
  local newest = tonumber(redis.call('ZRANGE', R, -1, -1, 'WITHSCORES')[2])
  if newest > t then t = newest end
  if uniform and newest + math.floor(unit / rps) > t then t = newest + math.floor(unit / rps) end
end
if n >= rps then
  local kth = tonumber(redis.call('ZRANGE', R, n - rps, n - rps, 'WITHSCORES')[2])
  if kth + unit > t then t = kth + unit end
end
if most >= 0 and t - now > most then return { 0, t - now } end
redis.call('ZADD', R, string.format('%.0f', t), id)
local ttl = math.ceil((t - now + unit) / 1000) + 1000
redis.call('PEXPIRE', R, ttl)
redis.call('PEXPIRE', RM, ttl)
return { 1, string.format('%.0f', t), t - now }
`

// Give back an unused reservation. KEYS: R. ARGV: id.
const unrate = `
if redis.call('TYPE', KEYS[1]).ok ~= 'zset' then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[1])
`

// Reservations not yet reached. KEYS: R.
const rateWaiting = `
if redis.call('TYPE', KEYS[1]).ok ~= 'zset' then return 0 end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.0f', now), '+inf')
`

// Names carry a version: two copies of sabsync in one process never
// share a command whose script differs.
const commands = {
  sabsync1Take: { numberOfKeys: 6, lua: take },
  sabsync1Leave: { numberOfKeys: 6, lua: leave },
  sabsync1Renew: { numberOfKeys: 6, lua: renew },
  sabsync1Beat: { numberOfKeys: 6, lua: beat },
  sabsync1Count: { numberOfKeys: 6, lua: count },
  sabsync1Rate: { numberOfKeys: 2, lua: rate },
  sabsync1Unrate: { numberOfKeys: 1, lua: unrate },
  sabsync1RateWaiting: { numberOfKeys: 1, lua: rateWaiting }
}

module.exports = { commands, WAKE }
