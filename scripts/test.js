#!/usr/bin/env node
'use strict'
// The tap files of `npm test` (every file but the long ones below) and of
// `npm run test:long` (--long: the long ones), or all of them (--all), with
// tap's terse reporter: a summary, the failures in full, and tap's
// `# { total: N, pass: P, fail: F }` line that .ci/run reads. Other
// arguments go to tap (e.g. --reporter=tap for the whole stream; files named
// there run alone).
//
// A file is long when it takes a minute or more of a loaded 2-CPU machine
// and another file in npm test covers its feature.
//
// After the run, spaces a test left in /dev/shm (sabsync.test-<pid>-<n>
// of a test process that has ended) are listed; under CI they fail the run.
const { spawnSync } = require('child_process')
const fs = require('fs')
const path = require('path')

const root = path.join(__dirname, '..')
const LONG = {
  'scribble.test.js': 'Sema and RateLimit memory flipped under racing users, seconds a seed (space-scribble and memory-safety are quick)',
  'sema-fast.test.js': 'the Sema fast path against its protocol, with terminations and scribbles (sema.test.js covers the Sema)',
  'space-wait-order.test.js': 'FIFO and SIGKILLed waiters across many processes (space-wait.test.js covers wait/notify in a space)',
  'examples-locks.test.js': 'every lock example in its own processes (examples.test.js runs the others)',
  'bench.test.js': 'the benchmark harness on real cases',
  'package.test.js': 'npm pack, an install into an empty app, tsc over it',
  'rate-limiter-redis.test.js': 'the table of RateLimiter checks on Redis, 3 processes (rate-limiter-redis-evict and the docs\' Redis blocks are quick)',
  'types.test.js': 'tsc --strict over every type test (docs.test.js compiles the docs\' TypeScript)'
}

const args = process.argv.slice(2)
const mode = args.includes('--long') ? 'long' : args.includes('--all') ? 'all' : 'quick'
const tapArgs = args.filter(a => a !== '--long' && a !== '--all')
const all = fs.readdirSync(path.join(root, 'test')).filter(f => f.endsWith('.test.js')).sort()
for (const f of Object.keys(LONG)) {
  if (!all.includes(f)) throw new Error(`scripts/test.js: LONG names test/${f}, which does not exist`)
}
// Files named on the command line run alone.
const named = tapArgs.filter(a => !a.startsWith('-') && a.endsWith('.js'))
const files = named.length > 0
  ? []
  : all.filter(f => mode === 'all' || (mode === 'long') === Object.hasOwn(LONG, f)).map(f => 'test/' + f)
if (!tapArgs.some(a => a.startsWith('--reporter') || a === '-R')) tapArgs.unshift('--reporter=terse')

const started = Date.now()
const tap = path.join(root, 'node_modules', 'tap', 'dist', 'esm', 'run.mjs')
// Into a pipe or a file, the terse reporter's live progress would be
// hundreds of redrawn lines: it prints statically where it thinks it runs
// in CI (is-in-ci), which CONTINUOUS_INTEGRATION tells it without touching
// CI, which the tests read.
const env = process.stdout.isTTY ? process.env : { ...process.env, CONTINUOUS_INTEGRATION: '1' }
const r = spawnSync(process.execPath, [tap, ...tapArgs, ...files], { cwd: root, stdio: 'inherit', env })
let status = r.status === null ? 1 : r.status

const alive = pid => {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return err.code === 'EPERM'
  }
}
const shm = '/dev/shm'
const left = fs.existsSync(shm)
  ? fs.readdirSync(shm).filter(f => {
    const m = /^sabsync\.test-(\d+)-\d+$/.exec(f)
    if (m === null || alive(Number(m[1]))) return false
    try {
      return fs.statSync(path.join(shm, f)).mtimeMs >= started - 1000
    } catch {
      return false
    }
  })
  : []
if (left.length > 0) {
  console.log(`# left in ${shm} by ended test processes: ${left.join(', ')}`)
  if (process.env.CI) status = status || 1
}
process.exit(status)
