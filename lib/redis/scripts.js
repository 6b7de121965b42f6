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
// The lease queue (Mutex is nr = 1 with fences, Sema is nr tokens). The
// common case, a free Mutex taken and given back, touches one key with
// three calls a script (TIME, then EXISTS and HSET to take, HMGET and DEL
// to give back), in scripts of their own that name that key alone and
// take three arguments and one (takeFree, leaveFree: a client uses them
// while it finds the object free, see lib/redis/queue.js);
// an object that never had a waiter keeps no key while idle. A hand-off
// (a holder leaves, the head of the queue is granted and told) reads the
// head and its client's heartbeat, takes it off the queue and publishes
// the grant: TIME, HMGET, ZRANGE, ZSCORE, ZREM, PUBLISH, HSET.
//
//   key   type    holds
//   M     hash    nr, fz (1: fences), fence (the last fence), held (how
//                 many hold), nw (how many queued: the members of Q), seq
//                 (last ticket), ep (the epoch: the server's clock in µs
//                 when M was made, which tells a waiter whether the object
//                 it queued on is the one that answers);
//                 nr = 1: h (the holder's id, '' when none), hx (its lease
//                 expiry, server ms), hf (its fence); a field left out
//                 reads as its value after a first grant: fence as hf,
//                 held as 1 (h set), nw and seq as 0 (a free Mutex's take
//                 writes nr, fz, ep, h, hx and hf alone: each field is
//                 server time, and the rest follow from these); i (who
//                 holds: "<holder id> <host> <pid> <threadId>", written
//                 by its renewals, stale once h names another id);
//                 nr > 1: top (slots ever handed out since the Sema was
//                 last idle), h:<holder id> -> slot
//   Q     zset    "<waiter id> <lease ms>" -> ticket (arrival order);
//                 exists while nw > 0. A waiter id is "<client id>:<n>",
//                 so the member names the client to tell and the lease
//                 to grant, and a grant reads nothing else of the waiter
//   B     zset    client id -> heartbeat expiry (server ms) of the clients
//                 with waiters; deleted when the last waiter leaves
//   L     zset    nr > 1: holder id -> lease expiry (server ms)
//   F     list    nr > 1: the slots below top that nobody holds (LPOP to
//                 grant one, RPUSH to give one back: O(1) each)
//
// Fences: max(last fence + 1, the server's clock in µs), so they keep
// growing across a restart that lost M, unless a clock steps back.
//
// Work per call is bounded: one call reaps at most BATCH lapsed holders
// (in a few commands that take them all at once) and takes at most WAITERS
// waiters off the queue (three O(log n) commands each), so no call blocks
// the server for long, whatever piled up: 20,000 dead holders are reaped by
// 40 calls, 20,000 waiters of a dead client skipped by 160. A call that left such work reports 0 ms
// to the next lease expiry, so the clients with waiters call again at
// once; a take always finds a slot if one lapsed (it reaps before it
// grants).
//
// Expiry and eviction. No key has a TTL while its object is in use (held
// > 0 or nw > 0): under a `volatile-*` maxmemory policy only keys with a
// TTL are evicted, and an evicted M, Q, L or F would grant a slot twice.
// When the object goes idle, M is deleted if no waiter ever queued on it
// since it was made (seq = 0) and its last fence is behind the clock (so
// the next fence, from the clock, is larger); otherwise it is trimmed to
// its counters and gets a TTL (a day for a Mutex, a minute for a Sema): a
// waiter stalled past a grant it never saw still finds the epoch it
// queued under. Losing an idle M, by expiry or eviction, loses nothing a
// later grant relies on. An object whose holders all died stays in use,
// without TTL, until the next call on it finds the leases lapsed. Under
// an `allkeys-*` policy any key can be evicted: a call whose ARGV[1] is
// '1' reads the policy (INFO memory) before anything else and refuses
// such a server; the client asks for that on an object's first call and
// then once a renewal period (lib/redis/queue.js).
//
// Invariants after every script: held = the holders (nr = 1: h ~= '';
// nr > 1: the h: fields = the members of L) <= nr; for nr > 1, a slot
// below top is in F or held by exactly one holder, and held = 0 means
// top = 0 and no F; nw = ZCARD(Q); if held < nr then Q holds no waiter of
// a live client, unless the call reported its work unfinished (pump()
// grants before anything else happens). An idle object has no key but
// maybe M, with a TTL; an object in use has no key with a TTL.
//
// A script fails before it writes anything when a key holds another type.
// M: its HMGET, the first command that reads it (take's EXISTS before it
// does not read it: a key that exists goes on to the HMGET). Q and B: a script whose object has
// waiters reads the head of Q and its client's score in B before it
// writes; one that may queue on an object without waiters reads their
// TYPE first (a new object never queues: its slots are free). L and F
// (nr > 1): while someone holds, L is read first (its earliest expiry)
// and F's TYPE is read; else L's first write is the first write of the
// script (a grant's ZADD), or its TYPE is read first (a queue of dead
// waiters may be emptied before that grant), and F is not touched (top
// = 0). A key that holds something else fails the call and changes
// nothing.
//
// Replies of take: {1, slot, fence, lease-left-ms, top} granted (top: the
// slots handed out since the object was last idle, which every slot held
// is below; 1 for nr = 1); {0} busy (try);
// {2, ms-to-next-lease-expiry or -1, epoch} queued.
//
// A grant to a queued waiter is published on its client's wake channel as
// the waiter's id alone: a hint to ask (beat), never a grant. Anyone who
// may PUBLISH can send one; what the waiter believes is the beat's reply,
// read from the state above.

const { createHash } = require('crypto')
const { bind, unbind, noReply, failure } = require('./common')

const WAKE = 'sabsync:wake:' // + client id: where grants to its waiters are hinted
const BATCH = 500 // the most lapsed holders one call reaps (a few batched commands for all)
const WAITERS = 125 // the most waiters one call takes off a queue (three commands each)

// Lua: when ARGV[i] is '1', read the server's eviction policy before
// anything else and fail the call if a key in use could be evicted
// (allkeys-*) or the policy cannot be read. The client turns the two
// errors into ERR_SABSYNC_REDIS naming the policy (lib/redis/common.js).
const evictionGuard = i => policyCheck(`ARGV[${i}] == '1'`)

