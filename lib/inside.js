'use strict'
// diagnostics_channel: what APM agents and OpenTelemetry subscribe to.
//
//   sabsync:lock     TracingChannel  a Mutex or RWLock lock call that waits
//   sabsync:acquire  TracingChannel  a Sema acquire, or a RateLimit call, that waits
//   sabsync:wait     TracingChannel  a Latch, Barrier, CondVar, AtomicFlag or
//                                    Once call that waits
//   sabsync:owner-died       channel a holder found dead and taken over
//   sabsync:limiter-full     channel a RateLimiter's table had no room for a key
//   sabsync:deadlock         channel a cycle of lock waits (among the
//                                    threads of this process, or in a space)
//                                    that includes this thread, found when
//                                    one of its Mutex, RWLock or named lock
//                                    waits has lasted DEADLOCK_MS
//
// A tracing context is { tier, kind, key, async, waitedMs } (tier:
// 'thread', 'space' or 'redis'; kind: the class; key: the space key, or
// null; on Redis the object's key, its waits traced by lib/redis itself
// through lib/trace.js, from the reply that says it waits;
// async: a promise call, whose span ends at asyncEnd, not end), with the
// TracingChannel's own result or error; waitedMs (a float) is set before
// `end` (blocking calls) or `asyncStart` (promises). Only calls that wait
// are traced: the fast paths (a free lock taken with one compare-and-swap)
// never reach this file, and the slow paths ask `observed` first, so with
// no subscriber nothing is built or published.

const dc = require('diagnostics_channel')
const { threadId } = require('worker_threads')
const { backendOf } = require('./backend')

const { LOCK, ACQUIRE, WAIT, observed } = require('./trace')
const ownerDiedChannel = dc.channel('sabsync:owner-died')
const limiterFullChannel = dc.channel('sabsync:limiter-full')
const deadlockChannel = dc.channel('sabsync:deadlock')

// Objects' names for the channels: their space key (lib/space.js), or the
// object they are part of (an RWLock's writers' Mutex is shown as the
// RWLock; a RateLimit's turn, a Sema, is quiet: the RateLimit's own calls
// are traced instead).
const about = new WeakMap() // object -> { key } | { outer, kind, quiet }

function nameObject (object, key) {
  about.set(object, { ...about.get(object), key })
}

function partOf (inner, outer, kind, quiet = false) {
  about.set(inner, { outer, kind, quiet })
}

// What the channels say of `object` (class `kind`).
function describe (object, kind) {
  const d = about.get(object)
  if (d !== undefined && d.outer !== undefined) return describe(d.outer, d.kind)
  return { tier: backendOf(object.buffer).tier, kind, key: d?.key ?? null }
}

// The context of `object`'s wait, or null when it is quiet.
function contextOf (object, kind) {
  const d = about.get(object)
  if (d !== undefined && d.quiet) return null
  const c = describe(object, kind)
  c.async = false
  c.waitedMs = 0
  return c
}

// fn(a, b, c, d) traced on `c` with `context`, its waitedMs set before
// `end` (or, for a promise, before `asyncStart`). Callers pass the wait
// as a function and its arguments, never a closure: a closure in a method
// makes V8 allocate its context on every call, the fast path's included.
function traceSync (c, context, fn, a, b, d, e) {
  context.async = false
  return c.traceSync(timedSync, context, undefined, context, performance.now(), fn, a, b, d, e)
}

function timedSync (context, start, fn, a, b, d, e) {
  try {
    return fn(a, b, d, e)
  } finally {
    context.waitedMs = performance.now() - start
  }
}

function tracePromise (c, context, fn, a, b, d, e) {
  context.async = true
  return c.tracePromise(timedAsync, context, undefined, context, performance.now(), fn, a, b, d, e)
}

function timedAsync (context, start, fn, a, b, d, e) {
  const done = () => { context.waitedMs = performance.now() - start }
  return Promise.resolve(fn(a, b, d, e)).then(v => { done(); return v }, err => { done(); throw err })
}

// The wait fn(a, b, c, d) of `object` (class `kind`), blocking or a
// promise, traced when someone listens. Call only on a slow path.
function waitSync (c, object, kind, fn, a, b, d, e) {
  if (!observed(c)) return fn(a, b, d, e)
  const context = contextOf(object, kind)
  return context === null ? fn(a, b, d, e) : traceSync(c, context, fn, a, b, d, e)
}

