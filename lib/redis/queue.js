'use strict'
// The lease queue under Mutex (one slot, fenced) and Sema (nr slots): take
// a slot now or queue for one, hold it under a lease this process renews,
// give it back. The state is in Redis (lib/redis/scripts.js); this file is
// the client side: one waiter record per pending call, one Holding per
// slot held.
//
// A pending call settles exactly once, whichever comes first: its grant
// (the take's reply, or a heartbeat's report; a wake-up message only makes
// the hub beat at once, see hub.js), its timeout, its abort, or a failure.
// Whatever settles it other than a grant sends `leave` for its id, which
// Redis runs after the take (one connection keeps their order): a grant
// that raced the timeout is given back at once instead of being held,
// unknowingly, until its lease ends. A grant is believed only with values
// in range (grantError) and a lease not yet run out, counted from before
// the request it answers; one that arrives lapsed is given back, and the
// waiter queues again (or a try answers that nothing was free).

const { hubOf, malformed } = require('./hub')
const { direct, sendScript } = require('./scripts')
const { LOCK, ACQUIRE, observed, traceWait } = require('../trace')
const {
  msOption, prefixOption, unsafeAllowEvictionOption, waitOptions, within, bound, bind, unbind, noReply, connected, failure, redisError,
  quiet, redisName, isRefusal, Deadlines, SabsyncError
} = require('./common')

const KEY_SUFFIXES = ['m', 'q', 'b', 'l', 'f'] // the KEYS of lib/redis/scripts.js
const MAX_SLOT = 0x7FFFFFFF // a Sema's largest nr (lib/redis/common.js checkCount)
// Who this thread is, as a Mutex holder's renewals tell it (holder()).
const HOST = require('os').hostname().replace(/\s/g, '_').slice(0, 255) || 'unknown'
const { threadId } = require('worker_threads')
const WHO = `${HOST} ${process.pid} ${threadId}`

// Resolves once the hub's eviction check passed (skipped with
// unsafeAllowEviction), rejects with its error, with ERR_SABSYNC_REDIS when
// it is not answered within `ms` (this call's bound), or with signal.reason
// on an abort. The check itself is shared by every call on the client and
// bounded by `commandTimeout` alone: a call with a short timeout gives up
// on it without making the next call, with a longer one, inherit its bound.
function evictionCheck (hub, allowed, ms, signal, commandTimeout = ms) {
  if (allowed) return Promise.resolve()
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer)
      if (signal !== undefined) signal.removeEventListener('abort', aborted)
    }
    const aborted = () => { done(); reject(signal.reason) }
    const timer = setTimeout(() => { done(); reject(noReply(ms, 'INFO memory', hub.redis)) }, Math.min(Math.max(ms, 1), 0x7FFFFFFF))
    if (signal !== undefined) signal.addEventListener('abort', aborted, { once: true })
    hub.checkEviction(Math.max(ms, commandTimeout)).then(v => { done(); resolve(v) }, e => { done(); reject(e) })
  })
}

class LeaseQueue {
  constructor (redis, kind, key, nr, fencing, options) {
    this.redis = redis
    this.hub = hubOf(redis)
    this.tag = `{${prefixOption(options)}:${kind}:${key}}`
    // Its waits on the channels (lib/trace.js): a Mutex's on sabsync:lock,
    // a Sema's on sabsync:acquire.
    this.trace = { channel: kind === 'mutex' ? LOCK : ACQUIRE, kind: kind === 'mutex' ? 'Mutex' : 'Sema', key }
    this.keys = KEY_SUFFIXES.map(s => redisName(this.tag + ':' + s))
    this.takeWhat = 'take on ' + this.tag // name a take and a release in their errors
    this.releaseWhat = 'release on ' + this.tag
    this.nr = nr
    this.fencing = fencing
    this.lease = msOption(options, 'lease', 10000, 10)
    this.heartbeat = msOption(options, 'heartbeat', 3000, 30)
    this.commandTimeout = msOption(options, 'commandTimeout', 5000, 1)
    this.allowEviction = unsafeAllowEvictionOption(options)
    this.evictionChecked = false
    // Whether this object was free at this client's last take: then its
    // next take is sent as takeFree, its one-key script for a free object
    // of one slot (lib/redis/scripts.js), and the grant's release as
    // leaveFree; when the object is not free after all, they answer so,
    // and take or leave follows. A take that queues or finds the object
    // busy turns this off, so a contended object costs no extra call;
    // one granted at once turns it on again.
    this.free = nr === 1
    // When a script of this object last read the eviction policy and found
    // it safe (performance.now() when that call was sent): a take, renewal
    // or heartbeat sent a renewal period (lease/3) after that asks its
    // script to read it again first, so a policy changed at run time is
    // found before the next grant, and by every holder within a renewal.
    this.policyAt = -Infinity
    // The renewals due a period (lease/3) after a grant or a confirmed
    // renewal, under one timer (common.js, Deadlines); unref'd, as a held
    // lease never keeps the process alive.
    this.renewals = new Deadlines(this.lease / 3, false)
  }

