'use strict'
// RateLimiter between the threads of one process: the table of checks every
// tier passes (test/fixtures/rate-limiter/checks.js) with two workers
// hammering (test/fixtures/rate-limiter/hammer.js),
// and what only the in-memory table has: its memory, attach, a scribbled
// table, the hash.
const t = require('tap')
const path = require('path')
const { Worker } = require('worker_threads')
const { RateLimiter, Mutex } = require('..')
const { checks, lostAtMostTheCall } = require('./fixtures/rate-limiter/checks')
const { queuedMs } = require('./fixtures/run-queue')

const hammerFile = path.join(__dirname, 'fixtures', 'rate-limiter', 'hammer.js')

function participant (t, spec) {
  const w = new Worker(hammerFile, { workerData: spec })
  t.teardown(() => w.terminate())
  const done = new Promise((resolve, reject) => {
    w.on('error', reject)
    w.on('message', m => {
      if (m.error) reject(new Error(m.error))
      else if (m.grants) resolve(m)
    })
  })
  const ready = new Promise(resolve => w.once('message', resolve))
  return { ready, go: (until, from) => { w.postMessage({ go: until, from }); return done } }
}

checks(t, {
  name: 'threads',
  table: true,
  make: opts => new RateLimiter(opts),
  hammer: (limiter, opts, key, n = 2) => Array.from({ length: n }, () => participant(t, {
    tier: 'threads', key, handle: { buffer: limiter.buffer, byteOffset: limiter.byteOffset }, opts
  }))
})

// The thread tier's twin of the space's SIGKILL test
// (test/fixtures/rate-limiter/terminated.js): a worker terminated
// at a random moment (between two calls, or inside one: a claim holding its
// lock, a marker made, an F written) loses at most the call it was in.
t.test('threads: a worker terminated mid-consume loses at most that call', async t => {
  const slowOpts = { limit: 1, window: 1_000_000, burst: 1_000_000, keys: 64 }
  const churnOpts = { limit: 1, window: 1, keys: 256 }
  const slow = new RateLimiter(slowOpts)
  const churn = new RateLimiter(churnOpts)
  const count = new Int32Array(new SharedArrayBuffer(4))
  const file = path.join(__dirname, 'fixtures', 'rate-limiter', 'terminated.js')
  const kills = 12
  for (let k = 0; k < kills; k++) {
    // execArgv: [] spares the worker tap's loader hooks (seconds a start on a
    // loaded machine); it needs none.
    const w = new Worker(file, { workerData: { slow, churn, count, id: k }, execArgv: [] })
    await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
    await new Promise(resolve => setTimeout(resolve, 10 + Math.random() * 60))
    await w.terminate()
  }
  lostAtMostTheCall(t, { slow, burst: slowOpts.burst, churn, count, kills, what: 'terminated' })
})

t.test('memory: byteLength, buffer and byteOffset, from()', async t => {
  t.equal(RateLimiter.byteLengthFor(1000), 64 + 16 * 1000 + 8 * 63, 'a header, 16 bytes a slot, 8 bytes a claim lock per 16 slots')
  t.equal(RateLimiter.byteLength, RateLimiter.byteLengthFor(), 'byteLength: the default of 10,000 keys')
  const sab = new SharedArrayBuffer(8 + RateLimiter.byteLengthFor(100))
  const l = new RateLimiter({ limit: 2, window: 1000, keys: 100, buffer: sab, byteOffset: 8 })
  t.same(Object.keys(l), ['buffer', 'byteOffset', 'byteLength'], 'own enumerable buffer, byteOffset and byteLength')
  t.equal(l.byteLength, RateLimiter.byteLengthFor(100))
  t.equal(l.byteOffset, 8)
  l.consume('x', 2)
  const again = RateLimiter.from(l)
  t.same([again.limit, again.window, again.burst, again.keys, again.whenFull], [2, 1000, 2, 100, 'allow'])
  t.equal(again.consume('x').allowed, false, 'one table: the attached limiter sees the same bucket')
  t.throws(() => new RateLimiter({ limit: 2, window: 1000, keys: 100, buffer: sab, byteOffset: 4 }), { name: 'RangeError', message: /byteOffset/ })
  t.throws(() => new RateLimiter({ limit: 2, window: 1000, keys: 101, buffer: sab, byteOffset: 8 }), { name: 'RangeError', message: /byteOffset/ })
  const m = new Mutex()
  t.throws(() => RateLimiter.from(m), { code: 'ERR_SABSYNC_WRONG_KIND' })
  t.throws(() => RateLimiter.from({ buffer: new SharedArrayBuffer(64), byteOffset: 0 }), { code: 'ERR_SABSYNC_BAD_MEMORY' })
  t.throws(() => new RateLimiter(), { name: 'TypeError', message: /"options"/ })
})