function waitAsync (c, object, kind, fn, a, b, d, e) {
  if (!observed(c)) return fn(a, b, d, e)
  const context = contextOf(object, kind)
  return context === null ? fn(a, b, d, e) : tracePromise(c, context, fn, a, b, d, e)
}

// A holder (owner id `ownerId`) found dead and taken over by this thread.
function ownerDied (object, kind, ownerId) {
  if (!ownerDiedChannel.hasSubscribers) return
  ownerDiedChannel.publish({ ...describe(object, kind), ownerId })
}

// Deadlocks. A lock wait (w.lockWait: a Mutex's or an RWLock's), in a
// space whose backend can list the cycles of waits (lib/inspect.js) or on
// this process's memory (the process's list of lock waits, which every
// thread's lock waits join once they have waited 50 ms, lib/waiting.js:
// threadDeadlocks), looks
// for one between two parks, its park cut short to wake it: first within
// DEADLOCK_MS of its first park, then again every DEADLOCK_MS / 2 or so
// while it waits. A look sees the other waiters queued, and itself as the
// waiter of its cell; another party that happens to be between two parks
// at that moment is not seen, so the looks are spread at random (a cycle
// missed once is found at the next look; on this process's memory a wait
// stays listed between its parks). A named lock's waiting request looks
// on a timer instead (lib/locks/front.js, deadlockLooker). Each cycle is
// published once per thread. Called before a lock wait parks, only while sabsync:deadlock has
// subscribers.
const DEADLOCK_MS = 1000
const told = new Set() // cycles published: "space|id,id,..."

function deadlocks () { return deadlockChannel.hasSubscribers }

function watchDeadlock (w) {
  const own = w.own
  if (own.tier !== 'thread' && typeof own.deadlocks !== 'function') return
  const now = performance.now()
  if (w.since === 0) {
    w.since = now
    w.nextLook = now + DEADLOCK_MS * (0.5 + Math.random() / 2)
  }
  const left = w.nextLook - now
  if (left > 0) {
    if (w.wait > left) w.wait = left
    return
  }
  w.nextLook = now + DEADLOCK_MS * (0.25 + Math.random() / 2)
  if (w.wait > w.nextLook - now) w.wait = w.nextLook - now
  let found
  try {
    // In a space, this wait is between two parks, out of the queue: it is
    // named as a waiter of the cell it parks on. On this process's memory
    // it stays in the list of lock waits from its first park to its end.
    found = own.tier === 'thread' ? threadDeadlocks() : own.deadlocks(w.i32, w.cell)
  } catch {
    return // a space closed meanwhile: its wait says so
  }
  publishDeadlocks(found, own.tier === 'thread' ? threadId : own.self)
}

// The cycles in `found` that include this thread (`self`: its threadId, or
// in a space its owner id), each once.
function publishDeadlocks (found, self) {
  for (const d of found) {
    const ids = d.tier === 'thread' ? d.parties.map(p => p.threadId) : d.parties.map(p => p.ownerId)
    if (!ids.includes(self)) continue
    const sig = `${d.space ?? 'thread'}|${ids.sort((a, b) => a - b).join(',')}`
    if (told.has(sig)) continue
    if (told.size > 1000) told.clear()
    told.add(sig)
    deadlockChannel.publish(d)
  }
}

function threadDeadlocks () {
  return require('./inspect').threadDeadlocks()
}

// For a named locks backend (lib/locks/front.js, which loads no native
// code): whether to look, and a look that publishes what `find()` answers
// of cycles through this thread (`self()`: as publishDeadlocks has it).
function deadlockLooker (find, self) {
  return {
    ms: DEADLOCK_MS,
    wanted: deadlocks,
    look () {
      let found
      try {
        found = find()
      } catch {
        return // a space closed meanwhile: the request says so
      }
      publishDeadlocks(found, self())
    }
  }
}

function limiterFull (object, message) {
  if (!limiterFullChannel.hasSubscribers) return
  limiterFullChannel.publish({ ...describe(object, 'RateLimiter'), ...message })
}

module.exports = {
  LOCK,
  ACQUIRE,
  WAIT,
  observed,
  waitSync,
  waitAsync,
  traceSync,
  tracePromise,
  contextOf,
  ownerDied,
  limiterFull,
  deadlocks,
  watchDeadlock,
  deadlockLooker,
  threadDeadlocks,
  DEADLOCK_MS,
  nameObject,
  partOf
}
