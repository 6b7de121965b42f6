'use strict'
// The Lua scripts of LockManager (lib/redis/locks.js): the Web Locks
// request algorithm across machines. Each state change is one script, so
// Redis runs it whole; time is the server's (TIME).
//
// Every key of one manager prefix shares one hash tag, `{prefix:locks}`:
// the fence is one counter per prefix, taken inside the granting script,
// so the counter and every name's keys must be in one slot of a Redis
// Cluster (a prefix is one shard; give unrelated locks other prefixes to
// spread them). With T = `{prefix:locks}`:
//
//   key          type    holds
//   T:f          string  the last fence (the one key kept at rest)
//   T:a          zset    manager id -> its lease expiry (server ms); a
//                        manager is in it while it holds or waits
//   T:n          set     the names in use (held or waited for)
//   T:h:<name>   zset    holders: "<ticket> <x|s> <clientId>" -> fence
//   T:q:<name>   zset    waiters: "<ticket> <x|s> <clientId>" -> arrival
//
// <name> is the name's WTF-8 bytes (lib/redis/common.js redisName): one
// string, one key, lone surrogates included. A ticket is "<hub id>:<n>/<m>"
// (lib/redis/hub.js): "<hub id>:<n>" is its manager, whose expiry in T:a is
// the lease of every ticket it has; <hub id> names the wake channel of
// its client. A zset key goes when its last member does, so a name nobody
// holds or waits for has no key; T:a and T:n go with their last member.
//
// Invariants after every script, per name:
//   N1  an exclusive holder is the only holder (a grant of x needs no
//       holder left, a grant of s no x holder; steal empties T:h first);
//   N2  the head of T:q is not grantable, or the call reported more work
//       (next = 0): pump() grants in queue order until the head is
//       blocked, skipping waiters whose manager's lease ran out;
//   N3  the name is in T:n iff T:h or T:q exists.
// A holder whose manager's lease ran out still holds until a call on its
// name needs the room (reap): it is then taken off without a word to it
// (its own manager, if it lives, finds its ticket gone when it renews).
// Fences: max(last + 1, the server's clock in µs), so they grow with every
// grant, and still grow after a restart or flush that lost T:f, unless a
// clock steps back.
//
// A grant to a waiter, and a steal, is hinted on the wake channel of the
// waiter's (robbed holder's) client as its ticket alone: a hint to ask the
// server (sync), never a grant. What the caller's own client gains or
// loses is in the reply instead (`mine`), which is the server's word.

const { WAKE } = require('./scripts')

const WAITERS = 1000 // the most waiters one call takes off a queue (pump)