  // Whether a call sent at `now` must have its script read the policy.
  policyDue (now) {
    return !this.allowEviction && now - this.policyAt >= this.lease / 3
  }

  policyChecked (sent) {
    if (sent > this.policyAt) this.policyAt = sent
  }

  // The server may evict keys in use: every call reads the policy again.
  policyRefused () {
    this.policyAt = -Infinity
  }

  // What adopt(h) makes of h: a Holding, or undefined when the slot was
  // not free (try) or not granted within the timeout. `queue` false: take
  // only a free slot. adopt runs where the answer comes, so the caller's
  // answer costs no promise of its own (a turn of the microtask queue
  // between a reply and the next request, where nobody waits). Bad
  // options reject, never throw.
  take (queue, options, adopt) {
    try {
      return this.evictionChecked ? this.#take(queue, options, adopt) : this.#checked(queue, options, adopt)
    } catch (err) {
      return Promise.reject(err)
    }
  }

  // take() with the client's first eviction check.
  #checked (queue, options, adopt) {
    // Parsed first: bad options reject as they would after the check.
    const { timeout, signal } = waitOptions(options)
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
    // The check counts against the call's own bound, as the take does.
    const bound = queue && timeout !== Infinity && timeout !== 0 ? timeout : this.commandTimeout
    const started = performance.now()
    return evictionCheck(this.hub, this.allowEviction, bound, signal, this.commandTimeout).then(() => {
      this.evictionChecked = true
      if (timeout === Infinity || timeout === 0) return this.#take(queue, options, adopt)
      const left = Math.max(1, timeout - (performance.now() - started))
      return this.#take(queue, signal === undefined ? { timeout: left } : { timeout: left, signal }, adopt)
    }, err => {
      // Late from a connected client, within the caller's own timeout: a
      // timeout (see connected()).
      if (bound === timeout && err.cause && err.cause.noReply && connected(this.redis)) return adopt(undefined)
      throw err
    })
  }

  #take (queue, options, adopt) {
    const { timeout, signal } = waitOptions(options)
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
    if (timeout === 0) queue = false
    const began = performance.now()
    if (this.free && signal === undefined && !this.policyDue(began)) return this.#takeFree(queue, timeout, began, adopt)
    const hub = this.hub
    const wid = hub.nextId()
    return new Promise((_resolve, _reject) => {
      // Traced from the reply that says it waits, when someone listens.
      let traced = null
      const resolve = h => {
        if (traced !== null) traced(true, h === undefined ? false : this.fencing ? h.fence : h.slot)
        _resolve(adopt(h))
      }
      const reject = err => {
        if (traced !== null) traced(false, err)
        _reject(err)
      }
      let replied = false
      let settled = false
      let stop = null // ends the bound below
      // woken: a wake-up named it (at wokenAt), a hint to ask; epoch: the
      // epoch of the object it queued on (scripts.js), which tells a grant
      // that lapsed unseen from a server that lost its state.
      const w = { wid, queue: this, group: null, woken: false, wokenAt: 0, epoch: null, granted: null, failed: null, lapsed: null }
      const settle = () => {
        settled = true
        if (stop !== null) { stop(); stop = null }
        if (signal !== undefined) signal.removeEventListener('abort', onAbort)
        hub.part(w)
      }
      // A grant from the server's state (a take's or a beat's reply): lease
      // `leaseLeft` ms counted from `at`, before the request was sent.
      w.granted = (slot, fence, leaseLeft, at, top) => {
        if (settled) return
        const bad = this.grantError(slot, fence, leaseLeft, top)
        if (bad !== null) return w.failed(bad)
        const deadline = at + leaseLeft
        const now = performance.now()
        if (now >= deadline) {
          // It reached this process after its lease ran out (a stall, a
          // late reply): not a grant. Give it back in case the server
          // still counts it, and ask again.
          this.leaveQuietly(wid)
          return w.lapsed()
        }
        settle()
        resolve(new Holding(this, wid, slot, fence, deadline, false, now))
      }
      w.lapsed = () => {
        if (settled) return
        if (!queue) {
          settle()
          return resolve(undefined)
        }
        w.woken = false
        send()
      }
      w.failed = err => {
        if (settled) return
        settle()
        this.leaveQuietly(wid)
        reject(err)
      }
      function onAbort () {
        if (settled) return
        settle()
        w.queue.leaveQuietly(wid)
        reject(signal.reason)
      }
      // Registered before the take is sent: a wake-up can beat its reply.
      if (queue) hub.waiters.set(wid, w)
      // Until the take's reply, the bound on waiting for it; after a
      // "queued" reply, the caller's timeout (if any).
      const limit = queue && timeout !== Infinity ? timeout : this.commandTimeout
      stop = bound(limit, () => {
        stop = null
        if (settled) return
        // No reply by the caller's own deadline from a connected client is
        // a timeout (see connected()); by commandTimeout, an error.
        if (!replied && (timeout === Infinity || !queue || !connected(this.redis))) {
          return w.failed(noReply(limit, 'take on ' + this.tag, this.redis))
        }
        settle()
        this.leaveQuietly(wid)
        resolve(undefined)
      })
      if (signal !== undefined) signal.addEventListener('abort', onAbort, { once: true })
      const send = () => {
        const started = performance.now()
        const drops = hub.drops
        const check = this.policyDue(started)
        let sent
        replied = false
        try {
          sent = this.redis.sabsync5Take(...this.keys, check ? 1 : 0, wid, hub.id, this.lease, this.heartbeat, queue ? 1 : 0,
            this.nr, this.fencing ? 1 : 0)
        } catch (err) { // a client that throws instead of rejecting
          return w.failed(failure(err, this.takeWhat, this.redis))
        }
        sent.then(r => {
          replied = true
          if (check) this.policyChecked(started)
          if (settled) return
          // The connection dropped before the answer came: the client may
          // have sent the take again (ioredis does, by default), to a server
          // that may have lost its state and so granted it while the old
          // holder still thinks it holds. Give up whatever it got; the
          // caller learns that Redis failed, as the other waiters do.
          if (hub.drops !== drops) return w.failed(this.droppedError())
          if (!Array.isArray(r) || (r[0] === 2 ? !Number.isInteger(r[1]) || typeof r[2] !== 'string' : r[0] !== 0 && r[0] !== 1)) {
            return w.failed(this.replyError(r))
          }
          if (this.nr === 1) this.free = r[0] === 1
          if (r[0] === 1) return w.granted(r[1], r[2], r[3], started, r[4])
          if (r[0] === 0) {
            settle()
            return resolve(undefined)
          }
          if (timeout === Infinity && stop !== null) { stop(); stop = null }
          if (traced === null && observed(this.trace.channel)) {
            const { channel, kind, key } = this.trace
            traced = traceWait(channel, { tier: 'redis', kind, key, async: true, waitedMs: 0 }, began)
          }
          w.epoch = r[2]
          hub.join(w, r[1], started)
        }, err => {
          replied = true
          const e = failure(err, this.takeWhat, this.redis)
          if (isRefusal(e)) this.policyRefused()
          w.failed(e)
        })
      }
      send()
    })
  }

  // The take of an object that was free at this client's last take: one
  // takeFree, without the waiter record, abort and trace of #take, which
  // a grant at once never needs (they cost about a tenth of a free
  // lock+unlock here). Answers as #take does, within the same bounds.
  // Where #take would send again (the object was not free after all, or
  // the grant arrived lapsed), #take goes on with what is left of the
  // caller's timeout.
  #takeFree (queue, timeout, began, adopt) {
    return new Promise((resolve, reject) => new FreeTake(this, queue, timeout, began, adopt, resolve, reject))
  }

  // #take with what is left of a timeout counted from `began`.
  again (queue, timeout, began, adopt) {
    return this.#take(queue, timeout === Infinity ? undefined : { timeout: Math.max(timeout - (performance.now() - began), 1) }, adopt)
  }

  // What is wrong with a grant the server answered, as the error that
  // refuses it, or null: a slot below `top`, the slots the object handed
  // out since it was last idle (1 for a Mutex; for a Sema at most the
  // largest nr of its clients, which a deploy may change:
  // lib/redis/scripts.js, take), a fence that is a positive integer (0
  // without fences), a lease left in 0 … lease ms.
  grantError (slot, fence, leaseLeft, top) {
    let bad = null
    if (!Number.isSafeInteger(top) || top < 1 || top > MAX_SLOT || (this.nr === 1 && top !== 1)) {
      bad = `a slot bound (top) of ${malformed(top)}`
    } else if (!Number.isSafeInteger(slot) || slot < 0 || slot >= top) {
      bad = `slot ${malformed(slot)}, outside 0 … ${top - 1}`
    } else if (this.fencing ? !(Number.isSafeInteger(fence) && fence > 0) : fence !== 0) {
      bad = `fence ${malformed(fence)}, not ${this.fencing ? 'a positive integer' : '0'}`
    } else if (!Number.isSafeInteger(leaseLeft) || leaseLeft < 0 || leaseLeft > this.lease) {
      bad = `a lease of ${malformed(leaseLeft)} ms left, outside 0 … ${this.lease}`
    }
    return bad === null
      ? null
      : redisError(`sabsync: Redis granted ${this.tag} with ${bad}; ` +
        'no grant was believed (another program wrote its keys, or this is not Redis)')
  }

  // The other errors of a take's reply, for #take and #takeFree alike: a
  // reply that is no script's of ours, a connection that dropped while the
  // take was unanswered.
  replyError (r) {
    return redisError(`sabsync: Redis answered a take on ${this.tag} with ${malformed(r)}, not the ` +
      'reply of sabsync\'s script (another program wrote its keys, or this is not Redis)')
  }

  droppedError () {
    return redisError(`sabsync: the connection to Redis dropped while the take on ${this.tag} was unanswered`)
  }

  // Give up id (held or queued) without waiting for the answer.
  leaveQuietly (wid) {
    try {
      this.redis.sabsync5Leave(...this.keys, 0, wid, this.lease).catch(quiet)
    } catch {}
  }

  count () {
    return within(this.redis.sabsync5Count(...this.keys, 0), this.commandTimeout, 'count on ' + this.tag, this.redis).then(Number)
  }

  // A Mutex's holder now (Mutex.holder()): null, or { host, pid,
  // threadId, fence, leaseLeftMs }. Who it is comes from its renewals
  // (scripts.js, field i) when it is not this process's: null until its
  // first renewal, a third of a lease after the grant, and a claim of
  // whoever can write the key, checked only for its shape.
  async holder () {
    const r = await within(this.redis.sabsync1Holder(this.keys[0]), this.commandTimeout, 'holder of ' + this.tag, this.redis)
    if (!Array.isArray(r) || (r.length !== 0 && r.length !== 4)) {
      throw redisError(`sabsync: Redis answered holder() on ${this.tag} with ${malformed(r)}, not the reply of sabsync's script`)
    }
    if (r.length === 0) return null
    const [wid, left, fence, who] = r
    if (typeof wid !== 'string' || !/^[0-9a-f]+:[0-9a-z]+$/.test(wid) || !Number.isSafeInteger(left) || left < 0 ||
        typeof fence !== 'string' || !/^[0-9]{1,16}$/.test(fence) || typeof who !== 'string') {
      throw redisError(`sabsync: the holder of ${this.tag} reads as ${malformed(r)}: another program wrote its keys`)
    }
    const out = { host: null, pid: null, threadId: null, fence: Number(fence), leaseLeftMs: left }
    let mine = false
    for (const h of this.hub.leases) if (h.wid === wid) mine = true
    const parts = mine ? [wid, HOST, String(process.pid), String(threadId)] : who.split(' ')
    if (parts.length === 4 && parts[0] === wid && parts[1].length > 0 && parts[1].length <= 255 &&
        /^[0-9]{1,10}$/.test(parts[2]) && /^[0-9]{1,10}$/.test(parts[3])) {
      out.host = parts[1]
      out.pid = Number(parts[2])
      out.threadId = Number(parts[3])
    }
    return out
  }
}

