'use strict'
// The benchmark harness (bench/index.js) run over the cases in
// test/fixtures/bench-cases: a row states what all of its runs found (a
// row once read "CHECK FAILED; 0 overlapping holders": the failure of an
// earlier run beside the count of the last one); a plain run writes no
// file (the committed bench/RESULTS.md and bench/results.svg are written
// only with --write); a case that needs another Node is skipped with a note
// instead of installing one in the middle of the run.
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnSync } = require('child_process')
const { root, plainEnv } = require('./helpers')

const cases = path.join(__dirname, 'fixtures', 'bench-cases')

// Three runs of the harness, each measuring the machine's load around its
// cases: well past the suite's 120 s per file on a loaded machine (126 s
// was seen at a load average of 24).
t.setTimeout(600000)

function bench (...args) {
  return spawnSync(process.execPath, [path.join(root, 'bench', 'index.js'), '--cases', cases, '--repeats', '3', ...args],
    { cwd: root, encoding: 'utf8', env: plainEnv(), timeout: 280000 })
}

const rowOf = (out, name, subject) => out.split('\n').find(l => l.startsWith(`| ${name} | ${subject} |`))
const notesOf = row => row.split('|').slice(-2, -1)[0].trim()

t.test('a row states what its runs found; a plain run writes nothing; a missing Node is skipped', async t => {
  const results = fs.mkdtempSync(path.join(os.tmpdir(), 'sabsync-bench-'))
  t.teardown(() => fs.rmSync(results, { recursive: true, force: true }))
  const r = bench('--results', results)
  t.equal(r.status, 0, r.stderr)
  const peer = rowOf(r.stdout, 'fixture: the peer fails its check in its first run only', 'peer')
  t.ok(peer, 'the peer\'s row')
  t.equal(notesOf(peer), '**CHECK FAILED** in 1 of 3 runs; 3 bad answers in 3000 answers over 3 runs')
  const own = rowOf(r.stdout, 'fixture: the peer fails its check in its first run only', 'sabsync')
  t.equal(notesOf(own), '0 bad answers in 3000 answers over 3 runs')
  const extras = rowOf(r.stdout, 'fixture: extras that differ from run to run', 'sabsync')
  t.equal(notesOf(extras), 'median run: run number 2', 'the run that the median comes from, labelled')
  const skipped = rowOf(r.stdout, 'fixture: runs under Node 99', '(skipped)')
  t.ok(skipped, 'a row says the case was skipped')
  t.match(notesOf(skipped), 'needs Node 99, not installed: run `npm run bench:setup` first')
  t.match(r.stderr, 'bench: skipped "fixture: runs under Node 99"')
  t.notOk(fs.existsSync(path.join(root, 'build', 'matrix', 'node99')), 'nothing was installed')
  t.same(fs.readdirSync(results), [], 'no file written without --write')
  t.match(r.stderr, '`npm run bench -- --write` records this run')
})

t.test('--write writes RESULTS.md and results.svg; not for a filtered run', async t => {
  const results = fs.mkdtempSync(path.join(os.tmpdir(), 'sabsync-bench-'))
  t.teardown(() => fs.rmSync(results, { recursive: true, force: true }))
  const r = bench('--results', results, '--write')
  t.equal(r.status, 0, r.stderr)
  t.same(fs.readdirSync(results).sort(), ['RESULTS.md', 'results.svg'])
  t.match(fs.readFileSync(path.join(results, 'RESULTS.md'), 'utf8'), '**CHECK FAILED** in 1 of 3 runs; 3 bad answers in 3000 answers over 3 runs')
  const f = bench('--results', results, '--write', 'extras')
  t.equal(f.status, 2)
  t.match(f.stderr, '--write records the whole suite')
})
