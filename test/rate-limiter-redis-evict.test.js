'use strict'
// sabsync/redis RateLimiter under memory pressure: a server of this file's
// own (its maxmemory and policy are changed) with maxmemory-policy
// volatile-lru, filled past maxmemory with keys that have a TTL. Redis evicts
// only keys with a TTL under a volatile-* policy, and the limiter's keys have
// none, so no client's bucket is lost: an emptied bucket stays empty.
const t = require('tap')
const { redisSuite } = require('./fixtures/redis/suite')
const { RateLimiter } = require('../lib/redis')

const infoField = (info, name) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)[1])

redisSuite(t, async s => {
  s.test('redis: volatile-lru eviction under maxmemory grants nothing more', async (t, k) => {
    await s.admin.config('SET', 'maxmemory-policy', 'volatile-lru')
    const l = new RateLimiter(s.client(), k.prefix, { limit: 5, window: 3_600_000 })
    for (let i = 0; i < 5; i++) t.equal((await l.consume('victim')).allowed, true, `victim: call ${i + 1} allowed`)
    for (let i = 0; i < 50; i++) await l.consume('client-' + i, 2)
    t.equal((await l.consume('victim')).allowed, false, 'victim: the sixth is refused')
    const used = infoField(await s.admin.info('memory'), 'used_memory')
    const evictedBefore = infoField(await s.admin.info('stats'), 'evicted_keys')
    await s.admin.config('SET', 'maxmemory', String(used + 4 * 1024 * 1024))
    // 20 MB of keys with a TTL: several times what maxmemory leaves room for.
    const value = 'x'.repeat(1000)
    for (let batch = 0; batch < 20; batch++) {
      const p = s.admin.pipeline()
      for (let i = 0; i < 1000; i++) p.set(`${k.prefix}:filler:${batch}:${i}`, value, 'PX', 3_600_000)
      await p.exec()
    }
    const evicted = infoField(await s.admin.info('stats'), 'evicted_keys') - evictedBefore
    t.ok(evicted > 1000, `Redis evicted ${evicted} keys with a TTL`)
    const victim = await l.consume('victim')
    t.equal(victim.allowed, false, 'victim: still refused after the eviction')
    t.equal(victim.remaining, 0)
    let kept = 0
    for (let i = 0; i < 50; i++) if ((await l.peek('client-' + i)).remaining === 3) kept++
    t.equal(kept, 50, 'every other client kept its bucket')
    await s.admin.config('SET', 'maxmemory', '0')
  })
}, { own: true })
