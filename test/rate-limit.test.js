'use strict'
// RateLimit: at most rps grants in any window of timeUnit, across threads.
// Checked on the grant times the limiter reports (recorded under its lock),
// never on how fast the machine is.
const t = require('tap')
const { RateLimit, Sema } = require('..')
const { fixture, exited, until } = require('./helpers')

const message = w => new Promise(resolve => w.once('message', resolve))
const now = () => Number(process.hrtime.bigint()) / 1e6
const handleOf = limit => ({ buffer: limit.buffer, byteOffset: limit.byteOffset })

// Most grants in any half-open window of `unit` ms, and whether any rps+1
// consecutive grants fall within less than `unit`.
function busiest (times, unit) {
  let most = 0
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= unit) j++
    most = Math.max(most, i - j + 1)
  }
  return most
}

async function hammer (rps, timeUnit, uniformDistribution, ms) {
  const limit = RateLimit(rps, { timeUnit, uniformDistribution })
  const until = now() + ms
  const handle = { buffer: limit.buffer, byteOffset: limit.byteOffset }
  const ws = [0, 1, 2].map(i => fixture('rate-limit/taker', { handle, until, sync: i !== 1 }))
  const got = ws.map(message)
  const mine = []
  while (now() < until) mine.push(await limit())
  const all = mine.concat(...(await Promise.all(got)))
  await Promise.all(ws.map(exited))
  return { all: all.sort((a, b) => a - b), mine, limit }
}

t.test('no window of timeUnit holds more than rps grants, across 4 threads', async t => {
  const rps = 8
  const unit = 200
  const { all, mine } = await hammer(rps, unit, false, 1500)
  for (let i = rps; i < all.length; i++) {
    if (all[i] - all[i - rps] < unit) t.fail(`grants ${i - rps} and ${i} only ${all[i] - all[i - rps]} ms apart`)
  }
  t.equal(busiest(all, unit), rps, 'the busiest window is full: the limit is reached, never passed')
  t.ok(mine.length > 0, 'the main thread got its share')
  const span = all[all.length - 1] - all[0]
  t.comment(`${all.length} grants in ${span.toFixed(0)} ms; the limit allows ${Math.floor(span / unit) * rps + rps}`)
})

t.test('uniformDistribution spaces grants by timeUnit / rps', async t => {
  const rps = 20
  const unit = 200
  const { all, limit } = await hammer(rps, unit, true, 800)
  t.equal(limit.uniformDistribution, true)
  let closest = Infinity
  for (let i = 1; i < all.length; i++) closest = Math.min(closest, all[i] - all[i - 1])
  t.ok(closest >= unit / rps - 1e-6, `closest grants ${closest.toFixed(3)} ms apart (>= ${unit / rps})`)
  t.ok(busiest(all, unit) <= rps)
})

t.test('a thread that dies leaks nothing', async t => {
  const rps = 5
  const unit = 150
  const limit = RateLimit(rps, { timeUnit: unit })
  const w = fixture('rate-limit/dies-holding-grants', { buffer: limit.buffer, byteOffset: limit.byteOffset })
  const times = await message(w)
  t.equal(times.length, rps)
  await w.terminate()
  // Granted now only if the dead worker's window has passed (a loaded
  // machine can take longer than `unit` to get here), never inside it.
  const early = limit.sync(0)
  t.ok(early === undefined || early >= Math.min(...times) + unit, 'its grants still count in their window')
  const last = Math.max(...times, early === undefined ? 0 : early)
  while (now() < last + unit) await new Promise(resolve => setTimeout(resolve, 5))
  const again = []
  for (let i = 0; i < rps; i++) {
    again.push(limit.sync(0))
    t.ok(again[i] > 0, `grant ${i + 1} of ${rps} at once: nothing was lost to the dead worker`)
  }
  const more = limit.sync(0)
  t.ok(more === undefined || more >= again[0] + unit, 'and no more than rps in a window')
})

