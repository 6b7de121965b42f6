'use strict'
// One hub per Redis client object: its id (which names its waiters and its
// wake channel), the scripts defined on the client, the one extra
// connection that receives wake-ups, and the heartbeats of its waiters.
//
// Wake-ups. A grant to a queued waiter is hinted by the granting script
// on the channel of the waiter's client, `sabsync:wake:<hub id>`: the
// message is the waiter's id, and the waiter believes nothing from it. It
// beats its object at once, and the beat's reply, read from the object's
// state by a script, is the grant (slot, fence, and the lease left, counted
// from before the beat was sent). A message anyone else publishes there
// costs one beat and grants nothing. The hub
// keeps one subscriber connection (client.duplicate()) for all its waiters
// on every object, opened when one of them first has to queue and closed
// five seconds after the last one is served (at once when the client
// ends), so
// waiters never poll and never pin a connection each. Pub/Sub delivers at
// most once: a message published while the subscriber is down is lost. The
// grant itself is in the object's keys, so nothing is lost but time: every
// (re)subscription is followed by a heartbeat of every object that has
// waiters here, and heartbeats report grants too.
//
// Heartbeats. Per object with waiters here, one script call every
// heartbeat/3 ms renews this client's liveness in that object (a waiter
// whose client stopped beating for `heartbeat` ms is skipped when its turn
// comes) and answers the state of each of its waiters. A beat is also
// scheduled for the moment the first lease on the object runs out, so
// that a holder that died is replaced as soon as its lease allows, not a
// beat later. A waiter whose client could not beat for `heartbeat` ms, or
// whose entry the server no longer has, fails with ERR_SABSYNC_REDIS.

const { randomBytes } = require('crypto')
const { commands, direct, WAKE } = require('./scripts')
const { within, redisError, evictionError, noPolicyError, isRefusal, isUnreachable, quiet } = require('./common')

const LINGER_MS = 5000 // how long the subscriber outlives its last waiter

const hubs = new WeakMap()

function hubOf (redis) {
  let hub = hubs.get(redis)
  if (hub === undefined) {
    hub = new Hub(redis)
    hubs.set(redis, hub)
  }
  return hub
}

// The leases held through one client (queue.js Holding), for letGo() and
// holder(): a list through the holdings' own fields (before, after,
// listed), so that taking and giving back a lease costs a few writes, not
// a Set's hashing, on the calls where nobody waits.
class Leases {
  constructor () {
    this.first = null
  }

  add (h) {
    h.before = null
    h.after = this.first
    if (this.first !== null) this.first.before = h
    this.first = h
    h.listed = true
  }

  delete (h) {
    if (!h.listed) return
    h.listed = false
    if (h.before === null) this.first = h.after
    else h.before.after = h.after
    if (h.after !== null) h.after.before = h.before
    h.before = h.after = null
  }

  * [Symbol.iterator] () {
    for (let h = this.first; h !== null; h = h.after) yield h
  }
}

class Hub {
  constructor (redis) {
    this.redis = redis
    this.id = randomBytes(8).toString('hex')
    this.channel = WAKE + this.id
    this.seq = 0
    // waiter id -> waiter, from before its take is sent; also a
    // LockManager's tickets (lib/redis/locks.js), which have `wake()` and
    // no group: a wake or a (re)subscription calls it, and it asks the
    // server itself.
    this.waiters = new Map()
    this.groups = new Map() // object tag -> { queue, waiters, timer, due, inflight, again, lastOk }
    this.sub = null
    this.subscribed = false
    this.linger = null
    this.idleSince = 0
    this.eviction = null // the promise of the eviction check (checkEviction)
    this.holdings = new Set() // LockManager tickets held through this client (locks.js), for letGo()
    this.leases = new Leases() // Mutex and Sema leases held through it (queue.js Holding), for letGo()
    // The scripts sabsync sends itself (scripts.js, sendScript) are not
    // defined: a definition would cost a SHA-1 per client, never used.
    for (const [name, def] of Object.entries(commands)) {
      if (!(name in direct) && typeof redis[name] !== 'function') redis.defineCommand(name, def)
    }
    // Connections this client lost: a take that was unanswered across one
    // may have been sent again by the client (queue.js).
    this.drops = 0
    if (typeof redis.on === 'function') {
      redis.on('close', () => { this.drops++ })
      // An ended client reconnects no more: let the process exit.
      redis.on('end', () => this.closeSub())
    }
  }

  nextId () {
    return this.id + ':' + (++this.seq).toString(36)
  }

