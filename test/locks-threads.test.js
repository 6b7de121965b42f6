'use strict'
// The threads tier of the Web Locks API across workers: exclusion and FIFO
// hand-off between threads, a worker that ends releasing what it holds
// and leaving the queues, steal across threads, query() for every thread,
// and names that cost nothing at rest.
const t = require('tap')
const { threadId } = require('worker_threads')
const { locks } = require('..')
const native = require('../lib/native')
const { worker, until, sleep, message } = require('./helpers')

const counts = () => native.locksCounts() // [requests, names], process-wide
const me = `${process.pid}:${threadId}`

t.test('4 workers x 2,000 requests on one name: never two inside, nothing lost', async t => {
  const K = 2000
  const sab = new SharedArrayBuffer(16)
  const cells = new Int32Array(sab) // 0: counter, 1: inside, 2: most inside
  const ws = []
  for (let i = 0; i < 4; i++) {
    ws.push(worker(`
      const { locks } = sabsync
      const cells = new Int32Array(workerData.sab)
      ;(async () => {
        for (let k = 0; k < workerData.K; k++) {
          await locks.request('hand-off', async () => {
            const inside = Atomics.add(cells, 1, 1) + 1
            if (inside > Atomics.load(cells, 2)) Atomics.store(cells, 2, inside)
            const v = cells[0]
            if (k % 64 === 0) await null // let another thread try to get in
            cells[0] = v + 1
            Atomics.sub(cells, 1, 1)
          })
        }
        parentPort.postMessage('done')
      })()
    `, { sab, K }))
  }
  await Promise.all(ws.map(w => message(w)))
  await Promise.all(ws.map(w => w.exited))
  t.equal(cells[0], 4 * K, 'counter = workers x requests')
  t.equal(cells[2], 1, 'never two inside the exclusive lock')
  t.same(counts(), [0, 0], 'nothing left held or waiting, no name kept')
})

t.test('a worker terminated while holding: its lock goes to the next; while waiting: it leaves the queue', async t => {
  const holder = worker(`
    sabsync.locks.request('held-by-worker', () => { parentPort.postMessage('holding'); return new Promise(() => {}) })
    setInterval(() => {}, 1000) // alive until terminated (a worker whose loop empties ends, and lets go)
  `)
  t.equal(await message(holder), 'holding')
  const waiter = worker(`
    sabsync.locks.request('held-by-worker', () => parentPort.postMessage('granted?'))
    setTimeout(() => parentPort.postMessage('queued'), 50)
    setInterval(() => {}, 1000)
  `)
  t.equal(await message(waiter), 'queued')
  let q = await locks.query()
  t.equal(q.held.filter(i => i.name === 'held-by-worker')[0].clientId, `${process.pid}:${holder.threadId}`, 'the holder named by pid and threadId')
  t.same(q.pending.filter(i => i.name === 'held-by-worker').map(i => i.clientId), [`${process.pid}:${waiter.threadId}`])
  await waiter.terminate()
  q = await locks.query()
  t.same(q.pending.filter(i => i.name === 'held-by-worker'), [], 'a terminated waiter leaves the queue')
  const granted = locks.request('held-by-worker', l => l.mode)
  await sleep(20)
  await holder.terminate()
  t.equal(await granted, 'exclusive', 'the terminated holder\'s lock went to the next request')
  t.same(counts(), [0, 0])
})

t.test('a worker that throws while holding releases it too', async t => {
  const w = worker(`
    sabsync.locks.request('thrower', () => {
      parentPort.postMessage('holding')
      return new Promise(() => { setTimeout(() => { throw new Error('boom') }, 30) })
    })
  `)
  w.on('error', () => {})
  t.equal(await message(w), 'holding')
  t.equal(await locks.request('thrower', l => l.name), 'thrower')
  await w.exited
})

t.test('steal across threads: the robbed worker\'s request rejects with AbortError', async t => {
  const w = worker(`
    sabsync.locks.request('steal-me', () => { parentPort.postMessage('holding'); return new Promise(() => {}) })
      .then(() => parentPort.postMessage('resolved?'), e => parentPort.postMessage(e.name + ':' + (e instanceof DOMException)))
    setInterval(() => {}, 1000) // alive until terminated
  `)
  t.equal(await message(w), 'holding')
  const robbed = message(w)
  t.equal(await locks.request('steal-me', { steal: true }, l => l.name), 'steal-me')
  t.equal(await robbed, 'AbortError:true', 'the robbed holder\'s promise rejected with an AbortError DOMException')
  await w.terminate()
  t.same(counts(), [0, 0])
})

t.test('query() sees every thread, and a deadlock between two threads', async t => {
  const w = worker(`
    const { locks } = sabsync
    parentPort.on('message', async m => {
      setInterval(() => {}, 1000)
      if (m === 'a') locks.request('dl-a', () => { parentPort.postMessage('has a'); return new Promise(() => {}) })
      if (m === 'b') { locks.request('dl-b', () => {}); setTimeout(() => parentPort.postMessage('wants b'), 20) }
    })
  `)
  w.postMessage('a')
  t.equal(await message(w), 'has a')
  let release
  locks.request('dl-b', () => new Promise(resolve => { release = resolve }))
  w.postMessage('b')
  t.equal(await message(w), 'wants b')
  const mine = locks.request('dl-a', () => 'finally')
  const q = await locks.query()
  const them = `${process.pid}:${w.threadId}`
  const pick = (list, name) => list.filter(i => i.name === name).map(i => i.clientId)
  t.same(pick(q.held, 'dl-a'), [them])
  t.same(pick(q.held, 'dl-b'), [me])
  t.same(pick(q.pending, 'dl-a'), [me])
  t.same(pick(q.pending, 'dl-b'), [them], 'each holds what the other waits for: visible in query()')
  t.not(me, them, 'two threads, two clientIds')
  await w.terminate() // breaks the cycle: its dl-a goes to this thread
  t.equal(await mine, 'finally')
  release()
  await until(() => counts()[0] === 0, 10000, 'nothing held')
})

t.test('200,000 distinct names: nothing kept at rest', async t => {
  const N = 200000
  let most = 0
  for (let i = 0; i < N; i += 1000) {
    const batch = []
    for (let j = i; j < i + 1000; j++) batch.push(locks.request('name-' + j, () => {}))
    most = Math.max(most, counts()[1])
    await Promise.all(batch)
  }
  t.ok(most > 0 && most <= 1000, `at most the names in use at once exist (${most})`)
  t.same(counts(), [0, 0], 'no request and no name left (the tables free their buckets when empty)')
})
