'use strict'
// RateLimiter between processes, in a shared space: the table of checks
// every tier passes (test/fixtures/rate-limiter/checks.js) with three forked
// processes hammering one key (test/fixtures/rate-limiter/hammer.js), and
// what only a space has: a key asked for with other parameters, a process
// SIGKILLed mid-consume (test/fixtures/rate-limiter/killed.js), a scribbled
// header.
const t = require('tap')
const path = require('path')
const { fork } = require('child_process')
const { openShared, RateLimiter } = require('..')
const { checks, sleep, lostAtMostTheCall } = require('./fixtures/rate-limiter/checks')
const { spaceName } = require('./space-helpers')

const fixtures = path.join(__dirname, 'fixtures', 'rate-limiter')

function child (t, file, args) {
  const p = fork(path.join(fixtures, file), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  t.teardown(() => p.kill('SIGKILL'))
  p.exited = new Promise(resolve => p.once('exit', (code, signal) => resolve({ code, signal })))
  return p
}

function participant (t, spec) {
  const p = child(t, 'hammer.js', [JSON.stringify(spec)])
  const ready = new Promise(resolve => p.once('message', resolve))
  const done = new Promise((resolve, reject) => {
    p.on('message', m => {
      if (m.error) reject(new Error(m.error))
      else if (m.grants) resolve(m)
    })
    p.once('exit', code => { if (code !== 0) reject(new Error('a participant exited with ' + code)) })
  })
  return { ready, go: (until, from) => { p.send({ go: until, from }); return done } }
}

const name = spaceName(t)
const space = openShared(name, { size: 4 << 20 })
t.teardown(() => space.close())
let n = 0
const made = new Map() // limiter -> its key in the space

checks(t, {
  name: 'space',
  table: true,
  make (opts) {
    const key = `limiter-${++n}`
    const l = space.rateLimiter(key, opts)
    made.set(l, key)
    return l
  },
  hammer: (limiter, opts, key, n = 3) => Array.from({ length: n }, () => participant(t, {
    tier: 'space', key, name, spaceKey: made.get(limiter), opts
  }))
})

t.test('space: limit, window, burst, exact and whenFull are the caller\'s; keys is the table\'s', async t => {
  const ten = space.rateLimiter('params', { limit: 10, window: 1000, keys: 100 })
  const slower = space.rateLimiter('params', { limit: 5, window: 1000, keys: 100, whenFull: 'deny' })
  t.same([slower.limit, slower.whenFull], [5, 'deny'], 'other parameters attach to the same table')
  for (let i = 0; i < 10; i++) ten.consume('c')
  const r = slower.consume('c')
  t.equal(r.allowed, false, 'what one caller took, the other sees')
  t.ok(r.retryAfter > 0 && r.retryAfter <= 200, `retryAfter ${r.retryAfter} ms: one point of the slower rate`)
  t.throws(() => space.rateLimiter('params', { limit: 10, window: 1000, keys: 200 }), {
    code: 'ERR_SABSYNC_SHARED_MISMATCH',
    message: /options\.keys is 200, but the table has 100 slots/
  })
  space.mutex('a-mutex')
  t.throws(() => space.rateLimiter('a-mutex', { limit: 1, window: 1000 }), { code: 'ERR_SABSYNC_SHARED_MISMATCH' })
  const again = space.rateLimiter('params', { limit: 10, window: 1000, keys: 100 })
  t.equal(again.keys, 100, 'the same parameters attach')
  t.throws(() => RateLimiter.from(again), { code: 'ERR_SABSYNC_BAD_MEMORY', message: /space\.rateLimiter/ }, 'from() refuses a space limiter (its table lives apart)')
  t.throws(() => space.rateLimiter('x'.repeat(200), { limit: 1, window: 1000 }), { name: 'RangeError', message: /"key"/ })
})

t.test('space: a scribbled header is a coded error; scribbled slots stay inside the table', async t => {
  const l = space.rateLimiter('scribbled', { limit: 5, window: 1000, keys: 64 })
  const head = new Int32Array(l.buffer, l.byteOffset, 16)
  const keysWord = head[5]
  head[5] = 0x7FFFFFFF
  t.throws(() => space.rateLimiter('scribbled', { limit: 5, window: 1000, keys: 64 }), { code: 'ERR_SABSYNC_BAD_MEMORY' })
  head[5] = keysWord
  t.equal(space.rateLimiter('scribbled', { limit: 5, window: 1000, keys: 64 }).consume('a').allowed, true)
  t.equal(l.consume('a').remaining, 3, 'the limiter made before keeps its own copy of the parameters')
})

t.test('space: SIGKILL of a process mid-consume loses at most that call', async t => {
  const slowOpts = { limit: 1, window: 1_000_000, burst: 1_000_000, keys: 64 }
  const churnOpts = { limit: 1, window: 1, keys: 256 }
  const slow = space.rateLimiter('slow', slowOpts)
  const churn = space.rateLimiter('churn', churnOpts)
  const count = space.int32Array('count', 1)
  const kills = 6
  for (let k = 0; k < kills; k++) {
    const p = child(t, 'killed.js', [name, JSON.stringify(slowOpts), JSON.stringify(churnOpts)])
    await new Promise(resolve => p.once('message', resolve))
    await sleep(30 + Math.random() * 150)
    p.kill('SIGKILL')
    t.same(await p.exited, { code: null, signal: 'SIGKILL' })
  }
  lostAtMostTheCall(t, { slow, burst: slowOpts.burst, churn, count, kills, what: 'SIGKILLed' })
})
