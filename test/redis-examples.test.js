'use strict'
// The sabsync/redis examples run against a real server, end by themselves
// and print what the README says they do.
const t = require('tap')
const path = require('path')
const { spawnSync } = require('child_process')
const { redisSuite } = require('./fixtures/redis/suite')

redisSuite(t, async s => {
  const { url } = s
  // Each run on a fresh database number, so that keys left by one run or
  // another test file do not meet.
  let db = 1
  const urlOf = n => { const u = new URL(url); u.pathname = '/' + n; return u.href }
  const run = file => spawnSync(process.execPath, [path.join(__dirname, '..', 'examples', file)],
    { encoding: 'utf8', timeout: 60000, env: { ...process.env, REDIS_URL: urlOf(db++) } })

  s.test('redis-quickstart.js', async t => {
    const r = run('redis-quickstart.js')
    t.equal(r.status, 0, r.stderr)
    t.match(r.stdout, /^holding orders:42 with fence \d+$/m)
    t.match(r.stdout, /^unlocked: true$/m)
    t.match(r.stdout, /^tokens (0, 1|1, 0) out; the third caller gets undefined$/m)
    const times = /^7 calls at \+(.*) ms$/m.exec(r.stdout)[1].split(', +').map(Number)
    t.ok(times[4] < 1000 && times[5] >= 1000 && times[6] >= 1000, 'five at once, the next two a second after the first ones: ' + times)
  })

  s.test('redis-fencing.js', async t => {
    const r = run('redis-fencing.js')
    t.equal(r.status, 0, r.stderr)
    t.match(r.stdout, 'B holds the lock, fence B > fence A: true')
    t.match(r.stdout, 'B writes: accepted')
    t.match(r.stdout, 'A writes: refused')
    t.match(r.stdout, 'A\'s lease was lost: true; A\'s unlock(): false')
    t.match(r.stdout, 'the report says: from B')
  })
})