// A free take in flight (LeaseQueue #takeFree): the caller's promise,
// the entry of the bound on its reply (common.js, bind) and the handler of
// that reply (scripts.js, sendScript), in one object; a closure for each
// cost more, between real replies, than the rest of the take's code. It
// is sent again (NOSCRIPT) only while it waits: once it gave up, its
// leave is on the wire, and the take must not follow it.
class FreeTake {
  constructor (q, queue, timeout, began, adopt, resolve, reject) {
    this.q = q
    this.queue = queue
    this.timeout = timeout
    this.began = began
    this.adopt = adopt
    this.resolve = resolve
    this.reject = reject
    this.wid = q.hub.nextId()
    this.drops = q.hub.drops
    this.limit = queue && timeout !== Infinity ? timeout : q.commandTimeout
    this.done = false
    this.due = 0 // the bound's entry
    this.prev = null
    this.next = null
    this.timer = null
    this.d = bind(this.limit, this, began)
    sendScript(q.redis, direct.sabsync2TakeFree, [q.keys[0], this.wid, q.lease, q.fencing ? 1 : 0], this)
  }

  // No reply within the bound.
  expire () {
    this.done = true
    const q = this.q
    if (this.timeout === Infinity || !this.queue || !connected(q.redis)) return this.fail(noReply(this.limit, q.takeWhat, q.redis))
    q.leaveQuietly(this.wid)
    this.resolve(this.adopt(undefined))
  }

