'use strict'
// sabsync/redis names: every class checks a prefix the same way (no braces,
// which would move or empty the hash tag), a name that is not well-formed
// UTF-16 (a lone surrogate) maps to a key of its own (WTF-8), and a
// mismatch says what differs.
const t = require('tap')
const { redisSuite } = require('./fixtures/redis/suite')
const { Mutex, Sema, RateLimit, RateLimiter } = require('../lib/redis')

redisSuite(t, async s => {
  const { client, admin } = s

  s.test('a prefix with a brace, or empty, is refused alike by every class', async t => {
    const r = client()
    const makers = {
      Mutex: p => new Mutex(r, 'k', { prefix: p }),
      Sema: p => new Sema(r, 'k', 2, { prefix: p }),
      RateLimit: p => RateLimit(r, 'k', 5, { prefix: p }),
      RateLimiter: p => new RateLimiter(r, p, { limit: 5, window: 1000 })
    }
    for (const [name, make] of Object.entries(makers)) {
      const arg = name === 'RateLimiter' ? '"prefix"' : '"options.prefix"'
      for (const p of ['}x', 'a}', '{a', 'a{b}c', '']) {
        t.throws(() => make(p), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE', message: new RegExp(`${arg}.*without \\{ or \\}`) },
          `${name}: prefix ${JSON.stringify(p)}`)
      }
      t.throws(() => make(5), { name: 'TypeError', message: new RegExp(arg) }, `${name}: a number`)
    }
  })

  s.test('lone surrogates: \\uD800 and \\uDBFF are two locks, two buckets; a well-formed name is its UTF-8', async (t, { prefix, opts }) => {
    const [a, b] = [client(), client()]
    const m1 = new Mutex(a, 'x\uD800', opts())
    const m2 = new Mutex(b, 'x\uDBFF', opts())
    t.type(await m1.tryLock(), 'number')
    t.type(await m2.tryLock(), 'number', 'the other name is another lock')
    const keys = (await admin.keysBuffer(`{${prefix}:mutex:x*`)).map(k => k.toString('hex')).sort()
    t.same(keys, [Buffer.from(`{${prefix}:mutex:x`).toString('hex') + 'eda080' + Buffer.from('}:m').toString('hex'),
      Buffer.from(`{${prefix}:mutex:x`).toString('hex') + 'edafbf' + Buffer.from('}:m').toString('hex')].sort(),
    'keyed by the surrogates\' own bytes (WTF-8), not U+FFFD')
    await m1.unlock()
    await m2.unlock()
    const emoji = new Mutex(a, 'x\uD83D\uDE00', opts())
    await emoji.tryLock()
    t.equal(await admin.exists(`{${prefix}:mutex:x\uD83D\uDE00}:m`), 1, 'a surrogate pair is its UTF-8, as before')
    await emoji.unlock()

    const limiter = new RateLimiter(a, prefix + ':names', { limit: 1, window: 60000 })
    t.equal((await limiter.consume('\uD800')).allowed, true)
    t.equal((await limiter.consume('\uDBFF')).allowed, true, 'client keys \\uD800 and \\uDBFF: two buckets')
    t.equal((await limiter.consume('\uD800')).allowed, false)
    t.equal((await limiter.consume('\uFFFD')).allowed, true, 'and U+FFFD a third')
    const l1 = RateLimit(a, '\uDC00', 1, opts({ timeUnit: 60000 }))
    const l2 = RateLimit(a, '\uDFFF', 1, opts({ timeUnit: 60000 }))
    t.type(await l1.try(), 'number')
    t.type(await l2.try(), 'number', 'two RateLimits')
    // The suite's cleanup matches keys as text: these are bytes.
    for (const k of await admin.keysBuffer(`*${prefix}*`)) await admin.del(k)
  })

  s.test('a Sema and a Mutex whose prefixes make one key: the mismatch names both', async (t, { prefix }) => {
    const r = client()
    // {<prefix>:sema:mutex:mutex:k} twice: a Mutex's tag is
    // {<its prefix>:mutex:<key>}, a Sema's {<its prefix>:sema:<key>}.
    const mutex = new Mutex(r, 'k', { prefix: prefix + ':sema:mutex' })
    const sema = new Sema(r, 'mutex:mutex:k', 1, { prefix })
    await mutex.tryLock()
    const err = await sema.tryAcquire().catch(e => e)
    t.equal(err.code, 'ERR_SABSYNC_SHARED_MISMATCH')
    t.match(err.message, /in use as a Mutex \(nr = 1, fenced\), and this call asked for a Sema of nr = 1: a Mutex and a Sema whose names make the same key\. Give one of them another key or prefix/)
    await mutex.unlock()
    const sema2 = new Sema(r, 'k2', 2, { prefix })
    await sema2.tryAcquire()
    const err2 = await new Sema(r, 'k2', 1, { prefix }).tryAcquire().catch(e => e)
    t.match(err2.message, /nr = 2 is in use \(1 held, 0 waiting\), this call asked for nr = 1/, 'two Semas: the two nr')
    await sema2.release()
  })
})
