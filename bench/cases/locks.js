'use strict'
// The Web Locks API, threads tier: require('sabsync').locks against Node's
// own (worker_threads.locks, Node >= 24.5), under a Node 24 binary from the
// registry (`npm run bench:setup`); without it the case is skipped.
const path = require('path')
const { Worker } = require('worker_threads')

const root = path.join(__dirname, '..', '..')

const builtin = () => require('worker_threads').locks || globalThis.navigator.locks
let space = null
function managerOf (impl) {
  if (impl === 'sabsync') return require(root).locks
  if (impl === 'space') {
    if (space === null) {
      const { openShared } = require(root)
      const name = `bench-locks-${process.pid}`
      space = openShared(name)
      openShared.unlink(name) // gone with this process
    }
    return space.locks
  }
  return builtin()
}

// Requests one after another on a free name: the cost of a request whose
// lock nobody else wants (the callback does nothing).
async function uncontended (impl, n) {
  const locks = managerOf(impl)
  let ran = 0
  const cb = () => { ran++ }
  for (let i = 0; i < 1000; i++) await locks.request('warm', cb)
  ran = 0
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) await locks.request('free', cb)
  const ns = Number(process.hrtime.bigint() - t0) / n
  return { value: ns / 1000, check: ran === n }
}

const STALL_MS = 20000

// 4 workers, k requests each on one name; the callback counts itself in
// and out (c[1] inside now, c[2] entries that found another inside) and
// increments a plain counter, across an await when `across`.
async function handoff (impl, k, across) {
  const sab = new SharedArrayBuffer(16)
  const c = new Int32Array(sab)
  const manager = impl === 'sabsync' ? `require(${JSON.stringify(root)}).locks` : "(require('worker_threads').locks || navigator.locks)"
  const code = `
const { workerData, parentPort } = require('worker_threads')
const locks = ${manager}
const c = new Int32Array(workerData.sab)
const keep = setInterval(() => {}, 1000) // a pending Web Locks request does not hold the loop open
;(async () => {
  parentPort.postMessage('ready')
  await new Promise(resolve => parentPort.once('message', resolve))
  for (let i = 0; i < workerData.k; i++) {
    await locks.request('bench-handoff', ${across ? 'async ' : ''}() => {
      if (Atomics.add(c, 1, 1) !== 0) Atomics.add(c, 2, 1)
      const v = c[0]
      ${across ? 'await null' : ''}
      c[0] = v + 1
      Atomics.sub(c, 1, 1)
    })
  }
  parentPort.postMessage('done')
  clearInterval(keep)
})()`
  const ws = [0, 1, 2, 3].map(() => new Worker(code, { eval: true, workerData: { sab, k } }))
  await Promise.all(ws.map(w => new Promise(resolve => w.once('message', resolve))))
  const done = ws.map(w => new Promise(resolve => w.once('message', resolve)))
  const t0 = process.hrtime.bigint()
  for (const w of ws) w.postMessage('go')
  // Node 24.21's own stalls here now and then (every worker waiting, no
  // holder): a run that has not ended in STALL_MS is reported as stalled.
  let timer
  const stalled = await Promise.race([
    Promise.all(done).then(() => false),
    new Promise(resolve => { timer = setTimeout(resolve, STALL_MS, true) })
  ])
  clearTimeout(timer)
  const ms = Number(process.hrtime.bigint() - t0) / 1e6
  await Promise.all(ws.map(w => w.terminate()))
  const overlaps = Atomics.load(c, 2)
  return {
    value: ms,
    check: !stalled && c[0] === 4 * k && overlaps === 0,
    tally: { overlaps, handoffs: 4 * k, lost: stalled ? 0 : 4 * k - c[0], stalled: stalled ? 1 : 0 }
  }
}

function tallyNote (t, runs) {
  return `${t.overlaps} overlapping holders in ${t.handoffs} hand-offs over ${runs} runs` +
    (t.lost > 0 ? `; ${t.lost} increments lost` : '') +
    (t.stalled > 0 ? `; ${t.stalled} runs stalled (no progress in ${STALL_MS / 1000} s)` : '')
}

// A hand-off row: sync callbacks, or async ones (`across` an await).
function handoffRow (name, across) {
  return {
    name,
    unit: 'ms',
    compare: 'worker_threads.locks',
    goal: 2,
    node: 24,
    tallyNote,
    subjects: {
      sabsync: () => handoff('sabsync', 2000, across),
      'worker_threads.locks': () => handoff('builtin', 2000, across)
    }
  }
}

module.exports = [
  {
    name: 'Web Locks request, uncontended (Node 24)',
    unit: 'us/op',
    compare: 'worker_threads.locks',
    goal: 4,
    node: 24,
    subjects: {
      sabsync: ({ quick }) => uncontended('sabsync', quick ? 20000 : 100000),
      'worker_threads.locks': ({ quick }) => uncontended('builtin', quick ? 20000 : 100000)
    }
  },
  {
    // The processes tier's request (sabsync: space.locks) within 2x of
    // the threads tier's.
    name: 'Web Locks request, uncontended: space.locks against locks (threads)',
    unit: 'us/op',
    compare: 'locks (threads)',
    goal: 0.5,
    subjects: {
      sabsync: ({ quick }) => uncontended('space', quick ? 20000 : 100000),
      'locks (threads)': ({ quick }) => uncontended('sabsync', quick ? 20000 : 100000)
    }
  },
  handoffRow('Web Locks hand-off, 4 workers x 2,000 requests on one name (Node 24)', false),
  handoffRow('Web Locks hand-off, async callbacks, 4 workers x 2,000 (Node 24)', true)
]