  fail (err) {
    this.q.leaveQuietly(this.wid)
    this.reject(err)
  }

  live () {
    return !this.done
  }

  // The fence of a grant of slot 0 (of 1) with the whole lease, or -1:
  // the object was not free after all.
  reply (r) {
    if (this.done) return
    this.done = true
    unbind(this.d, this)
    const q = this.q
    if (q.hub.drops !== this.drops) return this.fail(q.droppedError())
    if (r === -1) {
      q.free = false
      return this.resolve(q.again(this.queue, this.timeout, this.began, this.adopt))
    }
    if (typeof r !== 'number') return this.fail(q.replyError(r))
    const bad = q.grantError(0, r, q.lease, 1)
    if (bad !== null) return this.fail(bad)
    const deadline = this.began + q.lease
    const now = performance.now()
    if (now < deadline) return this.resolve(this.adopt(new Holding(q, this.wid, 0, r, deadline, true, now)))
    // Lapsed on its way here: as #take, give it back and ask again.
    q.leaveQuietly(this.wid)
    this.resolve(this.queue ? q.again(this.queue, this.timeout, this.began, this.adopt) : this.adopt(undefined))
  }

  failed (err) {
    if (this.done) return
    this.done = true
    unbind(this.d, this)
    const q = this.q
    const e = failure(err, q.takeWhat, q.redis)
    if (isRefusal(e)) q.policyRefused()
    this.fail(e)
  }
}

