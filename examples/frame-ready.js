'use strict'
// A decoder worker flags "frame ready" to a compositor worker with an
// AtomicFlag: the decoder writes a frame into shared memory, sets the flag
// and notifies; the compositor waits for the flag, reads the frame, clears
// the flag and notifies back. Neither thread spins.
//
//   node examples/frame-ready.js
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const { AtomicFlag } = require('sabsync')

const FRAMES = 30
const PIXELS = 1024

if (isMainThread) {
  const ready = new AtomicFlag()
  const frame = new SharedArrayBuffer(PIXELS * 4)
  const start = role => new Worker(__filename, { workerData: { role, ready, frame } })
  const compositor = start('compositor')
  start('decoder')
  compositor.on('message', ({ frames, checksum }) => {
    const expected = FRAMES * (FRAMES + 1) / 2 * PIXELS
    console.log(`compositor showed ${frames} frames, checksum ${checksum} (expected ${expected})`)
    if (frames !== FRAMES || checksum !== expected) process.exitCode = 1
  })
} else {
  const ready = AtomicFlag.from(workerData.ready)
  const pixels = new Int32Array(workerData.frame)
  if (workerData.role === 'decoder') {
    for (let f = 1; f <= FRAMES; f++) {
      ready.wait(true) // until the compositor took the last frame
      pixels.fill(f) // "decode" frame f
      ready.testAndSet() // frame ready...
      ready.notifyOne() // ...and wake the compositor
    }
  } else {
    let checksum = 0
    for (let f = 1; f <= FRAMES; f++) {
      ready.wait(false) // until a frame is ready
      for (let i = 0; i < PIXELS; i++) checksum += pixels[i]
      ready.clear() // slot free...
      ready.notifyOne() // ...and wake the decoder
    }
    parentPort.postMessage({ frames: FRAMES, checksum })
  }
}