// The start of every script: the clock, the caller's keys, helpers.
// KEYS: T:f, T:a, T:n. ARGV[1]: T, ARGV[2]: the caller's hub id (grants to
// its own tickets go in the reply, not on its channel).
const head = `
local F, A, N = KEYS[1], KEYS[2], KEYS[3]
local T, me = ARGV[1], ARGV[2]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local nowUs = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local mine = {} -- ticket, fence (0: robbed) of the caller's client
local more = false
local lives = {} -- manager id -> lease expiry, or false when gone

local function parse (member)
  return string.match(member, '^(([0-9a-f]+):[0-9a-z]+)/[0-9a-z]+ ([xs]) ')
end

local function ticketOf (member)
  return string.match(member, '^(%S+) ')
end

-- A manager's lease expiry if it runs, else false.
local function alive (mgr)
  local s = lives[mgr]
  if s == nil then
    s = tonumber(redis.call('ZSCORE', A, mgr))
    if not s or s <= now then s = false end
    lives[mgr] = s
  end
  return s
end

local function tell (hub, member, fence)
  local ticket = ticketOf(member)
  if hub == me then
    mine[#mine + 1] = ticket
    mine[#mine + 1] = fence
  else
    redis.call('PUBLISH', '${WAKE}' .. hub, ticket)
  end
end

local function grant (name, H, member)
  local f = (tonumber(redis.call('GET', F)) or 0) + 1
  if f < nowUs then f = nowUs end
  f = string.format('%.0f', f)
  redis.call('SET', F, f)
  redis.call('ZADD', H, f, member)
  redis.call('SADD', N, name)
  return tonumber(f)
end

-- Take off the holders whose manager's lease ran out. Returns how many
-- hold, whether one is exclusive, and the earliest lease expiry of those
-- left (nil when none).
local function reap (H)
  local left, x, first = 0, false, nil
  local gone = {}
  for _, m in ipairs(redis.call('ZRANGE', H, 0, -1)) do
    local mgr, hub, mode = parse(m)
    local s = mgr and alive(mgr)
    if s then
      left = left + 1
      if mode == 'x' then x = true end
      if not first or s < first then first = s end
    else
      gone[#gone + 1] = m
    end
  end
  for i = 1, #gone, 500 do redis.call('ZREM', H, unpack(gone, i, math.min(i + 499, #gone))) end
  return left, x, first
end

-- The mode of the first live holder of H ('x' or 's'), or false when
-- none holds; the holders before it whose manager's lease ran out are
-- taken off. By N1 that answers both questions a grant asks (is anyone
-- left; is an exclusive holder left) without reading every shared holder.
local function blocker (H)
  while true do
    local m = redis.call('ZRANGE', H, 0, 0)[1]
    if not m then return false end
    local mgr, hub, mode = parse(m)
    if mgr and alive(mgr) then return mode end
    redis.call('ZREM', H, m)
  end
end

-- Whether a request of this mode is grantable over holders in this state
-- (blocker's answer), its queue ahead of it empty.
local function fits (mode, held)
  return (mode == 'x' and not held) or (mode == 's' and held ~= 'x')
end

-- Grant the queue's head while it is grantable (spec: "process the lock
-- request queue"), skipping waiters whose manager's lease ran out. Returns
-- the holders' state (as blocker), or nil when it did not need to read it.
local function pump (name, H, Q)
  local held
  local taken = 0
  while true do
    local m = redis.call('ZRANGE', Q, 0, 0)[1]
    if not m then break end
    if taken == ${WAITERS} then more = true break end
    taken = taken + 1
    local mgr, hub, mode = parse(m)
    if not (mgr and alive(mgr)) then
      redis.call('ZREM', Q, m)
    else
      if held == nil then held = blocker(H) end
      if not fits(mode, held) then break end
      redis.call('ZREM', Q, m)
      tell(hub, m, grant(name, H, m))
      if mode == 'x' or not held then held = mode end
    end
  end
  return held
end

-- N3: a name with neither key leaves T:n.
local function tidy (name, H, Q)
  if redis.call('EXISTS', H, Q) == 0 then redis.call('SREM', N, name) end
end

-- Milliseconds until the first lease of a holder of H runs out (-1: none
-- holds; 0: work left for the next call). Reads every holder: asked only
-- for a request that waits, when it queues and at its manager's syncs.
local function nextOf (H)
  if more then return 0 end
  local left, x, first = reap(H)
  if not first then return -1 end
  return math.max(first - now, 0)
end
`

// request: ARGV[3] manager id, [4] lease ms, [5] name, [6] member
// ("<ticket> <x|s> <clientId>"), [7] how (0 normal, 1 ifAvailable, 2 steal).
// Reply: {1, fence, mine} granted; {0, mine} not available (how = 1);
// {2, ms to the first holder's lease expiry or -1, mine} queued.
//
// A request sent twice (a client that resends after a reconnect) gets the
// same answer: a ticket already holding or queued is not added again.
const request = head + `
local mgr, lease, name, member, how = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7]
local H, Q = T .. ':h:' .. name, T .. ':q:' .. name
local mode = string.match(member, '^%S+ ([xs]) ')
redis.call('ZADD', A, now + lease, mgr)
lives[mgr] = now + lease
-- Fast path: nobody holds or waits.
if redis.call('EXISTS', H, Q) == 0 then
  return { 1, grant(name, H, member), mine }
end
local top = redis.call('ZRANGE', H, 0, 0)[1]
if top then
  local f = redis.call('ZSCORE', H, member)
  if f then return { 1, tonumber(f), mine } end
end
if how == '2' then
  -- Steal: every holder loses the name (told), and this request is
  -- granted ahead of the queue, which stays as it is.
  for _, m in ipairs(redis.call('ZRANGE', H, 0, -1)) do
    local _, hub = parse(m)
    if hub then tell(hub, m, 0) end
  end
  redis.call('DEL', H)
  return { 1, grant(name, H, member), mine }
end
if redis.call('ZSCORE', Q, member) then return { 2, nextOf(H), mine } end
local held = pump(name, H, Q)
if redis.call('EXISTS', Q) == 0 then
  -- Grantable: first in an empty queue, and (x) nobody holds or (s) no
  -- exclusive holder.
  if held == nil then held = blocker(H) end
  if fits(mode, held) then return { 1, grant(name, H, member), mine } end
end
if how == '1' then
  tidy(name, H, Q)
  return { 0, mine }
end
local last = redis.call('ZRANGE', Q, -1, -1, 'WITHSCORES')[2]
redis.call('ZADD', Q, (tonumber(last) or 0) + 1, member)
redis.call('SADD', N, name)
return { 2, nextOf(H), mine }
`

