'use strict'
// What a pending waitAsync holds, and lets go: the memory it waits on is
// kept alive while any wait on that address is pending (one reference per
// address, however many waits), and released when the last one settles;
// records come from per-thread pools (src/napi/pool.c), so waits of every
// kind settled in any order must leave the pools reusable; an abort handle
// names one wait only; and waitAsync's short path (lib/atomics.js) answers
// as the full one does.
const t = require('tap')
const v8 = require('v8')
const vm = require('vm')
const sabsync = require('..')
const native = require('../lib/native')
const { fixture, message, sleep, HAS_GROWABLE } = require('./helpers')

v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')
const turn = () => new Promise(resolve => setImmediate(resolve))

// Full collections, with turns of the loop between them (a WeakRef's target
// is kept until the job that made or read it has ended).
async function collect () {
  for (let i = 0; i < 3; i++) {
    await turn()
    gc()
  }
  await turn()
}

const alive = refs => refs.filter(r => r.deref() !== undefined).length

t.test('the memory waited on is kept while a wait on it is pending, and let go after the last', async t => {
  const w = fixture('wait-memory/notifier')
  const N = 20
  const refs = []
  const first = [] // the waits on cell 0
  const second = [] // the waits on cell 2
  ;(function () {
    const buffers = []
    for (let b = 0; b < N; b++) {
      const sab = new SharedArrayBuffer(16)
      const ta = new Int32Array(sab)
      for (let k = 0; k < 3; k++) {
        first.push(sabsync.waitAsync(ta, 0, 0).value)
        second.push(sabsync.waitAsync(ta, 2, 0).value)
      }
      refs.push(new WeakRef(sab))
      buffers.push(sab)
    }
    w.postMessage({ buffers })
  })()
  t.equal(await message(w), 'got')
  // notify's and waitAsync's one-entry cache (lib/atomics.js) holds the
  // last array it saw: point it elsewhere.
  sabsync.notify(new Int32Array(new SharedArrayBuffer(4)), 0)
  await collect()
  t.equal(alive(refs), N, 'no buffer with waits pending was collected (the worker holds other objects)')

  w.postMessage({ notify: 0 })
  t.equal(await message(w), 3 * N, 'the worker woke the waits on cell 0')
  t.same([...new Set(await Promise.all(first))], ['ok'])
  w.postMessage({ notify: 2, count: 1 })
  t.equal(await message(w), N, 'the worker woke one wait on cell 2 of each buffer')
  await collect()
  t.equal(alive(refs), N, 'each buffer is still kept by the 2 waits left on its cell 2')

  w.postMessage({ notify: 2 })
  t.equal(await message(w), 2 * N, 'the worker woke the rest')
  t.same([...new Set(await Promise.all(second))], ['ok'])
  for (let i = 0; i < 20 && alive(refs) > 0; i++) await collect()
  t.equal(alive(refs), 0, 'every buffer was let go once its last wait settled')
  await w.terminate()
})

t.test('waits of every kind, on many cells, settled in any order, leave nothing behind', async t => {
  const buffers = Array.from({ length: 12 }, () => new Int32Array(new SharedArrayBuffer(64)))
  const ac = new AbortController()
  const waits = []
  let seed = 7
  const rand = n => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    return (seed >>> 12) % n
  }
  // Past several pool chunks (128 records) of each kind of record.
  for (let i = 0; i < 1500; i++) {
    const ta = buffers[rand(buffers.length)]
    const cell = rand(16)
    const kind = rand(4)
    let r
    if (kind === 0) r = sabsync.waitAsync(ta, cell, 0)
    else if (kind === 1) r = sabsync.waitAsync(ta, cell, 0, 1 + rand(30))
    else if (kind === 2) r = sabsync.waitAsync(ta, cell, 0, Infinity, { signal: ac.signal })
    else r = sabsync.waitAsync(ta, cell, 0, 60000, { ref: false })
    t.equal(r.async, true)
    waits.push({ kind, ta, cell, p: r.value.then(v => v, e => e) })
  }
  const total = () => buffers.reduce((n, ta) => { for (let c = 0; c < 16; c++) n += sabsync.waiters(ta, c); return n }, 0)
  // The timed waits' deadlines (at most 31 ms) come before this timer's.
  await sleep(60)
  const reason = new Error('stop')
  // Wake a third of the cells one waiter at a time, abort, then wake all.
  for (let i = 0; i < 200; i++) sabsync.notify(buffers[rand(buffers.length)], rand(16), 1)
  ac.abort(reason)
  for (const ta of buffers) for (let c = 0; c < 16; c++) sabsync.notify(ta, c)
  const results = await Promise.all(waits.map(w => w.p))
  const bad = waits.filter((w, i) => {
    const v = results[i]
    if (w.kind === 1) return v !== 'timed-out' && v !== 'ok'
    if (w.kind === 2) return v !== reason && v !== 'ok'
    return v !== 'ok'
  })
  t.equal(bad.length, 0, 'each wait settled as its kind can')
  t.ok(results.some(v => v === reason), 'some waits were aborted')
  t.ok(results.some(v => v === 'timed-out'), 'some waits timed out')
  t.equal(total(), 0, 'no record left queued')
  // The pools serve new waits after all that.
  const ta = buffers[0]
  const again = Array.from({ length: 300 }, (_, i) => sabsync.waitAsync(ta, i % 16, 0, i % 2 ? 60000 : Infinity).value)
  for (let c = 0; c < 16; c++) sabsync.notify(ta, c)
  t.same([...new Set(await Promise.all(again))], ['ok'])
})