// The same check, when the Lua condition `cond` holds.
const policyCheck = cond => `
if ${cond} then
  local ok, info = pcall(redis.call, 'INFO', 'memory')
  if not ok then
    return redis.error_reply('SABSYNC_NOPOLICY ' .. (type(info) == 'table' and tostring(info.err) or tostring(info)))
  end
  local policy = string.match(info, 'maxmemory_policy:([^\\r\\n]*)')
  if not policy then return redis.error_reply('SABSYNC_NOPOLICY INFO memory did not report maxmemory_policy') end
  if string.sub(policy, 1, 8) == 'allkeys-' then return redis.error_reply('SABSYNC_EVICTION ' .. policy) end
end
`

// The start of every lease-queue script: the policy check, the clock, and
// M read once (v), the first command on M, so a key of another type fails
// the call before anything is written. \`w\`: the Lua expression of the
// caller's id, whose h:<id> field (a Sema holder's slot) is read too.
//
// What follows the head in take, leave and renew is a fast path for the
// common case where nobody waits (a free object taken, the holder of an
// object nobody waited for leaving, a Mutex renewed): the commands the
// general path would run, and the state it would write, without the Lua
// that sets the general path up (its functions and the state table: about
// half of a call's time on the server for a free Mutex). Each fast path
// decides from v alone (take's, from whether M exists, before v is
// read); whatever it cannot decide falls through to the general path,
// which reuses v and the clock.
const start = evictionGuard(1) + `
local M, Q, B, L, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local nowUs = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
`
const read = w => `
local v = redis.call('HMGET', M, 'nr', 'fz', 'fence', 'held', 'nw', 'seq', 'h', 'hx', 'hf', 'top', 'ep', 'h:' .. ${w})
`
const head = w => start + read(w)

