'use strict'
// The race fuzzer of shared memory: a hostile thread flips every word of a
// Sema's or a RateLimit's memory in turn between its good value and hostile
// ones (test/fixtures/scribble-flipper.js), while other threads use the
// object (test/fixtures/scribble-user.js) and short-lived users are
// terminated while they hold what they took (so reclaims run on scribbled
// memory too). The object sits between guard bytes in its buffer. Then the
// good bytes are put back, and the object must work as new.
//
// Checked: every answer the users got was a real one (a token in 0 … nr-1,
// a grant time, a timeout, or ERR_SABSYNC_BAD_MEMORY / _BAD_TOKEN); the
// guard bytes are intact; nothing is left queued; after the repair every
// token is there exactly once, a release hands a token to a waiter, and a
// RateLimit grants and keeps its window. The process staying alive (and, in
// the ASan+UBSan flavour, clean) is the rest.
//
// test/scribble.test.js runs it briefly; `npm run stress` longer.
const path = require('path')
const { Worker } = require('worker_threads')
const { Sema, RateLimit } = require('..')

const GUARD = 64
const PATTERN = 0xA5
const fixture = name => path.join(__dirname, 'fixtures', name)
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const control = () => new Int32Array(new SharedArrayBuffer(4))

function make (kind, nr, buffer) {
  if (kind === 'sema') return new Sema(nr, { buffer, byteOffset: GUARD })
  return RateLimit(nr, { timeUnit: 20, buffer, byteOffset: GUARD })
}

function bytesOf (kind, nr) {
  return kind === 'sema' ? Sema.byteLengthFor(nr) : RateLimit.byteLengthFor(nr)
}

// A user thread; resolves its stats (or null if it was terminated).
function user (kind, handle, nr, stop, seed) {
  const w = new Worker(fixture('scribble-user.js'), { workerData: { kind, handle, nr, control: stop, seed } })
  const attached = new Promise(resolve => w.once('message', resolve))
  const exited = new Promise(resolve => w.once('exit', resolve))
  const result = new Promise((resolve, reject) => {
    w.on('message', m => { if (m !== 'attached') resolve(m) })
    w.once('error', reject)
    w.once('exit', () => resolve(null))
  })
  return { worker: w, attached, result, exited }
}

async function healthySema (s, nr, problems) {
  if (s.nrWaiting() !== 0) problems.push(`nrWaiting() is ${s.nrWaiting()} after the run`)
  const got = []
  for (let i = 0; i < nr; i++) got.push(s.tryAcquire())
  const sorted = [...got].sort((a, b) => a - b)
  if (sorted.join() !== [...Array(nr).keys()].join()) problems.push(`after the repair tryAcquire() gave ${got.join()}, not each of 0 … ${nr - 1} once`)
  if (s.tryAcquire() !== undefined) problems.push('a token beyond nr after the repair')
  const waiter = s.acquire({ timeout: 60000 })
  if (s.nrWaiting() !== 1) problems.push(`an acquire did not queue (nrWaiting ${s.nrWaiting()})`)
  s.release(got[0])
  const handed = await waiter
  if (handed !== got[0]) problems.push(`release() handed ${handed} to the waiter, not ${got[0]}`)
  s.release(handed)
  for (const tok of got.slice(1)) s.release(tok)
  const again = s.tryAcquire()
  if (again === undefined) problems.push('no token after everything was released')
  else s.release(again)
}

async function healthyRate (limit, rps, problems) {
  if (limit.nrWaiting() !== 0) problems.push(`nrWaiting() is ${limit.nrWaiting()} after the run`)
  const grants = []
  for (let i = 0; i <= rps; i++) grants.push(await limit())
  const span = grants[rps] - grants[0]
  if (!(span >= limit.timeUnit)) problems.push(`${rps + 1} grants within ${span} ms, a window of ${limit.timeUnit} ms holds at most ${rps}`)
  const g = limit.sync(60000)
  if (typeof g !== 'number') problems.push(`limit.sync() gave ${g} after the repair`)
}