t.test('a scribbled table answers wrongly or with a coded error, and touches nothing outside', async t => {
  const keys = 64
  const bytes = RateLimiter.byteLengthFor(keys)
  const sab = new SharedArrayBuffer(bytes + 128)
  const guard = new Uint8Array(sab)
  guard.fill(0xA5)
  const l = new RateLimiter({ limit: 5, window: 1000, keys, buffer: sab, byteOffset: 64 })
  for (let i = 0; i < 100; i++) l.consume('k' + i)
  const slots = new BigInt64Array(sab, 64 + 64, keys * 2)
  const values = [0n, -1n, 1n, -(2n ** 63n), 2n ** 63n - 1n, 123456789n, BigInt(process.hrtime.bigint()) + 10n ** 12n]
  let errors = 0
  let answers = 0
  let seed = 7
  const rnd = n => { seed = (seed * 1103515245 + 12345) >>> 0; return seed % n }
  for (let round = 0; round < 2000; round++) {
    slots[rnd(keys * 2)] = values[rnd(values.length)]
    if (rnd(3) === 0) slots[rnd(keys * 2)] = BigInt.asIntN(64, BigInt(rnd(2 ** 30)) << BigInt(rnd(34)))
    try {
      const r = [l.consume('k' + rnd(100)), l.peek('k' + rnd(100))]
      l.refund('k' + rnd(100))
      l.reset('k' + rnd(100))
      if (r.every(x => typeof x.allowed === 'boolean' && x.remaining >= 0)) answers++
    } catch (err) {
      if (err.code !== 'ERR_SABSYNC_BAD_MEMORY') throw err
      errors++
    }
  }
  t.ok(answers + errors === 2000, `every call answered (${answers}) or threw ERR_SABSYNC_BAD_MEMORY (${errors})`)
  t.ok(guard.subarray(0, 64).every(b => b === 0xA5), 'the bytes before the limiter are untouched')
  t.ok(guard.subarray(64 + bytes).every(b => b === 0xA5), 'the bytes after it are untouched')
  const head = new Int32Array(sab, 64, 16)
  head[5] = 1 << 30 // keys
  t.throws(() => RateLimiter.from({ buffer: sab, byteOffset: 64 }), { code: 'ERR_SABSYNC_BAD_MEMORY', message: /keys/ })
})

// A reference HalfSipHash-c-d (64-bit output) over UTF-16 code units, in
// JS, written from the paper's description: the library's hash is C only
// (src/core/limiter.c); this checks it. fp gets the two 32-bit halves.
const fp = new Int32Array(2)
const rotl = (x, b) => (x << b) | (x >>> (32 - b))
function makeHash (c, d) {
  return function hashKey (s, k0, k1) {
    const v = [k0, k1 ^ 0xee, 0x6c796765 ^ k0, 0x74656462 ^ k1]
    const round = () => {
      v[0] = (v[0] + v[1]) | 0; v[1] = rotl(v[1], 5); v[1] ^= v[0]; v[0] = rotl(v[0], 16)
      v[2] = (v[2] + v[3]) | 0; v[3] = rotl(v[3], 8); v[3] ^= v[2]
      v[0] = (v[0] + v[3]) | 0; v[3] = rotl(v[3], 7); v[3] ^= v[0]
      v[2] = (v[2] + v[1]) | 0; v[1] = rotl(v[1], 13); v[1] ^= v[2]; v[2] = rotl(v[2], 16)
    }
    const block = m => { v[3] ^= m; for (let r = 0; r < c; r++) round(); v[0] ^= m }
    const n = s.length
    let i = 0
    for (; i < (n & ~1); i += 2) block(s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16))
    block(((n * 2) << 24) | (i < n ? s.charCodeAt(i) : 0))
    v[2] ^= 0xee
    for (let r = 0; r < d; r++) round()
    fp[0] = v[1] ^ v[3]
    v[1] ^= 0xdd
    for (let r = 0; r < d; r++) round()
    fp[1] = v[1] ^ v[3]
  }
}
// Where the library puts a key: its hash under a table's secret, natively.
const hashKey = (s, k0, k1) => {
  const native = require('../lib/native')
  native.limiterHash(s, k0, k1)
  fp[0] = native.out[0]
  fp[1] = native.out[1]
}

