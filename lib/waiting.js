'use strict'
// The loop every blocking primitive runs: look at the shared words, decide
// to finish or to park, park, look again. A primitive writes that decision
// once, as an `attempt(w)` function over a Wait record, and runs it with
// either driver: settleSync (parks the thread) or settleAsync (parks a
// promise on this thread's loop). Keeping one decision function per
// primitive is what keeps the blocking and the promise forms identical.
//
// attempt(w) answers PARK after it has set w.cell, w.value, w.wait (ms, > 0)
// and w.epoch; anything else is the result. It reads w.code, the outcome of
// the previous park (OK, NOT_EQUAL, TIMED_OUT, OWNER_DEAD; -1 at first).

const { addressOf } = require('./lot')
const { OK, TIMED_OUT, WATCH_ANY } = require('./shared')
const { observed, contextOf, traceSync, tracePromise, deadlocks, watchDeadlock } = require('./inside')

const PARK = Symbol('park')
// What a lock's wait waits for (w.lockKind), as src/core/lockwaits.c reads it.
const LOCK_MUTEX = 1
const LOCK_RWLOCK = 2

// `be` is the backend (lib/backend.js) the primitive chose at construction:
// owner ids, liveness, deaths, and parking.
class Wait {
  constructor (i32, timeout, be) {
    this.i32 = i32
    this.deadline = timeout === Infinity ? Infinity : performance.now() + timeout
    this.cell = 0
    this.value = 0
    this.wait = 0
    this.watch = WATCH_ANY
    this.epoch = 0
    this.code = -1
    this.parked = 0 // how many parks so far
    this.signal = undefined
    this.ref = true
    this.own = be
    // { channel, object, kind }: the wait is traced on that channel
    // (lib/inside.js) from its first park, when someone listens.
    this.traced = null
    // A lock's wait (Mutex, RWLock), watched for deadlocks in a space
    // while someone listens (lib/inside.js): since its first park, and
    // when it looks next (ms).
    this.lockWait = false
    this.since = 0
    this.nextLook = 0
    // A lock's wait on this process's memory (lockView, lockKind: set by
    // Mutex and RWLock) is in the process's list of lock waits from
    // LIST_MS after its first park (listFrom) to its end (lockHandle),
    // whether or not anyone listens: a thread that looks for a cycle sees
    // every other thread's waits.
    this.lockView = null
    this.lockKind = 0
    this.lockHandle = 0
    this.listFrom = 0
  }

  // Milliseconds left (Infinity for none), or 0 when the deadline passed.
  remaining () {
    if (this.deadline === Infinity) return Infinity
    const left = this.deadline - performance.now()
    return left > 0 ? left : 0
  }
}

function settleSync (w, attempt) {
  const r = attempt(w)
  if (r !== PARK) return r
  if (w.traced !== null && observed(w.traced.channel)) {
    const context = contextOf(w.traced.object, w.traced.kind)
    if (context !== null) return traceSync(w.traced.channel, context, parkedSync, w, attempt)
  }
  return parkedSync(w, attempt)
}

// The process's list of lock waits (only the threads backend keeps one):
// a lock wait joins it once it has waited LIST_MS, its parks cut short to
// that end. Most contended waits last microseconds and pay nothing (a
// link and an unlink cost about 0.3 us, a tenth of a park and its wake);
// a deadlock lasts, and is listed long before anyone looks for it (at
// DEADLOCK_MS / 2 at the earliest, lib/inside.js). Called before a park.
const LIST_MS = 50

function listLock (w) {
  if (w.lockHandle !== 0 || w.lockKind === 0 || w.own.lockWait === undefined) return
  const now = performance.now()
  if (w.listFrom === 0) w.listFrom = now
  const left = w.listFrom + LIST_MS - now
  if (left > 0) {
    if (w.wait > left) w.wait = left
    return
  }
  w.lockHandle = w.own.lockWait(w.lockView, w.lockKind)
}

function leaveLock (w) {
  if (w.lockHandle === 0) return
  w.own.lockWaitEnd(w.lockHandle)
  w.lockHandle = 0
}

// settleSync from a PARK answer on.
function parkedSync (w, attempt) {
  try {
    for (;;) {
      listLock(w)
      if (w.lockWait && deadlocks()) watchDeadlock(w)
      w.parked++
      w.code = w.own.park(w.i32, w.cell, w.value, w.wait, w.watch, w.epoch)
      const r = attempt(w)
      if (r !== PARK) return r
    }
  } finally {
    leaveLock(w)
  }
}

// `abandon(w)`, if given, runs when an abort rejects the park: it undoes
// what the attempt had published (a bit, a registration) before the
// rejection goes on to the caller.
function settleAsync (w, attempt, abandon) {
  let r
  try {
    r = attempt(w)
  } catch (err) {
    return Promise.reject(err)
  }
  if (r !== PARK) return Promise.resolve(r)
  if (w.traced !== null && observed(w.traced.channel)) {
    const context = contextOf(w.traced.object, w.traced.kind)
    if (context !== null) return tracePromise(w.traced.channel, context, parkedAsync, w, attempt, abandon)
  }
  return parkedAsync(w, attempt, abandon)
}

// settleAsync from a PARK answer on.
async function parkedAsync (w, attempt, abandon) {
  try {
    for (;;) {
      listLock(w)
      if (w.lockWait && deadlocks()) watchDeadlock(w)
      w.parked++
      let c = w.own.parkAsync(w.i32, w.cell, w.value, w.wait, w.signal, w.ref, w.watch, w.epoch)
      if (typeof c !== 'number') {
        try {
          c = (await c) === 'ok' ? OK : TIMED_OUT
        } catch (err) {
          // A space closed under the wait: its memory is gone from this
          // thread and its owner id has ended (the close took its records
          // out), so there is nothing of it to undo here.
          if (abandon !== undefined && err.code !== 'ERR_SABSYNC_SHARED_CLOSED') abandon(w)
          throw err
        }
      }
      w.code = c
      const r = attempt(w)
      if (r !== PARK) return r
    }
  } finally {
    leaveLock(w)
  }
}

// The address of a cell, a key for per-thread state that every object
// attached to the same memory in this thread shares (two SharedArrayBuffer
// objects received by postMessage are distinct objects over one memory).
function addressKey (i32, index) {
  return addressOf(i32, i32.buffer, index, 4)
}

module.exports = { PARK, Wait, settleSync, settleAsync, addressKey, LOCK_MUTEX, LOCK_RWLOCK }
