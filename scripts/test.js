#!/usr/bin/env node
'use strict'
// The test runner of `npm test`, of `npm run test:long` and of every part of
// .ci/run that runs tap files (scripts/test-flavour.sh, test-matrix.sh,
// test-arm64.sh). Each tap file runs as `node FILE` (no tap runner: its
// loader hooks, inherited by every child process a test starts, cost more
// CPU than the tests), files side by side, JOBS at a time, the longest
// first; each file's output goes to a log of its own.
//
//   node scripts/test.js [--long | --all] [--checks] [--set NAME] [FILE ...]
//
//   (default)     the quick files: every file but those in LONG below
//   --long        the long files; --all every file
//   --set NAME    only the files of one CI dimension (SETS below)
//   FILE ...      only these (test/mutex.test.js, or just mutex)
//   --checks      also the linters and the plain C tests with the fuzz
//                 smoke run, as jobs beside the tap files (npm test)
//   --jobs N      files at a time (default: twice the CPUs; SABSYNC_TEST_JOBS)
//   --node CMD    the Node to run files with ("qemu-aarch64 /x/node" too)
//   --dir DIR     the tree whose test/ is run (a flavour's copy)
//   --logs DIR    where the logs go (default build/test-logs/LABEL)
//   --label NAME  prints `NAME: N passed, M failed` as its last line
//   --timeout S   tap's limit for a file's test (TAP_TIMEOUT), in seconds
//                 (default 300; a file took at most ~70 s at a load of 20,
//                 package.test.js sets its own 600); a file still running
//                 at twice that is killed (a hang guard)
//   --env K=V     sets K in the files' environment (LD_PRELOAD), not ours
//   --fail-on RE  a file whose log matches RE fails (a sanitizer's report)
//   --list        prints the files it would run, and their count
//
// N and M count files (and the --checks jobs): a file passes when it exits
// 0 with tap's summary and no failed assertion. Then the ten slowest files
// with their seconds, and for a failure what failed and where its log is.
//
// Nothing is left behind, whether the run passes, fails or is interrupted
// (SIGINT, SIGTERM, SIGHUP): every process a file started carries
// SABSYNC_TEST_RUN in its environment, and when the file ends, any still
// alive is killed with its descendants (and named); at the end, a space in
// /dev/shm that a test process of the run left (sabsync.test-<pid>-<n>, the
// process ended, no process holds it) is removed and named, and under CI
// fails the run; after an interrupt, so are the docs' blocks' spaces.
const { spawn, spawnSync } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')

const root = path.join(__dirname, '..')

// A file is long when it takes a minute or more of a loaded 2-CPU machine
// and another file in npm test covers its feature.
const LONG = {
  'scribble.test.js': 'Sema and RateLimit memory flipped under racing users, seconds a seed (space-scribble and memory-safety are quick)',
  'sema-fast.test.js': 'the Sema fast path against its protocol, with terminations and scribbles (sema.test.js covers the Sema)',
  'space-wait-order.test.js': 'FIFO and SIGKILLed waiters across many processes (space-wait.test.js covers wait/notify in a space)',
  'examples-locks.test.js': 'every lock example in its own processes (examples.test.js runs the others)',
  'bench.test.js': 'the benchmark harness on real cases',
  'package.test.js': 'npm pack, an install into an empty app, tsc over it',
  'rate-limiter-redis.test.js': 'the table of RateLimiter checks on Redis, 3 processes (rate-limiter-redis-evict and the docs\' Redis blocks are quick)',
  'types.test.js': 'tsc --strict over every type test (docs.test.js compiles the docs\' TypeScript)',
  'pm2-reload.test.js': 'a real PM2 daemon, 4 instances started and reloaded (space-versioned and the rate-limiter files cover changed parameters)',
  'deploy-roll.test.js': '8 processes rolled one by one in each of two tiers (space-versioned, redis-sema and shutdown cover versions, nr and signals)'
}

