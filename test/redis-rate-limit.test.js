'use strict'
// sabsync/redis RateLimit against a real redis-server: at most rps grants
// in any window of timeUnit, on the server's clock, across processes.
const t = require('tap')
const path = require('path')
const { fork } = require('child_process')
const { redisSuite, tick } = require('./fixtures/redis/suite')
const { RateLimit } = require('../lib/redis')

const us = ms => Math.round(ms * 1000) // grant times (ms, µs precision) as whole µs

// The most grants in any half-open window [x, x + unit) of sorted times (µs).
function mostInWindow (times, unitUs) {
  const s = [...times].sort((a, b) => a - b)
  let most = 0
  let j = 0
  for (let i = 0; i < s.length; i++) {
    while (s[i] - s[j] >= unitUs) j++
    most = Math.max(most, i - j + 1)
  }
  return most
}

redisSuite(t, async s => {
  const { url, client, until } = s

  s.test('arguments are checked, and named', async (t, { prefix, key: keyOf }) => {
    const r = client()
    t.throws(() => RateLimit(r, 'k'), { name: 'TypeError', message: /"rps" argument/ })
    t.throws(() => RateLimit(r, 'k', 0), { name: 'RangeError', message: /"rps" argument/ })
    t.throws(() => RateLimit(r, 'k', 1, { timeUnit: 0 }), { name: 'RangeError', message: /"options.timeUnit"/ })
    t.throws(() => RateLimit(r, 'k', 1, { timeUnit: '1' }), { name: 'TypeError', message: /"options.timeUnit"/ })
    t.throws(() => RateLimit(r, 'k', 1, { uniformDistribution: 1 }), { name: 'TypeError', message: /"options.uniformDistribution"/ })
    t.throws(() => RateLimit(undefined, 'k', 1), { name: 'TypeError', message: /"redis" argument/ })
    const limit = RateLimit(r, 'args', 1, { prefix })
    await t.rejects(limit({ signal: 'x' }), { name: 'TypeError', message: /"options.signal"/ })
    await t.rejects(limit(5), { name: 'TypeError', message: /"options"/ })
    t.equal(limit.rps, 1)
    t.equal(limit.timeUnit, 1000)
  })

  s.test('the sliding window: rps at once, then one per grant that leaves the window', async (t, { prefix, key: keyOf }) => {
    const limit = RateLimit(client(), 'window', 3, { timeUnit: 200, prefix })
    const times = []
    for (let i = 0; i < 9; i++) times.push(us(await limit()))
    t.equal(mostInWindow(times, 200000), 3, 'never more than rps in a window')
    t.ok(times[2] - times[0] < 200000, 'the first rps without waiting for the window')
    for (let i = 3; i < 9; i++) t.ok(times[i] - times[i - 3] >= 200000, `grant ${i} waits for grant ${i - 3} to leave the window`)
  })

  s.test('the log: a call that finds rps grants trims what no longer counts; one with room writes only its own', async (t, { prefix }) => {
    const r = client()
    const log = key => `{${prefix}:rate:${key}}:log`
    // Saturated: every call finds rps grants or more, and takes off those
    // that left the window, so the log never holds more than the rps that
    // count and the one just granted.
    const busy = RateLimit(r, 'trim-busy', 3, { timeUnit: 150, prefix })
    let most = 0
    for (let i = 0; i < 12; i++) {
      await busy()
      most = Math.max(most, await r.zcard(log('trim-busy')))
    }
    t.ok(most <= 4, `at most rps + 1 entries while saturated (${most}, of 12 grants)`)
    // With room: nothing to trim, every grant kept until it stops counting
    // (then the idle tidy takes the log away).
    const free = RateLimit(r, 'trim-free', 100, { timeUnit: 60000, prefix })
    for (let i = 0; i < 5; i++) await free()
    t.equal(await r.zcard(log('trim-free')), 5, 'a limit with room keeps its 5 grants')
    // A call whose newest grant no longer counts trims the whole log (grants
    // of a process gone before its idle tidy ran: times long past).
    await r.zadd(log('trim-old'), 1, 'a', 2, 'b', 3, 'c')
    await RateLimit(r, 'trim-old', 100, { timeUnit: 100, prefix })()
    t.equal(await r.zcard(log('trim-old')), 1, 'only the new grant is left')
  })

  s.test('uniform spacing: at least timeUnit/rps apart', async (t, { prefix, key: keyOf }) => {
    const limit = RateLimit(client(), 'uniform', 4, { timeUnit: 200, uniformDistribution: true, prefix })
    const times = await Promise.all(Array.from({ length: 6 }, () => limit()).map(p => p.then(us)))
    times.sort((a, b) => a - b)
    for (let i = 1; i < times.length; i++) t.ok(times[i] - times[i - 1] >= 50000, `grant ${i} is 50 ms after the one before`)
  })

  s.test('a timeout answers undefined; an abort gives its time back', async (t, { prefix, key: keyOf }) => {
    const r = client()
    const limit = RateLimit(r, 'timeout', 1, { timeUnit: 500, prefix })
    const t1 = us(await limit())
    const t0 = performance.now()
    t.equal(await limit({ timeout: 100 }), undefined, 'not within 100 ms')
    t.ok(performance.now() - t0 < 500, 'answered without waiting for a grant it cannot have')
    const ac = new AbortController()
    const p = limit({ signal: ac.signal })
    await tick(20)
    t.equal(await limit.nrWaiting(), 1, 'one caller sleeps until its time')
    ac.abort(new Error('stop'))
    await t.rejects(p, { message: 'stop' })
    const t3 = us(await limit())
    t.ok(t3 - t1 >= 500000 && t3 - t1 < 1000000, 'the aborted caller\'s time went to the next one')
    await t.rejects(limit({ signal: AbortSignal.abort(new Error('before')) }), { message: 'before' })
  })

  s.test('timeout 0 and try(): granted when the limit has room now, and only then', async (t, { prefix }) => {
    const [a, b] = [client(), client()]
    const la = RateLimit(a, 'try', 2, { timeUnit: 60000, prefix })
    const lb = RateLimit(b, 'try', 2, { timeUnit: 60000, prefix })
    const tries = []
    for (let i = 0; i < 5; i++) tries.push(await la({ timeout: 0 }))
    t.same(tries.map(x => typeof x), ['number', 'number', 'undefined', 'undefined', 'undefined'],
      'an idle limiter: the first two of five (its room), then undefined')
    t.equal(await lb.try(), undefined, 'full, seen from another client: try() answers undefined')
    t.equal(await la.nrWaiting(), 0, 'nothing recorded for a refused call')
    const ld = RateLimit(a, 'try-idle', 5, { timeUnit: 60000, prefix })
    const got = await Promise.all([ld.try(), ld.try(), ld.try(), ld.try(), ld.try()])
    t.ok(got.every(x => typeof x === 'number'), 'five calls at once on an idle limiter of 5: all granted')
  })

  s.test('another rps on the same key: one log, each caller applying its own (a rolling deploy)', async (t, { prefix }) => {
    const a = RateLimit(client(), 'deploy', 2, { prefix, timeUnit: 60000 })
    const b = RateLimit(client(), 'deploy', 3, { prefix, timeUnit: 60000 })
    t.type(await a.try(), 'number')
    t.type(await a.try(), 'number')
    t.equal(await a.try(), undefined, 'the old rps (2) is spent')
    t.type(await b.try(), 'number', 'the new rps (3) counts the same grants and allows a third')
    t.equal(await b.try(), undefined, 'and no fourth')
    t.equal(await a.try(), undefined, 'the old caller still sees its own rule')
    t.equal(await client().exists(`{${prefix}:rate:deploy}:m`), 0, 'no parameters are kept on the server')
  })

  s.test('a key holding something else: ERR_SABSYNC_REDIS with the cause, nothing written', async (t, { prefix }) => {
    const r = client()
    const tag = `{${prefix}:rate:wrongtype}`
    for (const [key, other] of [[tag + ':log', tag + ':m']]) {
      await r.set(key, 'something else')
      const err = await RateLimit(r, 'wrongtype', 2, { prefix })().catch(e => e)
      t.equal(err.code, 'ERR_SABSYNC_REDIS', key)
      t.match(err.cause.message, /WRONGTYPE/)
      t.equal(await r.exists(other), 0, 'the other key was not written')
      t.equal(await r.get(key), 'something else')
      await r.del(key)
    }
    t.type(await RateLimit(r, 'wrongtype', 2, { prefix })(), 'number', 'once the keys are free, it works')
  })

  s.test('grant times another program wrote into the log: refused or too late, never a grant', async (t, { prefix }) => {
    const r = client()
    const log = `{${prefix}:rate:forged}:log`
    // The newest grant at +inf, or at a time past what a reply can carry
    // exactly (2^60 µs): the grant that would follow it is not believed.
    for (const score of ['+inf', String(2 ** 60)]) {
      await r.del(log)
      await r.zadd(log, score, 'forged')
      const limit = RateLimit(r, 'forged', 2, { prefix })
      const err = await limit().catch(e => e)
      t.equal(err.code, 'ERR_SABSYNC_REDIS', `newest grant at ${score}: rejected`)
      t.match(err.message, /answered a rate limit call/, 'saying what the server answered')
      await until(async () => (await r.zcard(log)) === 1, 'the reservation it made to be given back')
      t.equal(await limit({ timeout: 100 }), undefined, 'with a timeout: too late for it')
      t.same(await r.zrange(log, 0, -1), ['forged'], 'and nothing recorded')
    }
    await r.del(log)
  })

  s.test('4 processes: never more than rps in any window of server time, none early', async (t, { prefix, key: keyOf }) => {
    const rps = 6
    const unit = 300
    const key = keyOf('procs')
    const runs = await Promise.all([0, 1, 2, 3].map(() => new Promise((resolve, reject) => {
      const p = fork(path.join(__dirname, 'fixtures', 'redis', 'limiter.js'), [url, key, String(rps), String(unit), '0', '10'],
        { stdio: ['ignore', 'pipe', 'inherit', 'ipc'], execArgv: [] })
      let out = ''
      p.stdout.on('data', d => { out += d })
      const guard = setTimeout(() => p.kill('SIGKILL'), 60000)
      p.on('exit', code => {
        clearTimeout(guard)
        if (code !== 0) return reject(new Error('limiter exited with ' + code))
        resolve(JSON.parse(out))
      })
    })))
    const grants = runs.flat()
    t.equal(grants.length, 40)
    t.equal(mostInWindow(grants.map(g => g.t), unit * 1000), rps, `at most ${rps} in any ${unit} ms`)
    t.ok(grants.every(g => g.after >= g.t), 'each caller proceeded at or after its grant time (server clock)')
  })
})