// release: ARGV[3] manager id, [4] 1 when the manager has nothing else
// (it leaves T:a), [5] name, [6] member. Takes the member off the holders
// or the queue, then serves the queue. Reply: {1 held / 0 not, mine}.
const release = head + `
local mgr, name, member = ARGV[3], ARGV[5], ARGV[6]
local H, Q = T .. ':h:' .. name, T .. ':q:' .. name
local r = redis.call('ZREM', H, member)
if r == 0 then redis.call('ZREM', Q, member) end
if redis.call('EXISTS', H, Q) == 0 then
  redis.call('SREM', N, name)
elseif redis.call('EXISTS', Q) == 1 then
  pump(name, H, Q)
  tidy(name, H, Q)
end
if ARGV[4] == '1' then
  redis.call('ZREM', A, mgr)
  -- Managers whose lease ran out: their tickets are reaped when met.
  redis.call('ZREMRANGEBYSCORE', A, '-inf', now)
end
return { r, mine }
`

// sync: the manager's renewal, and its answer to a hint. ARGV[3] manager
// id, [4] lease ms, [5] 1 when the manager has nothing but these releases
// (it leaves T:a), then per ticket: kind ('h' held, 'p' pending, 'r' to
// release), name, member. Renews the manager's lease (one ZADD for all its
// tickets), forgets the managers whose lease ran out, serves the queues
// its pending tickets wait in. Reply: {next, mine, then per ticket: h: its
// fence, or 0 when gone (stolen, or reaped after its lease ran out); p:
// {1, fence} granted, {2} queued, {0} gone; r: 1}. next: ms to the first
// lease expiry of a holder ahead of a pending ticket (-1: none).
const sync = head + `
local mgr, lease, last = ARGV[3], tonumber(ARGV[4]), ARGV[5] == '1'
if not last then
  redis.call('ZADD', A, now + lease, mgr)
  lives[mgr] = now + lease
end
redis.call('ZREMRANGEBYSCORE', A, '-inf', now)
local out = { -1, mine }
local next = -1
for i = 6, #ARGV, 3 do
  local kind, name, member = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local H, Q = T .. ':h:' .. name, T .. ':q:' .. name
  if kind == 'h' then
    out[#out + 1] = tonumber(redis.call('ZSCORE', H, member)) or 0
  elseif kind == 'r' then
    if redis.call('ZREM', H, member) == 0 then redis.call('ZREM', Q, member) end
    if redis.call('EXISTS', Q) == 1 then pump(name, H, Q) end
    tidy(name, H, Q)
    out[#out + 1] = 1
  else
    pump(name, H, Q)
    local f = redis.call('ZSCORE', H, member)
    if f then
      out[#out + 1] = { 1, tonumber(f) }
    elseif redis.call('ZSCORE', Q, member) then
      out[#out + 1] = { 2 }
      local n = nextOf(H)
      if n >= 0 and (next < 0 or n < next) then next = n end
    else
      out[#out + 1] = { 0 }
    end
    tidy(name, H, Q)
  end
end
if last then redis.call('ZREM', A, mgr) end
if more then next = 0 end
out[1] = next
return out
`

// query: every name in use, {name, holders, waiters}, holders as member,
// fence pairs, waiters in queue order; those whose manager's lease ran out
// are left out. Reads only.
const query = head + `
local out = {}
for _, name in ipairs(redis.call('SMEMBERS', N)) do
  local H, Q = T .. ':h:' .. name, T .. ':q:' .. name
  local held, pending = {}, {}
  local hs = redis.call('ZRANGE', H, 0, -1, 'WITHSCORES')
  for i = 1, #hs, 2 do
    local mgr = parse(hs[i])
    if mgr and alive(mgr) then
      held[#held + 1] = hs[i]
      held[#held + 1] = hs[i + 1]
    end
  end
  for _, m in ipairs(redis.call('ZRANGE', Q, 0, -1)) do
    local mgr = parse(m)
    if mgr and alive(mgr) then pending[#pending + 1] = m end
  end
  if #held > 0 or #pending > 0 then out[#out + 1] = { name, held, pending } end
end
return out
`

// Names carry a version: two copies of sabsync in one process never share
// a command whose script differs. numberOfKeys: 3 (T:f, T:a, T:n).
const lockCommands = {
  sabsync1LockRequest: { numberOfKeys: 3, lua: request },
  sabsync1LockRelease: { numberOfKeys: 3, lua: release },
  sabsync1LockSync: { numberOfKeys: 3, lua: sync },
  sabsync1LockQuery: { numberOfKeys: 3, lua: query }
}

module.exports = { lockCommands }
