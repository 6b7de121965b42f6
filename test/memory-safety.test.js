'use strict'
// Shared memory is writable by every thread: whatever is written there, the
// addon must not read or write outside the object, hand out a token that
// does not exist, crash, or stay wedged once the bytes are put back. One
// test per way this was seen to fail; test/scribble.test.js fuzzes the
// whole of each object's memory.
const t = require('tap')
const path = require('path')
const { Worker } = require('worker_threads')
const sabsync = require('..')
const native = require('../lib/native')
const { Sema, RateLimit, SabsyncError } = sabsync
const { fixture, exited, until } = require('./helpers')

const GUARD = 64 // bytes of guard on each side of the object
const PATTERN = 0xA5

// A buffer with the object's bytes between two guards of PATTERN.
function guarded (bytes) {
  const buffer = new SharedArrayBuffer(GUARD + bytes + GUARD)
  const u8 = new Uint8Array(buffer)
  u8.fill(PATTERN, 0, GUARD)
  u8.fill(PATTERN, GUARD + bytes)
  return { buffer, byteOffset: GUARD, intact: () => u8.subarray(0, GUARD).every(b => b === PATTERN) && u8.subarray(GUARD + bytes).every(b => b === PATTERN) }
}

function flipper (buffer, byteOffset, words, nr, seed = 1) {
  const control = new Int32Array(new SharedArrayBuffer(8)) // [stop, flips so far]
  const w = new Worker(path.join(__dirname, 'fixtures', 'scribble-flipper.js'), {
    workerData: { buffer, byteOffset, words, nr, control, flips: 256, hold: 0, seed }
  })
  const result = new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
  return {
    stop: () => { Atomics.store(control, 0, 1); return result },
    flips: () => Atomics.load(control, 1),
    worker: w
  }
}

t.test('a pooled slot flipped under tryAcquire/release never becomes a token (grant re-read the ring)', async t => {
  const nr = 2
  const g = guarded(Sema.byteLengthFor(nr))
  const s = new Sema(nr, { buffer: g.buffer, byteOffset: g.byteOffset })
  const RING = 8 // the ring's first word (src/core/sema.c)
  const f = flipper(g.buffer, g.byteOffset, [RING, RING + 1], nr)
  await until(() => f.flips() > 0, 60000, 'the flipper to start')
  const seen = new Set()
  let errors = 0
  // At least 200,000 rounds, and on until the flipper has flipped 200,000
  // times alongside (on a loaded machine it may get little CPU).
  for (let i = 0; i < 200000 || (f.flips() < 200000 && i < 2e7); i++) {
    let tok
    try {
      tok = s.tryAcquire()
    } catch (err) {
      if (!(err instanceof SabsyncError)) throw err
      errors++
      continue
    }
    if (tok === undefined) continue
    seen.add(tok)
    try { s.release(tok) } catch (err) { if (!(err instanceof SabsyncError)) throw err }
  }
  const { flips } = await f.stop()
  t.ok(flips > 0, `the flipper flipped ${flips} times`)
  t.same([...seen].filter(x => !(x >= 0 && x < nr)), [], 'no token outside 0 … nr-1')
  t.ok(g.intact(), 'guard bytes intact')
  t.comment(`${errors} ERR_SABSYNC_BAD_MEMORY answers, tokens seen: ${[...seen].sort()}`)
})

// Resolves with what `p` resolves to, or `what` after `ms` (a hang guard
// that does not keep the process alive).
function within (p, ms, what) {
  let timer
  const guard = new Promise(resolve => { timer = setTimeout(resolve, ms, what); timer.unref() })
  return Promise.race([p, guard]).finally(() => clearTimeout(timer))
}

// A worker blocked in acquireSync() without a timeout while another thread
// calls notify() in a loop: `raw` notifies the waiters' own key through the
// raw binding (wakes that carry no token, see src/napi/sema.c), otherwise
// the public notify() on the Sema's first word (which must not reach them).
async function terminateWhileHammered (t, raw) {
  const s = new Sema(1)
  const held = s.tryAcquire()
  t.equal(held, 0)
  const blocked = fixture('memory-safety/blocked-acquirer', { buffer: s.buffer, byteOffset: s.byteOffset })
  await new Promise(resolve => blocked.once('message', resolve))
  await until(() => s.nrWaiting() === 1, 60000, 'the worker queued')
  const control = new Int32Array(new SharedArrayBuffer(4))
  const hammer = fixture('memory-safety/notify-hammer', { buffer: s.buffer, byteOffset: s.byteOffset, control, raw })
  const hammered = new Promise(resolve => hammer.on('message', m => { if (m !== 'hammering') resolve(m) }))
  await new Promise(resolve => hammer.once('message', resolve)) // 'hammering'
  if (raw) await until(() => s.nrWaiting() === 1, 60000, 'the acquirer to be queued (it requeues after each wake)')
  const code = await within(blocked.terminate(), 20000, 'still running after 20 s')
  Atomics.store(control, 0, 1)
  const { n, woken } = await hammered
  t.ok(n > 0, `notify() ran all along (${n} calls)`)
  if (raw) t.ok(woken > 0, `the raw notifies woke the acquirer ${woken} times`)
  else t.equal(woken, 0, 'notify() on the first word never woke the acquirer')
  t.equal(code, 1, 'terminate() finished')
  t.equal(s.nrWaiting(), 0, 'the terminated waiter left the queue')
  s.release(held)
  t.equal(s.tryAcquire(), 0, 'the token is still there')
  await exited(hammer)
}

