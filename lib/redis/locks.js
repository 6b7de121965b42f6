'use strict'
// The Redis backend of the Web Locks API (`new LockManager(redis, prefix,
// { lease })`): names locked across every machine that uses the prefix.
// The spec's request and query algorithms, their argument checks and
// errors are the shared front's (lib/locks/front.js); this file keeps the
// state on Redis (lib/redis/locks-scripts.js) and answers the front:
//
//   request(name, exclusive, how) -> ticket | 0 | { promise, cancel }
//   release(ticket), watch(onStolen), info(ticket) -> { fence },
//   query() -> { held, pending }, close()
//
// A ticket is a number of this manager's; on the server it is
// "<manager id>/<n>", where the manager id is "<hub id>:<k>" (hub.js): one
// lease per manager covers all its tickets, renewed by one script call
// every lease/3 (sync), which also checks the tickets held (a steal or a
// reap took them: onStolen) and serves the queues of those pending.
//
// A ticket is in `tickets` from before its request is sent until it is
// released, lost or given up, and meanwhile in the hub's waiter map under
// its server id: a wake on the client's channel naming it (a grant to it,
// a steal from it, or anyone's PUBLISH) makes the manager ask the server
// (sync), never grants or takes anything by itself. Grants to and steals
// from tickets of the caller's own client come in the script's reply.
//
// Leases. A held ticket is taken for lost when no renewal sent in the last
// `lease` ms was confirmed (the server lets others reap it only after its
// own expiry, which is later): onStolen fires and its release is sent in
// case the server still has it. A pending ticket whose place is gone, or
// whose manager lost touch for longer than the lease, rejects with
// ERR_SABSYNC_REDIS. The renewal timer never rejects anything.

const os = require('os')
const { threadId } = require('worker_threads')
const { hubOf, malformed } = require('./hub')
const { evictionCheck } = require('./queue')
const { lockCommands } = require('./locks-scripts')
const { makeLockManager } = require('../locks/front')
const {
  checkClient, checkPrefix, msOption, objectOptions, unsafeAllowEvictionOption, within, redisName, redisError,
  isRefusal, quiet, invalidType, outOfRange, SabsyncError
} = require('./common')

const MAX_NAME = 1024 // UTF-16 code units: a key of at most ~3 KB (WTF-8)
const CLIENT_ID = `${os.hostname()}:${process.pid}:${threadId}`

class RedisLockBackend {
  #redis
  #hub
  #keys
  #tickets = new Map() // n -> Ticket: requesting, pending or held
  #lost = new Map() // n -> Ticket lost or stolen, until the front releases it
  #releasing = new Map() // n -> Ticket whose release the server has not confirmed
  #woken = new Set() // tickets a wake named, for the next sync
  #wakeDue = false
  #onStolen = null
  #seq = 0
  #okAt = -Infinity // when the latest confirmed renewal of the lease was sent
  #timer = null
  #due = Infinity
  #syncing = false
  #again = 0 // 1: a sync of the woken tickets is due after this one; 2: of all
  #closed = false
  #policyAt = -Infinity // when the eviction policy was last read safe
  // Whether this manager may be in T:a (its lease): set by every request
  // sent (#sent counts them), cleared once a call that leaves T:a is
  // confirmed with no request sent since.
  #inA = false
  #sent = 0

  constructor (redis, prefix, options) {
    checkClient(redis)
    checkPrefix('prefix', prefix)
    options = objectOptions(options)
    this.lease = msOption(options, 'lease', 10000, 10)
    this.commandTimeout = msOption(options, 'commandTimeout', 5000, 1)
    this.allowEviction = unsafeAllowEvictionOption(options)
    this.#redis = redis
    this.#hub = hubOf(redis)
    for (const [name, def] of Object.entries(lockCommands)) {
      if (typeof redis[name] !== 'function') redis.defineCommand(name, def)
    }
    this.tag = `{${prefix}:locks}`
    this.#keys = [this.tag + ':f', this.tag + ':a', this.tag + ':n']
    this.id = this.#hub.nextId()
    this.clientId = CLIENT_ID
  }

  watch (onStolen) {
    if (typeof onStolen !== 'function') throw invalidType('onStolen', 'a function', onStolen)
    this.#onStolen = onStolen
  }

