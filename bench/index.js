#!/usr/bin/env node
'use strict'
// The benchmark harness. Runs every case in bench/cases/*.js: each subject
// several times, interleaved, reporting min / median / max and the ratio of
// medians against the case's comparison, all from one run on one machine.
//
//   npm run bench                 the whole suite
//   npm run bench -- --quick      a short pass
//   npm run bench -- mutex sema   only cases whose name contains a word
//   npm run bench -- redis        only bench/redis.js (run after the
//                                 cases when a Redis server can be had)
//
// A case: { name, unit: 'ns/op' | 'us/op' | 'ops/s', compare, goal,
//   taskset?, subjects: { sabsync: async ({ quick }) => ({ value, check,
//   extra? }), [peer]: ... } }. `check` is the subject's own verification of
// its result: a fast wrong answer is reported as FAIL, not as speed.
// Cases with `taskset` run in a child process pinned to those CPUs; cases
// with `node: 24` run under that Node major.
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnSync } = require('child_process')
const { renderSvg } = require('./chart')

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const childCase = args.includes('--child') ? args[args.indexOf('--child') + 1] : null
const repeatsArg = args.includes('--repeats') ? Number(args[args.indexOf('--repeats') + 1]) : 0
const repeats = repeatsArg > 0 ? repeatsArg : quick ? 3 : 5
const filters = args.filter((a, i) => !a.startsWith('--') && !['--child', '--repeats'].includes(args[i - 1]))

function loadCases () {
  const dir = path.join(__dirname, 'cases')
  const cases = []
  for (const f of fs.readdirSync(dir).filter(f => f.endsWith('.js')).sort()) {
    for (const c of require(path.join(dir, f))) cases.push(c)
  }
  return cases
}

const lowerIsBetter = unit => unit !== 'ops/s'

function median (xs) {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

async function runCase (c) {
  const runs = {}
  for (const name of Object.keys(c.subjects)) runs[name] = { values: [], check: true, extra: '' }
  for (let r = 0; r < repeats; r++) {
    for (const [name, fn] of Object.entries(c.subjects)) {
      const out = await fn({ quick })
      runs[name].values.push(out.value)
      if (out.check !== true) runs[name].check = false
      if (out.extra) runs[name].extra = out.extra
    }
  }
  return runs
}

// The binary of another Node major (from the registry's `node` package,
// cached where scripts/test-matrix.sh keeps it); the addon is Node-API, so
// the same build loads there.
function nodeBinary (major) {
  if (process.versions.node.split('.')[0] === String(major)) return process.execPath
  const dir = path.join(__dirname, '..', 'build', 'matrix', 'node' + major)
  const bin = path.join(dir, 'node_modules', 'node', 'bin', 'node')
  if (!fs.existsSync(bin)) {
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, 'package.json'), '{"private":true}')
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--loglevel=error', 'node@' + major],
      { cwd: dir, stdio: 'inherit' })
    if (r.status !== 0) throw new Error('could not install node@' + major)
  }
  return fs.realpathSync(bin)
}

// Run a case in a child process: pinned to CPUs (taskset) and/or under
// another Node major (node).
function runInChild (c) {
  const node = c.node ? nodeBinary(c.node) : process.execPath
  let cmd = node
  let childArgs = ['--expose-gc', __filename, '--child', c.name, '--repeats', String(repeats)]
  if (quick) childArgs.push('--quick')
  if (c.taskset) {
    childArgs = ['-c', c.taskset, node, ...childArgs]
    cmd = 'taskset'
  }
  const p = spawnSync(cmd, childArgs, { encoding: 'utf8', maxBuffer: 1 << 24 })
  if (p.status !== 0) throw new Error(`child run of "${c.name}" failed (status ${p.status}, signal ${p.signal}): ${p.stderr || p.error || p.stdout.slice(-2000)}`)
  return JSON.parse(p.stdout.trim().split('\n').pop())
}

function summarize (c, runs) {
  const rows = []
  const cmp = runs[c.compare]
  const cmpMed = cmp ? median(cmp.values) : NaN
  for (const [name, run] of Object.entries(runs)) {
    const med = median(run.values)
    let ratio = null
    if (cmp && name !== c.compare) ratio = lowerIsBetter(c.unit) ? cmpMed / med : med / cmpMed
    rows.push({
      name,
      min: Math.min(...run.values),
      median: med,
      max: Math.max(...run.values),
      ratio,
      check: run.check,
      extra: run.extra
    })
  }
  const own = rows.find(r => r.name === 'sabsync')
  const met = c.goal == null || own == null || own.ratio == null ? null : own.ratio >= c.goal
  return { name: c.name, unit: c.unit, compare: c.compare, goal: c.goal, rows, met }
}