t.test('a worker in acquireSync() is terminated even while notify() hammers the Sema\'s first word', t => terminateWhileHammered(t, false))
t.test('a worker in acquireSync() is terminated even while wakes without a token keep coming', t => terminateWhileHammered(t, true))

t.test('a plain wait on a Sema\'s first word is not served by release() (no token lost)', async t => {
  const s = new Sema(2)
  const i32 = new Int32Array(s.buffer, s.byteOffset, 1)
  const a = s.tryAcquire()
  const b = s.tryAcquire()
  const plain = sabsync.waitAsync(i32, 0, Atomics.load(i32, 0), 60000)
  t.equal(plain.async, true, 'the plain waiter queued')
  t.equal(sabsync.waiters(i32, 0), 1)
  t.equal(s.nrWaiting(), 0, 'it is not an acquirer')
  s.release(a)
  s.release(b)
  t.equal(sabsync.waiters(i32, 0), 1, 'release() left the plain waiter alone')
  const x = s.tryAcquire()
  const y = s.tryAcquire()
  t.same([x, y].sort(), [0, 1], 'both tokens are still in the pool')
  s.release(x)
  s.release(y)
  t.equal(sabsync.notify(i32, 0), 1, 'notify() still wakes the plain waiter')
  t.equal(await plain.value, 'ok')
})

t.test('a plain blocking wait on a Sema\'s first word is not served by release() either', async t => {
  const s = new Sema(1)
  const tok = s.tryAcquire()
  const w = fixture('memory-safety/plain-waiter', { buffer: s.buffer, byteOffset: s.byteOffset })
  const i32 = new Int32Array(s.buffer, s.byteOffset, 1)
  await until(() => sabsync.waiters(i32, 0) === 1, 60000, 'the worker queued')
  s.release(tok)
  t.equal(s.tryAcquire(), 0, 'the token went back to the pool')
  s.release(0)
  t.equal(sabsync.notify(i32, 0), 1)
  t.equal(await new Promise(resolve => w.once('message', resolve)), 'ok')
  await exited(w)
})

t.test('a RateLimit whose memory was broken once works again once it is repaired', async t => {
  const limit = RateLimit(5, { timeUnit: 50 })
  const i32 = new Int32Array(limit.buffer, limit.byteOffset, 8)
  const W_HEAD = 3 // src/core/rate.c
  const good = Atomics.load(i32, W_HEAD)
  Atomics.store(i32, W_HEAD, 1000) // beyond the ring
  await t.rejects(limit(), { code: 'ERR_SABSYNC_BAD_MEMORY' })
  t.throws(() => limit.sync(10), { code: 'ERR_SABSYNC_BAD_MEMORY' })
  Atomics.store(i32, W_HEAD, good)
  const first = await within(limit(), 20000, 'wedged')
  t.type(first, 'number', 'limit() grants again')
  t.type(limit.sync(20000), 'number', 'limit.sync() grants again')
  t.equal(limit.nrWaiting(), 0)
})

t.test('the binding checks the type of every external it is handed', async t => {
  const s = new Sema(1)
  const view = native.semaView(new Int32Array(s.buffer, s.byteOffset, Sema.byteLengthFor(1) / 4))
  t.throws(() => native.cancel(view, new Error('x')), TypeError, 'a Sema view is not a wait handle')
  t.throws(() => native.cancel({}, new Error('x')), TypeError)
  const ta = new Int32Array(new SharedArrayBuffer(4))
  const [promise, handle] = native.waitAsync(ta, 0, 0, 60000, 2)
  t.throws(() => native.semaTry(handle), TypeError, 'a wait handle is not a Sema view')
  t.throws(() => native.semaRelease(handle, 0), TypeError)
  t.equal(native.cancel(handle, new Error('gone')), true, 'a wait handle still cancels')
  await t.rejects(promise, { message: 'gone' })
  t.equal(native.semaTry(view), native.constants.OK, 'a Sema view still works')
  t.equal(native.out[0], 0, 'and its token is in out[0]')
})