t.test('async-sema style: await lim() in a loop; sync, abort, handles', async t => {
  const lim = RateLimit(5, { timeUnit: 100 })
  const got = []
  for (let i = 0; i < 12; i++) got.push(await lim())
  t.equal(busiest(got, 100), 5)
  t.ok(got[10] - got[0] >= 200, '12 grants at 5 per 100 ms span two windows')
  t.same(Object.keys(lim), ['buffer', 'byteOffset', 'byteLength'])
  t.equal(lim.byteLength, RateLimit.byteLengthFor(5))
  t.equal(lim.rps, 5)
  t.equal(lim.timeUnit, 100)
  const other = RateLimit.from({ buffer: lim.buffer, byteOffset: lim.byteOffset })
  let extra = 0
  while (lim.sync(0) !== undefined) extra++
  t.ok(extra <= 5, 'sync(0) takes what is free, then answers undefined')
  t.equal(other.sync(0), undefined, 'attached: the same window')
  t.equal(RateLimit.from(lim).sync(0), undefined, 'from(limit) attaches to the limiter itself (a function)')
  const ac = new AbortController()
  const pending = other({ signal: ac.signal })
  ac.abort(new Error('enough'))
  await t.rejects(pending, { message: 'enough' })
  t.ok(Number.isInteger(RateLimit.byteLength) && RateLimit.byteLength % 8 === 0, 'byteLength is a number of bytes')
  t.equal(RateLimit.byteLength, RateLimit.byteLengthFor(64), 'it holds 64 per time unit')
  t.equal(RateLimit(64, { buffer: new SharedArrayBuffer(RateLimit.byteLength) }).rps, 64)
  t.throws(() => RateLimit(65, { buffer: new SharedArrayBuffer(RateLimit.byteLength) }), { name: 'RangeError' }, 'not 65')
  t.throws(() => RateLimit.byteLengthFor(0), { name: 'RangeError', message: /"rps"/ })
  const buffer = new SharedArrayBuffer(8 + RateLimit.byteLengthFor(3))
  const at = RateLimit(3, { buffer, byteOffset: 8 })
  t.equal(at.byteOffset, 8)
  t.ok(at.sync() > 0)
})

t.test('callers are served in arrival order across threads', async t => {
  // The test holds the limiter's turn (white box: the Sema of one token
  // after its grant ring) while callers queue in a known order, alternating
  // the main thread (async) and workers (async, and one sync); then lets
  // go. Each records its place when it is granted: one grant per 30 ms.
  const limit = RateLimit(1, { timeUnit: 30 })
  const turn = Sema.from({ buffer: limit.buffer, byteOffset: limit.byteOffset + RateLimit.byteLengthFor(1) - Sema.byteLengthFor(1) })
  const order = new Int32Array(new SharedArrayBuffer(4 * 8))
  t.equal(turn.tryAcquire(), 0, 'the turn is free')
  const ws = []
  const mine = []
  for (let k = 0; k < 6; k++) {
    if (k % 2 === 0) {
      mine.push(limit().then(() => { order[1 + Atomics.add(order, 0, 1)] = k }))
    } else {
      ws.push(fixture('rate-limit/queued-caller', { limit: handleOf(limit), order: order.buffer, k, sync: k === 3 }))
    }
    await until(() => limit.nrWaiting() === k + 1, 60000, `caller ${k} queued`)
  }
  turn.release(0)
  await Promise.all(mine)
  await Promise.all(ws.map(exited))
  t.same(Array.from(order.subarray(1, 7)), [0, 1, 2, 3, 4, 5], 'granted in arrival order')
  t.equal(limit.nrWaiting(), 0)
})

t.test('the turn is given up on abort and timeout, and comes back from a dead thread', async t => {
  const limit = RateLimit(1, { timeUnit: 50 })
  await limit()
  // A caller that holds the turn and aborts: the next one gets it.
  const ac = new AbortController()
  const first = limit({ signal: ac.signal })
  const second = limit()
  await until(() => limit.nrWaiting() === 1)
  ac.abort(new Error('enough'))
  await t.rejects(first, { message: 'enough' })
  t.ok(await second > 0, 'the next caller was granted')
  // A queued caller that aborts leaves the queue.
  const holder = limit()
  const ac2 = new AbortController()
  const queued = limit({ signal: ac2.signal })
  await until(() => limit.nrWaiting() === 1)
  ac2.abort(new Error('left'))
  await t.rejects(queued, { message: 'left' })
  t.equal(limit.nrWaiting(), 0)
  await holder
  // sync(timeout) behind a holder that sleeps longer: undefined, no turn kept.
  const slow = RateLimit(1, { timeUnit: 400 })
  await slow()
  const sleeping = slow()
  const w = fixture('rate-limit/sync-times-out', handleOf(slow))
  t.equal(await message(w), true, 'sync(20) timed out while another held the turn')
  await exited(w)
  await sleeping
  // A worker terminated while it holds the turn (it sleeps until its grant
  // is due, a minute after the last, however slowly it started): the turn
  // comes back, and the main thread, queued behind it, takes it.
  const held = RateLimit(1, { timeUnit: 60000 })
  await held()
  const dying = fixture('rate-limit/dies-holding-turn', handleOf(held))
  t.equal(await message(dying), 0, 'the worker took the turn')
  const ac3 = new AbortController()
  const after = held({ signal: ac3.signal })
  t.equal(held.nrWaiting(), 1, 'the main thread queues behind it')
  await dying.terminate()
  await until(() => held.nrWaiting() === 0, 60000, 'the turn to come back')
  ac3.abort(new Error('done'))
  await t.rejects(after, { message: 'done' }, 'the main thread held the turn, sleeping for its grant')
  const ac4 = new AbortController()
  const again = held({ signal: ac4.signal })
  t.equal(held.nrWaiting(), 0, 'an abort gave the turn up: the next caller takes it at once')
  ac4.abort(new Error('done'))
  await t.rejects(again, { message: 'done' })
  t.equal(held.nrWaiting(), 0)
})