// A slot held under a lease. The lease is renewed every lease/3 ms; it is
// lost when the server says so, or when a renewal could not be confirmed
// before `deadline` (a lower bound of the expiry the server keeps: lease
// ms after the last confirmed renewal was sent). Then `signal` aborts
// with ERR_SABSYNC_LEASE_LOST, and the slot is given back in case the
// server still counts it. The renewal timer never rejects anything.
// `lost` tells whether the lease is known to be lost.
class Holding {
  // `now`: performance.now() when the grant was believed.
  constructor (queue, wid, slot, fence, deadline, free, now) {
    this.queue = queue
    this.free = free // granted by takeFree: released by leaveFree first
    this.wid = wid
    this.slot = slot
    this.fence = fence
    this.deadline = deadline
    this.state = 'held' // -> 'lost' | 'released'
    this.ac = null // made when `signal` is first read (most holders never read it)
    this.reason = undefined // the ERR_SABSYNC_LEASE_LOST, once lost
    this.failure = undefined // the last renewal's error, until one succeeds
    this.timer = null // a renewal timer of its own, when not in queue.renewals
    this.due = 0 // in queue.renewals (common.js, Deadlines): when the renewal is due,
    this.prev = null // and its neighbours there
    this.next = null
    this.before = null // in queue.hub.leases (hub.js): its neighbours there,
    this.after = null
    this.listed = false // and whether it is listed
    this.d = null // a release in flight (leaveNow): its bound's list,
    this.waits = false // whether it waits for its reply,
    this.settle = null // and its promise's settlers
    this.refuse = null
    this.arm(queue.lease / 3, now)
    queue.hub.leases.add(this)
  }