// The general path's definitions.
const defs = `
local DAY = 86400000
local BATCH = ${BATCH}
local WAITERS = ${WAITERS}

local function typeCheck (keys)
  for _, kt in ipairs(keys) do
    local got = redis.call('TYPE', kt[1]).ok
    if got ~= 'none' and got ~= kt[2] then
      return 'WRONGTYPE sabsync: key ' .. kt[1] .. ' holds a ' .. got .. ', not the ' .. kt[2] .. ' sabsync keeps there'
    end
  end
  return nil
end

-- What an object is, in a mismatch message.
local function kind (nr, fencing)
  if fencing then return 'a Mutex (nr = 1, fenced)' end
  return 'a Sema of nr = ' .. nr
end

-- The head of Q: member, its waiter id, its client, its lease, and whether
-- that client's heartbeat is live; nil when Q is empty.
local function readHead ()
  local head = redis.call('ZRANGE', Q, 0, 0)[1]
  if not head then return nil end
  local w, ctx, lease = string.match(head, '^(([^ :]+):[^ ]*) (%d+)$')
  local alive = ctx and tonumber(redis.call('ZSCORE', B, ctx))
  return { member = head, w = w, ctx = ctx, lease = tonumber(lease), alive = alive ~= nil and alive > now }
end

-- The object's state, from v (the head's HMGET: v[12] is the caller's
-- h:<id>, so for nr > 1 st.mine is its slot if it holds one). nr, fencing:
-- the caller's, for an object without state (take); queue: whether the
-- caller may queue. st.nr is nil when there is no state and nothing to
-- make it with. Returns st, or nil and a WRONGTYPE message. Reads what the
-- type rules above need before anything is written.
local function open (nr, fencing, queue)
  local st = { nr = tonumber(v[1]), fencing = v[2] == '1', fence = tonumber(v[3] or v[9]) or 0,
    held = tonumber(v[4]) or ((v[1] == '1' and v[7] and v[7] ~= '') and 1 or 0),
    nw = tonumber(v[5]) or 0, seq = tonumber(v[6]) or 0, h = v[7] or '',
    hx = tonumber(v[8]) or 0, hf = v[9] or '0', top = tonumber(v[10]) or 0, ep = v[11], mine = v[12],
    dirty = false, granted = {}, fresh = false, exists = v[1] ~= false, head = false, first = nil, holders = {},
    slots = {}, freed = {}, more = false }
  st.nw0 = st.nw
  st.idle0 = st.held == 0 and st.nw == 0
  if not st.nr then
    if not nr then return st end
    st.nr, st.fencing, st.fresh = nr, fencing, true
  end
  if not st.ep then st.ep, st.dirty = string.format('%.0f', nowUs), true end
  local checks = {}
  if st.nw > 0 then
    st.head = readHead() -- reads Q and B
  elseif queue and st.held >= st.nr then
    -- Q and B are made if this call queues: it reads their types first.
    checks[#checks + 1] = {Q, 'zset'}
    checks[#checks + 1] = {B, 'zset'}
    st.qChecked = true
  end
  if st.nr > 1 then
    if st.held > 0 then
      st.first = tonumber(redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')[2]) -- reads L
      checks[#checks + 1] = {F, 'list'}
    elseif st.nw > 0 then
      checks[#checks + 1] = {L, 'zset'}
    end
  end
  if #checks > 0 then
    local bad = typeCheck(checks)
    if bad then return nil, bad end
  end
  return st
end

local function queueCheck (st)
  if st.qChecked or st.nw > 0 then return nil end
  st.qChecked = true
  return typeCheck({ {Q, 'zset'}, {B, 'zset'} })
end

-- Remove holder w (nr > 1: v is its slot) and give its slot back.
local function drop (st, w, v)
  if st.nr == 1 then
    if st.h == w then
      st.h, st.hx, st.hf = '', 0, '0'
      st.held = 0
      st.dirty = true
    end
    return
  end
  if v then
    st.freed[#st.freed + 1] = v
    redis.call('HDEL', M, 'h:' .. w)
    st.held = st.held - 1
    st.dirty = true
  end
  redis.call('ZREM', L, w)
end

-- Grant a slot to w (the caller checked st.held < st.nr). A waiter's
-- client (ctx) is told on its wake channel.
local function grant (st, w, lease, ctx)
  local slot = 0
  local fence = 0
  if st.fencing then
    -- Never below the server's clock in µs: fences keep growing across a
    -- restart without persistence, or a failover, unless a clock steps back.
    fence = st.fence + 1
    if fence < nowUs then fence = nowUs end
    st.fence = fence
  end
  local f = string.format('%.0f', fence)
  if st.nr == 1 then
    st.h, st.hx, st.hf = w, now + lease, f
  else
    -- L first: when nobody held, its ZADD may be the script's first write.
    redis.call('ZADD', L, now + lease, w)
    if #st.freed > 0 then
      slot = table.remove(st.freed)
    elseif st.top > st.held then
      -- The slots below top that nobody holds are in F.
      slot = redis.call('LPOP', F)
      if not slot then slot = st.top; st.top = st.top + 1 end
    else
      slot = st.top
      st.top = st.top + 1
    end
    st.holders[#st.holders + 1] = 'h:' .. w -- written by tidy's HSET
    st.holders[#st.holders + 1] = slot
    if #st.holders >= 200 then -- many grants at once: unpack() has a limit
      redis.call('HSET', M, unpack(st.holders))
      st.holders = {}
    end
    st.slots[w] = slot
    if not st.first or now + lease < st.first then st.first = now + lease end
  end
  st.held = st.held + 1
  st.dirty = true
  st.granted[w] = true
  if ctx then
    redis.call('PUBLISH', '${WAKE}' .. ctx, w)
  end
  return tonumber(slot), fence
end

-- Expire lapsed leases (at most BATCH), then grant free slots to the queue
-- in ticket order (at most WAITERS waiters taken off it), skipping waiters
-- whose client stopped beating. st.more: work left for the next call.
local function pump (st)
  if st.nr == 1 then
    if st.h ~= '' and st.hx <= now then drop(st, st.h) end
  elseif st.held > 0 and st.first and st.first <= now then
    local gone = redis.call('ZRANGEBYSCORE', L, '-inf', now, 'LIMIT', 0, BATCH)
    if #gone == BATCH then st.more = true end
    local fields = {}
    for i, w in ipairs(gone) do fields[i] = 'h:' .. w end
    local slots = redis.call('HMGET', M, unpack(fields))
    for i = 1, #gone do
      if slots[i] then
        st.freed[#st.freed + 1] = slots[i]
        st.held = st.held - 1
      end
    end
    redis.call('HDEL', M, unpack(fields))
    redis.call('ZREM', L, unpack(gone))
    st.dirty = true
    st.first = st.held > 0 and tonumber(redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')[2]) or nil
  end
  local taken = 0
  while st.held < st.nr and st.nw > 0 do
    if taken == WAITERS then
      st.more = true
      break
    end
    taken = taken + 1
    local head = st.head
    if head == false then head = readHead() end
    st.head = false
    if not head then
      st.nw = 0
      st.dirty = true
      break
    end
    redis.call('ZREM', Q, head.member)
    st.nw = st.nw - 1
    st.dirty = true
    if head.alive then grant(st, head.w, head.lease, head.ctx) end
  end
end

-- Milliseconds until the first lease expires (-1: none held); 0 when this
-- call left work for the next (st.more).
local function nextExpiry (st)
  if st.more then return 0 end
  if st.held == 0 then return -1 end
  local first = st.hx
  if st.nr > 1 then first = st.first end
  if not first then return -1 end
  return math.max(first - now, 0)
end

-- Save the state (see "Expiry and eviction" above): an idle object is
-- deleted, or trimmed to its counters with a TTL; Q, B, L and F exist only
-- while in use, and are made without one.
local function tidy (st)
  if st.nw0 > 0 and st.nw == 0 then redis.call('DEL', B) end
  local idle = st.held == 0 and st.nw == 0
  if idle then
    if st.nr > 1 and st.top > 0 then
      redis.call('DEL', F)
      st.top = 0
    end
    if not (st.fresh or st.dirty or not st.idle0) then return end
    if st.seq == 0 and not (st.fencing and st.fence >= nowUs) then
      if st.exists then redis.call('DEL', M) end
      return
    end
  elseif st.nr > 1 and #st.freed > 0 then
    for i = 1, #st.freed, BATCH do
      redis.call('RPUSH', F, unpack(st.freed, i, math.min(i + BATCH - 1, #st.freed)))
    end
  end
  -- An idle M gets its TTL before its counters: on a full server under
  -- noeviction a script's first write decides whether Redis lets it write
  -- (a PEXPIRE may; an HSET, which may grow memory, may not), and a
  -- release must get through.
  if idle and st.exists then redis.call('PEXPIRE', M, st.fencing and DAY or 60000) end
  if st.fresh or st.dirty then
    if st.nr == 1 then
      redis.call('HSET', M, 'nr', 1, 'fz', st.fencing and 1 or 0, 'fence', string.format('%.0f', st.fence), 'held', st.held,
        'nw', st.nw, 'seq', st.seq, 'ep', st.ep, 'h', st.h, 'hx', st.hx, 'hf', st.hf)
    else
      redis.call('HSET', M, 'nr', st.nr, 'fz', st.fencing and 1 or 0, 'held', st.held, 'nw', st.nw, 'seq', st.seq,
        'ep', st.ep, 'top', st.top, unpack(st.holders))
    end
  end
  if idle and not st.exists then
    redis.call('PEXPIRE', M, st.fencing and DAY or 60000)
  elseif not idle and st.idle0 and st.exists then
    redis.call('PERSIST', M)
  end
end

-- {1, slot, fence, lease left, top} if w holds a slot, else nil.
local function holding (st, w)
  if st.nr == 1 then
    if st.h ~= w then return nil end
    return { 1, 0, tonumber(st.hf), math.max(st.hx - now, 0), 1 }
  end
  local slot = st.slots[w] or st.mine
  if not slot then slot = redis.call('HGET', M, 'h:' .. w) end
  if not slot then return nil end
  local exp = tonumber(redis.call('ZSCORE', L, w))
  if not exp then return nil end
  return { 1, tonumber(slot), 0, math.max(exp - now, 0), st.top }
end
`

