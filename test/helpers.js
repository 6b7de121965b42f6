'use strict'
// Small helpers shared by the tap files.
const { spawn } = require('child_process')
const path = require('path')
const { Worker } = require('worker_threads')

const root = path.join(__dirname, '..')

// Poll `cond` until it is true; reject after `ms` (a hang guard, not a
// speed assertion: generous on purpose).
function until (cond, ms = 60000, what = 'condition') {
  const end = Date.now() + ms
  return new Promise((resolve, reject) => {
    (function poll () {
      let ok
      try { ok = cond() } catch (err) { return reject(err) }
      if (ok) return resolve()
      if (Date.now() > end) return reject(new Error('timed out waiting for ' + what))
      setTimeout(poll, 2)
    })()
  })
}

// A worker running `code` (a function body; `sabsync`, `workerData`,
// `parentPort` are in scope).
function worker (code, workerData, options = {}) {
  const src = `'use strict'
const sabsync = require(${JSON.stringify(root)})
const { workerData, parentPort } = require('worker_threads')
${code}`
  const w = new Worker(src, { eval: true, workerData, ...options })
  // Listen at once: a worker may exit before the test awaits it.
  w.exited = new Promise(resolve => w.once('exit', resolve))
  return w
}

function exited (w) {
  return w.exited || new Promise(resolve => w.once('exit', resolve))
}

// Run `code` in a child node process; resolve { code, signal, stdout, stderr, ms }.
function child (code, { timeout = 30000 } = {}) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint()
    const p = spawn(process.execPath, ['-e', `const sabsync = require(${JSON.stringify(root)});\n${code}`], {
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', d => { stdout += d })
    p.stderr.on('data', d => { stderr += d })
    const timer = setTimeout(() => p.kill('SIGKILL'), timeout)
    p.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, ms: Number(process.hrtime.bigint() - t0) / 1e6 })
    })
  })
}

module.exports = { until, worker, exited, child, root }
