'use strict'
// The sabsync/redis examples run against a real server, end by themselves
// and print what docs/redis.md says they do.
//
// The examples use plain key names ('orders:42', 'report', ...), so each
// runs in a database of its own, one that is empty when it starts (tap
// runs the other redis files beside this one, all of them in database 0).
// Whatever the example left there is deleted afterwards, and the test
// checks that the database is empty again: the server is left as found.
const t = require('tap')
const path = require('path')
const { spawnSync } = require('child_process')
const Redis = require('ioredis')
const { redisSuite } = require('./fixtures/redis/suite')

redisSuite(t, async s => {
  const { url } = s
  const urlOf = n => { const u = new URL(url); u.pathname = '/' + n; return u.href }

  // Database numbers in use by a run of this file: never two runs in one.
  const taken = new Set()
  async function emptyDb () {
    for (let n = 1; n < 16; n++) {
      if (taken.has(n)) continue
      const c = new Redis(urlOf(n))
      try {
        if ((await c.dbsize()) === 0) { taken.add(n); return n }
      } finally { c.disconnect() }
    }
    throw new Error('no empty database among 1-15 on ' + url)
  }

  async function run (t, file) {
    const db = await emptyDb()
    const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'examples', file)],
      { encoding: 'utf8', timeout: 60000, env: { ...process.env, REDIS_URL: urlOf(db) } })
    const c = new Redis(urlOf(db))
    try {
      const left = await c.keys('*')
      if (left.length > 0) await c.del(...left)
      t.equal(await c.dbsize(), 0, `database ${db} is empty again (the example left ${left.sort().join(', ') || 'nothing'})`)
    } finally {
      c.disconnect()
      taken.delete(db)
    }
    return r
  }

  s.test('redis-quickstart.js', async t => {
    const r = await run(t, 'redis-quickstart.js')
    t.equal(r.status, 0, r.stderr)
    t.match(r.stdout, /^holding orders:42 with fence \d+$/m)
    t.match(r.stdout, /^unlocked: true$/m)
    t.match(r.stdout, /^tokens (0, 1|1, 0) out; the third caller gets undefined$/m)
    const times = /^7 calls at \+(.*) ms$/m.exec(r.stdout)[1].split(', +').map(Number)
    t.ok(times[4] < 1000 && times[5] >= 1000 && times[6] >= 1000, 'five at once, the next two a second after the first ones: ' + times)
  })

  s.test('redis-fencing.js', async t => {
    const r = await run(t, 'redis-fencing.js')
    t.equal(r.status, 0, r.stderr)
    t.match(r.stdout, 'B holds the lock, fence B > fence A: true')
    t.match(r.stdout, 'B writes: accepted')
    t.match(r.stdout, 'A writes: refused')
    t.match(r.stdout, 'A\'s lease was lost: true; A\'s unlock(): false')
    t.match(r.stdout, 'the report says: from B')
  })
})