// ARGV: check policy (0/1), id, client id, lease ms, heartbeat ms, wait (0 try / 1 queue), nr, fencing (0/1).
const take = start + `
local w, lease, nr = ARGV[2], tonumber(ARGV[4]), tonumber(ARGV[7])
-- Fast path: no M, so nobody holds or waits: w takes slot 0 of a new
-- object, as the general path's open(), grant() and tidy() would (TIME,
-- EXISTS, HSET; a Sema's grant writes L first, a ZADD). EXISTS, not the
-- HMGET of M's fields: an integer, where twelve fields to ask for and
-- twelve nils to answer were a tenth of a free lock+unlock's time on the
-- server; an M of another type is left to the general path, whose HMGET
-- refuses it. The fence is the clock's (no earlier fence is known), as is
-- the epoch. A Mutex's M leaves out the fields whose value follows (see M
-- above).
if (nr == 1 or ARGV[8] == '0') and redis.call('EXISTS', M) == 0 then
  local ep = string.format('%.0f', nowUs)
  if nr == 1 then
    local fence, f = 0, '0'
    if ARGV[8] == '1' then fence, f = nowUs, ep end
    redis.call('HSET', M, 'nr', 1, 'fz', ARGV[8], 'ep', ep, 'h', w, 'hx', now + lease, 'hf', f)
    return { 1, 0, fence, lease, 1 }
  end
  redis.call('ZADD', L, now + lease, w)
  redis.call('HSET', M, 'nr', nr, 'fz', 0, 'held', 1, 'nw', 0, 'seq', 0, 'ep', ep, 'top', 1, 'h:' .. w, 0)
  return { 1, 0, 0, lease, 1 }
end
` + read('ARGV[2]') + defs + `
local ctx, beat, queue, fencing = ARGV[3], tonumber(ARGV[5]), ARGV[6] == '1', ARGV[8] == '1'
local st, bad = open(nr, fencing, queue)
if not st then return redis.error_reply(bad) end
if st.nr ~= nr and not st.fencing and not fencing and st.held == 0 and st.nw == 0 then
  -- An idle Sema keeps only its counters: it may be made again with another nr.
  st.nr, st.top, st.dirty = nr, 0, true
end
if st.nr ~= nr and not st.fencing and not fencing and st.nr > 1 and nr > 1 then
  -- A Sema's nr is its caller's: this take is granted while fewer than nr
  -- hold, and the queue is served up to the nr of the latest take. Across a
  -- deploy that changes nr, at most the larger of the two hold at once, and
  -- the new nr alone once the old clients are gone. Slots stay below the
  -- largest nr used since the Sema was last idle.
  st.nr, st.dirty = nr, true
end
if st.fencing ~= fencing then
  return redis.error_reply('SABSYNC_MISMATCH sabsync: ' .. M .. ' is in use as ' .. kind(st.nr, st.fencing) ..
    ', and this call asked for ' .. kind(nr, fencing) .. ': a Mutex and a Sema whose names make the same key.' ..
    ' Give one of them another key or prefix')
end
if st.nr ~= nr then
  return redis.error_reply('SABSYNC_MISMATCH sabsync: ' .. M .. ': nr = ' .. st.nr .. ' is in use (' .. st.held ..
    ' held, ' .. st.nw .. ' waiting), this call asked for nr = ' .. nr .. '. A Sema in use changes nr between two' ..
    ' values above 1; to or from nr = 1 only once it is idle (nobody holds or waits): try again then, or use another key')
end
pump(st)
-- The same id again (a command resent after a reconnect) gets the same answer.
if st.nr == 1 or st.mine or st.granted[w] then
  local held = holding(st, w)
  if held then tidy(st) return held end
end
if st.held < nr then
  -- pump() left nobody waiting: w is not queued, and takes a slot.
  local slot, fence = grant(st, w, lease, nil)
  local top = st.nr == 1 and 1 or st.top
  tidy(st)
  return { 1, slot, fence, lease, top }
end
local member = w .. ' ' .. ARGV[4]
if st.nw > 0 and redis.call('ZSCORE', Q, member) then tidy(st) return { 2, nextExpiry(st), st.ep } end
if not queue then tidy(st) return { 0 } end
bad = queueCheck(st)
if bad then return redis.error_reply(bad) end
st.seq = st.seq + 1
redis.call('ZADD', Q, st.seq, member)
redis.call('ZADD', B, now + beat, ctx)
st.nw = st.nw + 1
st.dirty = true
tidy(st)
return { 2, nextExpiry(st), st.ep }
`

// Release holder id, or take waiter id out of the queue. ARGV: check
// policy (0/1), id, its lease ms (which names it in the queue). 1 if it
// held a lease that had not expired, else 0.
const leave = head('ARGV[2]') + `
local w = ARGV[2]
-- Fast path: the holder of a Mutex (nr = 1) that nobody waited for since
-- M was made (seq = 0, so nw = 0) leaves, its fence behind the clock: M
-- goes, as drop(), pump() and tidy() below would do (TIME, HMGET, DEL).
if v[1] == '1' and v[7] == w and (v[6] or '0') == '0' and (v[5] or '0') == '0' and
    not (v[2] == '1' and (tonumber(v[3] or v[9]) or 0) >= nowUs) then
  redis.call('DEL', M)
  if (tonumber(v[8]) or 0) > now then return 1 end
  return 0
end
-- Fast path: the last holder of a Sema (nr > 1) that nobody waited for
-- leaves: M, L and F go, as drop(), pump() and tidy() below would do. L is
-- read first (ZSCORE: a key of another type fails here, as the general
-- path's ZRANGE would) and F's type checked; an F of another type is left
-- to the general path, which refuses it. TIME, HMGET, ZSCORE, TYPE, DEL.
if v[1] and v[1] ~= '1' and v[12] and v[4] == '1' and v[5] == '0' and v[6] == '0' then
  local exp = tonumber(redis.call('ZSCORE', L, w))
  local ft = exp and redis.call('TYPE', F).ok
  if ft == 'none' or ft == 'list' then
    redis.call('DEL', M, L, F)
    if exp > now then return 1 end
    return 0
  end
end
` + defs + `
local st, bad = open(nil, nil, false)
if not st then return redis.error_reply(bad) end
if not st.nr then return 0 end
local r = 0
local slot = st.mine
local exp
if st.nr == 1 then
  if st.h == w then exp = st.hx end
elseif slot then
  exp = tonumber(redis.call('ZSCORE', L, w))
end
if exp then
  if exp > now then r = 1 end
  drop(st, w, slot)
elseif st.nw > 0 and redis.call('ZREM', Q, w .. ' ' .. ARGV[3]) == 1 then
  st.head = false -- it may have been the head
  st.nw = st.nw - 1
  st.dirty = true
end
pump(st)
tidy(st)
return r
`