// The files each CI dimension runs: those whose outcome that dimension can
// change. npm test and test:long run every file once, on the Node of the
// build, with the futex parker; CONTRIBUTING.md ("What CI runs") says why
// each set is enough.
//
// Files that load no addon of the build, or whose run does not depend on
// the Node version, a parker or a sanitizer: run once (npm test / long).
const ONCE = [
  'types', // tsc over the .d.ts files: no addon, the same on any Node
  'docs', // the docs' blocks and the reference against the exports (their features run below)
  'package', // npm pack and an install: builds its own binaries
  'inside-cli-package', // the command from a packed and installed tarball, as package does
  'layers', // reads the sources (include and require graph)
  'platform', // the install script and the source's platform code, read
  'helpers', // the test helpers' output under a colouring runner
  'bench', // the benchmark harness's bookkeeping
  'pm2-reload' // PM2's daemon reloading the README's example: what it loads of the addon (a RateLimiter in a space) runs under every flavour in rate-limiter-space; under a sanitizer's preload, PM2's own reload of 4 instances outlasts its 60 s timeout
]
// sabsync/redis is plain JS over the caller's Redis client and never loads
// the addon.
const REDIS = f => /^(redis-|rate-limiter-redis|inside-redis)/.test(f)
// Shared spaces: their own futex parker on shared memory (space_lot.c,
// space_sema.c), never the in-process parker a flavour swaps.
const SPACE = f => /^space-/.test(f) || f === 'rate-limiter-space' || f === 'locks-space'
// Files that never park a thread: argument checking in JS and the spec's
// errors (their waits time out at once or are refused before any park),
// error messages, the addon's loading. They do change with V8 and Node:
// the Node matrix runs them.
const NO_PARK = ['wait-validation', 'fuzz-findings', 'kinds', 'errors', 'native-load']
// Examples: the same primitives in child processes, for their output.
const EXAMPLES = f => /^examples/.test(f)
// What the Node version changes: loading (native-load), the Atomics and
// TypedArray semantics the addon mirrors (wait-*: resizable and growable
// buffers differ between majors), async delivery and the event loop
// (wait-loop, wait-memory, wait-abort), teardown of workers and processes
// (wait-teardown, once, every primitive's dead-owner tests), workers, ESM
// and the error objects (errors), the redis client over Node's net
// and timers, and express's cluster (rate-limiter-express).
const SETS = {
  // ASan+UBSan build of the addon: every file that runs its C.
  asan: f => !ONCE.includes(f) && !REDIS(f),
  // ThreadSanitizer (npm run test:sanitize): the same files.
  tsan: f => SETS.asan(f),
  // The portable (libuv) parker: files that park a thread or wait
  // asynchronously in process memory.
  uv: f => !ONCE.includes(f) && !REDIS(f) && !SPACE(f) && !NO_PARK.includes(f),
  // Other Node majors, the same addon (Node-API).
  node: f => !ONCE.includes(f) && !SPACE(f) && !EXAMPLES(f) && f !== 'memory-safety' && f !== 'scribble',
  // linux-arm64 under qemu-user: what memory order and the CPU's atomics
  // can change, the Atomics semantics and FIFO of the lot and every
  // primitive with a fast path on shared words (test-arm64.sh says what is
  // left out and why).
  arm64: f => ['wait-atomics', 'wait-cells', 'lot', 'atomic-flag', 'mutex', 'once', 'latch', 'condvar', 'rwlock',
    'barrier', 'sema', 'sema-fast', 'sema-fair'].includes(f)
}

// Files that must not run beside another file of the same group, by name:
// { 'a-file': 'group', ... }. None needs it now: no file takes a fixed port
// (servers listen on port 0, the docs' servers on a free one), Redis tests
// keep to their own key prefix, database or private server, and test
// spaces are named for their process; and every file must pass on a
// loaded machine, so none needs the CPUs to itself.
const APART = {}

// Seconds a file took in the last run here (build/test-times.json), by the
// Node that ran it, to start the longest first; a file never timed counts
// as long.
const TIMES = path.join(root, 'build', 'test-times.json')

function parseArgs (argv) {
  const o = { mode: 'quick', checks: false, jobs: 0, node: process.execPath, dir: root, logs: '', label: '', timeout: 300, set: '', list: false, names: [], env: {}, failOn: null }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`scripts/test.js: ${a} needs a value`)
      return argv[++i]
    }
    if (a === '--long') o.mode = 'long'
    else if (a === '--all') o.mode = 'all'
    else if (a === '--checks') o.checks = true
    else if (a === '--list') o.list = true
    else if (a === '--jobs') o.jobs = Number(value())
    else if (a === '--node') o.node = value()
    else if (a === '--dir') o.dir = path.resolve(value())
    else if (a === '--logs') o.logs = path.resolve(value())
    else if (a === '--label') o.label = value()
    else if (a === '--timeout') o.timeout = Number(value())
    else if (a === '--set') o.set = value()
    else if (a === '--fail-on') o.failOn = new RegExp(value())
    else if (a === '--env') {
      const [k, ...v] = value().split('=')
      o.env[k] = v.join('=')
    } else if (a.startsWith('-')) throw new Error(`scripts/test.js: unknown option ${a}`)
    else o.names.push(a)
  }
  if (o.set && !Object.hasOwn(SETS, o.set)) throw new Error(`scripts/test.js: no set ${o.set} (${Object.keys(SETS).join(', ')})`)
  // Twice the CPUs: most files wait (on workers, child processes, Redis,
  // timeouts) more than they compute, and a file must pass on a loaded
  // machine anyway.
  const cpus = os.availableParallelism ? os.availableParallelism() : os.cpus().length
  if (!(o.jobs > 0)) o.jobs = Number(process.env.SABSYNC_TEST_JOBS) || 2 * cpus
  return o
}

