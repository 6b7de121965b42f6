'use strict'
// The Sema's JS fast path (lib/sema.js; the protocol is the table atop
// src/core/sema.c): with nobody waiting, tryAcquire / acquire / release
// take and give a slot by one CAS of its holder word, with no native call.
// Each test here fails if the fast path is removed (the native grant count
// moves) or broken (a waiter stranded or overtaken, a dead thread's slot
// lost, a mark reported wrong, a count off).
//
// The native side counts its grants in the stamp word (word 4), and every
// native grant or hand-over writes the slot's stamp; the fast path writes
// neither. So "the stamp word did not move" means "no native grant".
const t = require('tap')
const path = require('path')
const { Worker } = require('worker_threads')
const sabsync = require('..')
const native = require('../lib/native')
const { Sema, SabsyncError } = sabsync
const { until, exited, sleep } = require('./helpers')

const W_STAMP = 4
const HEADER = native.constants.SEMA_HEADER_BYTES / 4
const FREE_RECOVERED = native.constants.SEMA_HELD_RECOVERED
const message = w => new Promise(resolve => w.once('message', resolve))
const fixture = path.join(__dirname, 'fixtures', 'sema-fast-worker.js')
const words = s => new Int32Array(s.buffer, s.byteOffset, Sema.byteLengthFor(s.nr) / 4)
const grants = s => Atomics.load(words(s), W_STAMP)
const holder = (s, slot) => Atomics.load(words(s), HEADER + s.nr + slot)

function start (s, mode) {
  const w = new Worker(fixture, { workerData: { sema: { buffer: s.buffer, byteOffset: s.byteOffset }, mode } })
  // Listen at once: exited(w) after the worker has gone would wait forever
  // (seen under ASan: 'take-all-and-exit' ended before the test listened).
  w.exited = new Promise(resolve => w.once('exit', resolve))
  return w
}

t.test('with nobody waiting, tryAcquire, acquire, acquireSync and release make no native grant', async t => {
  const s = new Sema(3)
  const before = grants(s)
  for (let i = 0; i < 1000; i++) {
    const a = s.tryAcquire()
    const b = s.acquireSync()
    const c = await s.acquire()
    t.not(a, undefined)
    if (new Set([a, b, c]).size !== 3) t.fail(`three distinct tokens, got ${a}, ${b}, ${c}`)
    s.release(b)
    s.release()
    s.release(a)
  }
  t.equal(grants(s), before, 'the native side granted nothing: every take was the fast path')
  t.equal(s.nrWaiting(), 0)
  // The holder word names this thread while it holds a slot, 0 after.
  const tok = s.tryAcquire()
  t.equal(holder(s, tok), native.envId(), 'the holder word is this thread\'s owner id')
  s.release(tok)
  t.equal(holder(s, tok), 0, 'and 0 once given back')
  t.same([s.tryAcquire(), s.tryAcquire(), s.tryAcquire()].sort(), [0, 1, 2])
  t.equal(s.tryAcquire(), undefined, 'never more than nr')
})

t.test('a waiter is never overtaken: a release with a waiter queued goes native and hands over', async t => {
  const s = new Sema(2)
  const a = s.tryAcquire()
  const b = s.tryAcquire()
  const w = start(s, 'wait')
  await message(w) // 'waiting'
  await until(() => s.nrWaiting() === 1, 60000, 'the worker to queue')
  await sleep(20) // past the fairness bound: the release hands over (F1)
  const before = grants(s)
  s.release(a)
  t.equal(await message(w), a, 'the waiter got the released token')
  t.equal(grants(s), before + 1, 'handed over natively (its stamp written)')
  t.equal(s.tryAcquire(), undefined, 'the slot went to the waiter, not to the pool')
  t.equal(s.nrWaiting(), 0)
  // An async waiter in this thread, the same.
  const p = s.acquire()
  t.equal(s.nrWaiting(), 1, 'exact: one queued')
  t.equal(s.tryAcquire(), undefined, 'a try never overtakes it')
  s.release(b)
  t.equal(await p, b)
  t.equal(s.nrWaiting(), 0)
  s.release(b)
  const before2 = grants(s)
  t.equal(s.tryAcquire(), b, 'free again, and taken fast')
  t.equal(grants(s), before2)
  await w.terminate()
})

