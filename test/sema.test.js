'use strict'
// Sema: a token semaphore shared by workers and the main thread, with
// async-sema's meanings.
const t = require('tap')
const sabsync = require('..')
const { Sema } = sabsync
const { until, fixture, fixtureSource, exited, child } = require('./helpers')

const message = w => new Promise(resolve => w.once('message', resolve))

// ---- async-sema's own test suite, run against Sema (jest's calls as tap's)

t.test('async-sema: nrWaiting() is sane', async t => {
  const s = new Sema(1)
  await s.acquire()
  t.equal(s.nrWaiting(), 0)
  s.acquire().catch(t.fail)
  t.equal(s.nrWaiting(), 1)
  s.release()
  t.equal(s.nrWaiting(), 0)
  s.release()
  t.equal(s.nrWaiting(), 0)
})

t.test('async-sema: nr of available semas seems correct', async t => {
  const s = new Sema(3)
  await s.acquire()
  t.equal(s.nrWaiting(), 0)
  await s.acquire()
  t.equal(s.nrWaiting(), 0)
  await s.acquire()
  t.equal(s.nrWaiting(), 0)
})

t.test('async-sema: tryAcquire returns undefined', async t => {
  const s = new Sema(2)
  await s.acquire()
  t.not(s.tryAcquire(), undefined)
  t.equal(s.tryAcquire(), undefined)
  s.release()
  t.not(s.tryAcquire(), undefined)
  t.equal(s.tryAcquire(), undefined)
})

t.test('async-sema: pausing works', async t => {
  let paused = 0
  let resumed = 0
  const s = new Sema(5, { pauseFn: () => paused++, resumeFn: () => resumed++ })
  for (let i = 0; i < 5; i++) s.acquire().catch(t.fail)
  t.equal(paused, 0)
  t.equal(resumed, 0)
  s.acquire().catch(t.fail)
  t.equal(paused, 1)
  s.release()
  s.release()
  t.equal(resumed, 1)
})

t.test('async-sema: initFn is called properly', async t => {
  let calls = 0
  const s = new Sema(3, { initFn: () => { calls++; return 't' } })
  t.ok(s instanceof Sema)
  t.equal(calls, 3)
  t.equal(await s.acquire(), 't')
  s.release('t')
})

t.test('async-sema: tokens are returned properly', async t => {
  let nrTokens = 0
  const s = new Sema(3, { initFn: () => nrTokens++ })
  const tokens = await Promise.all([s.acquire(), s.acquire(), s.acquire()])
  t.same(tokens.sort(), [0, 1, 2])
})

t.test('async-sema style: acquire / try { } finally { release() }', async t => {
  const s = new Sema(4, { capacity: 100 })
  let running = 0
  let most = 0
  let done = 0
  async function task (i) {
    await s.acquire()
    try {
      running++
      most = Math.max(most, running)
      await new Promise(resolve => setTimeout(resolve, i % 3))
      running--
      done++
    } finally {
      s.release()
    }
  }
  await Promise.all(Array.from({ length: 100 }, (_, i) => task(i)))
  t.equal(done, 100)
  t.equal(most, 4, 'never more than nr at once, and nr reached')
  t.equal(s.nrWaiting(), 0)
  t.same((await s.drain()).sort(), [0, 1, 2, 3], 'drain: every token back')
  t.equal(s.tryAcquire(), undefined)
})

// ---- across threads

t.test('never more than nr holders across workers and the main thread', async t => {
  const nr = 3
  const s = new Sema(nr)
  const counters = new SharedArrayBuffer(16)
  const c = new Int32Array(counters)
  const iters = 1500
  const ws = []
  for (let i = 0; i < 4; i++) ws.push(fixture('sema/holder', { handle: { buffer: s.buffer, byteOffset: s.byteOffset }, counters, iters }))
  let mine = 0
  for (let i = 0; i < 300; i++) {
    const tok = await s.acquire()
    const n = Atomics.add(c, 0, 1) + 1
    if (n > Atomics.load(c, 1)) Atomics.store(c, 1, n)
    await null
    Atomics.sub(c, 0, 1)
    mine++
    s.release(tok)
  }
  await Promise.all(ws.map(exited))
  t.ok(Atomics.load(c, 1) <= nr, `most holders at once: ${Atomics.load(c, 1)}`)
  t.ok(Atomics.load(c, 2) >= 4 * iters * 3 / 4, 'every blocking acquire served')
  t.equal(mine, 300, 'every async acquire served')
  t.equal(s.nrWaiting(), 0)
  t.same((await s.drain({ timeout: 5000 })).sort(), [0, 1, 2], 'no token lost')
})

