'use strict'
// The threads tier on Windows, run by scripts/test-win32.sh under Wine with
// Node for Windows, from an app whose node_modules/sabsync is the packed
// tarball: loading, every primitive (Mutex, Sema, AtomicFlag, Once, Latch,
// CondVar, RWLock, Barrier, RateLimit, RateLimiter, locks) across threads, the
// waits (wait/notify, waitAsync), async delivery on the loop, and worker
// teardown (a holder terminated: ownerDied; a thread terminated while
// parked). node:test, not
// tap: Node for Windows runs it with nothing installed. Also runs on Linux
// against this checkout (`node test/win32/threads.js`), which is how it is
// checked before it goes to Wine.
const test = require('node:test')
const assert = require('node:assert')
const path = require('path')
const { Worker } = require('worker_threads')

// Under scripts/test-win32.sh: the installed package; else this checkout.
const entry = process.env.SABSYNC_ENTRY || path.join(__dirname, '..', '..')
const sabsync = require(entry)

// A worker running `body` (a function's source) with `sabsync` and
// `workerData` in scope; resolves with its exit code.
function worker (body, workerData) {
  const w = new Worker(`
    const sabsync = require(${JSON.stringify(require.resolve(entry))})
    const { workerData, parentPort } = require('worker_threads')
    ;(${body})(workerData, parentPort)`, { eval: true, workerData })
  w.exited = new Promise((resolve, reject) => { w.on('exit', resolve); w.on('error', reject) })
  return w
}

const message = w => new Promise(resolve => w.once('message', resolve))

test('require loads the win32-x64 prebuilt binary', () => {
  const pkg = path.dirname(require.resolve(entry + '/package.json'))
  const found = require(require.resolve('node-gyp-build', { paths: [pkg] })).resolve(pkg)
  if (process.platform === 'win32') {
    assert.match(found, /[\\/]prebuilds[\\/]win32-x64[\\/]sabsync\.node$/, 'node-gyp-build picks prebuilds/win32-x64')
  }
  assert.strictEqual(typeof sabsync.Mutex, 'function')
  const ta = new Int32Array(new SharedArrayBuffer(8))
  assert.strictEqual(sabsync.wait(ta, 0, 1), 'not-equal')
  assert.strictEqual(sabsync.wait(ta, 0, 0, 20), 'timed-out')
})

test('4 workers x 10,000 plain increments under a Mutex: exact', async () => {
  const m = new sabsync.Mutex()
  const cell = new Int32Array(new SharedArrayBuffer(4))
  const ws = []
  for (let i = 0; i < 4; i++) {
    ws.push(worker(function ({ m, cell }) {
      const mu = sabsync.Mutex.from(m)
      for (let k = 0; k < 10000; k++) {
        mu.lock()
        cell[0] = cell[0] + 1 // plain read and write: only the lock keeps them apart
        mu.unlock()
      }
    }, { m, cell }))
  }
  const codes = await Promise.all(ws.map(w => w.exited))
  assert.deepStrictEqual(codes, [0, 0, 0, 0])
  assert.strictEqual(cell[0], 40000)
  assert.strictEqual(m.isLocked, false)
})

test('Sema(2): a third acquirer waits until a token comes back', async () => {
  const s = new sabsync.Sema(2)
  const a = s.tryAcquire()
  const b = s.tryAcquire()
  assert.deepStrictEqual([a, b].sort(), [0, 1], 'tokens are the slots 0 and 1')
  assert.strictEqual(s.tryAcquire(), undefined, 'no third token')
  const w = worker(function ({ s }, port) {
    const sema = sabsync.Sema.from(s)
    port.postMessage(['timed', sema.acquireSync(50)])
    port.postMessage(['got', sema.acquireSync(30000)])
  }, { s })
  assert.deepStrictEqual(await message(w), ['timed', undefined], 'a worker\'s acquireSync times out while both are out')
  while (s.nrWaiting() === 0) await new Promise(resolve => setTimeout(resolve, 1))
  s.release(a)
  assert.deepStrictEqual(await message(w), ['got', a], 'and gets the token given back')
  assert.strictEqual(await w.exited, 0)
  assert.strictEqual(s.tryAcquire(), a, 'the token the ended worker held came back')
  s.release(a)
  s.release(b)
})