t.test('a free slot while a waiter is queued past the bound (a give-back between its CAS and its kick) goes to the waiter, not to a try', async t => {
  const s = new Sema(1)
  const tok = s.tryAcquire()
  const w = start(s, 'wait')
  await message(w) // 'waiting'
  await until(() => s.nrWaiting() === 1, 60000, 'the worker to queue')
  await sleep(20) // past the fairness bound (1 ms): no try may overtake it (F1)
  // The give-back's CAS, as lib/sema.js does it, without what follows it
  // (its look at the waiters' counter and its kick): the window a racing
  // try could use to overtake the waiter.
  t.equal(Atomics.compareExchange(words(s), HEADER + s.nr + tok, native.envId(), 0), native.envId())
  t.equal(s.tryAcquire(), undefined, 'the try does not take the free slot: someone waits (K3)')
  t.equal(await message(w), tok, 'and that native try served the waiter first')
  t.equal(s.nrWaiting(), 0)
  await w.terminate()
})

t.test('FIFO across fast and slow: three queued acquires are served in order', async t => {
  const s = new Sema(1)
  const tok = s.tryAcquire()
  const order = []
  const ps = [1, 2, 3].map(i => s.acquire().then(v => { order.push(i); return v }))
  t.equal(s.nrWaiting(), 3)
  s.release(tok)
  const first = await ps[0]
  t.equal(s.nrWaiting(), 2)
  s.release(first)
  const second = await ps[1]
  s.release(second)
  const third = await ps[2]
  t.same(order, [1, 2, 3])
  t.equal(s.nrWaiting(), 0)
  s.release(third)
  const before = grants(s)
  t.equal(s.tryAcquire(), 0, 'nobody waits: the fast path again')
  t.equal(grants(s), before)
  s.release()
})

t.test('tokens taken fast by a terminated worker come back, recovered; the mark travels through the fast path', async t => {
  const s = new Sema(2)
  const w = start(s, 'take-all-and-hang')
  const { tokens, nativeGrants } = await message(w)
  t.same(tokens.sort(), [0, 1])
  t.equal(nativeGrants, 0, 'the worker took both by the fast path')
  t.equal(s.tryAcquire(), undefined, 'both out')
  await w.terminate()
  // The first take finds no free slot and goes native, which reclaims
  // both (RECOVERED) and grants one; the second is a fast take of a
  // free, RECOVERED slot, and reports the mark too.
  const x = s.tryAcquire()
  t.not(x, undefined)
  t.equal(s.recovered(x), true, 'recovered: its holder died')
  const before = grants(s)
  const y = s.tryAcquire()
  t.equal(grants(s), before, 'the second take was the fast path')
  t.not(y, undefined)
  t.equal(s.recovered(y), true, 'and reports the mark')
  t.same([x, y].sort(), [0, 1])
  s.release(y)
  const z = s.tryAcquire()
  t.equal(z, y)
  t.equal(s.recovered(z), false, 'the mark is reported once')
  s.release(z)
  s.release(x)
})

t.test('a worker that ends holding fast-taken tokens: a waiter queued at the death gets one', async t => {
  const s = new Sema(1)
  const w = start(s, 'take-all-and-hang')
  const { tokens } = await message(w)
  t.same(tokens, [0])
  const waiting = s.acquire()
  t.equal(s.nrWaiting(), 1)
  await w.terminate()
  t.equal(await waiting, 0, 'the waiter got the dead thread\'s token')
  t.equal(s.recovered(), true)
  s.release()
  const w2 = start(s, 'take-all-and-exit')
  t.same((await message(w2)).tokens, [0])
  await exited(w2)
  t.equal(s.tryAcquire(), 0, 'a normal exit without release: the next caller reclaims')
  t.equal(s.recovered(), true)
})

t.test('holder words and hints scribbled under the fast path: only real tokens, never out of bounds', async t => {
  const nr = 3
  const GUARD = 64
  const buffer = new SharedArrayBuffer(GUARD + Sema.byteLengthFor(nr) + GUARD)
  const u8 = new Uint8Array(buffer)
  u8.fill(0xA5)
  const s = new Sema(nr, { buffer, byteOffset: GUARD })
  const good = u8.slice(GUARD, GUARD + Sema.byteLengthFor(nr))
  const i32 = new Int32Array(buffer, GUARD)
  const hostile = [-1, nr, 0x7fffffff, FREE_RECOVERED, native.envId(), 0x40000001, 1 << 20]
  const targets = [0, 1, 2, 3, HEADER + nr, HEADER + nr + 1, HEADER + nr + 2]
  let seed = 7
  const rand = () => { seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0; return seed }
  const seen = new Set()
  let errors = 0
  for (let i = 0; i < 20000; i++) {
    if (i % 7 === 0) {
      const w = targets[rand() % targets.length]
      i32[w] = hostile[rand() % hostile.length]
    }
    if (i % 11 === 0) u8.set(good, GUARD) // put it back now and then
    try {
      const tok = s.tryAcquire()
      if (tok !== undefined) {
        seen.add(tok)
        s.release(tok)
      }
    } catch (err) {
      if (!(err instanceof SabsyncError) || !['ERR_SABSYNC_BAD_MEMORY', 'ERR_SABSYNC_BAD_TOKEN'].includes(err.code)) throw err
      errors++
    }
  }
  t.same([...seen].filter(x => !(Number.isInteger(x) && x >= 0 && x < nr)), [], 'no token outside 0 … nr-1')
  t.ok(u8.subarray(0, GUARD).every(b => b === 0xA5) && u8.subarray(GUARD + good.length).every(b => b === 0xA5), 'guard bytes intact')
  // The repair: every token there once, and a waiter served.
  u8.set(good, GUARD)
  const got = [s.tryAcquire(), s.tryAcquire(), s.tryAcquire()]
  t.same([...got].sort(), [0, 1, 2], 'after the repair every token is there once')
  t.equal(s.tryAcquire(), undefined)
  const p = s.acquire({ timeout: 60000 })
  s.release(got[1])
  t.equal(await p, got[1], 'a release hands a token to the waiter')
  t.comment(`${errors} documented errors along the way`)
})