// The common case alone, for an object of one slot (a Mutex, a Sema of
// nr = 1), in scripts that name M and nothing else: every key and
// argument a script is sent with costs its client and the server time
// (ten keys and eleven arguments for a take and a leave above, where these
// take one and three, and one and one). They decide what take and leave
// would from the same state, write what those would, and answer 3 where
// it takes more (someone holds or waits): the client then sends take or
// leave itself, with the same id. Neither reads the eviction policy: a
// client sends take when that is due.
//
// takeFree: ARGV id, lease ms, fencing (0/1). The grant's fence (0
// without fences) when granted, for slot 0 of 1 with the whole lease (what
// take's {1, 0, fence, lease, 1} says, in an integer: a table reply costs
// the server about a µs more); -1 unless the object is idle. Without M it is
// made as take's fast path makes it (EXISTS, TIME, HSET); an idle M (held
// by nobody, nobody queued: trimmed to its counters, with a TTL, after a
// waiter once queued) is granted as take's general path grants it: the
// next fence, the holder, and no TTL while in use (EXISTS, HMGET, TIME,
// HSET, PERSIST). A lapsed holder, a mismatch of kind, a key of another
// type: take.
const takeFree = `
local M = KEYS[1]
local v = false
if redis.call('EXISTS', M) == 1 then
  v = redis.call('HMGET', M, 'nr', 'fz', 'fence', 'held', 'nw', 'h', 'hf')
  if v[1] ~= '1' or v[2] ~= ARGV[3] or (v[6] or '') ~= '' or (v[4] or '0') ~= '0' or (v[5] or '0') ~= '0' then return -1 end
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local nowUs = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local lease = tonumber(ARGV[2])
local fence, f = 0, '0'
if not v then
  local ep = string.format('%.0f', nowUs)
  if ARGV[3] == '1' then fence, f = nowUs, ep end
  redis.call('HSET', M, 'nr', '1', 'fz', ARGV[3], 'ep', ep, 'h', ARGV[1], 'hx', now + lease, 'hf', f)
  return fence
end
if ARGV[3] == '1' then
  fence = (tonumber(v[3] or v[7]) or 0) + 1
  if fence < nowUs then fence = nowUs end
  f = string.format('%.0f', fence)
  redis.call('HSET', M, 'fence', f, 'held', '1', 'h', ARGV[1], 'hx', now + lease, 'hf', f)
else
  redis.call('HSET', M, 'held', '1', 'h', ARGV[1], 'hx', now + lease, 'hf', f)
end
redis.call('PERSIST', M)
return fence
`

// leaveFree: ARGV id. As leave answers (1: it held a lease that had not
// expired, 0: it held nothing, or a lapsed lease) when M is gone, or when
// its holder id leaves an object of one slot that nobody waits for: M
// goes if nobody waited since it was made (seq = 0) and its fence is
// behind the clock (TIME, HMGET, DEL); else it is trimmed to its
// counters, with its TTL first, as leave's tidy() trims it (PEXPIRE,
// HSET). 3 otherwise (someone waits, or another holds it now): the client
// sends leave. A key of another type fails here, as leave's HMGET would.
const leaveFree = `
local M = KEYS[1]
local v = redis.call('HMGET', M, 'nr', 'fz', 'fence', 'nw', 'seq', 'h', 'hx', 'hf')
if not v[1] then return 0 end
if v[1] ~= '1' or v[6] ~= ARGV[1] or (v[4] or '0') ~= '0' then return 3 end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local nowUs = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local r = 0
if (tonumber(v[7]) or 0) > now then r = 1 end
local fence = tonumber(v[3] or v[8]) or 0
if (v[5] or '0') == '0' and not (v[2] == '1' and fence >= nowUs) then
  redis.call('DEL', M)
  return r
end
redis.call('PEXPIRE', M, v[2] == '1' and '86400000' or '60000')
redis.call('HSET', M, 'fence', string.format('%.0f', fence), 'held', '0', 'h', '', 'hx', '0', 'hf', '0')
return r
`

// Extend holder id's lease to lease ms from now, if it still holds one
// that has not expired. ARGV: check policy (0/1), id, lease ms, and for a
// Mutex who holds it ("<id> <host> <pid> <threadId>", kept in field i for
// holder(): a person's hint, believed only while its id is h's). 1
// renewed, 0 lost.
const renew = head("''") + `
local w, lease = ARGV[2], tonumber(ARGV[3])
-- Fast path: a Mutex (nr = 1) whose holder w renews in time: only hx (and
-- i) change (the general path's tidy() writes every field again, the rest
-- unchanged).
if v[1] == '1' and v[7] == w and (tonumber(v[8]) or 0) > now and v[11] then
  if ARGV[4] then
    redis.call('HSET', M, 'hx', now + lease, 'i', ARGV[4])
  else
    redis.call('HSET', M, 'hx', now + lease)
  end
  return 1
end
` + defs + `
local st, bad = open(nil, nil, false)
if not st then return redis.error_reply(bad) end
if not st.nr then return 0 end
local exp
if st.nr == 1 then
  if st.h == w then exp = st.hx end
else
  exp = tonumber(redis.call('ZSCORE', L, w))
end
if not exp or exp <= now then
  pump(st)
  tidy(st)
  return 0
end
if st.nr == 1 then
  st.hx = now + lease
  st.dirty = true
else
  redis.call('ZADD', L, 'XX', now + lease, w)
end
tidy(st)
if st.nr == 1 and ARGV[4] then redis.call('HSET', M, 'i', ARGV[4]) end
return 1
`

