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
// `parentPort` are in scope). New tests use fixture() instead: a body in a
// file that the linter reads.
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

// The absolute path of test/fixtures/<name>.js.
const fixturePath = name => path.join(__dirname, 'fixtures', name + '.js')

// The source of an eval'd worker that runs test/fixtures/<name>.js, for
// workers started inside a child process's code: new Worker(src, { eval:
// true }). A worker started from the file's path instead runs its main
// module through the loader hooks the test runner passes in execArgv (tap's
// TypeScript import), which took 10 to 20 s a worker on a loaded machine
// and made tests time out; a worker that evaluates require(file) starts as
// fast as one with an inline body, in the same environment.
const fixtureSource = name => `require(${JSON.stringify(fixturePath(name))})`

// A worker running test/fixtures/<name>.js (`name` without the .js), with
// `workerData`. Each worker body of the tests is such a file, where the
// linter reads it and a reader finds it; `exited` as for worker().
function fixture (name, workerData, options = {}) {
  const w = new Worker(fixtureSource(name), { eval: true, workerData, ...options })
  w.exited = new Promise(resolve => w.once('exit', resolve))
  return w
}

// Resolves after `ms` (to let other threads run, never to assert speed).
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// Threads waiting anywhere on the parking lot, from its per-bucket
// counters (lib/lot.js); null where the addon keeps none. Loaded on first
// use: some test files never load the addon.
function lotWaiters () {
  const { counts } = require('../lib/lot')
  if (counts === null) return null
  const stride = require('../lib/native').constants.COUNT_STRIDE
  let n = 0
  for (let i = 0; i < counts.length; i += stride) n += Atomics.load(counts, i)
  return n
}

// The next message a worker posts.
const message = w => new Promise(resolve => w.once('message', resolve))

function exited (w) {
  return w.exited || new Promise(resolve => w.once('exit', resolve))
}

// The environment for a child process whose output a test compares as
// text. In a terminal, tap sets FORCE_COLOR for the test files, and a child
// inherits it: its console.log would then colour numbers (`exit with
// \x1b[33m2\x1b[39m waiting`) even though its stdout is a pipe. Without
// FORCE_COLOR the child sees a pipe and prints plain text, in a terminal, a
// pipe and CI alike.
function plainEnv (extra = {}) {
  const env = { ...process.env, ...extra }
  delete env.FORCE_COLOR
  env.NODE_DISABLE_COLORS = '1'
  return env
}

// The command and arguments that run this Node with `args`. Under
// emulation (scripts/test-arm64.sh), process.execPath is a binary for
// another machine, which this one runs only through the emulator that runs
// us: SABSYNC_TEST_EMULATOR names it, and children start through it too.
function nodeCommand (args) {
  const emulator = (process.env.SABSYNC_TEST_EMULATOR || '').split(' ').filter(Boolean)
  if (emulator.length === 0) return [process.execPath, args]
  return [emulator[0], [...emulator.slice(1), process.execPath, ...args]]
}

// Run `code` in a child node process; resolve { code, signal, stdout, stderr, ms }.
// `sabsync` is loaded there first, unless `load` is false.
function child (code, { timeout = 30000, load = true } = {}) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint()
    const prelude = load ? `const sabsync = require(${JSON.stringify(root)});\n` : ''
    const [cmd, args] = nodeCommand(['-e', prelude + code])
    const p = spawn(cmd, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: plainEnv()
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

// For the conformance tests of wait / waitAsync / notify: the intrinsic
// TypedArray getters (an own `length` or `buffer` cannot fool them), a way
// to detach a buffer, and which buffer kinds this Node has. Resizable
// ArrayBuffers and growable SharedArrayBuffers (ES2024) are missing on
// Node 18, where `maxByteLength` is ignored: the cases that need them are
// left out there, and `noteMissingBuffers(t)` says so in the output.
const TA_PROTO = Object.getPrototypeOf(Int32Array.prototype)
const taGetter = name => Object.getOwnPropertyDescriptor(TA_PROTO, name).get
const taTag = taGetter(Symbol.toStringTag)
const detach = buf => { structuredClone(buf, { transfer: [buf] }) }
const HAS_RESIZABLE = typeof ArrayBuffer.prototype.resize === 'function'
const HAS_GROWABLE = typeof SharedArrayBuffer.prototype.grow === 'function'
function noteMissingBuffers (t) {
  if (!HAS_RESIZABLE) t.comment('no resizable ArrayBuffer in this Node: its cases are left out')
  if (!HAS_GROWABLE) t.comment('no growable SharedArrayBuffer in this Node: its cases are left out')
}

// An error thrown on purpose by a conversion hook, tagged with where.
class Poison extends Error {
  constructor (tag) {
    super('poison ' + tag)
    this.tag = tag
  }
}

module.exports = {
  until,
  worker,
  fixture,
  fixturePath,
  fixtureSource,
  sleep,
  message,
  lotWaiters,
  exited,
  child,
  plainEnv,
  nodeCommand,
  root,
  TA_PROTO,
  taGetter,
  taTag,
  detach,
  HAS_RESIZABLE,
  HAS_GROWABLE,
  noteMissingBuffers,
  Poison
}