t.test('holder words flipped by another thread under the fast path: only real tokens, guards intact, healthy after', async t => {
  const nr = 2
  const GUARD = 64
  const bytes = Sema.byteLengthFor(nr)
  const buffer = new SharedArrayBuffer(GUARD + bytes + GUARD)
  const u8 = new Uint8Array(buffer)
  u8.fill(0xA5)
  const s = new Sema(nr, { buffer, byteOffset: GUARD })
  const control = new Int32Array(new SharedArrayBuffer(8))
  // next, and both holder words: the words the fast path reads and CASes.
  const flipped = [3, HEADER + nr, HEADER + nr + 1]
  const f = new Worker(path.join(__dirname, 'fixtures', 'scribble-flipper.js'), {
    workerData: { buffer, byteOffset: GUARD, words: flipped, nr, control, flips: 256, hold: 0, seed: 3 }
  })
  const stopped = new Promise((resolve, reject) => { f.once('message', resolve); f.once('error', reject) })
  await until(() => Atomics.load(control, 1) > 0, 60000, 'the flipper to start')
  const seen = new Set()
  let errors = 0
  for (let i = 0; i < 100000 || (Atomics.load(control, 1) < 100000 && i < 1e7); i++) {
    try {
      const tok = s.tryAcquire()
      if (tok === undefined) continue
      seen.add(tok)
      s.release(tok)
    } catch (err) {
      if (!(err instanceof SabsyncError)) throw err
      errors++
    }
  }
  Atomics.store(control, 0, 1)
  const { flips } = await stopped
  t.ok(flips > 0, `${flips} flips`)
  t.same([...seen].filter(x => !(Number.isInteger(x) && x >= 0 && x < nr)), [], 'no token outside 0 … nr-1')
  t.ok(u8.subarray(0, GUARD).every(b => b === 0xA5) && u8.subarray(GUARD + bytes).every(b => b === 0xA5), 'guard bytes intact')
  // The flipper puts each word back as it found it; a take or give-back
  // that raced a flip may have left a word off: repair, as the scribble
  // test does, and the Sema works as new.
  const i32 = new Int32Array(buffer, GUARD, bytes / 4)
  for (let i = 0; i < nr; i++) Atomics.store(i32, HEADER + nr + i, 0)
  const all = [s.tryAcquire(), s.tryAcquire()]
  t.same([...all].sort(), [0, 1])
  t.equal(s.tryAcquire(), undefined)
  t.comment(`${errors} documented errors`)
})

t.test('pauseFn / resumeFn: a release in another thread refills the pool and resumes a paused thread', async t => {
  const s = new Sema(2)
  let paused = 0
  let resumed = 0
  const q = Sema.from(s, { pauseFn: () => paused++, resumeFn: () => resumed++ })
  const go = new Int32Array(new SharedArrayBuffer(4))
  const w = new Worker(fixture, { workerData: { sema: { buffer: s.buffer, byteOffset: s.byteOffset }, mode: 'hold-one', go } })
  w.exited = new Promise(resolve => w.once('exit', resolve))
  t.equal(await message(w), 'holding')
  const mine = s.tryAcquire()
  t.not(mine, undefined)
  const pending = q.acquire()
  t.equal(paused, 1, 'paused while its acquire waits')
  s.release(mine) // a waiter is queued: handed over
  t.equal(await pending, mine)
  // Both tokens are out (q's and the worker's): q's thread watches for a
  // refill. The worker's release must wake that watch.
  await new Promise(resolve => setImmediate(resolve))
  t.equal(resumed, 0, 'no token free yet')
  Atomics.store(go, 0, 1)
  Atomics.notify(go, 0)
  t.equal(await message(w), 'released')
  await until(() => resumed === 1, 60000, 'resumeFn after the worker\'s release')
  t.equal(resumed, 1)
  await exited(w)
  q.release(mine)
})
