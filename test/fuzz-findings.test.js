'use strict'
// What the API fuzz (test/fuzz-primitives.test.js) found,
// one test each, so that npm test keeps them fixed.
const t = require('tap')
const sabsync = require('..')
const { sleep } = require('./helpers')
const { Mutex, Sema, Latch, RateLimit, AtomicFlag, SabsyncError } = sabsync

t.test('Mutex over memory with flags but no owner: lock() answers instead of looping forever', async t => {
  const m = new Mutex()
  const word = new Int32Array(m.buffer, m.byteOffset + 4, 1) // the lock word, after the kind tag
  word[0] = 0x40000000 // PARKED, no owner: never a Mutex's state
  t.equal(m.lock(0), true)
  m.unlock()
  word[0] = 0x80000000 | 0 // DIED, no owner
  t.equal(await m.lockAsync({ timeout: 10 }), true)
  m.unlock()
  t.equal(word[0], 0)
})

t.test('lockAsync with a timeout beyond setTimeout\'s 2^31-1 ms does not time out at once', async t => {
  const m = new Mutex()
  await m.lockAsync()
  const first = m.lockAsync() // this thread's queue: the next ones wait on JS timers
  const long = m.lockAsync({ timeout: 3e9 })
  let settled = false
  long.then(() => { settled = true })
  await sleep(20)
  t.equal(settled, false, 'still waiting after 20 ms')
  m.unlock()
  t.equal(await first, true)
  m.unlock()
  t.equal(await long, true)
  m.unlock()
})

t.test('a RateLimit wait beyond 2^31-1 ms sleeps, it does not poll every ms', async t => {
  const warnings = []
  const onWarning = w => warnings.push(w.name)
  process.on('warning', onWarning)
  const limit = RateLimit(1, { timeUnit: 1e11 })
  await limit()
  const ac = new AbortController()
  const p = limit({ signal: ac.signal })
  await sleep(20)
  ac.abort(new Error('enough'))
  await t.rejects(p, { message: 'enough' })
  await sleep(5)
  process.off('warning', onWarning)
  t.same(warnings.filter(n => n === 'TimeoutOverflowWarning'), [])
})

t.test('RateLimit.from(limit) attaches to the limiter itself', async t => {
  const limit = RateLimit(2)
  const other = RateLimit.from(limit)
  t.equal(other.rps, 2)
  t.equal(other.buffer, limit.buffer)
})

// Signals that are not this realm's AbortSignal but look like one.
function fake ({ addThrows = false, removeThrows = false } = {}) {
  const listeners = []
  return {
    aborted: false,
    reason: undefined,
    addEventListener (type, fn) {
      if (addThrows) throw new Error('addEventListener throws')
      listeners.push(fn)
    },
    removeEventListener () {
      if (removeThrows) throw new Error('removeEventListener throws')
    },
    abort (reason) {
      this.aborted = true
      this.reason = reason
      for (const fn of listeners) fn()
    }
  }
}

t.test('a foreign signal\'s code runs only on the caller\'s stack, never from a timer', async t => {
  const uncaught = []
  const onUncaught = err => uncaught.push(err)
  process.prependListener('uncaughtException', onUncaught)
  // Its removeEventListener throws: the library never calls it later (from
  // a timer, where the throw was an uncaught exception).
  const m = new Mutex()
  await m.lockAsync()
  const first = m.lockAsync()
  t.equal(await m.lockAsync({ timeout: 5, signal: fake({ removeThrows: true }) }), false, 'timed out')
  const limit = RateLimit(1, { timeUnit: 20 })
  await limit()
  t.ok(await limit({ signal: fake({ removeThrows: true }) }) > 0)
  // It aborts: the waits it guards end with its reason.
  const s = fake()
  const flag = new AtomicFlag()
  const waiting = flag.waitAsync(false, { signal: s })
  const queued = m.lockAsync({ signal: s })
  const latch = new Latch(1).waitAsync({ signal: s })
  const i32 = new Int32Array(new SharedArrayBuffer(4))
  const atomics = sabsync.waitAsync(i32, 0, 0, Infinity, { signal: s })
  s.abort(new Error('fake abort'))
  for (const p of [waiting, queued, latch, atomics.value]) await t.rejects(p, { message: 'fake abort' })
  // Its addEventListener throws: the call throws (or rejects), nothing waits.
  t.throws(() => sabsync.waitAsync(i32, 0, 0, Infinity, { signal: fake({ addThrows: true }) }), { message: 'addEventListener throws' })
  t.throws(() => new Latch(1).waitAsync({ signal: fake({ addThrows: true }) }), { message: 'addEventListener throws' })
  t.equal(sabsync.waiters(i32, 0), 0)
  m.unlock()
  t.equal(await first, true)
  m.unlock()
  await sleep(30)
  process.off('uncaughtException', onUncaught)
  t.same(uncaught, [])
})

t.test('a Sema whose memory was overwritten throws SabsyncError ERR_SABSYNC_BAD_MEMORY', async t => {
  const s = new Sema(2)
  new Int32Array(s.buffer, s.byteOffset, 8).fill(-1)
  const err = t.throws(() => s.tryAcquire())
  t.ok(err instanceof SabsyncError, 'a SabsyncError')
  t.equal(err.code, 'ERR_SABSYNC_BAD_MEMORY')
  t.throws(() => s.acquireSync(0), { code: 'ERR_SABSYNC_BAD_MEMORY', name: 'SabsyncError' })
  t.throws(() => s.nrWaiting(), { code: 'ERR_SABSYNC_BAD_MEMORY', name: 'SabsyncError' })
})