t.test('nrWaiting() counts every thread, blocking and async', async t => {
  const s = new Sema(1)
  t.equal(s.tryAcquire(), 0)
  const ws = [fixture('sema/acquire-release', s), fixture('sema/acquire-release', s)]
  await until(() => s.nrWaiting() === 2)
  const p = s.acquire()
  t.equal(s.nrWaiting(), 3)
  s.release()
  await Promise.all(ws.map(exited))
  t.equal(await p, 0)
  t.equal(s.nrWaiting(), 0)
  s.release()
})

t.test('a released token goes to the longest waiter, whichever thread', async t => {
  for (const pattern of ['babab', 'aabba', 'bbaa']) {
    const s = new Sema(1)
    const log = new Int32Array(new SharedArrayBuffer(4 * (1 + pattern.length)))
    t.equal(s.tryAcquire(), 0)
    const ws = []
    const ps = []
    for (let id = 1; id <= pattern.length; id++) {
      if (pattern[id - 1] === 'b') {
        ws.push(fixture('sema/fifo-waiter', { s: { buffer: s.buffer, byteOffset: s.byteOffset }, log: log.buffer, id }))
      } else {
        ps.push(s.acquire().then(tok => {
          Atomics.store(log, 1 + Atomics.add(log, 0, 1), id)
          s.release(tok)
        }))
      }
      await until(() => s.nrWaiting() === id, 60000, `waiter ${id} queued`)
    }
    t.equal(s.tryAcquire(), undefined, 'no barging past the queue')
    s.release(0)
    await Promise.all([...ps, ...ws.map(exited)])
    t.same(Array.from(log.subarray(1)), pattern.split('').map((_, i) => i + 1), `FIFO for ${pattern}`)
    t.equal(s.nrWaiting(), 0)
  }
})

t.test('timeouts and aborts leave the queue clean and lose no token', async t => {
  const s = new Sema(1)
  t.equal(s.acquireSync(0), 0)
  t.equal(s.acquireSync(0), undefined)
  t.equal(s.acquireSync(15), undefined)
  t.equal(await s.acquire({ timeout: 15 }), undefined)
  t.equal(await s.acquire({ timeout: 0 }), undefined)
  t.equal(s.nrWaiting(), 0)
  const ac = new AbortController()
  const aborted = s.acquire({ signal: ac.signal })
  const later = s.acquire()
  t.equal(s.nrWaiting(), 2)
  const reason = new Error('stop')
  ac.abort(reason)
  await t.rejects(aborted, reason)
  t.equal(s.nrWaiting(), 1)
  await t.rejects(s.acquire({ signal: ac.signal }), reason, 'an aborted signal rejects at once')
  const w = fixture('sema/times-out', s)
  t.equal(await message(w), undefined, 'a worker times out too')
  await exited(w)
  t.equal(s.nrWaiting(), 1)
  s.release()
  t.equal(await later, 0, 'the token skipped the dead entries')
  s.release()
  t.equal(s.tryAcquire(), 0)
})

t.test('tokens of a terminated worker come back, marked recovered', async t => {
  const s = new Sema(2)
  const w = fixture('sema/holds-two-then-sleeps', s)
  t.same(await message(w), [0, 1])
  const waiting = s.acquire()
  t.equal(s.nrWaiting(), 1)
  await w.terminate()
  t.equal(await waiting, 0, 'the waiter got a token back')
  t.equal(s.recovered(), true, 'recovered: its holder died')
  t.equal(s.tryAcquire(), 1, 'and the next, without waiting')
  t.equal(s.recovered(1), true)
  s.release(1)
  t.equal(s.tryAcquire(), 1, 'slot 1 again (0 is still held)')
  t.equal(s.recovered(), false, 'the mark is reported once')
  s.release()
  s.release(0)

  // Nobody waiting at the death: the next caller reclaims.
  const w2 = fixture('sema/takes-two-and-ends', s)
  await message(w2)
  await exited(w2)
  t.same([s.tryAcquire(), s.tryAcquire()].sort(), [0, 1])
  t.ok(s.recovered(0) && s.recovered(1))
  t.throws(() => s.release(7), { code: 'ERR_SABSYNC_BAD_TOKEN' })
})

t.test('a worker terminated while it waits leaves the queue; a token handed to it goes on', async t => {
  const s = new Sema(1)
  for (let round = 0; round < 6; round++) {
    t.equal(s.tryAcquire(), 0)
    const dying = round % 2 ? fixture('sema/dies-waiting-sync', s) : fixture('sema/dies-waiting-async', s)
    await until(() => s.nrWaiting() === 1)
    const next = s.acquire()
    t.equal(s.nrWaiting(), 2)
    const term = dying.terminate()
    if (round % 3 === 0) await new Promise(resolve => setImmediate(resolve))
    s.release(0) // to the dying worker, or to `next` if it left already
    await term
    t.equal(await next, 0, `round ${round}: the token reached the next waiter`)
    t.equal(s.nrWaiting(), 0)
    s.release(0)
  }
})

