'use strict'
// Demo: a Sema of 2 tokens shared by three workers, which block in
// acquireSync(), and the main thread, which awaits acquire() and keeps its
// event loop running meanwhile. A fourth worker takes a token and is
// terminated while it holds it: the token comes back, marked recovered.
//
//   node examples/demo-sema.js
const { Worker, isMainThread, workerData, parentPort, threadId } = require('worker_threads')
const { Sema } = require('sabsync')

const TOKENS = 2
const ROUNDS = 4
const t0 = Number(process.hrtime.bigint()) / 1e6
const at = () => (Number(process.hrtime.bigint()) / 1e6 - t0).toFixed(1).padStart(6)

if (isMainThread) {
  const sema = new Sema(TOKENS)
  const handle = { buffer: sema.buffer, byteOffset: sema.byteOffset }
  const holders = new Int32Array(new SharedArrayBuffer(8)) // now, most
  const log = []
  const note = line => { log.push(line); console.log(line) }

  ;(async () => {
    note(`${at()} ms  main: Sema(${TOKENS}) shared with 3 workers`)
    const start = new Int32Array(new SharedArrayBuffer(4))
    const workers = [1, 2, 3].map(() => new Worker(__filename, { workerData: { handle, holders, t0, start, mode: 'contend' } }))
    for (const w of workers) w.on('message', note)
    const exited = workers.map(w => new Promise(resolve => w.once('exit', resolve)))
    await Promise.all(workers.map(w => new Promise(resolve => w.once('online', resolve))))
    let ticks = 0
    const ticker = setInterval(() => ticks++, 1)
    await new Promise(resolve => setTimeout(resolve, 20)) // the workers park on `start`
    Atomics.store(start, 0, 1)
    Atomics.notify(start, 0)
    for (let i = 0; i < ROUNDS; i++) {
      const waitingBefore = sema.nrWaiting()
      const token = await sema.acquire()
      const n = Atomics.add(holders, 0, 1) + 1
      if (n > Atomics.load(holders, 1)) Atomics.store(holders, 1, n)
      note(`${at()} ms  main: got token ${token} (${waitingBefore} waited before me)`)
      await new Promise(resolve => setTimeout(resolve, 10))
      Atomics.sub(holders, 0, 1)
      sema.release(token)
    }
    await Promise.all(exited)
    clearInterval(ticker)
    note(`${at()} ms  main: the event loop ran ${ticks} timer ticks while it waited for tokens`)
    note(`${at()} ms  main: at most ${Atomics.load(holders, 1)} holders at once (tokens: ${TOKENS})`)

    const doomed = new Worker(__filename, { workerData: { handle, holders, t0, mode: 'hold' } })
    note(await new Promise(resolve => doomed.once('message', resolve)))
    await doomed.terminate()
    note(`${at()} ms  main: terminated that worker while it held its token`)
    const back = [sema.tryAcquire(), sema.tryAcquire()]
    note(`${at()} ms  main: tryAcquire x2 -> ${back.join(', ')}; recovered from the dead worker: ${back.filter(tok => sema.recovered(tok)).join(', ')}`)
  })()
} else {
  const sema = Sema.from(workerData.handle)
  const holders = workerData.holders
  const nap = new Int32Array(new SharedArrayBuffer(4))
  const at = () => (Number(process.hrtime.bigint()) / 1e6 - workerData.t0).toFixed(1).padStart(6)
  if (workerData.mode === 'hold') {
    const token = sema.acquireSync()
    parentPort.postMessage(`${at()} ms  worker ${threadId}: took token ${token} and hangs`)
    Atomics.wait(nap, 0, 0)
  } else {
    Atomics.wait(workerData.start, 0, 0)
    for (let i = 0; i < ROUNDS; i++) {
      const waiting = sema.nrWaiting()
      const token = sema.acquireSync()
      const n = Atomics.add(holders, 0, 1) + 1
      if (n > Atomics.load(holders, 1)) Atomics.store(holders, 1, n)
      parentPort.postMessage(`${at()} ms  worker ${threadId}: got token ${token} (${waiting} waited before me)`)
      Atomics.wait(nap, 0, 0, 8) // work
      Atomics.sub(holders, 0, 1)
      sema.release(token)
    }
  }
}
