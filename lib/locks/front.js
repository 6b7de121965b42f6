'use strict'
// The Web Locks API's LockManager over any tier: request() and query() as
// the W3C spec has them, with what a tier keeps (names, holders, queues)
// left to its backend: lib/locks/threads.js (every thread of a process),
// lib/redis/locks.js (every machine).
//
// A backend answers:
//   request(name, exclusive, how)   how: WAIT, IF_AVAILABLE or STEAL
//     -> a ticket (granted now; a truthy number or string), 0 (IF_AVAILABLE
//        and not grantable), or { promise, cancel } (waits: promise gives
//        the ticket once granted; cancel() answers true when it took the
//        request out of its queue before the grant), or a promise of one
//   release(ticket)                 -> anything, or a promise
//   watch(onStolen)                 onStolen(ticket, why?): a holder was robbed
//                                   (why: what else took it, for its message)
//   info(ticket)                    -> own properties for the Lock, or undefined
//   query()                         -> { held, pending }, or a promise of it
//   deadlocks                       optional: { ms, wanted(), look() } (lib/inside.js,
//                                   deadlockLooker): a waiting request looks for cycles
//                                   of waits through it, within `ms` and then every ms/2
//                                   or so, while wanted() (sabsync:deadlock listened to)
//
// What the spec asks that differs from the rest of sabsync: every error is
// a rejected promise, never a throw; errors are the global DOMException
// and TypeError; an aborted signal rejects with its reason itself.
const { isAbortSignal, ownSignal } = require('../signal')

const WAIT = 0
const IF_AVAILABLE = 1
const STEAL = 2

// Callbacks run on a later microtask, never inside request() (the spec's
// callback is a task of its own): a resolved promise's reaction costs less
// than queueMicrotask, which wraps each call for async_hooks.
const resolved = Promise.resolve()
const later = fn => { resolved.then(fn) }

// A waiting request's looks for deadlocks (backend.deadlocks), spread at
// random as lib/inside.js's are; its timer holds no loop open.
function lookForDeadlocks (req, d, ms) {
  req.look = setTimeout(() => {
    req.look = null
    if (req.state !== WAITING) return
    d.look()
    if (req.state === WAITING && d.wanted()) lookForDeadlocks(req, d, d.ms * (0.25 + Math.random() / 2))
  }, ms)
  req.look.unref()
}

function stopLooking (req) {
  if (req.look === null) return
  clearTimeout(req.look)
  req.look = null
}

const notSupported = msg => new DOMException(msg, 'NotSupportedError')

// The Lock a callback receives: its name and mode (and, on Redis, its
// fence). Made only here.
const made = Symbol('sabsync.Lock')
class Lock {
  #name
  #mode
  constructor (token, name, mode, extra) {
    if (token !== made) throw new TypeError('Illegal constructor')
    this.#name = name
    this.#mode = mode
    if (extra !== undefined) Object.assign(this, extra)
  }

