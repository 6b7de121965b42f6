'use strict'
// Stress of wait / waitAsync / notify: more threads than cores, random
// timeouts, aborts and terminations; invariants checked at the end.
const path = require('path')
const { Worker } = require('worker_threads')
const sabsync = require('..')

const root = JSON.stringify(path.join(__dirname, '..'))

// Workers and the main thread pass a token around a ring of cells: cell i
// holds the number of times thread i was handed the token. Each hand-off is
// a store and a notify; waits use random timeouts (a timed-out wait just
// looks again). Meanwhile extra "noise" workers wait on the same cells with
// random timeouts and get terminated at random. Invariant: the token makes
// exactly `rounds` laps, so every counter ends equal to `rounds`.
async function tokenRing ({ threads = 6, rounds = 3000, noise = 4, seed = 1 } = {}) {
  const N = threads + 1 // + the main thread, index 0
  const sab = new SharedArrayBuffer(4 * (N + 2))
  const cells = new Int32Array(sab) // cells[i]: laps seen by i; cells[N]: whose turn
  const code = `
const s = require(${root})
const { workerData } = require('worker_threads')
const cells = new Int32Array(workerData.sab)
const { id, N, rounds } = workerData
let rnd = workerData.seed
const next = () => (rnd = (rnd * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff
for (let lap = 0; lap < rounds; lap++) {
  for (;;) {
    const turn = Atomics.load(cells, N)
    if (turn === id) break
    s.wait(cells, N, turn, next() < 0.5 ? next() * 3 : Infinity)
  }
  Atomics.add(cells, id, 1)
  Atomics.store(cells, N, (id + 1) % N)
  s.notify(cells, N)
}`
  const noiseCode = `
const s = require(${root})
const { workerData } = require('worker_threads')
const cells = new Int32Array(workerData.sab)
for (;;) s.wait(cells, workerData.N, Atomics.load(cells, workerData.N), Math.random() * 5)`
  const exits = []
  for (let id = 1; id < N; id++) {
    const w = new Worker(code, { eval: true, workerData: { sab, id, N, rounds, seed: seed + id } })
    exits.push(new Promise((resolve, reject) => { w.once('exit', resolve); w.once('error', reject) }))
  }
  let noisy = []
  const churn = setInterval(() => {
    // terminate a random noise worker and start another
    if (noisy.length >= noise) noisy.splice(Math.floor(Math.random() * noisy.length), 1)[0].terminate()
    noisy.push(new Worker(noiseCode, { eval: true, workerData: { sab, N } }))
  }, 15)
  for (let lap = 0; lap < rounds; lap++) {
    for (;;) {
      const turn = Atomics.load(cells, N)
      if (turn === 0) break
      const ac = Math.random() < 0.2 ? new AbortController() : null
      if (ac) setTimeout(() => ac.abort(), Math.random() * 3)
      const r = sabsync.waitAsync(cells, N, turn, Math.random() < 0.5 ? Math.random() * 4 : Infinity, { signal: ac ? ac.signal : undefined })
      if (r.async) await r.value.catch(() => 'aborted')
    }
    Atomics.add(cells, 0, 1)
    Atomics.store(cells, N, 1)
    sabsync.notify(cells, N)
  }
  await Promise.all(exits)
  clearInterval(churn)
  await Promise.all(noisy.map(w => w.terminate()))
  noisy = []
  const counts = Array.from(cells.subarray(0, N))
  const ok = counts.every(c => c === rounds)
  return { ok, detail: `laps per thread ${counts.join(',')} (want ${rounds}); waiters left ${sabsync.waiters(cells, N)}` }
}

// A soak: a million waitAsync with timeouts, half woken by notify and half
// timing out, in batches; heap and RSS measured before and after.
async function soakWaitAsync ({ total = 1000000, batch = 10000 } = {}) {
  const ta = new Int32Array(new SharedArrayBuffer(64))
  const measure = () => { global.gc && global.gc(); return process.memoryUsage() }
  let ok = 0
  let timedOut = 0
  const round = async () => {
    const ps = new Array(batch)
    for (let i = 0; i < batch; i++) ps[i] = sabsync.waitAsync(ta, i & 7, 0, 1 + (i & 3)).value
    for (let c = 0; c < 8; c += 2) sabsync.notify(ta, c) // cells 0,2,4,6 woken; 1,3,5,7 time out
    for (const v of await Promise.all(ps)) v === 'ok' ? ok++ : timedOut++
  }
  // Half the run first, unmeasured: RSS climbs ~40 MB over the first
  // ~500k waits as V8's heap sizing and malloc settle, then stays flat for
  // millions more (measured), so only growth after that would be a leak.
  for (let done = 0; done < total / 2; done += batch) await round()
  ok = timedOut = 0
  const before = measure()
  for (let done = 0; done < total; done += batch) await round()
  const after = measure()
  const growth = (after.rss - before.rss) / 2 ** 20
  const heap = (after.heapUsed - before.heapUsed) / 2 ** 20
  let left = 0
  for (let c = 0; c < 8; c++) left += sabsync.waiters(ta, c)
  return {
    ok: ok + timedOut === total && left === 0 && growth < 10 && heap < 10,
    detail: `${total} waits: ${ok} ok, ${timedOut} timed out; RSS ${growth >= 0 ? '+' : ''}${growth.toFixed(1)} MB, heap ${heap >= 0 ? '+' : ''}${heap.toFixed(1)} MB; waiters left ${left}`
  }
}

module.exports = { tokenRing, soakWaitAsync }