// The test files to run, as names relative to the tree (test/x.test.js).
function selectFiles (o) {
  const all = fs.readdirSync(path.join(root, 'test')).filter(f => f.endsWith('.test.js')).sort()
  for (const f of Object.keys(LONG)) {
    if (!all.includes(f)) throw new Error(`scripts/test.js: LONG names test/${f}, which does not exist`)
  }
  const base = f => f.replace(/\.test\.js$/, '')
  if (o.names.length > 0) {
    return o.names.map(n => {
      const f = base(path.basename(n)) + '.test.js'
      if (!all.includes(f)) throw new Error(`scripts/test.js: no test/${f}`)
      return 'test/' + f
    })
  }
  return all
    .filter(f => o.set || o.mode === 'all' || (o.mode === 'long') === Object.hasOwn(LONG, f))
    .filter(f => !o.set || SETS[o.set](base(f)))
    .map(f => 'test/' + f)
}

const alive = pid => {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return err.code === 'EPERM'
  }
}

// The pids in /proc (as strings), or none where it cannot be read.
function procPids () {
  try {
    return fs.readdirSync('/proc').filter(p => /^\d+$/.test(p))
  } catch {
    return []
  }
}

// Processes (this user's) whose environment carries SABSYNC_TEST_RUN=<tag>
// (a tag ending in '/' matches every tag it starts), with their command.
function tagged (tag) {
  const found = []
  const pids = procPids()
  const wanted = 'SABSYNC_TEST_RUN=' + tag
  for (const p of pids) {
    if (Number(p) === process.pid) continue
    let env
    try {
      env = fs.readFileSync(`/proc/${p}/environ`, 'latin1')
    } catch {
      continue
    }
    const hit = env.split('\0').some(v => tag.endsWith('/') ? v.startsWith(wanted) : v === wanted)
    if (!hit) continue
    let cmd = ''
    try {
      cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'latin1').split('\0').join(' ').trim().slice(0, 80)
    } catch {}
    found.push({ pid: Number(p), cmd })
  }
  return found
}

// Each process's parent: { pid: ppid }.
function parents () {
  const map = new Map()
  for (const p of procPids()) {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'latin1')
      map.set(Number(p), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]))
    } catch {}
  }
  return map
}

// Kills every process carrying `tag`, and their descendants (a
// redis-server overwrites its environment with its title), until none is
// left; answers them.
function killTagged (tag) {
  const killed = []
  for (let round = 0; round < 20; round++) {
    const left = tagged(tag)
    const ppid = parents()
    const all = new Map(left.map(p => [p.pid, p]))
    for (let grew = true; grew;) {
      grew = false
      for (const [pid, parent] of ppid) {
        if (!all.has(pid) && all.has(parent) && pid !== process.pid) {
          let cmd = ''
          try { cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim().slice(0, 80) } catch {}
          all.set(pid, { pid, cmd })
          grew = true
        }
      }
    }
    if (all.size === 0) break
    for (const p of all.values()) {
      try { process.kill(p.pid, 'SIGKILL') } catch {}
      if (!killed.some(k => k.pid === p.pid)) killed.push(p)
    }
    spawnSync('sleep', ['0.05'])
  }
  return killed
}

// /dev/shm files some process has open or mapped.
function shmInUse () {
  const used = new Set()
  for (const p of procPids()) {
    try {
      for (const line of fs.readFileSync(`/proc/${p}/maps`, 'latin1').split('\n')) {
        const at = line.indexOf('/dev/shm/')
        if (at >= 0) used.add(line.slice(at).replace(/ \(deleted\)$/, ''))
      }
    } catch {}
    try {
      for (const fd of fs.readdirSync(`/proc/${p}/fd`)) {
        try {
          const target = fs.readlinkSync(`/proc/${p}/fd/${fd}`)
          if (target.startsWith('/dev/shm/')) used.add(target)
        } catch {}
      }
    } catch {}
  }
  return used
}

