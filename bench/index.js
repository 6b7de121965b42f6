#!/usr/bin/env node
'use strict'
// The benchmark harness. Runs every case in bench/cases/*.js: each subject
// several times, interleaved, reporting min / median / max and the ratio of
// medians against the case's comparison, all from one run on one machine.
//
//   npm run bench                 the whole suite; prints the table
//   npm run bench -- --quick      a short pass
//   npm run bench -- mutex sema   only cases whose name contains a word
//   npm run bench -- --write      the whole suite, and write the committed
//                                 bench/RESULTS.md and bench/results.svg
//   npm run bench:setup           install the other Node majors that cases
//                                 run under (from the npm registry's `node`
//                                 package, into build/matrix/); without
//                                 them those cases are skipped, with a note
//   npm run bench -- redis        only bench/redis.js (run after the
//                                 cases when a Redis server can be had)
//   npm run bench -- --before DIR another checkout of sabsync, built (or
//                                 SABSYNC_BENCH_BEFORE=DIR): each case that
//                                 both have runs its sabsync subject from
//                                 DIR too, as the row "sabsync before",
//                                 interleaved with this tree's, and a table
//                                 of after against before follows
//
// A case: { name, unit: 'ns/op' | 'us/op' | 'ops/s', compare, goal,
//   taskset?, node?, tallyNote?, subjects: { sabsync: async ({ quick }) =>
//   ({ value, check, extra?, tally? }), [peer]: ... } }. `check` is the
// subject's own verification of its result: a fast wrong answer is reported
// as a failure, not as speed. A row's notes state what its runs found:
// `check` over every run ("CHECK FAILED in 2 of 5 runs"), and `tally` (an
// object of counts) summed over the runs and worded by the case's
// `tallyNote(total, runs)`; else `extra` when every run said the same, or
// the median run's `extra`, labelled so. Cases with `taskset` run in a
// child process pinned to those CPUs; cases with `node: 24` run under that
// Node major. (`--cases DIR` and `--results DIR` point the harness at other
// cases and another place to write: test/bench.test.js uses them.)
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnSync } = require('child_process')
const { renderSvg } = require('./chart')
const { sample, otherCpus, calibrateEach } = require('./support/other-load')

const args = process.argv.slice(2)
const quick = args.includes('--quick')
const write = args.includes('--write')
const valueOf = flag => args.includes(flag) ? args[args.indexOf(flag) + 1] : null
const childCase = valueOf('--child')
const repeatsArg = Number(valueOf('--repeats'))
const repeats = repeatsArg > 0 ? repeatsArg : quick ? 3 : 5
const DEFAULT_CASES = path.join(__dirname, 'cases')
const casesDir = path.resolve(valueOf('--cases') || DEFAULT_CASES)
const resultsDir = path.resolve(valueOf('--results') || __dirname)
const VALUED = ['--child', '--repeats', '--cases', '--results', '--before']
const beforeDir = valueOf('--before') || process.env.SABSYNC_BENCH_BEFORE || null
const BEFORE = 'sabsync before'
const filters = args.filter((a, i) => !a.startsWith('--') && !VALUED.includes(args[i - 1]))