t.test('initFn runs per thread and per slot; tokens are that thread\'s values', async t => {
  const made = []
  const s = new Sema(2, { initFn: slot => { made.push(slot); return { conn: 'main-' + slot } } })
  t.same(made, [0, 1])
  const first = await s.acquire()
  t.same(first, { conn: 'main-0' })
  const w = fixture('sema/init-fn', { buffer: s.buffer, byteOffset: s.byteOffset })
  t.same(await message(w), [[0, 1], 'worker-1'])
  await exited(w)
  t.throws(() => s.release({ conn: 'main-0' }), { code: 'ERR_SABSYNC_BAD_TOKEN' }, 'an equal object is not the token')
  s.release(first)
  t.throws(() => s.release(first), { code: 'ERR_SABSYNC_BAD_TOKEN', message: /token/ }, 'twice')
})

t.test('a token held by another thread cannot be released here', async t => {
  const s = new Sema(1)
  const w = fixture('sema/holds-until-told', s)
  t.equal(await message(w), 0)
  t.throws(() => s.release(0), { code: 'ERR_SABSYNC_BAD_TOKEN' })
  t.throws(() => s.release(), { code: 'ERR_SABSYNC_BAD_TOKEN', message: /holds no token/ })
  w.postMessage('go')
  await exited(w)
  t.equal(s.tryAcquire(), 0, 'the token was not lost')
})

t.test('pauseFn / resumeFn follow this thread\'s waiters and tokens freed anywhere', async t => {
  const events = []
  const s = new Sema(1, { pauseFn: () => events.push('pause'), resumeFn: () => events.push('resume') })
  const w = fixture('sema/pause-resume-holder', s)
  t.equal(await message(w), 'held')
  t.equal(await s.acquire({ timeout: 10 }), undefined)
  t.same(events, ['pause'], 'paused while it waited; no token free yet, so no resume')
  w.postMessage('release')
  t.equal(await message(w), 'released')
  await until(() => events.length === 2)
  t.same(events, ['pause', 'resume'], 'the worker\'s release refilled the pool: resumed')
  await exited(w)
  t.equal(s.tryAcquire(), 0)
  s.release()
})

t.test('bad input: errors name the argument; no change of capacity', async t => {
  t.throws(() => new Sema(0), { name: 'RangeError', message: /"nr"/ })
  t.throws(() => new Sema(1.5), { name: 'RangeError', message: /"nr"/ })
  t.throws(() => new Sema(-1), { name: 'RangeError', message: /"nr"/ })
  t.throws(() => new Sema('3'), { name: 'TypeError', message: /"nr"/ })
  t.throws(() => new Sema(), { name: 'TypeError', message: /"nr"/ })
  t.throws(() => new Sema(2 ** 30), { name: 'RangeError', message: /"nr"/ })
  t.throws(() => new Sema(2, 'x'), { name: 'TypeError', message: /"options"/ })
  t.throws(() => new Sema(2, { initFn: 1 }), { name: 'TypeError', message: /"options.initFn"/ })
  t.throws(() => new Sema(2, { pauseFn () {} }), { name: 'TypeError', message: /"options.resumeFn"/ })
  t.throws(() => new Sema(2, { resumeFn () {} }), { name: 'TypeError', message: /"options.pauseFn"/ })
  t.throws(() => new Sema(2, { capacity: 0 }), { name: 'RangeError', message: /"options.capacity"/ })
  t.throws(() => new Sema(2, { buffer: new ArrayBuffer(64) }), { name: 'TypeError', message: /"options.buffer"/ })
  t.throws(() => new Sema(2, { buffer: new SharedArrayBuffer(128), byteOffset: 4 }), { name: 'RangeError', message: /"options.byteOffset"/ })
  t.throws(() => new Sema(2, { buffer: new SharedArrayBuffer(16) }), { name: 'RangeError', message: /"options.byteOffset"/ })
  t.throws(() => Sema.byteLengthFor(0), { name: 'RangeError', message: /"nr"/ })
  t.throws(() => Sema.from(null), { name: 'TypeError', message: /"handle"/ })
  t.throws(() => Sema.from({ buffer: new SharedArrayBuffer(64), byteOffset: 0 }), { code: 'ERR_SABSYNC_BAD_MEMORY' })

  const s = new Sema(2)
  t.throws(() => s.release(), { code: 'ERR_SABSYNC_BAD_TOKEN' })
  t.throws(() => s.release(2), { code: 'ERR_SABSYNC_BAD_TOKEN', message: /"token"/ })
  t.throws(() => s.release('0'), { code: 'ERR_SABSYNC_BAD_TOKEN' })
  t.throws(() => s.release(1), { code: 'ERR_SABSYNC_BAD_TOKEN' }, 'a token that is not out')
  t.throws(() => s.acquireSync('1'), { name: 'TypeError', message: /"timeout"/ })
  await t.rejects(s.acquire({ timeout: 'x' }), { name: 'TypeError', message: /"options.timeout"/ })
  await t.rejects(s.acquire({ signal: {} }), { name: 'TypeError', message: /"options.signal"/ })
  await t.rejects(s.acquire(5), { name: 'TypeError', message: /"options"/ })
  t.same([s.tryAcquire(), s.tryAcquire(), s.tryAcquire()], [0, 1, undefined], 'capacity unchanged by the refusals')
})

