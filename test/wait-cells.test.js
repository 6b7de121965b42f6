'use strict'
// BigInt64Array cells, Int32 and BigInt64 waits sharing one address, and
// growable SharedArrayBuffers.
const t = require('tap')
const sabsync = require('..')
const { exited, until, fixture } = require('./helpers')

t.test('BigInt64Array: 64-bit compare', async t => {
  const ta = new BigInt64Array(new SharedArrayBuffer(16))
  ta[1] = 1n << 40n
  t.equal(sabsync.wait(ta, 1, 0n, 0), 'not-equal', 'high bits count')
  t.equal(sabsync.wait(ta, 1, 1n << 40n, 0), 'timed-out')
  t.equal(sabsync.wait(ta, 1, (1n << 40n) + (1n << 64n), 0), 'timed-out', 'ToBigInt64 wraps')
  ta[0] = -1n
  t.equal(sabsync.wait(ta, 0, 0xFFFFFFFFFFFFFFFFn, 0), 'timed-out', '2^64-1 wraps to -1')
  const r = sabsync.waitAsync(ta, 1, 1n << 40n)
  t.equal(r.async, true)
  t.equal(sabsync.notify(ta, 1), 1)
  t.equal(await r.value, 'ok')
})

t.test('Int32 and BigInt64 waiters on one address share a FIFO queue', async t => {
  const sab = new SharedArrayBuffer(16)
  const i32 = new Int32Array(sab)
  const i64 = new BigInt64Array(sab)
  const order = []
  const a = sabsync.waitAsync(i64, 0, 0n).value.then(() => order.push('i64'))
  const w = fixture('wait-cells/mixed-waiters', sab)
  await until(() => sabsync.waiters(i64, 0) === 2)
  t.equal(sabsync.waiters(i32, 0), 2, 'one queue, seen from both views')
  t.equal(sabsync.waiters(i32, 1), 0, 'the upper half is another address')
  const c = sabsync.waitAsync(i32, 1, 0).value
  t.equal(sabsync.waiters(i32, 1), 1)
  t.equal(sabsync.notify(i32, 0, 1), 1)
  await a
  t.same(order, ['i64'], 'the oldest (the 64-bit waiter) first')
  t.equal(sabsync.notify(i64, 0, 1), 1)
  await exited(w)
  t.equal(Atomics.load(i32, 3), 1)
  t.equal(sabsync.notify(i32, 1), 1)
  t.equal(await c, 'ok')
})

t.test('subarrays with byte offsets address the right cell', async t => {
  const sab = new SharedArrayBuffer(64)
  const whole = new Int32Array(sab)
  const view = new Int32Array(sab, 8, 4)
  const p = sabsync.waitAsync(view, 1, 0).value
  t.equal(sabsync.waiters(whole, 3), 1)
  t.equal(sabsync.notify(whole, 1), 0)
  t.equal(sabsync.notify(whole, 3), 1)
  t.equal(await p, 'ok')
})

t.test('growable SharedArrayBuffer', { skip: typeof SharedArrayBuffer.prototype.grow !== 'function' && 'no growable SAB' }, async t => {
  const sab = new SharedArrayBuffer(8, { maxByteLength: 4096 })
  const tracking = new Int32Array(sab)
  t.equal(tracking.length, 2)
  t.throws(() => sabsync.wait(tracking, 100, 0, 0), RangeError)
  sab.grow(1024)
  t.equal(tracking.length, 256)
  const p = sabsync.waitAsync(tracking, 200, 0).value
  const fixed = new Int32Array(sab, 800, 1)
  t.equal(sabsync.waiters(fixed, 0), 1, 'same cell through another view')
  t.equal(sabsync.notify(fixed, 0), 1)
  t.equal(await p, 'ok')
  // index converted after the length was read (ValidateAtomicAccess step 1-2):
  // growing the buffer inside valueOf does not make the index valid.
  const small = new SharedArrayBuffer(8, { maxByteLength: 64 })
  const ta = new Int32Array(small)
  t.throws(() => sabsync.notify(ta, { valueOf () { small.grow(64); return 5 } }), RangeError)
  t.equal(ta.length, 16)
})

t.test('notify on a non-shared array returns 0; wait rejects it', async t => {
  const ta = new Int32Array(4)
  t.equal(sabsync.notify(ta, 0), 0)
  t.equal(sabsync.waiters(ta, 0), 0)
  t.throws(() => sabsync.wait(ta, 0, 0, 0), TypeError)
  t.throws(() => sabsync.waitAsync(ta, 0, 0, 0), TypeError)
})