function loadCases (dir = casesDir) {
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

// Every run of every subject: its value, its check, its extra and its tally.
async function runCase (c) {
  const runs = {}
  for (const name of Object.keys(c.subjects)) runs[name] = { values: [], checks: [], extras: [], tally: null }
  for (let r = 0; r < repeats; r++) {
    for (const [name, fn] of Object.entries(c.subjects)) {
      const out = await fn({ quick })
      const run = runs[name]
      run.values.push(out.value)
      run.checks.push(out.check === true)
      run.extras.push(out.extra || '')
      if (out.tally) {
        run.tally = run.tally || {}
        for (const [k, v] of Object.entries(out.tally)) run.tally[k] = (run.tally[k] || 0) + v
      }
    }
  }
  return runs
}

// Another Node major, from the registry's `node` package, where
// scripts/test-matrix.sh keeps it (the addon is Node-API: the same build
// loads there). `npm run bench:setup` installs it; a run never does.
const matrixDir = major => path.join(__dirname, '..', 'build', 'matrix', 'node' + major)
const matrixBin = major => path.join(matrixDir(major), 'node_modules', 'node', 'bin', 'node')
const isCurrent = major => process.versions.node.split('.')[0] === String(major)

// The binary to run a case under, or null when that Node is not installed.
function nodeBinary (major) {
  if (isCurrent(major)) return process.execPath
  return fs.existsSync(matrixBin(major)) ? fs.realpathSync(matrixBin(major)) : null
}

function setup (cases) {
  const majors = [...new Set(cases.map(c => c.node).filter(Boolean))].filter(m => !isCurrent(m))
  for (const major of majors) {
    if (fs.existsSync(matrixBin(major))) {
      console.log(`bench:setup: Node ${major} is installed (${matrixBin(major)})`)
      continue
    }
    const dir = matrixDir(major)
    fs.mkdirSync(dir, { recursive: true })
    // A package.json of its own, or npm would install into ours.
    fs.writeFileSync(path.join(dir, 'package.json'), '{"private":true}')
    console.log(`bench:setup: installing node@${major} from the npm registry into ${dir}`)
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--loglevel=error', 'node@' + major],
      { cwd: dir, stdio: 'inherit' })
    if (r.status !== 0) throw new Error('bench:setup: could not install node@' + major)
  }
  if (majors.length === 0) console.log('bench:setup: no case needs another Node')
}

// Run a case in a child process: pinned to CPUs (taskset) and/or under
// another Node major (node).
function runInChild (c, dir = casesDir) {
  const node = c.node ? nodeBinary(c.node) : process.execPath
  let cmd = node
  let childArgs = ['--expose-gc', __filename, '--child', c.name, '--repeats', String(repeats), '--cases', dir]
  if (quick) childArgs.push('--quick')
  if (c.taskset) {
    childArgs = ['-c', c.taskset, node, ...childArgs]
    cmd = 'taskset'
  }
  const p = spawnSync(cmd, childArgs, { encoding: 'utf8', maxBuffer: 1 << 24 })
  if (p.status !== 0) throw new Error(`child run of "${c.name}" failed (status ${p.status}, signal ${p.signal}): ${p.stderr || p.error || p.stdout.slice(-2000)}`)
  return JSON.parse(p.stdout.trim().split('\n').pop())
}

// What a row's runs found, in words (see the top of this file).
function notesOf (c, run) {
  const n = run.values.length
  const failed = run.checks.filter(ok => !ok).length
  const notes = []
  if (failed > 0) notes.push(`**CHECK FAILED** in ${failed} of ${n} runs`)
  if (run.tally && c.tallyNote) {
    notes.push(c.tallyNote(run.tally, n))
  } else if (run.extras.some(Boolean)) {
    if (run.extras.every(e => e === run.extras[0])) {
      notes.push(run.extras[0])
    } else {
      const med = median(run.values)
      const i = run.values.reduce((best, v, j) => Math.abs(v - med) < Math.abs(run.values[best] - med) ? j : best, 0)
      notes.push(`median run: ${run.extras[i]}`)
      run.checks.forEach((ok, j) => { if (!ok && j !== i && run.extras[j]) notes.push(`failed run ${j + 1}: ${run.extras[j]}`) })
    }
  }
  return notes.join('; ')
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
      check: run.checks.every(Boolean),
      notes: notesOf(c, run)
    })
  }
  const own = rows.find(r => r.name === 'sabsync')
  const met = c.goal == null || own == null || own.ratio == null ? null : own.ratio >= c.goal
  return { name: c.name, unit: c.unit, compare: c.compare, goal: c.goal, rows, met }
}

const fmt = v => v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)
const fmtUnit = (v, unit) => unit === 'ops/s' ? (v / 1e6).toFixed(2) + ' M' : fmt(v)

// The "other CPU" cell: CPUs' worth of other work during the case (the
// whole case, every subject and run), marked when it took half the
// machine or more.
// And when the machine itself ran slow around the case (on some CPU, just
// before or just after it, the fixed work of calibrateEach() took 1.25
// times its time on the fastest CPU at the run's start, or more):
// ' **slowed ×1.9**'.
function otherCell (other, cpus, slowed) {
  if (other == null) return ''
  return other.toFixed(1) + (other >= cpus / 2 ? ' **noisy**' : '') +
    (slowed != null && slowed >= 1.25 ? ` **slowed ×${slowed.toFixed(1)}**` : '')
}