  get name () { return this.#name }
  get mode () { return this.#mode }
}

class LockManager {
  #backend
  // Granted requests by ticket, until released or robbed.
  #held = new Map()

  constructor (token, backend) {
    if (token !== made) throw new TypeError('Illegal constructor')
    this.#backend = backend
    backend.watch((ticket, why) => this.#robbed(ticket, why))
  }

  // request(name, callback) or request(name, options, callback) -> a
  // promise of what the callback returns, once the lock is released.
  request (name, options, callback) {
    let exclusive, ifAvailable, steal, signal
    try {
      if (arguments.length < 2) throw new TypeError(`LockManager.request: a name and a callback are required (${arguments.length} argument${arguments.length === 1 ? '' : 's'} given)`)
      if (arguments.length === 2) {
        callback = options
        options = undefined
      }
      name = `${name}`
      // The options dictionary's members, in the spec's (alphabetical) order.
      if (options !== undefined && options !== null && typeof options !== 'object' && typeof options !== 'function') {
        throw new TypeError('LockManager.request: options must be an object')
      }
      const o = options ?? {}
      ifAvailable = Boolean(o.ifAvailable)
      const mode = o.mode === undefined ? 'exclusive' : `${o.mode}`
      if (mode !== 'exclusive' && mode !== 'shared') throw new TypeError(`LockManager.request: options.mode must be 'exclusive' or 'shared', not '${mode}'`)
      exclusive = mode === 'exclusive'
      if (o.signal !== undefined) {
        if (!isAbortSignal(o.signal)) throw new TypeError('LockManager.request: options.signal must be an AbortSignal')
        signal = ownSignal(o.signal)
      }
      steal = Boolean(o.steal)
      if (typeof callback !== 'function') throw new TypeError('LockManager.request: the callback must be a function')
    } catch (err) {
      return Promise.reject(err)
    }
    if (name.startsWith('-')) return Promise.reject(notSupported(`LockManager.request: names starting with '-' are reserved ('${name}')`))
    if (steal && ifAvailable) return Promise.reject(notSupported("LockManager.request: 'steal' and 'ifAvailable' cannot be used together"))
    if (steal && !exclusive) return Promise.reject(notSupported("LockManager.request: 'steal' is only for mode 'exclusive'"))
    if (signal !== undefined && (steal || ifAvailable)) return Promise.reject(notSupported("LockManager.request: 'signal' cannot be used with 'steal' or 'ifAvailable'"))
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
    return this.#ask(name, exclusive, steal ? STEAL : ifAvailable ? IF_AVAILABLE : WAIT, signal, callback)
  }

  query () {
    try {
      return Promise.resolve(this.#backend.query())
    } catch (err) {
      return Promise.reject(err)
    }
  }

  #ask (name, exclusive, how, signal, callback) {
    const req = new Request(name, exclusive, signal, callback)
    let answer
    try {
      answer = this.#backend.request(name, exclusive, how)
    } catch (err) {
      req.reject(err)
      return req.promise
    }
    if (answer !== null && typeof answer === 'object' && typeof answer.then === 'function') {
      answer.then(a => this.#answered(req, a), err => this.#fail(req, err))
    } else {
      this.#answered(req, answer)
    }
    if (signal !== undefined && req.state !== DONE) {
      req.onAbort = () => this.#abort(req)
      signal.addEventListener('abort', req.onAbort, { once: true })
    }
    return req.promise
  }

  #answered (req, answer) {
    if (req.state === ABORTED) {
      // Aborted while the backend was answering: give back what it gave.
      if (answer !== null && typeof answer === 'object') {
        const taken = answer.cancel()
        const back = t => { if (!t) answer.promise.then(ticket => this.#backend.release(ticket), () => {}) }
        if (taken !== null && typeof taken === 'object' && typeof taken.then === 'function') taken.then(back, () => {})
        else back(taken)
      } else if (answer) {
        this.#backend.release(answer)
      }
      return
    }
    if (answer === 0 || answer === null || answer === undefined) {
      // ifAvailable, and not available: the callback sees null.
      req.state = RUNNING
      later(() => this.#run(req, null))
    } else if (typeof answer === 'object') {
      req.pending = answer
      req.state = WAITING
      answer.promise.then(ticket => this.#granted(req, ticket), err => this.#fail(req, err))
      const d = this.#backend.deadlocks
      if (d !== undefined && d.wanted()) lookForDeadlocks(req, d, d.ms * (0.5 + Math.random() / 2))
    } else {
      this.#granted(req, answer)
    }
  }

  #granted (req, ticket) {
    stopLooking(req)
    req.ticket = ticket
    req.pending = null
    this.#held.set(ticket, req)
    req.state = GRANTED
    later(() => this.#start(req))
  }

  // A granted request's callback runs, unless the request was aborted or
  // robbed first.
  #start (req) {
    if (req.state !== GRANTED) return // robbed before its callback ran
    if (req.signal !== undefined && req.signal.aborted) {
      this.#release(req)
      this.#settle(req, false, req.signal.reason)
      return
    }
    req.state = RUNNING
    this.#run(req, new Lock(made, req.name, req.exclusive ? 'exclusive' : 'shared', this.#backend.info(req.ticket)))
  }

  #run (req, lock) {
    if (req.onAbort !== undefined) req.signal.removeEventListener('abort', req.onAbort)
    let r
    try {
      r = req.callback(lock)
    } catch (err) {
      this.#finish(req, false, err)
      return
    }
    if (r !== null && (typeof r === 'object' || typeof r === 'function')) {
      Promise.resolve(r).then(v => this.#finish(req, true, v), err => this.#finish(req, false, err))
    } else {
      this.#finish(req, true, r)
    }
  }

  // The callback settled: release, then settle the request the same way.
  #finish (req, ok, value) {
    if (req.ticket === undefined) {
      this.#settle(req, ok, value)
      return
    }
    const robbed = req.state === DONE
    const released = this.#release(req)
    if (robbed) return
    if (released !== null && typeof released === 'object' && typeof released.then === 'function') {
      released.then(() => this.#settle(req, ok, value), () => this.#settle(req, ok, value))
    } else {
      this.#settle(req, ok, value)
    }
  }

  // A release that fails (its space closed, its server gone) changes
  // nothing for the request: the lock went with what held it, and the
  // request settles as its callback did.
  #release (req) {
    this.#held.delete(req.ticket)
    try {
      const r = this.#backend.release(req.ticket)
      if (r !== null && typeof r === 'object' && typeof r.then === 'function') return r.then(undefined, () => {})
      return r
    } catch {
      return undefined
    }
  }

  #settle (req, ok, value) {
    if (req.state === DONE) return
    stopLooking(req)
    req.state = DONE
    if (req.onAbort !== undefined) req.signal.removeEventListener('abort', req.onAbort)
    if (ok) req.resolve(value)
    else req.reject(value)
  }

  #fail (req, err) {
    if (req.ticket !== undefined) this.#release(req)
    this.#settle(req, false, err)
  }

  #abort (req) {
    if (req.state === WAITING) {
      const taken = req.pending.cancel()
      const done = t => { if (t) this.#settle(req, false, req.signal.reason) }
      if (taken !== null && typeof taken === 'object' && typeof taken.then === 'function') taken.then(done, () => {})
      else done(taken)
    } else if (req.state === ASKING) {
      // The backend has not answered yet: a grant is released when it
      // comes, a wait cancelled.
      this.#settle(req, false, req.signal.reason)
      req.state = ABORTED
    }
    // GRANTED: #start sees the signal; RUNNING: too late, as the spec has it.
  }

  // A held lock taken away: by a steal, or as the backend says (`why`: a
  // lease lost, its state gone, its manager closed).
  #robbed (ticket, why) {
    const req = this.#held.get(ticket)
    if (req === undefined) return
    this.#held.delete(ticket)
    // Its callback, if it runs, runs on; its release is then a no-op.
    this.#settle(req, false, new DOMException(why === undefined
      ? `the lock '${req.name}' was stolen by another request (steal: true)`
      : `the lock '${req.name}' was lost: ${why}`, 'AbortError'))
  }
}

// A request's states.
const ASKING = 0 // the backend has not answered
const WAITING = 1 // queued
const GRANTED = 2 // held; its callback not yet run
const RUNNING = 3 // its callback runs
const DONE = 4 // settled (its callback may still run: robbed)
const ABORTED = 5 // aborted before the backend answered

class Request {
  constructor (name, exclusive, signal, callback) {
    this.name = name
    this.exclusive = exclusive
    this.signal = signal
    this.callback = callback
    this.state = ASKING
    this.ticket = undefined
    this.pending = null
    this.look = null // its next look for deadlocks (a timer)
    this.onAbort = undefined
    this.promise = new Promise((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
  }
}

function makeLockManager (backend) {
  return new LockManager(made, backend)
}

module.exports = { Lock, LockManager, makeLockManager, WAIT, IF_AVAILABLE, STEAL }