  // Waiter w's take answered "queued" (sent at `sentAt`); `next` is the
  // ms to the first lease expiry on its object (-1: none).
  join (w, next, sentAt) {
    const q = w.queue
    let g = this.groups.get(q.tag)
    if (g === undefined) {
      g = { queue: q, waiters: new Set(), timer: null, due: Infinity, inflight: false, again: false, lastOk: sentAt }
      this.groups.set(q.tag, g)
    }
    if (sentAt > g.lastOk) g.lastOk = sentAt
    g.waiters.add(w)
    w.group = g
    this.openSub()
    // Woken before its take was answered: ask now.
    this.schedule(g, w.woken ? 0 : next >= 0 ? Math.min(q.heartbeat / 3, next + 1) : q.heartbeat / 3)
  }

  // w is settled: it no longer waits here.
  part (w) {
    if (this.waiters.get(w.wid) === w) this.waiters.delete(w.wid)
    const g = w.group
    if (g) {
      g.waiters.delete(w)
      w.group = null
      if (g.waiters.size === 0 && !g.inflight) this.dropGroup(g)
    }
    if (this.waiters.size === 0 && this.sub) {
      // One timer at most: a hand-off a millisecond makes no timer each.
      this.idleSince = performance.now()
      if (this.linger === null) this.lingerFor(LINGER_MS)
    }
  }

  // Close the subscriber once nobody has waited here for LINGER_MS.
  lingerFor (ms) {
    this.linger = setTimeout(() => {
      this.linger = null
      if (this.waiters.size > 0 || this.sub === null) return
      const left = this.idleSince + LINGER_MS - performance.now()
      if (left > 0) this.lingerFor(left)
      else this.closeSub()
    }, ms)
    this.linger.unref()
  }

  dropGroup (g) {
    clearTimeout(g.timer)
    g.timer = null
    if (this.groups.get(g.queue.tag) === g) this.groups.delete(g.queue.tag)
  }

  // Beat g in `delay` ms, or sooner if a beat is due sooner already.
  schedule (g, delay) {
    const due = performance.now() + delay
    if (g.timer !== null && g.due <= due) return
    clearTimeout(g.timer)
    g.due = due
    g.timer = setTimeout(() => { g.timer = null; g.due = Infinity; this.beat(g) }, Math.max(0, delay))
  }

  beat (g) {
    if (g.inflight) { g.again = true; return }
    const list = [...g.waiters]
    if (list.length === 0) return this.dropGroup(g)
    const q = g.queue
    const sent = performance.now()
    const check = q.policyDue(sent)
    g.inflight = true
    let reply
    try {
      reply = this.redis.sabsync5Beat(...q.keys, check ? 1 : 0, this.id, q.heartbeat, ...list.flatMap(w => [w.wid, w.queue.lease]))
    } catch (err) {
      reply = Promise.reject(err)
    }
    within(reply, q.commandTimeout, 'heartbeat of ' + q.tag, this.redis).then(r => {
      if (!Array.isArray(r) || r.length !== list.length + 2 || !Number.isInteger(r[0]) || typeof r[1] !== 'string' ||
          r.slice(2).some(s => !Array.isArray(s) || (s[0] !== 0 && s[0] !== 1 && s[0] !== 2))) {
        const err = redisError(`sabsync: Redis answered a heartbeat of ${q.tag} with ${malformed(r)}, not the ` +
          'reply of sabsync\'s script (another program wrote its keys, or this is not Redis)')
        for (const w of list) w.failed(err)
        return
      }
      if (check) q.policyChecked(sent)
      g.lastOk = sent
      const epoch = r[1]
      list.forEach((w, i) => {
        const s = r[i + 2]
        if (s[0] === 1) w.granted(s[1], s[2], s[3], sent, s[4])
        else if (s[0] === 2) {
          // Still queued when this beat was read: a wake that came before
          // it was sent was no grant (a forged one, or one already served).
          if (w.woken && w.wokenAt < sent) w.woken = false
        } else if (w.woken && epoch === w.epoch) {
          // Woken, then neither holding nor queued in the object it queued
          // on: granted, and the lease ran out before this client confirmed
          // it (a stall): no grant.
          w.lapsed()
        } else {
          // Not woken, or the object is not the one it queued on (the
          // epoch differs or the state is gone): whatever a wake said, the
          // server lost the place (a wake is only a hint).
          w.failed(redisError(`sabsync: this wait's place in the queue of ${q.tag} is gone: the server lost its ` +
            `state (a restart, a failover or a flush), or this client was silent for more than its heartbeat (${q.heartbeat} ms)`))
        }
      })
      const next = r[0]
      this.schedule(g, next >= 0 ? Math.min(q.heartbeat / 3, next + 1) : q.heartbeat / 3)
    }, err => {
      if (isRefusal(err)) {
        // The server may evict what these waiters would be granted.
        q.policyRefused()
        for (const w of list) w.failed(err)
        return
      }
      // Still in the queue until `heartbeat` after the last beat that
      // reached the server; after that the server skips these waiters.
      const left = g.lastOk + q.heartbeat - performance.now()
      if (left <= 0) {
        for (const w of list) {
          w.failed(redisError(`sabsync: lost touch with Redis for longer than the heartbeat (${q.heartbeat} ms) ` +
            `while waiting on ${q.tag}: ${err.message}`, err.cause !== undefined ? err.cause : err))
        }
      }
      this.schedule(g, Math.max(0, Math.min(q.heartbeat / 6, left)))
    }).finally(() => {
      g.inflight = false
      if (g.waiters.size === 0) this.dropGroup(g)
      else if (g.again) { g.again = false; this.beat(g) }
    })
  }