  // Renew in `delay` ms, or at the deadline if that is sooner. The regular
  // period (lease/3) goes in the queue's renewals, whose entries are due in
  // the order they were added; a retry (lease/6), or a deadline sooner than
  // the period, gets a timer of its own.
  arm (delay, now = performance.now()) {
    this.unarm()
    const r = this.queue.renewals
    if (delay === r.ms && now + delay <= this.deadline) return r.add(this, now)
    this.timer = setTimeout(() => { this.timer = null; this.renew() }, Math.max(0, Math.min(delay, this.deadline - now)))
    this.timer.unref()
  }

  unarm () {
    if (this.timer !== null) {
      clearTimeout(this.timer)
      this.timer = null
    } else {
      this.queue.renewals.delete(this)
    }
  }

  // Due in queue.renewals (common.js, Deadlines) while held; else the
  // bound on a release in flight ran out.
  expire () {
    if (this.state === 'held') return this.renew()
    if (!this.waits) return
    this.waits = false
    const q = this.queue
    this.refuse(noReply(q.commandTimeout, q.releaseWhat, q.redis))
  }

  renew () {
    if (this.state !== 'held') return
    const q = this.queue
    const sent = performance.now()
    if (this.checkDeadline()) return
    const check = q.policyDue(sent)
    let reply
    try {
      reply = q.fencing
        ? q.redis.sabsync6Renew(...q.keys, check ? 1 : 0, this.wid, q.lease, this.wid + ' ' + WHO)
        : q.redis.sabsync6Renew(...q.keys, check ? 1 : 0, this.wid, q.lease)
    } catch (err) {
      reply = Promise.reject(err)
    }
    const byDeadline = this.deadline - sent < q.commandTimeout
    within(reply, Math.min(q.commandTimeout, this.deadline - sent), 'renew on ' + q.tag, q.redis).then(r => {
      if (check && (r === 0 || r === 1)) q.policyChecked(sent)
      if (this.checkDeadline()) return
      if (r === 1) {
        this.failure = undefined
        this.deadline = Math.max(this.deadline, sent + q.lease)
        this.arm(q.lease / 3)
      } else {
        this.lose('the server no longer has its lease (it ran out, or the server lost its state)')
      }
    }, err => {
      if (this.state !== 'held') return
      if (isRefusal(err)) {
        // The server may evict the lease's keys, and grant them again.
        q.policyRefused()
        return this.lose(err.message, err)
      }
      // A renewal cut short by the lease's end says only that it ran out,
      // which the loss says anyway: an earlier failure (an OOM, say) is
      // what the holder is told.
      if (!(byDeadline && err.cause && err.cause.noReply && this.failure !== undefined)) this.failure = err
      if (!this.checkDeadline()) this.arm(q.lease / 6)
    })
  }

  // Whether the lease is lost, by the local deadline too: a lease whose
  // deadline passed is lost the moment anyone looks (isHeld, lost), not
  // when the renewal timer runs next, which a blocked event loop delays.
  checkDeadline (now = performance.now()) {
    if (this.state === 'held' && now >= this.deadline) {
      const f = this.failure
      this.lose(`its lease (${this.queue.lease} ms) ran out before a renewal was confirmed` +
        (f === undefined ? '' : ` (the last renewal failed: ${f.message})`), f)
    }
    return this.state !== 'held'
  }