t.test('an abort handle names one wait: stale or forged handles cancel nothing', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const HANDLE = native.constants.ASYNC_HANDLE | native.constants.ASYNC_REF
  const [p1, h1] = native.waitAsync(ta, 0, 0, Infinity, HANDLE)
  t.type(h1, 'number')
  t.equal(sabsync.notify(ta, 0), 1)
  t.equal(await p1, 'ok')
  // The next wait of that kind takes the slot p1 had.
  const [p2, h2] = native.waitAsync(ta, 0, 0, Infinity, HANDLE)
  t.not(h2, h1, 'a new wait in the same slot has another handle')
  t.equal(native.cancel(h1, new Error('stale')), false, 'the settled wait\'s handle cancels nothing')
  t.equal(sabsync.waiters(ta, 0), 1, 'the new wait is still queued')
  for (const forged of [-1, 0.5, 2 ** 53, NaN, Infinity]) {
    t.throws(() => native.cancel(forged, new Error('x')), TypeError, `${forged} is no handle`)
  }
  t.throws(() => native.cancel('1', new Error('x')), TypeError, 'a string is no handle')
  t.throws(() => native.cancel(5, new Error('x')), TypeError, 'a plain wait has no handle')
  t.equal(native.cancel(h2 + 1, new Error('x')), false, 'a slot with no wait')
  t.equal(native.cancel(h2 + 2 ** 30, new Error('x')), false, 'another serial')
  t.equal(sabsync.waiters(ta, 0), 1)
  const err = new Error('now')
  t.equal(native.cancel(h2, err), true, 'the live handle cancels')
  await t.rejects(p2, err)
  t.equal(native.cancel(h2, err), false, 'once')
  t.equal(sabsync.waiters(ta, 0), 0)
})

// Every outcome of a waitAsync call: what it throws, or its answer.
async function outcome (waitAsync, notify, ta, args) {
  let r
  try {
    r = waitAsync(ta, ...args)
  } catch (err) {
    return { throws: err.constructor.name }
  }
  if (!r.async) return { async: false, value: r.value }
  const woken = notify(ta, 0) + notify(ta, 1) + notify(ta, 2) + notify(ta, 3)
  return { async: true, value: await r.value, woken }
}

t.test('the short path of waitAsync answers as Atomics.waitAsync does', async t => {
  const ours = new Int32Array(new SharedArrayBuffer(16))
  const theirs = new Int32Array(new SharedArrayBuffer(16))
  ours[1] = theirs[1] = 7
  ours[2] = theirs[2] = -1
  const cases = [
    [0, 0], [-0, 0], [0, -0], [1, 7], [1, 7.9], [1, 7 + 2 ** 32], [2, -1], [2, 2 ** 32 - 1], [2, -1.5],
    [3, 0], [0, 1], [1, 0], [4, 0], [-1, 0], [1.5, 0], ['1', 7], [NaN, 0], [Infinity, 0], [2 ** 31, 0],
    [0, '0'], [0, NaN], [0, null], [0, undefined], [0, 0, 5], [0, 0, 0], [0, 0, NaN], [0, 0, undefined, {}]
  ]
  for (const args of cases) {
    sabsync.notify(ours, 0) // so that `ours` is the array seen last: the short path's condition
    const a = await outcome(sabsync.waitAsync, sabsync.notify, ours, args)
    const b = await outcome(Atomics.waitAsync, Atomics.notify, theirs, args)
    t.same(a, b, `waitAsync(ta, ${args.map(String).join(', ')})`)
  }
  t.equal(ours[0] + ours[3], 0)
})

t.test('the short path reads a length-tracking array\'s length anew', { skip: !HAS_GROWABLE && 'no growable SharedArrayBuffer' }, async t => {
  const sab = new SharedArrayBuffer(8, { maxByteLength: 64 })
  const ta = new Int32Array(sab) // length-tracking
  sabsync.notify(ta, 0)
  t.throws(() => sabsync.waitAsync(ta, 5, 0), RangeError, 'index 5 is past the length, 2')
  sab.grow(32)
  const r = sabsync.waitAsync(ta, 5, 0)
  t.equal(r.async, true, 'index 5 is inside the grown array')
  t.equal(sabsync.waiters(ta, 5), 1)
  t.equal(sabsync.notify(ta, 5), 1)
  t.equal(await r.value, 'ok')
})

t.test('a worker torn down with a thousand waits of every kind pending leaves none queued', async t => {
  const arrays = Array.from({ length: 10 }, () => new Int32Array(new SharedArrayBuffer(32)))
  const sema = new sabsync.Sema(1)
  const held = sema.tryAcquire()
  const total = () => arrays.reduce((n, ta) => { for (let c = 0; c < 8; c++) n += sabsync.waiters(ta, c); return n }, 0)
  const before = native.failures()
  for (let round = 0; round < 3; round++) {
    const w = fixture('wait-memory/many-pending', { arrays, sema: { buffer: sema.buffer, byteOffset: sema.byteOffset } })
    t.equal(await message(w), 'pending')
    t.equal(total(), 900, 'its 900 waits are queued')
    t.equal(sema.nrWaiting(), 300, 'and its 300 acquires')
    // Wake some while it dies: those wakes are handed on (to nobody here).
    const term = w.terminate()
    if (round === 1) for (const ta of arrays) sabsync.notify(ta, round, 5)
    await term
    t.equal(total(), 0, `round ${round}: none of its waits is left queued`)
    t.equal(sema.nrWaiting(), 0, 'nor its acquires')
  }
  sema.release(held)
  t.equal(sema.tryAcquire(), held, 'the Sema\'s token is free again')
  t.equal(native.failures(), before, 'no napi call failed where no caller could be told')
})