test('Sema(2): never more than 2 holders among 4 workers and the main thread', async () => {
  const s = new sabsync.Sema(2)
  const counts = new Int32Array(new SharedArrayBuffer(12)) // [in, max, acquisitions]
  const ws = []
  for (let i = 0; i < 4; i++) {
    ws.push(worker(function ({ s, counts }) {
      const sema = sabsync.Sema.from(s)
      for (let k = 0; k < 500; k++) {
        const token = sema.acquireSync()
        const now = Atomics.add(counts, 0, 1) + 1
        for (let max = Atomics.load(counts, 1); now > max; max = Atomics.load(counts, 1)) {
          if (Atomics.compareExchange(counts, 1, max, now) === max) break
        }
        Atomics.add(counts, 2, 1)
        for (let spin = 0; spin < 200; spin++) Atomics.load(counts, 0)
        Atomics.sub(counts, 0, 1)
        sema.release(token)
      }
    }, { s, counts }))
  }
  // The main thread takes its share asynchronously meanwhile.
  for (let k = 0; k < 50; k++) {
    const token = await s.acquire()
    const now = Atomics.add(counts, 0, 1) + 1
    if (now > Atomics.load(counts, 1)) Atomics.store(counts, 1, now)
    Atomics.add(counts, 2, 1)
    await new Promise(resolve => setImmediate(resolve))
    Atomics.sub(counts, 0, 1)
    s.release(token)
  }
  assert.deepStrictEqual(await Promise.all(ws.map(w => w.exited)), [0, 0, 0, 0])
  assert.strictEqual(counts[2], 4 * 500 + 50, 'every acquisition counted')
  assert.ok(counts[1] >= 1 && counts[1] <= 2, `at most 2 holders at once (saw ${counts[1]})`)
  assert.strictEqual(s.nrWaiting(), 0)
})

test('waitAsync resolves on the loop when a worker notifies; counts exact', async () => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const r1 = sabsync.waitAsync(ta, 0, 0)
  const r2 = sabsync.waitAsync(ta, 0, 0, 30000)
  assert.strictEqual(r1.async, true)
  assert.strictEqual(sabsync.waiters(ta, 0), 2)
  const w = worker(function ({ ta }, port) {
    Atomics.store(ta, 0, 1)
    port.postMessage(sabsync.notify(ta, 0, 1)) // wakes the oldest only
  }, { ta })
  assert.strictEqual(await message(w), 1, 'notify(…, 1) woke one')
  assert.strictEqual(await r1.value, 'ok', 'the oldest waiter, on the main loop')
  let settled = false
  r2.value.then(() => { settled = true })
  await new Promise(resolve => setTimeout(resolve, 50))
  assert.strictEqual(settled, false, 'the second is still waiting')
  assert.strictEqual(sabsync.notify(ta, 0), 1)
  assert.strictEqual(await r2.value, 'ok')
  await w.exited
  const t0 = process.hrtime.bigint()
  const r3 = sabsync.waitAsync(ta, 0, 1, 100)
  assert.strictEqual(await r3.value, 'timed-out')
  assert.ok(process.hrtime.bigint() - t0 >= 100000000n, 'the timeout is never early')
})

test('a blocking wait in a worker woken by the main thread', async () => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const w = worker(function ({ ta }, port) {
    port.postMessage('waiting')
    port.postMessage(sabsync.wait(ta, 0, 0, 30000))
  }, { ta })
  assert.strictEqual(await message(w), 'waiting')
  while (sabsync.waiters(ta, 0) === 0) await new Promise(resolve => setTimeout(resolve, 1))
  assert.strictEqual(sabsync.notify(ta, 0), 1)
  assert.strictEqual(await message(w), 'ok')
  assert.strictEqual(await w.exited, 0)
})

test('a worker terminated while holding a Mutex: the next holder sees ownerDied', async () => {
  const m = new sabsync.Mutex()
  const w = worker(function ({ m }, port) {
    sabsync.Mutex.from(m).lock()
    port.postMessage('held')
    for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000)
  }, { m })
  assert.strictEqual(await message(w), 'held')
  const waiting = m.lockAsync({ timeout: 20000 })
  await w.terminate()
  assert.strictEqual(await waiting, true, 'the waiter gets the lock')
  assert.strictEqual(m.ownerDied, true, 'and is told its owner died')
  m.unlock()
  assert.strictEqual(m.ownerDied, false)
  assert.strictEqual(m.tryLock(), true)
  m.unlock()
})