function table (results) {
  const lines = [
    '| case | subject | min | median | max | unit | ratio vs comparison | goal | other CPU | notes |',
    '|---|---|---:|---:|---:|---|---:|---|---:|---|'
  ]
  const cpus = os.cpus().length
  for (const r of results) {
    if (r.skipped) {
      lines.push(`| ${r.name} | (skipped) | | | | ${r.unit} | | | | ${r.skipped} |`)
      continue
    }
    for (const row of r.rows) {
      const ratio = row.ratio == null ? '' : row.ratio.toFixed(2) + '×'
      let goal = ''
      if (row.name === 'sabsync' && r.goal != null) goal = `≥ ${r.goal.toFixed(2)}× ${r.met ? '**met**' : '**missed**'}`
      const notes = row.notes
      const unitLabel = r.unit === 'ops/s' ? 'ops/s' : r.unit
      lines.push(`| ${r.name} | ${row.name} | ${fmtUnit(row.min, r.unit)} | ${fmtUnit(row.median, r.unit)} | ` +
        `${fmtUnit(row.max, r.unit)} | ${unitLabel} | ${ratio} | ${goal} | ${otherCell(r.other, cpus, r.slowed)} | ${notes} |`)
    }
  }
  return lines.join('\n')
}

// After against before: each case's sabsync median over the earlier
// tree's (times: before / after, so above 1 means faster now).
function beforeTable (results) {
  const lines = [
    `Before: ${beforeDir}. Ratio: the earlier tree's median over this tree's (for times; the inverse for ops/s): above 1 means faster now.`,
    '',
    '| case | unit | before (median) | after (median) | after vs before |',
    '|---|---|---:|---:|---:|'
  ]
  for (const r of results) {
    const now = r.rows && r.rows.find(x => x.name === 'sabsync')
    const then = r.rows && r.rows.find(x => x.name === BEFORE)
    if (!now || !then) continue
    const ratio = lowerIsBetter(r.unit) ? then.median / now.median : now.median / then.median
    lines.push(`| ${r.name} | ${r.unit} | ${fmtUnit(then.median, r.unit)} | ${fmtUnit(now.median, r.unit)} | ${ratio.toFixed(2)}× |`)
  }
  return lines.join('\n')
}

