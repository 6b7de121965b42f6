'use strict'
const { isMainThread } = require('worker_threads')
const native = require('./native')
const { wait, waitAsync, notify, waiters } = require('./atomics')
const { SabsyncError } = require('./errors')
const { Mutex } = require('./mutex')
const { AtomicFlag } = require('./atomic-flag')
const { Once } = require('./once')
const { Latch } = require('./latch')
const { Sema } = require('./sema')
const { RateLimit } = require('./rate-limit')
const { RateLimiter } = require('./rate-limiter')
const { CondVar } = require('./condvar')
const { RWLock } = require('./rwlock')
const { Barrier } = require('./barrier')
const { openShared } = require('./space')
const { locks } = require('./locks/threads')
const { Lock, LockManager } = require('./locks/front')
const { threadDeadlocks } = require('./inspect')

// A worker parked in native code is not interrupted by the main thread's
// exit: Node terminates workers and joins them. Tell parked threads to look
// for their termination right away (see src/napi/binding.c).
if (isMainThread) process.on('exit', native.shutdown)

module.exports = {
  wait,
  waitAsync,
  notify,
  waiters,
  Mutex,
  AtomicFlag,
  Once,
  Latch,
  CondVar,
  RWLock,
  Barrier,
  Sema,
  RateLimit,
  RateLimiter,
  openShared,
  locks,
  Lock,
  LockManager,
  // The cycles of lock waits among this process's threads now, for any
  // thread to ask (lib/inspect.js).
  deadlocks: threadDeadlocks,
  SabsyncError
}