const fmt = v => v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)
const fmtUnit = (v, unit) => unit === 'ops/s' ? (v / 1e6).toFixed(2) + ' M' : fmt(v)

function table (results) {
  const lines = [
    '| case | subject | min | median | max | unit | ratio vs comparison | goal | notes |',
    '|---|---|---:|---:|---:|---|---:|---|---|'
  ]
  for (const r of results) {
    for (const row of r.rows) {
      const ratio = row.ratio == null ? '' : row.ratio.toFixed(2) + '×'
      let goal = ''
      if (row.name === 'sabsync' && r.goal != null) goal = `≥ ${r.goal.toFixed(2)}× ${r.met ? '**met**' : '**missed**'}`
      const notes = [row.check ? '' : '**CHECK FAILED**', row.extra].filter(Boolean).join('; ')
      const unitLabel = r.unit === 'ops/s' ? 'ops/s' : r.unit
      lines.push(`| ${r.name} | ${row.name} | ${fmtUnit(row.min, r.unit)} | ${fmtUnit(row.median, r.unit)} | ` +
        `${fmtUnit(row.max, r.unit)} | ${unitLabel} | ${ratio} | ${goal} | ${notes} |`)
    }
  }
  return lines.join('\n')
}

async function main () {
  const cases = loadCases()
  if (childCase) {
    const c = cases.find(x => x.name === childCase)
    process.stdout.write('\n' + JSON.stringify(await runCase(c)) + '\n')
    return
  }
  const chosen = cases.filter(c => filters.length === 0 || filters.some(f => c.name.toLowerCase().includes(f.toLowerCase())))
  const results = []
  for (const c of chosen) {
    process.stderr.write(`bench: ${c.name} ...\n`)
    const runs = c.taskset || c.node ? runInChild(c) : await runCase(c)
    results.push(summarize(c, runs))
  }
  const cpus = os.cpus()
  const load = os.loadavg().map(x => x.toFixed(1)).join(' / ')
  const header = [
    `Machine: ${cpus.length} × ${cpus[0] ? cpus[0].model.trim() : 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.type()} ${os.release()}`,
    `Node ${process.version}; ${new Date().toISOString().slice(0, 10)}; \`npm run bench${quick ? ' -- --quick' : ''}\`; ${repeats} runs per subject, interleaved.`,
    `Load average at the end (1 / 5 / 15 min): ${load}; on a shared 2-CPU machine, cases that spin or pin threads suffer most from other load.`,
    'Ratio: the comparison\'s median over sabsync\'s (for times; the inverse for ops/s): above 1 means sabsync is faster.'
  ].join('\n')
  const md = table(results)
  console.log(header + '\n\n' + md)
  // Only sabsync's own failed check fails the run; a peer's is reported.
  const failed = results.some(r => r.rows.some(row => row.name === 'sabsync' && !row.check))
  if (filters.length === 0 && !args.includes('--no-write')) {
    fs.writeFileSync(path.join(__dirname, 'RESULTS.md'), '# Benchmark results\n\n' + header + '\n\n' + md + '\n')
    fs.writeFileSync(path.join(__dirname, 'results.svg'), renderSvg(results))
    console.error('bench: wrote bench/RESULTS.md and bench/results.svg')
  }
  if (failed) {
    console.error('bench: sabsync failed its own check in a case')
    process.exitCode = 1
  }
  // sabsync/redis against its peers (bench/redis.js), when a Redis server
  // can be had: its own table after this one; it writes no file.
  if ((filters.length === 0 || filters.some(f => f.toLowerCase() === 'redis')) && require('./redis').available()) {
    console.log('')
    const r = spawnSync(process.execPath, [path.join(__dirname, 'redis.js'), ...(quick ? ['--quick'] : [])], { stdio: 'inherit' })
    if (r.status !== 0) process.exitCode = 1
  }
}

let finished = false
main().then(() => { finished = true }, err => {
  console.error(err)
  process.exit(1)
})
// A case that awaits something nothing will settle lets the loop run dry:
// say so instead of exiting 0 without a table.
process.on('exit', () => {
  if (!finished && process.exitCode === undefined) {
    console.error('bench: the event loop ran dry before the run finished (a case awaited something nothing settles)')
    process.exitCode = 1
  }
})