t.test('a Sema travels by postMessage and lives at an offset of a bigger buffer', async t => {
  t.ok(Number.isInteger(Sema.byteLength) && Sema.byteLength % 8 === 0, 'static byteLength is a number of bytes')
  t.equal(Sema.byteLength, Sema.byteLengthFor(64), 'it holds 64 tokens')
  t.equal(new Sema(64, { buffer: new SharedArrayBuffer(Sema.byteLength) }).nr, 64)
  t.throws(() => new Sema(65, { buffer: new SharedArrayBuffer(Sema.byteLength) }), { name: 'RangeError' }, 'not 65')
  const buffer = new SharedArrayBuffer(8 + Sema.byteLengthFor(3) + 8)
  const s = new Sema(3, { buffer, byteOffset: 8 })
  t.same(Object.keys(s), ['buffer', 'byteOffset', 'byteLength'])
  t.equal(s.byteOffset, 8)
  t.equal(s.byteLength, Sema.byteLengthFor(3))
  t.equal(s.nr, 3)
  const w = fixture('sema/attach-by-message', null)
  w.postMessage(s)
  t.same(await message(w), [3, 0])
  await exited(w)
  t.same(new Int32Array(buffer, 0, 2), new Int32Array(2), 'the bytes before it are untouched')
})

// A Sema's size is read from its memory when it attaches: a write racing
// the attach that makes it up (with room for it in the buffer) would make
// the attached Sema span bytes past the one made, as test/scribble.js once
// saw. A posted Sema carries its byteLength, and from() holds the memory to it.
t.test('from() holds the memory to the handle\'s byteLength: a size written over is refused', async t => {
  const buffer = new SharedArrayBuffer(Sema.byteLengthFor(1) + 64)
  const s = new Sema(1, { buffer })
  const tail = new Uint8Array(buffer, s.byteLength)
  tail.fill(0xA5)
  const i32 = new Int32Array(buffer)
  const W_NR = 2
  Atomics.store(i32, W_NR, 2) // the size, made up
  const err = t.throws(() => Sema.from({ buffer: s.buffer, byteOffset: s.byteOffset, byteLength: s.byteLength }), { code: 'ERR_SABSYNC_BAD_MEMORY' })
  t.match(err.message, /holds a Sema of 2 tokens \(\d+ bytes\), the handle says 48 bytes/, 'the message says both sizes')
  t.throws(() => Sema.from({ buffer, byteOffset: 0, byteLength: 'big' }), { code: 'ERR_OUT_OF_RANGE', message: /"handle.byteLength"/ })
  // A bare { buffer, byteOffset } takes the memory's word for it, as documented.
  t.equal(Sema.from({ buffer, byteOffset: 0 }).nr, 2, 'a bare handle attaches by what the memory says')
  Atomics.store(i32, W_NR, 1)
  const again = Sema.from({ buffer: s.buffer, byteOffset: s.byteOffset, byteLength: s.byteLength })
  t.equal(again.tryAcquire(), 0)
  again.release(0)
  t.ok(tail.every(b => b === 0xA5), 'nothing written past the Sema')
})

t.test('process exit with an unref\'d worker parked in acquireSync does not hang', async t => {
  const r = await child(`
    const { Worker } = require('worker_threads')
    const s = new sabsync.Sema(1)
    s.tryAcquire()
    const w = new Worker(${JSON.stringify(fixtureSource('sema/parked-acquire'))}, { eval: true, workerData: s })
    w.unref()
    const poll = setInterval(() => { if (s.nrWaiting() === 1) { clearInterval(poll); console.log('parked') } }, 2)`)
  t.equal(r.code, 0, r.stderr)
  t.match(r.stdout, 'parked')
  t.comment(`exit took ${r.ms.toFixed(0)} ms`)
})
