'use strict'
// The threads tier of the Web Locks API: `require('sabsync').locks`, one
// table of names for every thread of the process (src/core/locks.c, bound
// by src/napi/locks.c), driven by the spec's front (lib/locks/front.js).
const { threadId } = require('worker_threads')
const native = require('../native')
const { makeLockManager, STEAL } = require('./front')
const { deadlockLooker, threadDeadlocks } = require('../inside')

// What the env's records keep alive: nothing but this (async.h's keep).
const keep = {}

let stolen = null // onStolen, once watch() was called

const backend = {
  request (name, exclusive, how) {
    const r = native.locksRequest(name, exclusive ? how : how | 4, threadId, keep)
    // A steal that robbed this thread's own holders tells them now, before
    // the thief's grant: the watch's wake-up comes on a later turn of the
    // loop, which may have nothing else to keep it running.
    if (how === STEAL) for (const ticket of native.locksStolen()) stolen(ticket)
    if (typeof r === 'number') return r
    const [promise, handle] = r
    return {
      promise,
      cancel () {
        if (!native.cancel(handle, undefined)) return false
        promise.catch(() => {}) // rejected by the cancel; nobody waits on it
        return true
      }
    }
  },
  release (ticket) {
    native.locksRelease(ticket)
  },
  info () {},
  query () {
    return native.locksQuery()
  },
  // Cycles among this process's threads through a waiting request.
  deadlocks: deadlockLooker(threadDeadlocks, () => threadId),
  watch (onStolen) {
    stolen = onStolen
    // Armed at the first request's grant would cost every request a
    // record; a steal is rare, so the watch is armed once, and again after
    // each robbery it reports. It does not keep the loop alive.
    let armed = false
    const look = () => {
      armed = false
      for (const ticket of native.locksStolen()) onStolen(ticket)
      arm()
    }
    const arm = () => {
      if (armed) return
      const p = native.locksWatch(threadId, keep)
      if (p === true) {
        queueMicrotask(look)
        return
      }
      armed = true
      p.then(look)
    }
    const first = backend.request
    backend.request = function (name, exclusive, how) {
      backend.request = first
      arm()
      return first(name, exclusive, how)
    }
  }
}

const locks = makeLockManager(backend)

module.exports = { locks }
