'use strict'
// The examples run, end by themselves and print what they promise.
const t = require('tap')
const path = require('path')
const { spawnSync } = require('child_process')
const { plainEnv } = require('./helpers')

function run (file) {
  return spawnSync(process.execPath, [path.join(__dirname, '..', 'examples', file)], { encoding: 'utf8', timeout: 60000, env: plainEnv() })
}

t.test('npm run demo', async t => {
  const r = run('demo.js')
  t.equal(r.status, 0, r.stderr)
  t.match(r.stdout, /3 workers are parked in sabsync\.wait/)
  t.match(r.stdout, /all 9 jobs done/)
  const taken = r.stdout.match(/took job \d+/g) || []
  t.equal(taken.length, 9, 'every job taken exactly once')
  t.equal(new Set(taken).size, 9)
  // The Mutex scene's window opens once every worker runs (they report
  // ready first), so each worker shows increments.
  const workers = [...r.stdout.matchAll(/worker (\d): (\d+) increments/g)]
  t.same(workers.map(m => m[1]), ['1', '2', '3'], 'each worker of the Mutex scene reports')
  t.ok(workers.every(m => Number(m[2]) > 0), 'no worker shows 0 increments: ' + workers.map(m => m[0]).join(', '))
})

t.test('npm run demo:processes (a cluster sharing a RateLimit and a Mutex; a worker killed mid-lock)', async t => {
  const r = run('cluster-shared.js')
  t.equal(r.status, 0, r.stderr)
  t.match(r.stdout, /kills worker \d+ with SIGKILL, in the middle of the rebuild/)
  t.match(r.stdout, /took the lock over from the killed worker, ownerDied = true/)
  t.match(r.stdout, /40 requests served/)
  const most = Number((r.stdout.match(/the most in any 500 ms window: (\d+)/) || [])[1])
  t.ok(most >= 1 && most <= 10, `at most 10 upstream calls in any window (saw ${most})`)
})