test('a worker terminated while parked in lock() ends promptly, and nothing stays queued', async () => {
  const m = new sabsync.Mutex()
  m.lock()
  const w = worker(function ({ m }, port) {
    port.postMessage('go')
    sabsync.Mutex.from(m).lock()
  }, { m })
  assert.strictEqual(await message(w), 'go')
  await new Promise(resolve => setTimeout(resolve, 100))
  const t0 = Date.now()
  await w.terminate()
  const ms = Date.now() - t0
  assert.ok(ms < 5000, `terminate() returned in ${ms} ms`)
  m.unlock()
  assert.strictEqual(m.tryLock(), true, 'the lock is free for the next')
  m.unlock()
})

// The other primitives, each across a worker: their waits and wakes are
// the same parker's, their state the same shared words.
test('AtomicFlag, Once, Latch: a worker sets, runs once and counts down; the main thread sees it', async () => {
  const flag = new sabsync.AtomicFlag()
  const once = new sabsync.Once()
  const latch = new sabsync.Latch(2)
  const ran = new Int32Array(new SharedArrayBuffer(4))
  const w = worker(function ({ flag, once, latch, ran }) {
    const f = sabsync.AtomicFlag.from(flag)
    const o = sabsync.Once.from(once)
    const l = sabsync.Latch.from(latch)
    o.run(() => Atomics.add(ran, 0, 1))
    f.testAndSet()
    f.notifyAll()
    l.countDown()
    l.countDown()
  }, { flag, once, latch, ran })
  assert.strictEqual(await flag.waitAsync(false, { timeout: 30000 }), true, 'the flag was set')
  assert.strictEqual(await latch.waitAsync({ timeout: 30000 }), true, 'the latch opened')
  once.run(() => Atomics.add(ran, 0, 1))
  assert.strictEqual(Atomics.load(ran, 0), 1, 'the Once ran once, in the worker')
  assert.strictEqual(await w.exited, 0)
})

test('CondVar with a Mutex: a worker waits for a predicate the main thread makes true', async () => {
  const m = new sabsync.Mutex()
  const cv = new sabsync.CondVar()
  const cell = new Int32Array(new SharedArrayBuffer(4))
  const w = worker(function ({ m, cv, cell }, port) {
    const mu = sabsync.Mutex.from(m)
    const c = sabsync.CondVar.from(cv)
    mu.lock()
    port.postMessage('waiting')
    while (cell[0] === 0) c.wait(mu, 30000)
    port.postMessage(cell[0])
    mu.unlock()
  }, { m, cv, cell })
  assert.strictEqual(await message(w), 'waiting')
  assert.strictEqual(await m.lockAsync({ timeout: 30000 }), true, 'the worker let go of the mutex while it waits')
  cell[0] = 42
  cv.notifyAll()
  m.unlock()
  assert.strictEqual(await message(w), 42)
  assert.strictEqual(await w.exited, 0)
})

test('RWLock: readers share it, a writer waits for them; Barrier: the parties leave together', async () => {
  const rw = new sabsync.RWLock()
  const b = new sabsync.Barrier(3)
  assert.strictEqual(rw.tryReadLock(), true)
  const w = worker(function ({ rw, b }, port) {
    const l = sabsync.RWLock.from(rw)
    const bar = sabsync.Barrier.from(b)
    port.postMessage(['read', l.tryReadLock()])
    l.readUnlock()
    port.postMessage(['write', l.writeLock(30000)])
    l.writeUnlock()
    port.postMessage(['barrier', bar.wait(30000) !== undefined])
  }, { rw, b })
  assert.deepStrictEqual(await message(w), ['read', true], 'a second reader gets in beside the first')
  await new Promise(resolve => setTimeout(resolve, 50))
  rw.readUnlock()
  assert.deepStrictEqual(await message(w), ['write', true], 'the writer gets it once the readers left')
  const mine = b.waitAsync({ timeout: 30000 })
  let left = false
  mine.then(() => { left = true })
  await new Promise(resolve => setTimeout(resolve, 50))
  assert.strictEqual(left, false, 'two of three parties: the barrier holds')
  const w2 = worker(function ({ b }) { sabsync.Barrier.from(b).wait(30000) }, { b })
  assert.deepStrictEqual(await message(w), ['barrier', true])
  assert.notStrictEqual(await mine, undefined, 'the main thread left with the others')
  assert.deepStrictEqual(await Promise.all([w.exited, w2.exited]), [0, 0])
})