t.test('the reference HalfSipHash as its authors compute it (their 64-bit test vectors, -2-4: key bytes 0..7, message bytes 0..len-1)', async t => {
  const h24 = makeHash(2, 4)
  // vectors_hsip64 of the reference implementation, for the even lengths
  // 0, 2 and 4 (a key is UTF-16 code units: two bytes each).
  const vectors = {
    0: [0x21, 0x8d, 0x1f, 0x59, 0xb9, 0xb8, 0x3c, 0xc8],
    2: [0x06, 0x4f, 0x39, 0xef, 0x7c, 0x50, 0xeb, 0x57],
    4: [0xd5, 0xe7, 0x8a, 0x17, 0x5b, 0xe5, 0x2e, 0xa1]
  }
  for (const [len, bytes] of Object.entries(vectors)) {
    let s = ''
    for (let i = 0; i < len; i += 2) s += String.fromCharCode(i | ((i + 1) << 8))
    h24(s, 0x03020100, 0x07060504)
    const out = Buffer.alloc(8)
    out.writeInt32LE(fp[0], 0)
    out.writeInt32LE(fp[1], 4)
    t.same([...out], bytes, `${len} bytes`)
  }
})

// The hash, GCRA and the claims are C only; keys of any length go through
// them (a long one in a heap buffer).
t.test('the native hash is the reference HalfSipHash-1-3, for keys of any length', async t => {
  const h13 = makeHash(1, 3)
  const native = require('../lib/native')
  let seed = 12345
  const rand = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed }
  let differ = 0
  for (let i = 0; i < 20000; i++) {
    let s = ''
    for (let n = i % 100 === 0 ? 128 + rand() % 4000 : rand() % 200; n > 0; n--) s += String.fromCharCode(rand() & 3 ? 32 + rand() % 95 : rand() & 0xffff)
    const k0 = rand() | 0
    const k1 = rand() | 0
    h13(s, k0, k1)
    native.limiterHash(s, k0, k1)
    if (native.out[0] !== fp[0] || native.out[1] !== fp[1]) differ++
  }
  t.equal(differ, 0, '20,000 random keys (lone surrogates included), 0 to 4,127 code units: the same 64 bits')
  const l = new RateLimiter({ limit: 3, window: 60000, keys: 64 })
  for (const key of ['short', 'k'.repeat(127), 'k'.repeat(128), 'long:' + 'x'.repeat(500), 'y'.repeat(100_000)]) {
    const got = [1, 2, 3, 4].map(() => l.consume(key))
    t.same(got.map(r => r.allowed), [true, true, true, false], `${key.length} code units: burst 3, then refused`)
    t.same(got.map(r => r.remaining), [2, 1, 0, 0])
    t.ok(got[3].retryAfter > 19000 && got[3].retryAfter <= 20000, 'retryAfter: one point, 20 s')
    t.equal(l.peek(key).remaining, 0, 'peek sees what consume wrote')
    l.reset(key)
    t.equal(l.consume(key).remaining, 2, 'after reset, consume finds a full bucket')
  }
})

t.test('the hash is keyed: two tables place keys apart, and keys are one-to-one with their strings', async t => {
  const seen = new Set()
  for (const s of ['', 'a', 'b', 'ab', 'ba', 'a\u0000', '\u0000a', 'abc', 'abcd', 'abcde', '\u{1F600}', 'x'.repeat(300)]) {
    hashKey(s, 1, 2)
    const h = fp[0] + ':' + fp[1]
    t.notOk(seen.has(h), `${JSON.stringify(s.slice(0, 8))} has its own fingerprint`)
    seen.add(h)
  }
  hashKey('client', 1, 2)
  const one = fp[0] + ':' + fp[1]
  hashKey('client', 1, 3)
  t.not(fp[0] + ':' + fp[1], one, 'another secret, another hash')
  const a = new RateLimiter({ limit: 1, window: 1000, keys: 64 })
  const b = new RateLimiter({ limit: 1, window: 1000, keys: 64 })
  const secret = l => { const h = new Int32Array(l.buffer, l.byteOffset, 16); return h[8] + ':' + h[9] }
  t.not(secret(a), secret(b), 'each table draws its own secret')
})