  info (ticket) {
    const t = this.#tickets.get(ticket) || this.#lost.get(ticket)
    return t === undefined || t.fence === 0 ? {} : { fence: t.fence }
  }

  async request (name, exclusive, how) {
    if (typeof name !== 'string') throw invalidType('name', 'a string', name)
    if (name.length > MAX_NAME) throw outOfRange('name', `a string of at most ${MAX_NAME} UTF-16 code units`, `a string of ${name.length}`)
    if (typeof exclusive !== 'boolean') throw invalidType('exclusive', 'a boolean', exclusive)
    if (how !== 0 && how !== 1 && how !== 2) throw outOfRange('how', '0 (wait), 1 (ifAvailable) or 2 (steal)', how)
    if (how === 2 && !exclusive) throw outOfRange('how', '0 or 1 for a shared request (a steal is exclusive)', how)
    if (this.#closed) throw closedError()
    await this.#policy()
    if (this.#closed) throw closedError()
    const n = ++this.#seq
    const t = new Ticket(this, n, name, exclusive)
    this.#tickets.set(n, t)
    // Before the request is sent: a wake can beat its reply.
    this.#hub.waiters.set(t.wid, t)
    this.#hub.openSub()
    const sent = performance.now()
    this.#inA = true
    this.#sent++
    let reply
    try {
      reply = this.#redis.sabsync1LockRequest(...this.#keys, this.tag, this.#hub.id, this.id, this.lease, t.arg, t.member, how)
    } catch (err) {
      reply = Promise.reject(err)
    }
    let r
    try {
      r = await within(reply, this.commandTimeout, () => `request of lock ${JSON.stringify(name.slice(0, 80))} on ${this.tag}`, this.#redis)
    } catch (err) {
      // The script may have run: give back whatever it did.
      this.#drop(t)
      this.#releasing.set(n, t)
      this.#arm(0)
      throw err
    }
    const ok = Array.isArray(r) && Array.isArray(r[r.length - 1]) &&
      ((r[0] === 1 && r.length === 3 && goodFence(r[1])) || (r[0] === 0 && r.length === 2) ||
       (r[0] === 2 && r.length === 3 && Number.isInteger(r[1])))
    if (!ok) {
      this.#drop(t)
      this.#releasing.set(n, t)
      this.#arm(0)
      throw redisError(`sabsync: Redis answered a lock request on ${this.tag} with ${malformed(r)}, not the ` +
        'reply of sabsync\'s script (another program wrote its keys, or this is not Redis)')
    }
    this.#renewed(sent)
    this.#mine(r[r.length - 1])
    if (this.#closed) {
      // close() came while this request was on its way.
      this.#drop(t)
      if (r[0] !== 0) this.#releasing.set(n, t)
      this.#arm(0)
      throw closedError()
    }
    if (r[0] === 1) {
      this.#hold(t, r[1])
      return n
    }
    if (r[0] === 0) {
      this.#drop(t)
      // The request made this manager's lease: leave it now if nothing
      // else here needs it.
      this.#quiet()
      return 0
    }
    if (t.state !== 'requesting') {
      // A grant for it came in another reply first (#mine).
      return t.state === 'held' ? n : this.#pendingOf(t)
    }
    t.state = 'pending'
    const pending = this.#pendingOf(t)
    this.#arm(r[1] >= 0 ? Math.min(this.lease / 3, r[1] + 1) : this.lease / 3)
    if (t.woken) this.wakeTicket(t)
    return pending
  }

  #pendingOf (t) {
    return {
      promise: t.promise,
      cancel: () => {
        if (t.state !== 'pending') return t.state !== 'held'
        // Out of the queue here; its leave takes it off the server's queue,
        // or gives back a grant this client has not seen yet.
        this.#drop(t)
        t.state = 'cancelled'
        this.#leave(t)
        return true
      }
    }
  }

  async release (ticket) {
    const lost = this.#lost.get(ticket)
    if (lost !== undefined) {
      this.#lost.delete(ticket)
      return
    }
    const t = this.#tickets.get(ticket)
    if (t === undefined || t.state !== 'held') return
    this.#drop(t)
    t.state = 'released'
    await this.#leave(t)
  }

  // Send t's release now; on a failure it is sent again with the next sync.
  #leave (t) {
    const last = this.#tickets.size === 0 && this.#releasing.size === 0
    const seq = this.#sent
    let reply
    try {
      reply = this.#redis.sabsync1LockRelease(...this.#keys, this.tag, this.#hub.id, this.id, last ? 1 : 0, t.arg, t.member)
    } catch (err) {
      reply = Promise.reject(err)
    }
    return within(reply, this.commandTimeout, 'release of a lock on ' + this.tag, this.#redis).then(r => {
      if (!Array.isArray(r) || (r[0] !== 0 && r[0] !== 1) || !Array.isArray(r[1])) throw new Error('malformed reply ' + malformed(r))
      this.#mine(r[1])
      if (last) this.#left(seq)
      this.#quiet()
      return r[0] === 1
    }, err => {
      this.#releasing.set(t.n, t)
      this.#arm(this.lease / 6)
      if (isRefusal(err)) this.#loseAll(err.message, err)
      return false
    })
  }