test('RateLimit and RateLimiter: shared between threads, the bounds hold', async () => {
  const limit = sabsync.RateLimit(5, { timeUnit: 60000 })
  const limiter = new sabsync.RateLimiter({ limit: 3, window: 60000, burst: 3 })
  const w = worker(function ({ limitHandle, limiterHandle }, port) {
    const lim = sabsync.RateLimit.from(limitHandle)
    const rl = sabsync.RateLimiter.from(limiterHandle)
    let allowed = 0
    for (let i = 0; i < 5; i++) if (rl.consume('client').allowed) allowed++
    Promise.all([lim(), lim(), lim()]).then(() => port.postMessage(allowed))
  }, { limitHandle: limit.handle, limiterHandle: { buffer: limiter.buffer, byteOffset: limiter.byteOffset } })
  const inWorker = await message(w)
  assert.strictEqual(inWorker, 3, 'the worker got the key\'s burst of 3')
  assert.strictEqual(limiter.consume('client').allowed, false, 'and the main thread none more for that key')
  await limit()
  await limit()
  assert.strictEqual(await limit({ timeout: 50 }), undefined, 'the sixth grant of 5 per minute waits past its timeout')
  assert.strictEqual(await w.exited, 0)
})

test('locks (Web Locks): workers hand off one name in order, a terminated holder lets go, steal robs a worker', async () => {
  const sab = new SharedArrayBuffer(8)
  const c = new Int32Array(sab)
  const ws = [0, 1, 2].map(() => worker(function ({ sab }, port) {
    const c = new Int32Array(sab)
    ;(async () => {
      for (let i = 0; i < 500; i++) {
        await sabsync.locks.request('win-handoff', async () => {
          if (Atomics.add(c, 1, 1) !== 0) Atomics.add(c, 1, 1000)
          const v = c[0]
          await null
          c[0] = v + 1
          Atomics.sub(c, 1, 1)
        })
      }
      port.postMessage('done')
    })()
  }, { sab }))
  await Promise.all(ws.map(w => message(w)))
  assert.deepStrictEqual([c[0], c[1]], [1500, 0], 'every increment, never two inside')

  const holder = worker(function (_, port) {
    sabsync.locks.request('win-held', () => { port.postMessage('holding'); return new Promise(() => {}) })
      .catch(e => port.postMessage(e.name))
    setInterval(() => {}, 1000)
  }, {})
  assert.strictEqual(await message(holder), 'holding')
  const robbed = message(holder)
  assert.strictEqual(await sabsync.locks.request('win-held', { steal: true }, l => l.mode), 'exclusive')
  assert.strictEqual(await robbed, 'AbortError', 'the robbed worker was told')
  const held = worker(function (_, port) {
    sabsync.locks.request('win-held', () => { port.postMessage('holding'); return new Promise(() => {}) })
    setInterval(() => {}, 1000)
  }, {})
  assert.strictEqual(await message(held), 'holding')
  const next = sabsync.locks.request('win-held', l => l.name)
  await held.terminate()
  assert.strictEqual(await next, 'win-held', 'a terminated holder\'s lock goes to the next request')
  await holder.terminate()
  const { held: h, pending } = await sabsync.locks.query()
  assert.deepStrictEqual([h.length, pending.length], [0, 0])
})

test('openShared is refused: ERR_SABSYNC_UNSUPPORTED, spaces need Linux', { skip: process.platform === 'linux' && 'Linux has spaces' }, () => {
  assert.throws(() => sabsync.openShared('sabsync-win32-test', { size: 1 << 20 }), err => {
    assert.strictEqual(err.code, 'ERR_SABSYNC_UNSUPPORTED')
    assert.ok(err instanceof sabsync.SabsyncError)
    assert.match(err.message, /need Linux/)
    return true
  })
})