// A Mutex's holder now, for a person (Mutex.holder()): { its id, the ms
// its lease has left, its fence, what its renewals said of it (field i,
// or '') }, or {} when nobody holds it or its lease ran out. Reads only;
// one key, M.
const holder = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local v = redis.call('HMGET', KEYS[1], 'h', 'hx', 'hf', 'i')
local hx = tonumber(v[2])
if not v[1] or v[1] == '' or not hx or hx <= now then return {} end
return { v[1], hx - now, v[3] or '', v[4] or '' }
`

// A waiting client's heartbeat, which also reports on its waiters.
// ARGV: check policy (0/1), client id, heartbeat ms, then per waiter: its
// id, its lease ms. Reply: { ms-to-next-lease-expiry or -1, epoch ('' when
// the object has no state), per id: {1, slot, fence, lease-left, top} | {2}
// queued | {0} gone }.
const beat = head("''") + defs + `
local ctx, hb = ARGV[2], tonumber(ARGV[3])
local st, bad = open(nil, nil, false)
if not st then return redis.error_reply(bad) end
local out = { -1, '' }
if not st.nr then
  for i = 4, #ARGV, 2 do out[#out + 1] = { 0 } end
  return out
end
if st.nw > 0 then
  redis.call('ZADD', B, now + hb, ctx)
  if st.head and st.head.ctx == ctx then st.head.alive = true end
