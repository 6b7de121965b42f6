'use strict'
// Backpressure with pauseFn / resumeFn: a readable stream of lines is
// paused while its lines wait for a token and resumed once tokens are free
// again (async-sema's pausing example, with the tokens shared by a worker).
//
// The worker takes two of the four tokens for a while, so the main thread
// has fewer slots than it expects and must pause sooner: the pause state is
// per thread, the tokens are shared.
//
//   node examples/sema-backpressure.js
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const { Readable } = require('stream')
const readline = require('readline')
const { Sema } = require('sabsync')

const LINES = 200

if (isMainThread) {
  let rl
  let closed = false // Node 24's readline throws on pause() or resume() after close
  let pauses = 0
  let resumes = 0
  const sema = new Sema(4, {
    pauseFn: () => { pauses++; if (!closed) rl.pause() },
    resumeFn: () => { resumes++; if (!closed) rl.resume() }
  })
  const worker = new Worker(__filename, { workerData: { buffer: sema.buffer, byteOffset: sema.byteOffset } })
  let done = 0
  let mostWaiting = 0
  const work = []
  const started = new Promise(resolve => worker.once('message', resolve))
  const exited = new Promise(resolve => worker.once('exit', resolve))
  started.then(() => {
    // The stream starts flowing once the worker holds its tokens.
    const input = Readable.from((function * () {
      for (let i = 1; i <= LINES; i++) yield `line ${i}\n`
    })())
    rl = readline.createInterface({ input, terminal: false })
    rl.on('line', line => {
      work.push((async () => {
        await sema.acquire()
        mostWaiting = Math.max(mostWaiting, sema.nrWaiting())
        try {
          await new Promise(resolve => setTimeout(resolve, 1)) // parse(line)
          done++
        } finally {
          sema.release()
        }
      })())
    })
    rl.on('close', async () => {
      closed = true
      await Promise.all(work)
      await exited
      console.log(`${done} of ${LINES} lines processed`)
      console.log(`stream paused ${pauses} times, resumed ${resumes} times`)
      console.log(`at most ${mostWaiting} lines waited for a token at once`)
      if (done !== LINES || pauses === 0 || resumes === 0) process.exitCode = 1
    })
  })
} else {
  const sema = Sema.from(workerData)
  const a = sema.acquireSync()
  const b = sema.acquireSync()
  parentPort.postMessage('holding two')
  setTimeout(() => { sema.release(a); sema.release(b) }, 30)
}