async function main () {
  const cases = loadCases()
  if (args.includes('--setup')) return setup(cases)
  if (childCase) {
    const c = cases.find(x => x.name === childCase)
    process.stdout.write('\n' + JSON.stringify(await runCase(c)) + '\n')
    return
  }
  if (write && filters.length > 0) {
    console.error('bench: --write records the whole suite; leave out the case filters (' + filters.join(' ') + ')')
    process.exitCode = 2
    return
  }
  const chosen = cases.filter(c => filters.length === 0 || filters.some(f => c.name.toLowerCase().includes(f.toLowerCase())))
  // The earlier tree's cases that this tree has too, by name, with a
  // sabsync subject.
  const beforeCases = new Map()
  if (beforeDir) {
    for (const c of loadCases(path.join(path.resolve(beforeDir), 'bench', 'cases'))) {
      if (c.subjects.sabsync && cases.some(x => x.name === c.name)) beforeCases.set(c.name, c)
    }
    console.error(`bench: ${beforeCases.size} cases also run from ${beforeDir}`)
  }
  const results = []
  const ncpu = os.cpus().length
  const cpuPace = [calibrateEach(ncpu)]
  // The fixed work's time on the fastest CPU at the start: a CPU that
  // takes 1.25 times as long, just before or after a case, marks its row.
  const fastest = cpuPace[0] ? Math.min(...cpuPace[0]) : null
  const slowest = () => { const p = fastest ? calibrateEach(ncpu) : null; return p ? Math.max(...p) / fastest : null }
  // The calibration after a case is the one before the next.
  let slowBefore = slowest()
  for (const c of chosen) {
    if (c.node && nodeBinary(c.node) === null) {
      const why = `needs Node ${c.node}, not installed: run \`npm run bench:setup\` first`
      console.error(`bench: skipped "${c.name}": ${why}`)
      results.push({ name: c.name, unit: c.unit, compare: c.compare, goal: c.goal, rows: [], met: null, skipped: why })
      continue
    }
    process.stderr.write(`bench: ${c.name} ...\n`)
    const before = sample()
    const old = beforeCases.get(c.name)
    let runs
    if (c.taskset || c.node) {
      runs = runInChild(c)
      // The earlier tree's case in a child of its own (its cases, this
      // harness): its sabsync row, after this tree's runs.
      if (old) runs[BEFORE] = runInChild(old, path.join(beforeDir, 'bench', 'cases')).sabsync
    } else {
      // One more subject, run in turn with the others.
      runs = await runCase(old ? { ...c, subjects: { ...c.subjects, [BEFORE]: old.subjects.sabsync } } : c)
    }
    const summary = summarize(c, runs)
    summary.other = otherCpus(before, sample())
    const slowAfter = slowest()
    summary.slowed = slowBefore === null || slowAfter === null ? null : Math.max(slowBefore, slowAfter)
    slowBefore = slowAfter
    results.push(summary)
  }
  cpuPace.push(calibrateEach(ncpu))
  const cpus = os.cpus()
  const load = os.loadavg().map(x => x.toFixed(1)).join(' / ')
  const header = [
    `Machine: ${cpus.length} × ${cpus[0] ? cpus[0].model.trim() : 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.type()} ${os.release()}`,
    `Node ${process.version}; ${new Date().toISOString().slice(0, 10)}; \`npm run bench${quick ? ' -- --quick' : ''}\`; ${repeats} runs per subject, interleaved.`,
    `Load average at the end (1 / 5 / 15 min): ${load}; on a shared 2-CPU machine, cases that spin or pin threads suffer most from other load.`,
    `Other CPU: CPUs' worth of time that work other than this benchmark took during each case (/proc/stat less this process and its children), of ${cpus.length}; **noisy** from half the machine: such a row measures the machine's load as much as the code. ` +
      '**slowed ×N**: on some CPU, just before or just after the case, a fixed piece of work (bench/support/other-load.js) took N times as long as on the fastest CPU at the start of the run (a virtual machine\'s host taking or slowing its CPUs, which the other-CPU count cannot see): the row measures the host too.',
    ...(cpuPace[0] && cpuPace[1]
      ? [`CPU speed, the fixed work on each CPU at the start and at the end of the run, relative to the fastest: ${cpuPace.map((p, k) => (k ? 'end ' : 'start ') + p.map(v => (v / Math.min(...cpuPace[0], ...cpuPace[1])).toFixed(2)).join(' / ')).join('; ')} (1.00: as fast as any CPU was).`]
      : []),
    'Ratio: the comparison\'s median over sabsync\'s (for times; the inverse for ops/s): above 1 means sabsync is faster.'
  ].join('\n')
  const md = table(results) + (beforeDir ? '\n\n' + beforeTable(results) : '')
  console.log(header + '\n\n' + md)
  // Only sabsync's own failed check fails the run; a peer's is reported.
  const failed = results.some(r => r.rows.some(row => row.name === 'sabsync' && !row.check))
  if (write) {
    fs.writeFileSync(path.join(resultsDir, 'RESULTS.md'), '# Benchmark results\n\n' + header + '\n\n' + md + '\n')
    fs.writeFileSync(path.join(resultsDir, 'results.svg'), renderSvg(results))
    console.error(`bench: wrote ${path.relative(process.cwd(), path.join(resultsDir, 'RESULTS.md'))} and results.svg`)
  } else if (filters.length === 0) {
    console.error('bench: bench/RESULTS.md and bench/results.svg left as they are (`npm run bench -- --write` records this run there)')
  }
  if (failed) {
    console.error('bench: sabsync failed its own check in a case')
    process.exitCode = 1
  }
  // sabsync/redis against its peers (bench/redis.js), when a Redis server
  // can be had: its own table after this one; it writes no file.
  // Not for other cases (--cases: test/bench.test.js checks the harness).
  if (casesDir === DEFAULT_CASES && (filters.length === 0 || filters.some(f => f.toLowerCase() === 'redis')) && require('./redis').available()) {
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
