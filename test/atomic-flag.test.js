'use strict'
// AtomicFlag: std::atomic_flag semantics across threads.
const t = require('tap')
const { AtomicFlag, waiters } = require('..')
const { until, fixture, message, sleep } = require('./helpers')

t.test('shape and the flag operations', async t => {
  t.equal(AtomicFlag.byteLength, 8)
  const sab = new SharedArrayBuffer(16)
  new Int32Array(sab).fill(7)
  const f = new AtomicFlag({ buffer: sab, byteOffset: 8 })
  t.same(Object.keys(f).sort(), ['buffer', 'byteOffset'])
  t.same(Array.from(new Int32Array(sab)), [7, 7, 0x464C4731, 0], 'initialised: its kind tag, then clear; nothing else touched')
  t.equal(f.test(), false)
  t.equal(f.testAndSet(), false, 'answers the previous value')
  t.equal(f.testAndSet(), true)
  t.equal(f.test(), true)
  t.equal(AtomicFlag.from({ buffer: sab, byteOffset: 8 }).test(), true, 'from() attaches')
  f.clear()
  t.equal(f.test(), false)
  t.equal(f.wait(true), true, 'wait(old) returns at once when the flag differs')
  t.equal(await f.waitAsync(true), true)
  t.equal(f.wait(false, 0), false, 'and times out while it equals old')
  t.throws(() => new AtomicFlag({ buffer: sab, byteOffset: 12 }), { name: 'RangeError', message: /byteOffset/ })
  t.throws(() => AtomicFlag.from({ buffer: 1 }), { name: 'TypeError', message: /buffer/ })
})

t.test('a waiter returns only once the flag differs and it is notified', async t => {
  const f = new AtomicFlag()
  const sab = new SharedArrayBuffer(8)
  const w = fixture('atomic-flag/wait-until-differs', { f, sab })
  const got = message(w)
  await until(() => Atomics.load(new Int32Array(sab), 0) === 1)
  await sleep(20)
  t.equal(f.notifyAll() <= 1, true)
  await sleep(20)
  // Notified while the flag still equals `old`: it keeps waiting.
  const state = await Promise.race([got, sleep(30).then(() => 'still waiting')])
  t.equal(state, 'still waiting')
  f.testAndSet()
  await until(() => f.notifyOne() === 1 || false, 60000, 'the waiter to be woken')
  t.same(await got, [true, true])
  await w.exited
})

t.test('notifyOne wakes one, notifyAll the rest; blocking and async', async t => {
  const f = new AtomicFlag()
  const sab = new SharedArrayBuffer(8)
  const c = new Int32Array(sab)
  const ws = []
  for (let i = 0; i < 3; i++) {
    ws.push(fixture('atomic-flag/wait-count', { f, sab }))
  }
  let asyncWoken = 0
  const ps = [f.waitAsync(false).then(r => { if (r) asyncWoken++ }), f.waitAsync(false).then(r => { if (r) asyncWoken++ })]
  await until(() => Atomics.load(c, 0) === 3)
  // All five queued (not a sleep: a slow machine, or an emulated one,
  // may take longer than any fixed time to get the workers there).
  const words = new Int32Array(f.buffer, f.byteOffset, 2) // [kind tag, flag]
  await until(() => waiters(words, 1) === 5, 60000, 'five waiters queued')
  f.testAndSet()
  t.equal(f.notifyOne(), 1, 'one woken')
  await until(() => Atomics.load(c, 1) + asyncWoken === 1)
  t.equal(f.notifyAll(), 4, 'the other four')
  await Promise.all(ps)
  await Promise.all(ws.map(w => w.exited))
  t.equal(Atomics.load(c, 1) + asyncWoken, 5)
  t.equal(f.notifyAll(), 0)
})

t.test('the seed example: frame ready from a decoder to a compositor', async t => {
  const ready = new AtomicFlag()
  const sab = new SharedArrayBuffer(4 * 17)
  const frames = 50
  const compositor = fixture('atomic-flag/compositor', { ready, sab, frames })
  const decoder = fixture('atomic-flag/decoder', { ready, sab, frames })
  t.equal(await message(compositor), frames * (frames + 1) / 2, 'every frame seen once, in order')
  await Promise.all([compositor.exited, decoder.exited])
})

t.test('timeouts and abort', async t => {
  const f = new AtomicFlag()
  for (const ms of [1, 20]) {
    const t0 = performance.now()
    t.equal(await f.waitAsync(false, { timeout: ms }), false)
    t.ok(performance.now() - t0 >= ms, `waitAsync ${ms} ms not early`)
  }
  const w = fixture('atomic-flag/wait-25', f)
  const [r, took] = await message(w)
  t.equal(r, false)
  t.ok(took >= 25, `wait(25) took ${took.toFixed(1)} ms`)
  const ac = new AbortController()
  const p = f.waitAsync(false, { signal: ac.signal })
  ac.abort(new Error('stop'))
  await t.rejects(p, { message: 'stop' })
  await t.rejects(f.waitAsync(false, { signal: AbortSignal.abort(new Error('early')) }), { message: 'early' })
  t.equal(f.notifyAll(), 0, 'the aborted waiter left the queue')
})

t.test('bad input', async t => {
  const f = new AtomicFlag()
  t.throws(() => f.wait(0), { name: 'TypeError', message: /"old"/ })
  t.throws(() => f.wait(), { name: 'TypeError', message: /"old"/ })
  t.throws(() => f.waitAsync('true'), { name: 'TypeError', message: /"old"/ })
  t.throws(() => f.wait(false, NaN), { name: 'TypeError', message: /"timeout"/ })
  t.throws(() => f.waitAsync(false, { signal: 'x' }), { name: 'TypeError', message: /"options.signal"/ })
  t.throws(() => new AtomicFlag({ buffer: new ArrayBuffer(8) }), { name: 'TypeError', message: /buffer/ })
})
