'use strict'
// diagnostics_channel: what APM agents and OpenTelemetry subscribe to.
//
//   sabsync:lock     TracingChannel  a Mutex or RWLock lock call that waits
//   sabsync:acquire  TracingChannel  a Sema acquire, or a RateLimit call, that waits
//   sabsync:wait     TracingChannel  a Latch, Barrier, CondVar, AtomicFlag or
//                                    Once call that waits
//   sabsync:owner-died       channel a holder found dead and taken over
//   sabsync:limiter-full     channel a RateLimiter's table had no room for a key
//
// A tracing context is { tier, kind, key, async, waitedMs } (tier:
// 'thread' or 'space'; kind: the class; key: the space key, or null;
// async: a promise call, whose span ends at asyncEnd, not end), with the
// TracingChannel's own result or error; waitedMs (a float) is set before
// `end` (blocking calls) or `asyncStart` (promises). Only calls that wait
// are traced: the fast paths (a free lock taken with one compare-and-swap)
// never reach this file, and the slow paths ask `observed` first, so with
// no subscriber nothing is built or published.

const dc = require('diagnostics_channel')
const { backendOf } = require('./backend')

// TracingChannel: Node >= 19.9 and 18.19; before that, no tracing.
const tracing = name => typeof dc.tracingChannel === 'function' ? dc.tracingChannel(name) : null

const LOCK = tracing('sabsync:lock')
const ACQUIRE = tracing('sabsync:acquire')
const WAIT = tracing('sabsync:wait')
const ownerDiedChannel = dc.channel('sabsync:owner-died')
const limiterFullChannel = dc.channel('sabsync:limiter-full')

// A TracingChannel's subscribers, sub-channel by sub-channel (its own
// hasSubscribers is Node >= 20.13 only).
function observed (c) {
  return c !== null && (c.start.hasSubscribers || c.end.hasSubscribers || c.asyncStart.hasSubscribers ||
    c.asyncEnd.hasSubscribers || c.error.hasSubscribers)
}

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
  nameObject,
  partOf
}