t.test('the express-rate-limit store: headers that say what is enforced, 429 once the bucket is empty', async t => {
  const l = new RateLimiter({ limit: 2, window: 60000, keys: 64 })
  t.equal(l.mostIn(60000), 4, 'burst 2 + 2 a minute: at most 4 in any minute')
  t.throws(() => l.store().init({ limit: 2, windowMs: 60000 }), { name: 'RangeError', message: /at least 4.*exact: true/ },
    'a policy of q=2;w=60 would misstate this limiter: refused, naming the limit to pass')
  const store = l.store()
  store.init({ limit: 4, windowMs: 60000 })
  const first = store.increment('ip')
  t.equal(first.totalHits, 3, 'limit 4 - remaining 1: the header\'s r is the points left now')
  t.ok(first.resetTime instanceof Date)
  t.equal(store.increment('ip').totalHits, 4)
  const over = store.increment('ip')
  t.equal(over.totalHits, 5, 'refused: more hits than the limit')
  t.ok(over.resetTime.getTime() - Date.now() <= 30000, 'resetTime: when a point is back')
  store.decrement('ip')
  t.equal(store.get('ip').totalHits, 3, 'decrement refunds a point')
  store.resetKey('ip')
  t.equal(store.get('ip').totalHits, 2, 'a full bucket: 2 points left of the 4 a minute can hold')
  const exact = new RateLimiter({ limit: 2, window: 60000, exact: true, keys: 64 })
  t.equal(exact.mostIn(60000), 2, 'exact: at most the limit in any window')
  const es = exact.store()
  es.init({ limit: 2, windowMs: 60000 })
  t.same([es.increment('ip').totalHits, es.increment('ip').totalHits], [2, 3], 'exact, burst 1: one now (none left), the second refused')
})

t.test('racing first claims of one new key: one slot, and burst exactly', async t => {
  // Workers (test/fixtures/rate-limiter/first-claims.js) leave a barrier
  // together and each consumes a new key 3 times: a key claimed twice would
  // be two buckets, and grant more than burst.
  const rounds = 300
  const workers = 4
  const calls = 3
  const burst = 2
  const keys = 4096
  const l = new RateLimiter({ limit: 1, window: 3_600_000, burst, keys })
  const ctl = new SharedArrayBuffer(4 * (1 + 2 * rounds))
  const file = path.join(__dirname, 'fixtures', 'rate-limiter', 'first-claims.js')
  const handle = { buffer: l.buffer, byteOffset: l.byteOffset }
  await Promise.all(Array.from({ length: workers }, () => new Promise((resolve, reject) => {
    const w = new Worker(file, { workerData: { handle, ctl, rounds, workers, calls } })
    t.teardown(() => w.terminate())
    w.on('error', reject)
    w.on('message', resolve)
  })))
  const allowed = new Int32Array(ctl, 4, rounds)
  const busy = new Int32Array(ctl, 4 * (1 + rounds), rounds)
  // A busy answer (the claim lock held past its 10 ms bound by a claimant
  // without a CPU) consumes nothing and is no grant: the grants are never
  // more than burst, and exactly burst in a round with no busy answer.
  const over = []
  let busyRounds = 0
  for (let r = 0; r < rounds; r++) {
    if (busy[r] > 0) busyRounds++
    if (allowed[r] > burst || (busy[r] === 0 && allowed[r] !== burst)) over.push([r, allowed[r], busy[r]])
  }
  t.same(over, [], `each of ${rounds} keys raced by ${workers} workers was granted burst (${burst}) points, never more (${busyRounds} rounds met a busy claim lock)`)
  // Count the slots holding each round's key (its fingerprint under the
  // table's secret, W a time): exactly one.
  const head = new Int32Array(l.buffer, l.byteOffset, 16)
  const slots = new Int32Array(l.buffer, l.byteOffset + 64, keys * 4)
  const w64 = new BigInt64Array(l.buffer, l.byteOffset + 64, keys * 2)
  const lo = new Int32Array(new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? [0, 1] : [1, 0])
  const twice = []
  for (let r = 0; r < rounds; r++) {
    hashKey(`first-${r}`, head[8], head[9])
    let held = 0
    for (let i = 0; i < keys; i++) {
      if (slots[i * 4 + lo[0]] === fp[0] && slots[i * 4 + lo[1]] === fp[1] && w64[i * 2 + 1] >= 0n) held++
    }
    if (held !== 1) twice.push([r, held])
  }
  t.same(twice, [], 'every key holds exactly one slot')
})