async function scribble ({ kind, nr = 3, ms = 1500, users = 2, terminate = true, seed = 1 }) {
  const bytes = bytesOf(kind, nr)
  const buffer = new SharedArrayBuffer(GUARD + bytes + GUARD)
  const u8 = new Uint8Array(buffer)
  u8.fill(PATTERN, 0, GUARD)
  u8.fill(PATTERN, GUARD + bytes)
  const obj = make(kind, nr, buffer)
  // The handle a posted object carries: with its byteLength, so that an
  // attach that reads a scribbled size is refused rather than made bigger
  // than the object (a bare { buffer, byteOffset } attaches by what the
  // memory says, and may then reach into the guard bytes: docs/threads.md).
  const handle = { buffer, byteOffset: GUARD, byteLength: bytes }
  const good = u8.slice(GUARD, GUARD + bytes)
  const words = [...Array(bytes / 4).keys()]

  const usersStop = control()
  const flipperStop = control()
  const ready = control()
  const flipper = new Worker(fixture('scribble-flipper.js'), {
    workerData: { buffer, byteOffset: GUARD, words, nr, control: flipperStop, ready, flips: 64, seed }
  })
  const flipped = new Promise((resolve, reject) => { flipper.once('message', resolve); flipper.once('error', reject) })
  const long = []
  for (let i = 0; i < users; i++) long.push(user(kind, handle, nr, usersStop, seed * 7919 + i))
  await Promise.all(long.map(u => u.attached))
  Atomics.store(ready, 0, 1)
  Atomics.notify(ready, 0)

  // Short-lived users, terminated while they work: their tokens and turns
  // come back through the death path, on memory being scribbled over.
  let terminated = 0
  const end = Date.now() + ms
  let k = 0
  while (Date.now() < end) {
    if (!terminate) { await sleep(20); continue }
    const u = user(kind, handle, nr, control(), seed * 104729 + k++)
    await Promise.race([u.attached, u.result])
    await sleep(2 + (k * 7) % 25)
    await u.worker.terminate()
    terminated++
  }
  Atomics.store(usersStop, 0, 1)
  const stats = await Promise.all(long.map(u => u.result))
  // A user's report comes before its thread ends, and a thread that ends
  // gives back what its memory says it holds (the death path): on memory
  // still scribbled, that can be a slot that is not its own. The repair
  // below puts the good bytes back once nothing else touches them, so it
  // waits for the threads to be gone.
  await Promise.all(long.map(u => u.exited))
  Atomics.store(flipperStop, 0, 1)
  const { flips } = await flipped

  const problems = []
  for (const st of stats) {
    if (st === null) problems.push('a user thread exited without its report')
    else problems.push(...st.bad)
  }
  if (!u8.subarray(0, GUARD).every(b => b === PATTERN)) problems.push('the guard bytes before the object were written')
  if (!u8.subarray(GUARD + bytes).every(b => b === PATTERN)) problems.push('the guard bytes after the object were written')
  // The repair: the good bytes back, as at the start.
  u8.set(good, GUARD)
  try {
    if (kind === 'sema') await healthySema(obj, nr, problems)
    else await healthyRate(obj, nr, problems)
  } catch (err) {
    problems.push('after the repair: ' + err.stack)
  }
  const sum = f => stats.reduce((n, st) => n + (st ? f(st) : 0), 0)
  const errors = {}
  for (const st of stats) for (const [c, n] of Object.entries(st ? st.errors : {})) errors[c] = (errors[c] || 0) + n
  return {
    ok: problems.length === 0,
    problems,
    flips,
    terminated,
    ops: sum(st => st.ops),
    tokens: sum(st => st.tokens),
    timeouts: sum(st => st.timeouts),
    errors
  }
}

module.exports = { scribble }