  beatAll () {
    for (const g of this.groups.values()) this.beat(g)
    // Entries that ask the server themselves (lib/redis/locks.js).
    for (const w of this.waiters.values()) if (w.wake !== undefined) w.wake()
  }

  openSub () {
    if (this.sub !== null) return
    const redis = this.redis
    // A Cluster's duplicate() takes (startupNodes, options): its defaults suit.
    const sub = redis.isCluster ? redis.duplicate() : redis.duplicate({ autoResubscribe: false, lazyConnect: false })
    this.sub = sub
    // Its errors reach the waiters through their heartbeats.
    sub.on('error', quiet)
    sub.on('message', (channel, message) => { if (channel === this.channel) this.wake(message) })
    sub.on('close', () => { if (this.sub === sub) this.subscribed = false })
    sub.on('ready', () => {
      sub.subscribe(this.channel).then(() => {
        if (this.sub !== sub) return
        this.subscribed = true
        // Grants published before this subscription took effect.
        this.beatAll()
      }, quiet)
    })
  }

  closeSub () {
    const sub = this.sub
    if (sub === null) return
    this.sub = null
    this.subscribed = false
    if (this.linger !== null) { clearTimeout(this.linger); this.linger = null }
    sub.disconnect()
  }

  // "<waiter id>" from a granting script, or from anyone who may publish:
  // ask the server (see "Wake-ups" above). A waiter whose take is still
  // unanswered beats once it has joined (queue.js).
  wake (message) {
    const w = this.waiters.get(message)
    if (w === undefined) return
    w.woken = true
    w.wokenAt = performance.now()
    if (w.group !== null) this.beat(w.group)
    else if (w.wake !== undefined) w.wake()
  }

  // Resolves once this client's server is known not to evict keys that
  // are in use (see "Expiry and eviction" in scripts.js), rejects with
  // ERR_SABSYNC_REDIS naming the policy otherwise. Asked once per client:
  // INFO memory, which a server that refuses CONFIG still answers; every
  // master of a Cluster. (Each object's scripts read the policy again on
  // its first call and then once a renewal period, on the server that
  // holds its keys: scripts.js, evictionGuard.)
  checkEviction (ms) {
    if (this.eviction === null) {
      const redis = this.redis
      const info = n => within(n.info('memory'), ms, 'INFO memory, at the first call', n)
      // A Cluster lists its masters once connected: the first INFO (to
      // any node) connects it, then every master is asked.
      this.eviction = info(redis)
        .then(first => redis.isCluster && typeof redis.nodes === 'function' && redis.nodes('master').length > 0
          ? Promise.all(redis.nodes('master').map(info))
          : [first])
        .then(infos => {
          for (const info of infos) {
            const m = /^maxmemory_policy:([^\r\n]*)/m.exec(typeof info === 'string' ? info : '')
            if (m === null) throw noPolicyError('INFO memory did not report it')
            if (m[1].startsWith('allkeys-')) throw evictionError(m[1])
          }
        }, err => {
          // No reply: said as for any call (and a late one may be a timeout).
          if ((err.cause && err.cause.noReply) || isUnreachable(err)) throw err
          throw noPolicyError('INFO memory failed: ' + err.message, err.cause !== undefined ? err.cause : err)
        })
      // A failure is not remembered: the next first call asks again.
      this.eviction.catch(() => { this.eviction = null })
    }
    return this.eviction
  }
}

// A short description of a reply that is not what a script answers.
function malformed (r) {
  let text
  try { text = JSON.stringify(r) } catch { text = String(r) }
  if (text === undefined) text = String(r)
  return text.length > 80 ? text.slice(0, 77) + '...' : text
}

module.exports = { hubOf, malformed }