  get lost () {
    this.checkDeadline()
    return this.reason !== undefined
  }

  lose (why, cause) {
    if (this.state !== 'held') return
    this.state = 'lost'
    this.queue.hub.leases.delete(this)
    this.unarm()
    this.abort(why, cause)
    this.queue.leaveQuietly(this.wid)
  }

  abort (why, cause) {
    if (this.reason !== undefined) return
    const err = new SabsyncError('ERR_SABSYNC_LEASE_LOST', `sabsync: the lease on ${this.queue.tag} was lost: ${why}`)
    if (cause !== undefined) Object.defineProperty(err, 'cause', { value: cause, writable: true, configurable: true })
    this.reason = err
    if (this.ac !== null) this.ac.abort(err)
  }

  // Aborts with ERR_SABSYNC_LEASE_LOST when the lease is lost (checked
  // against the local deadline whenever it is read).
  get signal () {
    this.checkDeadline()
    if (this.ac === null) {
      this.ac = new AbortController()
      if (this.reason !== undefined) this.ac.abort(this.reason)
    }
    return this.ac.signal
  }

  // letGo(): the lease is given back now, its holder still inside its
  // critical section: `signal` aborts (ERR_SABSYNC_LEASE_LOST, saying
  // why), and the holder's own release later answers false, as for any
  // lost lease. Resolves when the server has it back (true), or it had
  // run out there (false).
  giveUp () {
    if (this.state !== 'held') return Promise.resolve(false)
    this.abort('released by letGo() (the process is letting go of what it holds, on shutdown)')
    const r = this.release()
    this.state = 'lost'
    return r
  }

  // true: it was still held, and is released; false: it had been lost.
  // A release in flight is its own entry of its bound (common.js, bind)
  // and the handler of its reply (scripts.js, sendScript): it left the
  // renewals (unarm) before, and as it is no longer held, nothing arms it
  // again; expire() tells the two lists apart by the state.
  release () {
    const now = performance.now()
    this.checkDeadline(now)
    if (this.state !== 'held') {
      this.state = 'released'
      return Promise.resolve(false)
    }
    this.state = 'released'
    this.queue.hub.leases.delete(this)
    this.unarm()
    return new Promise((resolve, reject) => this.leaveNow(now, resolve, reject))
  }

  // One promise, settled by the first of the reply, the failure and the
  // bound (the reply's error worded as within() words it). leaveFree
  // answers 3 when it cannot decide (someone queued since): leave then,
  // within the same bound. A release goes on once its caller's bound has
  // passed (after a NOSCRIPT too): the sooner the server has the lock
  // back, the sooner a waiter gets it.
  leaveNow (now, resolve, reject) {
    const q = this.queue
    this.settle = resolve
    this.refuse = reject
    this.waits = true
    this.d = bind(q.commandTimeout, this, now)
    if (this.free) sendScript(q.redis, direct.sabsync2LeaveFree, [q.keys[0], this.wid], this)
    else this.general()
  }

  general () {
    this.leave().then(r => this.answered(r), err => this.failed(err))
  }

  // leaveFree's reply (sendScript).
  reply (r) {
    if (r === 3) this.general()
    else this.answered(r)
  }

  live () {
    return true
  }

  answered (r) {
    if (!this.waits) return
    this.waits = false
    unbind(this.d, this)
    if (r === 1) return this.settle(true)
    this.abort('it had run out on the server before it was released')
    this.settle(false)
  }

  failed (err) {
    if (!this.waits) return
    this.waits = false
    unbind(this.d, this)
    const q = this.queue
    this.refuse(failure(err, q.releaseWhat, q.redis))
  }

  // The reply of the release's general script (a client that throws
  // instead of rejecting rejects here).
  leave () {
    const q = this.queue
    try {
      return q.redis.sabsync5Leave(...q.keys, 0, this.wid, q.lease)
    } catch (err) {
      return Promise.reject(err)
    }
  }
}

module.exports = { LeaseQueue, evictionCheck }