end
pump(st)
for i = 4, #ARGV, 2 do
  local w = ARGV[i]
  local held = holding(st, w)
  if held then out[#out + 1] = held
  elseif st.nw > 0 and redis.call('ZSCORE', Q, w .. ' ' .. ARGV[i + 1]) then out[#out + 1] = { 2 }
  else out[#out + 1] = { 0 } end
end
out[1] = nextExpiry(st)
out[2] = st.ep
tidy(st)
return out
`

// How many wait, on every client (those of clients that stopped beating
// not counted). ARGV: check policy (0/1).
const count = head("''") + defs + `
local st, bad = open(nil, nil, false)
if not st then return redis.error_reply(bad) end
if not st.nr then return 0 end
pump(st)
local n = 0
if st.nw > 0 then
  for _, m in ipairs(redis.call('ZRANGE', Q, 0, -1)) do
    local ctx = string.match(m, '^([^ :]+):')
    local alive = ctx and redis.call('ZSCORE', B, ctx)
    if alive and tonumber(alive) > now then n = n + 1 end
  end
end
tidy(st)
return n
`

// The rate limiter: a log of the grant times of the last timeUnit, and of
// those still to come (reservations). KEYS: R (zset id -> µs). RM (a
// hash where an older version kept rps and unit, beside R) is never read,
// and goes with R (rateTidy).
// A grant at t needs t >= now, t >= the newest (arrival order), t >= the
// rps-th newest + unit (no window of unit holds more than rps grants) and,
// with uniform spacing, t >= newest + unit/rps: the window semantics of
// src/core/rate.c, with the caller sleeping until t instead of asking
// again. Removing an unused reservation (an abort) keeps every property
// above for the rest. rps, unit and uniform are each caller's: a rolling
// deploy that changes them shares the log, each caller applying its own
// rule to it, and the new rule holds once the old callers are gone (while
// both run, a caller of a shorter unit trims grants older than its unit
// that a caller of a longer one would still count).
//
// ARGV: id, rps, unit µs, uniform (0/1), most µs the caller will wait (-1:
// any), check policy (0/1). Reply: t µs, granted now (a free limit's
// call); {t µs, wait µs} reserved for later (t > 0); {0, wait µs} too
// late for the caller. Integers alone, as few as say it, and one key:
// each key, argument and reply element costs the server and the client
// time, for the call a free limit makes most. A call with room runs
// TIME, ZRANGE (the newest grant), ZCARD and ZADD; a call that finds rps
// grants or more also reads the rps-th newest (a ZRANGE, which costs the
// server more than a ZCARD: each score in a reply is formatted), and with
// rps = 1 the newest is the rps-th. Each command is a µs or two of the
// server, most of a call's cost there.
//
// The log is trimmed (grants at or before now - unit go, ZREMRANGEBYSCORE)
// by a call that finds rps grants or more in it, or finds its newest one
// no longer counting. So after every call the log holds at most rps
// grants, or only those of the last unit and those to come (what a trim
// at every call would leave), and a limit with room (fewer than rps)
// pays no trim. What a log of fewer than rps keeps beyond the last unit
// is taken off by the idle tidy (rateTidy, the granted clients' timers).
const rate = evictionGuard(6) + `
local R = KEYS[1]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local id, rps, unit, uniform, most = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1', tonumber(ARGV[5])
-- No TYPE calls: a key of another type fails the first command that
-- touches it, and the first write (the grant's ZADD on R) comes after the
-- reads of R, so a call that fails has changed nothing. The grant is also
-- the first write for Redis's memory check: on a full server under
-- noeviction every call that would grant fails alike (OOM).
-- Grants at or before now - unit, still in the log until the trim below,
-- constrain nothing: they are its oldest, so the newest is one only if all
-- are (then t = now), and the rps-th newest is one only when fewer than
-- rps count (then its time + unit <= now).
local t = now
local trim = false
local newest = redis.call('ZRANGE', R, -1, -1, 'WITHSCORES')[2]
if newest then
  newest = tonumber(newest)
  if newest > t then t = newest end
  if newest <= now - unit then trim = true end
  if uniform and newest + math.floor(unit / rps) > t then t = newest + math.floor(unit / rps) end
  -- The rps-th newest, if the log holds rps grants or more.
  local kth = newest
  if rps > 1 then
    kth = nil
    if redis.call('ZCARD', R) >= rps then kth = redis.call('ZRANGE', R, -rps, -rps, 'WITHSCORES')[2] end
  end
  if kth then
    trim = true
    if tonumber(kth) + unit > t then t = tonumber(kth) + unit end
  end
end
if most >= 0 and t - now > most then return { 0, t - now } end
-- No TTL: under a volatile-* policy a key with one may be evicted while it
-- still counts, and the limit would grant more than rps in a window. The
-- trim (see above) takes off only grants that no longer count: trimming to
-- the last rps instead would drop one that counts again once a later
-- reservation is given back.
-- A score given as a number is sent in a form that reads back as the
-- same double (Redis formats it with %.17g, or the shortest round trip).
redis.call('ZADD', R, t, id)
if trim then redis.call('ZREMRANGEBYSCORE', R, '-inf', now - unit) end
if t == now then return t end
return { t, t - now }
`

// A RateLimit's idle tidy (a timer of each client that was granted, run
// when its newest grant stops counting, so that an idle limit keeps no
// key without later calls): takes off up to BATCH grants at or before
// now - unit, and both keys when the log is empty. KEYS: R, RM. ARGV: unit
// µs. Reply: µs until the newest grant stops counting (0: more to take
// off now), or -1 once both keys are gone. The grants taken off are the
// oldest: counted (ZCOUNT) and removed by rank (ZREMRANGEBYRANK), which
// costs the server about half of reading them and removing each by name
// (a batch of 500: 120-180 µs against 230-370, bench/support/
// redis-sweep.js). A key of another type fails the ZCOUNT, before any
// write.
const rateTidy = `
local R, RM = KEYS[1], KEYS[2]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local unit = tonumber(ARGV[1])
local n = math.min(redis.call('ZCOUNT', R, '-inf', now - unit), ${BATCH})
if n > 0 then redis.call('ZREMRANGEBYRANK', R, 0, n - 1) end
if n == ${BATCH} then return 0 end
local newest = redis.call('ZRANGE', R, -1, -1, 'WITHSCORES')[2]
if not newest then
  redis.call('DEL', RM)
  return -1
end
return math.max(tonumber(newest) + unit - now, 0)
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

// The keyed limiter (lib/redis/rate-limiter.js): GCRA as the in-process
// RateLimiter (src/core/limiter.c), µs on the server's clock. One limiter's
// keys share one hash tag, so a script is one slot of a Redis Cluster:
//
//   key   type    holds
//   Z     zset    client key -> its tat (µs): the moment its bucket is
//                 full again (a score: below 2^53, so exact)
//   P     string  nothing this version writes: the parameters an older
//                 one kept there, deleted by the idle sweep once Z is
//                 empty
//
// T and tau are each caller's (a rolling deploy shares Z between callers
// of other parameters): a tat further ahead than this caller's tau (left by
// a deeper bucket) is obeyed as written and never lowered (C1 of
// src/core/limiter.c): remaining is then 0, retryAfter says when it comes
// within this caller's bucket.
//
// Nothing has a TTL: under a volatile-* policy Redis evicts only keys with a
// TTL, and a bucket evicted while it refills would start full again. A
// client key with tat <= now answers as an absent one, so its entry can go
// at any time. One consume, refund or reset in KEYED_EVERY (those whose
// `now`, in µs, is a multiple of it: one in KEYED_EVERY on average, by the
// clock's low digits) takes off up to KEYED_SWEEP entries of Z whose time
// has passed (the oldest first, one ZREMRANGEBYRANK), so the entries kept
// are the active ones and a backlog that later calls shrink (KEYED_SWEEP /
// KEYED_EVERY entries a call on average, more than the one a call adds).
// The sweep's two commands are thus paid by one call in KEYED_EVERY, not
// by each: a script's cost on the server is mostly its calls into Redis
// (~1.5 µs each here). A client's idle sweep (keyedSweep, on a timer after
// its writes) takes off the rest, and P once Z is empty.
//
// keyedRate: KEYS: Z, the only key a call needs (each key and argument
// sent costs the client and the server: one key and six arguments
// measured 6 % faster a call than two keys and nine, and five arguments
// fewer about 0.4 µs each of a round trip). ARGV: the operation, T µs,
// tau µs, the client key. The operation is one argument: its letter ('c'
// consume, 'p' peek, 'r' refund, 'x' reset), in upper case when the
// policy is to be read first, then the points when they are not 1 ('c5').
// Reply, in as few integers as say it (a reply's every integer costs the
// server about half a µs: a table of four measured 2 µs a call more than
// one integer): an allowed consume answers one integer, resetAfter µs ×
// (burst + 1) + remaining, where burst is tau / T (its pair {remaining,
// resetAfter µs} when that reaches 2^53); an allowed peek that pair; a
// refused consume or peek {remaining, retryAfter µs, resetAfter µs}; a
// refund or reset 0.
// A wrong type of Z fails the script at its first command on it (ZSCORE),
// before any write; peek only reads. A consume runs TIME, ZSCORE and ZADD;
// a sweeping one also ZCOUNT and, when it finds entries, one
// ZREMRANGEBYRANK (the oldest are the lowest ranks; see rateTidy).
// Scores go to Redis as Lua numbers, which it formats so that they read
// back as the same double: a string.format('%.0f') of each cost the
// server 1-3 µs a call more (INFO commandstats).
const KEYED_SWEEP = 24
const KEYED_EVERY = 8
const keyedRate = `
local op = string.byte(ARGV[1])
` + policyCheck('op < 97') + `
if op < 97 then op = op + 32 end
local n = 1
if #ARGV[1] > 1 then n = tonumber(string.sub(ARGV[1], 2)) end
local Z, key = KEYS[1], ARGV[4]
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local v = redis.call('ZSCORE', Z, key)
local tat = 0
if v then
  tat = tonumber(v)
  if not tat or tat ~= tat or tat == math.huge or tat == -math.huge then
    return redis.error_reply('SABSYNC_MISMATCH sabsync: ' .. Z .. ' holds ' .. v .. ' for a client key: not a RateLimiter time')
  end
end
local T, tau = tonumber(ARGV[2]), tonumber(ARGV[3])
local base = tat
if base < now then base = now end
-- Writes from here on: the call's own entry first (so that on a full
-- server under noeviction a consume that would grant fails, OOM, before
-- anything is written), then entries whose time has passed, oldest first,
-- by one call in KEYED_EVERY.
local reply = 0
if op == 99 then
  local nxt = base + n * T
  if nxt - now > tau then
    reply = { math.max(math.floor((now + tau - base) / T), 0), nxt - tau - now, base - now }
  else
    redis.call('ZADD', Z, nxt, key)
    local room = math.floor((now + tau - nxt) / T)
    reply = (nxt - now) * (tau / T + 1) + room
    if reply >= 9007199254740992 then reply = { room, nxt - now } end
  end
elseif op == 112 then
  local nxt = base + T
  if nxt - now > tau then
    return { math.max(math.floor((now + tau - base) / T), 0), nxt - tau - now, base - now }
  end
  return { math.floor((now + tau - base) / T), base - now }
elseif op == 114 and tat > now then
  local nxt = tat - n * T
  if nxt > now then
    redis.call('ZADD', Z, nxt, key)
  else
    redis.call('ZREM', Z, key)
  end
elseif op == 120 and v then
  redis.call('ZREM', Z, key)
end
if now % ${KEYED_EVERY} == 0 then
  local old = math.min(redis.call('ZCOUNT', Z, '-inf', now), ${KEYED_SWEEP})
  if old > 0 then redis.call('ZREMRANGEBYRANK', Z, 0, old - 1) end
end
return reply
`

// keyedSweep: a limiter's idle sweep (a timer of each client that wrote,
// so that state is reclaimed without later calls): up to BATCH entries
// whose time has passed (by rank, as rateTidy), then P if nothing is
// left. KEYS: P, Z. Reply: µs to the earliest entry's time while entries
// remain, -1 when none do. A key of another type fails the ZCOUNT, before
// any write.
const keyedSweep = `
local P, Z = KEYS[1], KEYS[2]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local old = math.min(redis.call('ZCOUNT', Z, '-inf', now), ${BATCH})
if old > 0 then redis.call('ZREMRANGEBYRANK', Z, 0, old - 1) end
local first = redis.call('ZRANGE', Z, 0, 0, 'WITHSCORES')[2]
if not first then
  redis.call('DEL', P)
  return -1
end
return math.max(tonumber(first) - now, 0)
`

// Names carry a version: two copies of sabsync in one process never
// share a command whose script differs.
const commands = {
  sabsync5Take: { numberOfKeys: 5, lua: take },
  sabsync5Leave: { numberOfKeys: 5, lua: leave },
  sabsync2TakeFree: { numberOfKeys: 1, lua: takeFree },
  sabsync2LeaveFree: { numberOfKeys: 1, lua: leaveFree },
  sabsync6Renew: { numberOfKeys: 5, lua: renew },
  sabsync1Holder: { numberOfKeys: 1, lua: holder },
  sabsync5Beat: { numberOfKeys: 5, lua: beat },
  sabsync5Count: { numberOfKeys: 5, lua: count },
  sabsync6Rate: { numberOfKeys: 1, lua: rate },
  sabsync2Unrate: { numberOfKeys: 1, lua: unrate },
  sabsync2RateTidy: { numberOfKeys: 2, lua: rateTidy },
  sabsync2RateWaiting: { numberOfKeys: 1, lua: rateWaiting },
  sabsync10KeyedRate: { numberOfKeys: 1, lua: keyedRate },
  sabsync3KeyedSweep: { numberOfKeys: 2, lua: keyedSweep }
}

// The scripts of the calls made where nobody waits (a free lock's take
// and release, a RateLimit call, a RateLimiter call) are sent as EVALSHA
// by sabsync itself (sendScript): ioredis's defineCommand sends the same
// EVALSHA, but wraps each call in a command subclass that makes a
// closure, looks its socket up in a WeakSet and copies the arguments
// twice, 2-3 % of a free lock+unlock here (bench/README.md). A server
// without the script (restarted, failed over, SCRIPT FLUSH, a Cluster
// node that never ran it) answers NOSCRIPT having run nothing: the call
// goes again as EVAL, which runs the script and keeps it for the next
// EVALSHA, but only while live() says its caller still waits for it (a
// take whose caller gave up has sent its leave, and must not run after
// it; a RateLimit call that gave up has given its time back).
const direct = {}
for (const name of ['sabsync2TakeFree', 'sabsync2LeaveFree', 'sabsync6Rate', 'sabsync10KeyedRate']) {
  const { numberOfKeys, lua } = commands[name]
  direct[name] = { numberOfKeys, lua, sha: createHash('sha1').update(lua).digest('hex') }
}

const isNoscript = err => err !== null && typeof err === 'object' && typeof err.message === 'string' && err.message.startsWith('NOSCRIPT')

// Sends `script` and hands its reply to h.reply(reply), or its failure to
// h.failed(err), once; a NOSCRIPT is answered by sending the script
// itself, while h.live() (a call that gave up is not sent again). `h` is
// the call's own object: no promise of sendScript's own and no closure
// but the client promise's callbacks (each promise is a turn of the
// microtask queue, and each is garbage, on the calls where nobody waits).
// A client that throws instead of rejecting fails here.
function sendScript (redis, script, args, h) {
  let sent
  try {
    sent = redis.evalsha(script.sha, script.numberOfKeys, ...args)
  } catch (err) {
    return h.failed(err)
  }
  sent.then(r => h.reply(r), err => {
    if (!isNoscript(err) || !h.live()) return h.failed(err)
    let again
    try {
      again = redis.eval(script.lua, script.numberOfKeys, ...args)
    } catch (e) {
      return h.failed(e)
    }
    again.then(r => h.reply(r), e => h.failed(e))
  })
}

// A script call bounded as within() bounds one: the promise of what
// answer(err, reply) returns (or throws) once the reply, the failure
// (worded as within() words it) or the deadline's error came; a call
// that gave up, or whose live() turned false, is not sent again
// (NOSCRIPT). One promise a call, and one object (ScriptCall).
function callScript (redis, script, args, ms, what, answer, live) {
  return new Promise((resolve, reject) => {
    const c = new ScriptCall(redis, ms, what, answer, live, resolve, reject)
    sendScript(redis, script, args, c)
  })
}

// callScript's call in flight: the entry of its bound (common.js, bind)
// and the handler of its reply (sendScript).
class ScriptCall {
  constructor (redis, ms, what, answer, live, resolve, reject) {
    this.redis = redis
    this.ms = ms
    this.what = what
    this.answer = answer
    this.liveFn = live
    this.resolve = resolve
    this.reject = reject
    this.waits = true
    this.due = 0
    this.prev = null
    this.next = null
    this.timer = null
    this.d = bind(ms, this, performance.now())
  }

  end (err, r) {
    if (!this.waits) return
    this.waits = false
    unbind(this.d, this)
    try {
      this.resolve(this.answer(err, r))
    } catch (e) {
      this.reject(e)
    }
  }

  expire () {
    this.end(noReply(this.ms, typeof this.what === 'function' ? this.what() : this.what, this.redis))
  }

  reply (r) {
    this.end(null, r)
  }

  failed (err) {
    if (this.waits) this.end(failure(err, this.what, this.redis))
  }

  live () {
    return this.waits && (this.liveFn === undefined || this.liveFn())
  }
}

module.exports = { commands, direct, sendScript, callScript, WAKE, BATCH, WAITERS }