t.test('bad input names the argument', async t => {
  t.throws(() => RateLimit(0), { name: 'RangeError', message: /"rps"/ })
  t.throws(() => RateLimit(-3), { name: 'RangeError', message: /"rps"/ })
  t.throws(() => RateLimit(1.5), { name: 'RangeError', message: /"rps"/ })
  t.throws(() => RateLimit('5'), { name: 'TypeError', message: /"rps"/ })
  t.throws(() => RateLimit(5, 1000), { name: 'TypeError', message: /"options"/ })
  t.throws(() => RateLimit(5, { timeUnit: 0 }), { name: 'RangeError', message: /"options.timeUnit"/ })
  t.throws(() => RateLimit(5, { timeUnit: NaN }), { name: 'RangeError', message: /"options.timeUnit"/ })
  t.throws(() => RateLimit(5, { timeUnit: '1s' }), { name: 'TypeError', message: /"options.timeUnit"/ })
  t.throws(() => RateLimit(5, { uniformDistribution: 1 }), { name: 'TypeError', message: /"options.uniformDistribution"/ })
  t.throws(() => RateLimit(5, { buffer: new SharedArrayBuffer(8) }), { name: 'RangeError', message: /"options.byteOffset"/ })
  t.throws(() => RateLimit.from({ buffer: new SharedArrayBuffer(64), byteOffset: 0 }), { code: 'ERR_SABSYNC_BAD_MEMORY' })
  t.throws(() => RateLimit.from(7), { name: 'TypeError', message: /"handle"/ })
  t.throws(() => RateLimit.from(() => 1), { name: 'TypeError', message: /"handle"/ })
  const lim = RateLimit(1)
  await t.rejects(lim({ signal: 'no' }), { name: 'TypeError', message: /"options.signal"/ })
  t.throws(() => lim.sync('1'), { name: 'TypeError', message: /"timeout"/ })
})

// API.md, "RateLimit": timeout in every tier; 0 (and limit.try()) grants
// exactly when the limit has room now.
t.test('timeout: 0 and try() grant when the limit has room now, and only then', async t => {
  const limit = RateLimit(2, { timeUnit: 300 })
  const first = limit.try()
  t.type(first, 'number', 'an idle limiter: try() grants, synchronously')
  t.type(await limit({ timeout: 0 }), 'number', 'room for a second: timeout 0 grants')
  t.equal(limit.try(), undefined, 'a full limiter: try() answers undefined')
  t.equal(await limit({ timeout: 0 }), undefined, 'and so does timeout 0')
  t.equal(limit.nrWaiting(), 0, 'neither queued')
  // A positive timeout shorter than the wait answers undefined.
  t.equal(await limit({ timeout: 50 }), undefined, 'not within 50 ms')
  // One that covers the wait is granted, no earlier than the window allows.
  const late = await limit({ timeout: 2000 })
  t.ok(late - first >= 300 - 0.001, 'granted once the first grant left the window')
  // A caller sleeping for its grant holds the turn: try() does not barge.
  const sleeping = limit()
  t.equal(limit.try(), undefined, 'while a caller waits, try() answers undefined')
  t.equal(await limit({ timeout: 0 }), undefined)
  await sleeping
  await t.rejects(limit({ timeout: '1' }), { name: 'TypeError', message: /"options.timeout"/ })
  await t.rejects(limit({ timeout: NaN }), { name: 'TypeError', message: /"options.timeout"/ })
})

t.test('timeout: 0 and try() from another thread share the limit', async t => {
  const limit = RateLimit(3, { timeUnit: 60000 })
  const w = fixture('rate-limit/try', handleOf(limit))
  t.same(await message(w), [true, true, true, false, false], 'a worker: three grants, then undefined (sync and async)')
  await exited(w)
  t.equal(limit.try(), undefined, 'the limit is full here too')
  t.equal(await limit({ timeout: 0 }), undefined)
})