// The spaces the docs' blocks open by name (test/docs.test.js unlinks
// each after its block; an interrupt leaves it).
function docsSpaces () {
  try {
    const { blocks, spaceNames } = require('../test/fixtures/markdown/blocks')
    const pages = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).map(f => 'docs/' + f)].filter(f => f.endsWith('.md'))
    return new Set(pages.flatMap(f => blocks(path.join(root, f)).flatMap(b => spaceNames(b.code))).map(n => 'sabsync.' + n))
  } catch {
    return new Set()
  }
}

// Spaces this run left in /dev/shm, removed; answers { test, other }.
// A test space is named for the process that made it
// (sabsync.test-<pid>-<n>): one of `pids`, the processes of the run, that
// has ended, or where they are not known (null: .ci/run's exit, on a
// machine of its own) any ended one. `others`: also the docs' spaces
// (docsSpaces). Only spaces changed since `started` that no process holds.
function sweepShm (started, pids, others) {
  const shm = '/dev/shm'
  const out = { test: [], other: [] }
  if (!fs.existsSync(shm)) return out
  const named = others ? docsSpaces() : new Set()
  let used = null
  for (const f of fs.readdirSync(shm)) {
    const m = /^sabsync\.test-(\d+)-\d+$/.exec(f)
    if (m === null && !named.has(f)) continue
    if (m !== null && (alive(Number(m[1])) || (pids !== null && !pids.has(Number(m[1]))))) continue
    const file = path.join(shm, f)
    let st
    try { st = fs.statSync(file) } catch { continue }
    if (st.mtimeMs < started - 1000 && st.ctimeMs < started - 1000) continue
    if (used === null) used = shmInUse()
    if (used.has(file)) continue
    try { fs.unlinkSync(file) } catch { continue }
    ;(m !== null ? out.test : out.other).push(f)
  }
  return out
}