t.test('a claim lock: a lease runs out, its holder\'s mark is cleared, a late holder cannot activate', async t => {
  const keys = 64
  const l = new RateLimiter({ limit: 1, window: 3_600_000, burst: 2, keys })
  const head = new Int32Array(l.buffer, l.byteOffset, 16)
  const w64 = new BigInt64Array(l.buffer, l.byteOffset + 64, keys * 2)
  const locks = new BigInt64Array(l.buffer, l.byteOffset + 64 + 16 * keys, keys / 16)
  hashKey('late', head[8], head[9])
  const start = (fp[0] >>> 0) % keys
  const f = BigInt.asIntN(64, (BigInt(fp[1]) << 32n) | BigInt(fp[0] >>> 0))
  const g = (start / 16) | 0
  // Holder A took the lock with a lease 150 ms long, marked the key's first
  // slot and wrote its fingerprint, then stopped before re-checking.
  const a = process.hrtime.bigint() + 150_000_000n
  Atomics.store(locks, g, a)
  Atomics.store(w64, start * 2 + 1, -1n - a)
  Atomics.store(w64, start * 2, f)
  // While A's lease runs, B waits for the lock at most ~10 ms, then answers
  // as a full table does (whenFull: allow), flagged busy, consuming nothing.
  const q0 = queuedMs()
  const t0 = process.hrtime.bigint()
  const busy = l.consume('late')
  const waited = Number(process.hrtime.bigint() - t0) / 1e6
  const cpuWait = queuedMs() - q0 // waiting for a CPU: the machine's, not the limiter's
  t.same([busy.allowed, busy.busy], [true, true], 'B, while the lease runs: whenFull\'s answer, busy')
  t.ok(waited >= 10 && waited - cpuWait < 100, `after waiting ${waited.toFixed(1)} ms (10 ms + slack; ${cpuWait.toFixed(1)} ms of it waiting for a CPU)`)
  while (process.hrtime.bigint() < a) await new Promise(resolve => setTimeout(resolve, 5))
  const r = l.consume('late')
  t.equal(r.allowed, true, 'B claims the key once A\'s lease has run out')
  t.notOk(r.busy, 'and is not busy then')
  const seen = Atomics.compareExchange(w64, start * 2 + 1, -1n - a, process.hrtime.bigint() + 1n)
  t.ok(seen !== -1n - a && seen > 0n, 'A\'s mark was cleared (B took the slot): A, resuming, cannot activate it')
  let held = 0
  for (let i = 0; i < keys; i++) if (w64[i * 2] === f && w64[i * 2 + 1] >= 0n) held++
  t.equal(held, 1, 'the key holds one slot')
  t.equal(l.consume('late').allowed, true)
  t.equal(l.consume('late').allowed, false, 'and one bucket: burst 2, the third call refused')
  t.ok(Atomics.load(locks, g) < 0n, 'the lock is free again, remembering its last token')
  Atomics.store(locks, g, process.hrtime.bigint() + 3_600_000_000_000n)
  // A lease no participant could have taken is a coded error for a key of
  // that lock, never a hang.
  let other = 'k'
  for (let i = 0; ; i++) {
    hashKey('k' + i, head[8], head[9])
    if ((((fp[0] >>> 0) % keys) / 16 | 0) === g) { other = 'k' + i; break }
  }
  t.throws(() => l.consume(other), { code: 'ERR_SABSYNC_BAD_MEMORY', message: /claim lock/ })
})