  // t leaves the tickets kept alive here (and the hub's waiters).
  // A call that left T:a (sent after `seq` requests) was confirmed.
  #left (seq) {
    if (this.#sent === seq) this.#inA = false
  }

  // Nothing held or waited for here any more, and none of it released
  // by a call that left T:a (a steal, a lost lease, a failure): leave it.
  #idle () {
    if (this.#tickets.size === 0 && this.#inA) this.#arm(0)
  }

  // Whether nothing is left to renew or release: then no timer, or one
  // call now to leave T:a.
  #quiet () {
    if (this.#tickets.size > 0 || this.#releasing.size > 0) return false
    if (this.#inA) this.#arm(0)
    else this.#stop()
    return true
  }

  #drop (t) {
    this.#tickets.delete(t.n)
    this.#woken.delete(t)
    this.#hub.part(t)
    this.#hub.holdings.delete(t)
  }

  #hold (t, fence) {
    const wasPending = t.state === 'pending'
    t.state = 'held'
    t.fence = fence
    this.#hub.holdings.add(t)
    this.#arm(this.lease / 3)
    if (wasPending) t.resolve(t.n)
  }

  // A held ticket is gone (stolen, or its lease lost): the front hears it.
  #steal (t, why, release) {
    if (t.state !== 'held') return
    this.#drop(t)
    t.state = 'lost'
    t.why = why
    this.#lost.set(t.n, t)
    if (release) this.#releasing.set(t.n, t)
    this.#idle()
    const onStolen = this.#onStolen
    if (onStolen !== null) {
      try { onStolen(t.n, why === 'stolen' ? undefined : why) } catch (err) { process.nextTick(() => { throw err }) }
    }
  }

  // A pending ticket fails: its place is gone, or this manager lost touch.
  #fail (t, err, release) {
    if (t.state !== 'pending') return
    this.#drop(t)
    t.state = 'failed'
    if (release) this.#releasing.set(t.n, t)
    this.#idle()
    t.reject(err)
  }

  // Grants to and steals from this client's tickets, from a script's
  // reply (the server's word): [ticket, fence (0: stolen), ...]. A ticket
  // may be another manager's on the same client. A steal is told now,
  // before the thief's grant is answered; a grant on the next turn of the
  // loop, as a grant from another client comes: the release whose reply
  // carried it settles its request first (the spec grants the next
  // request in a task of its own).
  #mine (list) {
    for (let i = 0; i + 1 < list.length; i += 2) {
      const t = this.#hub.waiters.get(String(list[i]))
      if (!(t instanceof Ticket)) continue
      const m = t.manager
      const fence = list[i + 1]
      if (fence === 0) m.#steal(t, 'stolen', false)
      else if (goodFence(fence)) {
        setImmediate(() => {
          if (t.state === 'pending' || t.state === 'requesting') m.#hold(t, fence)
        })
      }
    }
  }

  // A wake named t (Ticket.wake): ask the server on the next turn (wakes
  // of one message burst go in one sync).
  wakeTicket (t) {
    if (t.state === 'requesting') return // asked once its reply is in
    this.#woken.add(t)
    if (this.#wakeDue) return
    this.#wakeDue = true
    setImmediate(() => {
      this.#wakeDue = false
      if (this.#woken.size > 0) this.#sync(false)
    })
  }

  // The server's eviction policy, read again when the last reading is a
  // renewal period (lease/3) old, as the other objects' scripts do: an
  // operator who switches a running server to allkeys-* makes requests
  // refuse, and holders lose their locks at the next renewal (a refusal).
  // The hub's reading is the client's first: it is dropped to read anew.
  #policy () {
    if (this.allowEviction) return undefined
    const now = performance.now()
    if (now - this.#policyAt < this.lease / 3) return undefined
    this.#hub.eviction = null
    return evictionCheck(this.#hub, false, this.commandTimeout).then(() => { this.#policyAt = now })
  }

  #renewed (sent) {
    if (sent > this.#okAt) this.#okAt = sent
  }

  // Sync in `delay` ms, or sooner if one is due sooner.
  #arm (delay) {
    const due = performance.now() + Math.max(0, delay)
    if (this.#timer !== null && this.#due <= due) return
    clearTimeout(this.#timer)
    this.#due = due
    this.#timer = setTimeout(() => {
      this.#timer = null
      this.#due = Infinity
      this.#sync(true)
    }, Math.max(0, delay))
    this.#timer.unref()
  }

  #stop () {
    clearTimeout(this.#timer)
    this.#timer = null
    this.#due = Infinity
  }

  // One script call: renew this manager's lease, check the tickets held,
  // serve the queues of those pending, send the releases not yet
  // confirmed. `all` false: only the tickets a wake named.
  #sync (all) {
    if (this.#syncing) {
      this.#again = Math.max(this.#again, all ? 2 : 1)
      return
    }
    const list = []
    for (const t of all ? this.#tickets.values() : this.#woken) {
      if (t.state === 'held' || t.state === 'pending') list.push(t)
    }
    this.#woken.clear()
    const releases = [...this.#releasing.values()]
    const last = this.#tickets.size === 0
    if (list.length === 0 && releases.length === 0 && !(last && this.#inA)) {
      if (last) this.#stop()
      else if (all) this.#arm(this.lease / 3)
      return
    }
    const seq = this.#sent
    const args = []
    for (const t of list) args.push(t.state === 'held' ? 'h' : 'p', t.arg, t.member)
    for (const t of releases) args.push('r', t.arg, t.member)
    const sent = performance.now()
    // A reply after the leases held here run out is too late for them.
    const held = list.some(t => t.state === 'held')
    const bound = held ? Math.max(1, Math.min(this.commandTimeout, this.#okAt + this.lease - sent)) : this.commandTimeout
    this.#syncing = true
    let reply
    // Never sent once its bound has passed (its policy check can take
    // that long): this manager has given up on it and may have left T:a
    // since, and a renewal sent after that leave would put it back with
    // nobody to take it out.
    const call = () => {
      if (performance.now() - sent >= bound) throw new Error('not sent: its bound passed during the policy check')
      return this.#redis.sabsync1LockSync(...this.#keys, this.tag, this.#hub.id, this.id, this.lease, last ? 1 : 0, ...args)
    }
    try {
      const policy = list.length > 0 ? this.#policy() : undefined
      reply = policy === undefined ? call() : policy.then(call)
    } catch (err) {
      reply = Promise.reject(err)
    }
    within(reply, bound, 'lease renewal of locks on ' + this.tag, this.#redis).then(r => {
      if (!Array.isArray(r) || r.length !== 2 + list.length + releases.length || !Number.isInteger(r[0]) || !Array.isArray(r[1])) {
        throw redisError(`sabsync: Redis answered a lease renewal on ${this.tag} with ${malformed(r)}, not the ` +
          'reply of sabsync\'s script (another program wrote its keys, or this is not Redis)')
      }
      if (!last) this.#renewed(sent)
      else this.#left(seq)
      this.#mine(r[1])
      list.forEach((t, i) => {
        const s = r[2 + i]
        if (t.state === 'held') {
          if (s === 0) this.#steal(t, 'gone', false)
        } else if (t.state === 'pending') {
          if (Array.isArray(s) && s[0] === 1 && goodFence(s[1])) this.#hold(t, s[1])
          else if (!Array.isArray(s) || s[0] !== 2) {
            this.#fail(t, redisError(`sabsync: a lock request's place in the queue of ${this.tag} is gone: its ` +
              `manager was silent for longer than its lease (${this.lease} ms), or the server lost its state`), false)
          }
        }
      })
      for (const t of releases) if (this.#releasing.get(t.n) === t) this.#releasing.delete(t.n)
      const next = r[0]
      if (this.#quiet()) return
      if (!last) this.#arm(this.lease / 3)
      if (next >= 0 && [...this.#tickets.values()].some(t => t.state === 'pending')) this.#arm(next + 1)
      if (this.#releasing.size > 0) this.#arm(this.lease / 6)
    }).catch(err => {
      if (isRefusal(err)) return this.#loseAll(err.message, err)
      if (performance.now() >= this.#okAt + this.lease) {
        this.#loseAll(`no renewal of the lease (${this.lease} ms) was confirmed in time: ${err.message}`, err)
      }
      this.#arm(this.lease / 6)
    }).finally(() => {
      this.#syncing = false
      const again = this.#again
      this.#again = 0
      if (again > 0) this.#sync(again === 2)
    })
  }

  // Every ticket held is lost, every pending one fails: the server may
  // have handed them on.
  #loseAll (why, cause) {
    for (const t of [...this.#tickets.values()]) {
      if (t.state === 'held') this.#steal(t, why, true)
      else if (t.state === 'pending') {
        const err = redisError(`sabsync: a lock request on ${this.tag} lost its place: ${why}`, cause)
        this.#fail(t, err, true)
      }
    }
    if (this.#releasing.size > 0) this.#arm(this.lease / 6)
  }

  /**
   * Every lock held or waited for, on every machine using the prefix:
   * { held: [{ name, mode, clientId }] in grant order, pending: [...] in
   * queue order, name by name }.
   */
  async query () {
    if (this.#closed) throw closedError()
    await this.#policy()
    let reply
    try {
      reply = this.#redis.sabsync1LockQueryBuffer(...this.#keys, this.tag, this.#hub.id)
    } catch (err) {
      reply = Promise.reject(err)
    }
    const r = await within(reply, this.commandTimeout, 'query of locks on ' + this.tag, this.#redis)
    const bad = () => redisError(`sabsync: Redis answered a query of locks on ${this.tag} with ${malformed(r)}, not ` +
      'the reply of sabsync\'s script (another program wrote its keys, or this is not Redis)')
    if (!Array.isArray(r)) throw bad()
    const held = []
    const pending = []
    for (const entry of r) {
      if (!Array.isArray(entry) || entry.length !== 3 || !Buffer.isBuffer(entry[0]) || !Array.isArray(entry[1]) || !Array.isArray(entry[2])) throw bad()
      const name = fromWtf8(entry[0])
      for (let i = 0; i + 1 < entry[1].length; i += 2) {
        const lock = snapshot(name, entry[1][i])
        const fence = Number(String(entry[1][i + 1]))
        if (lock === null || !goodFence(fence)) throw bad()
        held.push({ lock, fence })
      }
      for (const m of entry[2]) {
        const lock = snapshot(name, m)
        if (lock === null) throw bad()
        pending.push(lock)
      }
    }
    held.sort((a, b) => a.fence - b.fence)
    return { held: held.map(h => h.lock), pending }
  }

  /**
   * Let go of everything: the tickets held are lost (onStolen) and given
   * back, those pending reject with ERR_SABSYNC_LEASE_LOST; resolves once
   * the server has them back. The client stays usable.
   */
  async close () {
    if (this.#closed) return
    this.#closed = true
    for (const t of [...this.#tickets.values()]) {
      if (t.state === 'held') this.#steal(t, 'closed', true)
      else if (t.state === 'pending') {
        this.#fail(t, new SabsyncError('ERR_SABSYNC_LEASE_LOST', `sabsync: the LockManager of ${this.tag} was closed ` +
          'while this request waited'), true)
      }
    }
    this.#lost.clear()
    this.#stop()
    while (this.#releasing.size > 0 || this.#syncing) {
      if (this.#syncing) {
        await new Promise(resolve => setTimeout(resolve, 1))
        continue
      }
      const before = this.#releasing.size
      const t = this.#releasing.values().next().value
      this.#releasing.delete(t.n)
      if (!(await this.#leave(t))) {
        // Not confirmed: let its lease run out on the server.
        if (this.#releasing.size >= before) {
          this.#releasing.clear()
          break
        }
      }
    }
    this.#stop()
    if (this.#inA) {
      // Its tickets were all lost or answered before: the lease set still
      // names it.
      const seq = this.#sent
      try {
        await within(this.#redis.sabsync1LockSync(...this.#keys, this.tag, this.#hub.id, this.id, this.lease, 1),
          this.commandTimeout, 'close of a LockManager on ' + this.tag, this.#redis)
        this.#left(seq)
      } catch {} // its lease runs out on the server
    }
  }

  // letGo(redis) (lib/redis/let-go.js): t is given back now.
  giveUp (t) {
    if (t.state !== 'held') return Promise.resolve(false)
    this.#steal(t, 'released by letGo()', false)
    return this.#leave(t)
  }
}

// One request of this manager: its ticket, and what the hub needs of a
// waiter (wid, group, woken, wake()).
class Ticket {
  constructor (manager, n, name, exclusive) {
    this.manager = manager
    this.n = n
    this.wid = `${manager.id}/${n.toString(36)}`
    this.group = null
    this.woken = false
    this.wokenAt = 0
    this.name = name
    this.arg = redisName(name)
    this.member = `${this.wid} ${exclusive ? 'x' : 's'} ${manager.clientId}`
    this.state = 'requesting' // -> held | pending -> held | cancelled | failed; held -> released | lost
    this.fence = 0
    this.why = null
    this.resolve = null
    this.reject = null
    this.promise = new Promise((resolve, reject) => { this.resolve = resolve; this.reject = reject })
    this.promise.catch(quiet) // a front that cancelled never looks at it
  }

  wake () {
    this.manager.wakeTicket(this)
  }

  // A holding for letGo() (lib/redis/let-go.js).
  giveUp () {
    return this.manager.giveUp(this)
  }
}

function goodFence (f) {
  return Number.isSafeInteger(f) && f > 0
}

function closedError () {
  return new SabsyncError('ERR_SABSYNC_LEASE_LOST', 'sabsync: this LockManager was closed (close())')
}

// { name, mode, clientId } of a member "<ticket> <x|s> <clientId>", or null.
function snapshot (name, member) {
  const m = /^\S+ ([xs]) (.*)$/s.exec(Buffer.isBuffer(member) ? member.toString('utf8') : String(member))
  return m === null ? null : { name, mode: m[1] === 'x' ? 'exclusive' : 'shared', clientId: m[2] }
}

// The string whose WTF-8 (common.js redisName) is `buf`: lone surrogates
// come back as themselves. Bytes that no string encodes to become U+FFFD.
function fromWtf8 (buf) {
  let out = ''
  for (let i = 0; i < buf.length;) {
    const b = buf[i]
    let c = 0xfffd
    let n = 1
    if (b < 0x80) c = b
    else if (b >= 0xc2 && b < 0xe0 && i + 1 < buf.length) { c = ((b & 31) << 6) | (buf[i + 1] & 63); n = 2 } else if (b >= 0xe0 && b < 0xf0 && i + 2 < buf.length) {
      c = ((b & 15) << 12) | ((buf[i + 1] & 63) << 6) | (buf[i + 2] & 63)
      n = 3
    } else if (b >= 0xf0 && b < 0xf5 && i + 3 < buf.length) {
      c = ((b & 7) << 18) | ((buf[i + 1] & 63) << 12) | ((buf[i + 2] & 63) << 6) | (buf[i + 3] & 63)
      n = 4
    }
    out += String.fromCodePoint(c)
    i += n
  }
  return out
}

/**
 * The Web Locks API across machines: `request(name, options?, callback)`
 * and `query()` as in every tier (lib/locks/front.js), for every client of
 * the server that uses `prefix`; a granted lock carries `fence`.
 * `close()` lets go of everything this manager holds or waits for.
 */
class LockManager {
  #locks
  #backend

  constructor (redis, prefix, options) {
    this.#backend = new RedisLockBackend(redis, prefix, options)
    this.#locks = makeLockManager(this.#backend)
  }

  // The arguments as given: the front counts them, as the spec does.
  request (...args) {
    return this.#locks.request(...args)
  }

  query () {
    return this.#locks.query()
  }

  close () {
    return this.#backend.close()
  }
}

module.exports = { LockManager, RedisLockBackend, MAX_NAME, fromWtf8 }