// tap's last summary line in a log: { total, pass, fail } or null.
function tapSummary (text) {
  const lines = text.split('\n').filter(l => /^# \{ total: \d+/.test(l))
  if (lines.length === 0) return null
  const last = lines[lines.length - 1]
  const n = k => {
    const m = new RegExp(k + ': (\\d+)').exec(last)
    return m ? Number(m[1]) : 0
  }
  return { total: n('total'), pass: n('pass'), fail: n('fail') }
}

// What a failed log says went wrong: each failing assertion with its
// diagnostics (at most 60 lines), then the last lines.
function failureExcerpt (text, tail = 15) {
  const lines = text.split('\n')
  const out = []
  let show = false
  for (const l of lines) {
    if (/^ *not ok /.test(l)) show = true
    if (show) out.push(l)
    if (out.length >= 60) break
    if (/^ *\.\.\.$/.test(l)) show = false
  }
  return [...out, '  [last lines]', ...lines.slice(-tail - 1).filter((l, i, a) => i < a.length - 1 || l !== '')].join('\n')
}

function main () {
  if (process.argv[2] === '--sweep') return sweep(process.argv[3], Number(process.argv[4]))
  const o = parseArgs(process.argv.slice(2))
  const files = selectFiles(o)
  if (o.list) {
    for (const f of files) console.log(f)
    console.log(`${files.length} files`)
    return
  }
  const label = o.label || o.set || (o.names.length > 0 ? 'files' : o.mode)
  const logs = o.logs || path.join(root, 'build', 'test-logs', label.replace(/[^\w.-]+/g, '-'))
  fs.rmSync(logs, { recursive: true, force: true })
  fs.mkdirSync(logs, { recursive: true })
  const node = o.node.split(' ').filter(Boolean)
  // Tags nest: a run inside .ci/run's carries its tag as a prefix.
  const run = `${process.env.SABSYNC_TEST_RUN || ''}${process.pid}-${Date.now()}/`
  const started = Date.now()

  // Emulation and sanitizers change which files are long.
  const timesKey = `${o.node} ${o.env.LD_PRELOAD || ''}`.trim()
  let times = {}
  try { times = JSON.parse(fs.readFileSync(TIMES, 'utf8')) } catch {}
  const mine = (times !== null && typeof times[timesKey] === 'object' && times[timesKey]) || {}
  const weight = f => mine[path.basename(f)] ?? 1e6

  // A job: a tap file or a check (a command); longest first.
  const jobs = files.map(f => ({ name: path.basename(f, '.test.js'), file: f, cmd: [...node, f], tap: true }))
    .sort((a, b) => weight(b.file) - weight(a.file))
  if (o.checks) {
    // The linters and the C tests first: they take CPU from the start.
    jobs.unshift(
      { name: 'lint (standard, clang-format)', cmd: ['npm', 'run', 'lint', '--silent'], tap: false },
      { name: 'C tests (plain) and fuzz smoke', cmd: ['make', '-s', '-C', 'test/c', 'plain', 'fuzz-smoke'], tap: false }
    )
  }

  const env = {
    ...process.env,
    TAP_TIMEOUT: String(o.timeout),
    // tap prints plain TAP into a file; a child's colours would be noise.
    FORCE_COLOR: '0',
    NODE_DISABLE_COLORS: '1',
    ...o.env
  }
  delete env.NODE_OPTIONS

  // The processes of this run, for the spaces they may leave: each file's,
  // and those its processes start (seen twice a second).
  const pids = new Set()
  const watch = setInterval(() => {
    for (const p of tagged(run)) pids.add(p.pid)
  }, 500)
  const results = []
  const running = new Map()
  let interrupted = null

  const t0 = Date.now()
  console.log(`${label}: ${jobs.length} ${o.checks ? 'jobs' : 'files'}, ${o.jobs} at a time; logs in ${path.relative(process.cwd(), logs) || '.'}`)

  async function finish (job, code, signal) {
    clearTimeout(job.timer)
    const seconds = (Date.now() - job.t0) / 1000
    // Processes the file left: killed, and named. A redis-server's guard
    // shell stops it when its pipe closes: such exits get a moment.
    let leftover = tagged(job.tag)
    for (let i = 0; i < 20 && leftover.length > 0; i++) {
      await new Promise(resolve => setTimeout(resolve, 100))
      leftover = tagged(job.tag)
    }
    if (leftover.length > 0) leftover = killTagged(job.tag)
    running.delete(job)
    const text = fs.readFileSync(job.log, 'utf8')
    const summary = job.tap ? tapSummary(text) : null
    let ok = code === 0 && (!job.tap || (summary !== null && summary.fail === 0))
    let why = ''
    if (job.timedOut) why = `killed after ${o.timeout * 2 + 30} s (hang guard)`
    else if (signal) why = `ended by ${signal}`
    else if (code !== 0) why = `exit ${code}`
    else if (job.tap && summary === null) why = 'no tap summary'
    else if (job.tap && summary.fail > 0) why = `${summary.fail} failed assertions`
    if (ok && o.failOn !== null && o.failOn.test(text)) {
      ok = false
      why = `its log matches ${o.failOn}`
    }
    if (interrupted && !ok) why = 'interrupted'
    const r = { job, ok, why, seconds, summary, text, leftover }
    results.push(r)
    if (!interrupted) {
      const status = ok ? 'ok' : 'FAILED'
      const asserts = summary ? ` (${summary.pass} asserts)` : ''
      const left = leftover.length ? `; killed what it left running: ${leftover.map(p => p.cmd).join('; ')}` : ''
      console.log(`${status.padEnd(6)} ${job.name} ${seconds.toFixed(1)} s${asserts}${ok ? '' : ': ' + why}${left}`)
      if (!ok) console.log(`       log: ${job.log}`)
    }
    schedule()
  }

  function start (job) {
    job.tag = run + job.name
    job.log = path.join(logs, job.name.replace(/[^\w.-]+/g, '-') + '.log')
    const fd = fs.openSync(job.log, 'w')
    job.t0 = Date.now()
    // Its own process group, so that a hang is killed with its children.
    const p = spawn(job.cmd[0], job.cmd.slice(1), {
      cwd: job.tap ? o.dir : root,
      env: { ...env, SABSYNC_TEST_RUN: job.tag },
      stdio: ['ignore', fd, fd],
      detached: true
    })
    fs.closeSync(fd)
    job.proc = p
    if (p.pid) pids.add(p.pid)
    running.set(job, p)
    job.timer = setTimeout(() => {
      job.timedOut = true
      try { process.kill(-p.pid, 'SIGKILL') } catch {}
    }, o.timeout * 2000 + 30000)
    p.on('error', err => {
      fs.appendFileSync(job.log, `\nscripts/test.js: could not start ${job.cmd.join(' ')}: ${err.message}\n`)
    })
    p.on('close', (code, signal) => finish(job, code, signal))
  }

  // Whether `job` may start beside what runs now.
  const fits = job => {
    const g = APART[job.name]
    return g === undefined || ![...running.keys()].some(j => APART[j.name] === g)
  }

  function schedule () {
    while (running.size < o.jobs) {
      if (interrupted) break
      const job = jobs.find(j => !j.started && fits(j))
      if (job === undefined) break
      job.started = true
      start(job)
    }
    if (running.size === 0 && (interrupted || jobs.every(j => j.started))) report()
  }

  let reported = false
  function report () {
    if (reported) return
    reported = true
    // Processes of this run still alive (an interrupt): killed.
    const stray = killTagged(run)
    clearInterval(watch)
    const shm = sweepShm(started, pids, interrupted !== null)
    const failed = results.filter(r => !r.ok)
    const passed = results.filter(r => r.ok)

    if (!interrupted) {
      // Read again: runs of other flavours may have written since.
      let now = {}
      try { now = JSON.parse(fs.readFileSync(TIMES, 'utf8')) } catch {}
      if (now === null || typeof now !== 'object') now = {}
      const timed = { ...(typeof now[timesKey] === 'object' ? now[timesKey] : {}) }
      for (const r of results) if (r.job.tap && r.ok) timed[path.basename(r.job.file)] = Math.round(r.seconds * 10) / 10
      now[timesKey] = timed
      for (const k of Object.keys(now)) if (typeof now[k] !== 'object') delete now[k]
      try { fs.writeFileSync(TIMES, JSON.stringify(now, null, 1) + '\n') } catch {}
    }

    for (const r of failed) {
      console.log(`\n--- ${r.job.name} failed: ${r.why}; log: ${r.job.log}`)
      if (!interrupted) console.log(failureExcerpt(r.text))
    }
    const slow = results.filter(r => r.job.tap).sort((a, b) => b.seconds - a.seconds).slice(0, 10)
    console.log(`\nslowest files: ${slow.map(r => `${r.job.name} ${r.seconds.toFixed(1)} s`).join(', ')}`)
    const asserts = results.reduce((n, r) => n + (r.summary ? r.summary.pass : 0), 0)
    console.log(`${label}: ${Math.round((Date.now() - t0) / 1000)} s; ${asserts} assertions passed in ${results.filter(r => r.job.tap).length} files`)
    let extra = 0
    if (stray.length > 0) console.log(`killed ${stray.length} processes left running: ${stray.map(p => p.cmd).join('; ')}`)
    if (shm.other.length > 0) console.log(`removed from /dev/shm, a docs block's space that no process holds: ${shm.other.join(', ')}`)
    if (shm.test.length > 0) {
      console.log(`# left in /dev/shm by ended test processes (removed): ${shm.test.join(', ')}`)
      if (process.env.CI) extra = 1
    }
    if (interrupted) {
      const notRun = jobs.filter(j => !j.started).length
      console.log(`interrupted by ${interrupted}: ${notRun} not run`)
    }
    const nFail = failed.length + extra + (interrupted ? jobs.filter(j => !j.started).length : 0)
    console.log(`${o.label ? o.label + ': ' : ''}${passed.length} passed, ${nFail} failed`)
    process.exitCode = nFail > 0 || interrupted ? 1 : 0
    if (interrupted) process.exit(interrupted === 'SIGINT' ? 130 : 143)
  }

  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      if (interrupted) return
      interrupted = sig
      for (const [, p] of running) {
        try { process.kill(-p.pid, 'SIGKILL') } catch {}
      }
      if (running.size === 0) report()
    })
  }
  schedule()
}

// `--sweep TAG SINCE_MS` (.ci/run's exit): kills what carries TAG and
// removes the spaces of /dev/shm made since then that nobody holds.
function sweep (tag, since) {
  if (!tag || !tag.endsWith('/') || !(since > 0)) throw new Error('scripts/test.js --sweep TAG/ SINCE_MS')
  const stray = killTagged(tag)
  if (stray.length > 0) console.log(`killed ${stray.length} processes left running: ${stray.map(p => p.cmd).join('; ')}`)
  const shm = sweepShm(since, null, true)
  const gone = [...shm.test, ...shm.other]
  if (gone.length > 0) console.log(`removed from /dev/shm, held by no process: ${gone.join(', ')}`)
}

if (require.main === module) main()

module.exports = { LONG, SETS, ONCE }
