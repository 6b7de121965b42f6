'use strict'
// A bounded producer/consumer queue in shared memory with a Mutex and two
// CondVars: worker threads produce, the main thread consumes with
// waitAsync (its event loop keeps running while the queue is empty).
//
//   node examples/bounded-queue.js
const { Worker, isMainThread, workerData } = require('worker_threads')
const { Mutex, CondVar } = require('sabsync')

const CAPACITY = 8
const PRODUCERS = 3
const EACH = 500

// Queue memory: [0] head, [1] tail, [2] size, [3 ...] items.
function queue () {
  return {
    lock: new Mutex(),
    notFull: new CondVar(),
    notEmpty: new CondVar(),
    cells: new SharedArrayBuffer(4 * (3 + CAPACITY))
  }
}

function attach (q) {
  return {
    lock: Mutex.from(q.lock),
    notFull: CondVar.from(q.notFull),
    notEmpty: CondVar.from(q.notEmpty),
    cells: new Int32Array(q.cells)
  }
}

// Blocking put, for workers.
function put ({ lock, notFull, notEmpty, cells }, value) {
  lock.lock()
  try {
    while (cells[2] === CAPACITY) notFull.wait(lock) // loop: wake-ups can be spurious
    cells[3 + cells[1]] = value
    cells[1] = (cells[1] + 1) % CAPACITY
    cells[2]++
    notEmpty.notifyOne()
  } finally {
    lock.unlock()
  }
}

// Async take, for the main thread.
async function take ({ lock, notFull, notEmpty, cells }) {
  await lock.lockAsync()
  try {
    while (cells[2] === 0) await notEmpty.waitAsync(lock)
    const value = cells[3 + cells[0]]
    cells[0] = (cells[0] + 1) % CAPACITY
    cells[2]--
    notFull.notifyOne()
    return value
  } finally {
    lock.unlock()
  }
}

if (isMainThread) {
  const q = queue()
  for (let p = 0; p < PRODUCERS; p++) new Worker(__filename, { workerData: { q, p } }) // eslint-disable-line no-new -- it runs by itself
  ;(async () => {
    const local = attach(q)
    const seen = new Set()
    let sum = 0
    for (let i = 0; i < PRODUCERS * EACH; i++) {
      const v = await take(local)
      if (seen.has(v)) throw new Error('duplicate ' + v)
      seen.add(v)
      sum += v
    }
    const n = PRODUCERS * EACH
    console.log(`consumed ${seen.size} distinct items, sum ${sum} (expected ${n * (n + 1) / 2})`)
    if (sum !== n * (n + 1) / 2) process.exitCode = 1
  })()
} else {
  const q = attach(workerData.q)
  for (let i = 1; i <= EACH; i++) put(q, workerData.p * EACH + i)
}
