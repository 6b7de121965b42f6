'use strict'
// The TracingChannels of the waits (lib/inside.js says what each carries),
// for every tier: plain JS over diagnostics_channel, so that sabsync/redis,
// which loads no native code, traces its waits on the same channels.

const dc = require('diagnostics_channel')

// TracingChannel: Node >= 19.9 and 18.19; before that, no tracing.
const tracing = name => typeof dc.tracingChannel === 'function' ? dc.tracingChannel(name) : null

const LOCK = tracing('sabsync:lock')
const ACQUIRE = tracing('sabsync:acquire')
const WAIT = tracing('sabsync:wait')

// A TracingChannel's subscribers, sub-channel by sub-channel (its own
// hasSubscribers is Node >= 20.13 only).
function observed (c) {
  return c !== null && (c.start.hasSubscribers || c.end.hasSubscribers || c.asyncStart.hasSubscribers ||
    c.asyncEnd.hasSubscribers || c.error.hasSubscribers)
}

// A wait already under way, traced from now until settle(ok, value) is
// called: `start` and `end` now, `asyncStart` and `asyncEnd` (or `error`)
// at the settle, with context.waitedMs counted from `since`
// (performance.now() when the call began). For a call that learns it
// waits only from a reply (a Redis take answered "queued").
function traceWait (c, context, since) {
  let settle
  const waited = new Promise((resolve, reject) => {
    settle = (ok, value) => {
      context.waitedMs = performance.now() - since
      if (ok) resolve(value)
      else reject(value)
    }
  })
  context.async = true
  // The traced promise's own outcome is the caller's to handle: this copy
  // of it must not be an unhandled rejection.
  c.tracePromise(() => waited, context).catch(() => {})
  return settle
}

module.exports = { LOCK, ACQUIRE, WAIT, observed, traceWait }
