'use strict'
// Async waits and the event loop: `ref` keeps the process alive (or not),
// the libuv threadpool is never held, microtasks run after a resolution.
const t = require('tap')
const fs = require('fs')
const crypto = require('crypto')
const sabsync = require('..')
const { exited, child, until, fixture, message, fixtureSource } = require('./helpers')

t.test('a pending wait keeps the loop alive by default', async t => {
  const r = await child(`
const ta = new Int32Array(new SharedArrayBuffer(8))
sabsync.waitAsync(ta, 0, 0, 150).value.then(v => console.log('settled', v))`)
  t.equal(r.code, 0)
  t.equal(r.stdout.trim(), 'settled timed-out')
})

t.test('ref:false lets the process exit', async t => {
  const r = await child(`
const ta = new Int32Array(new SharedArrayBuffer(8))
sabsync.waitAsync(ta, 0, 0, 5000, { ref: false }).value.then(v => console.log('settled', v))
sabsync.waitAsync(ta, 0, 0, Infinity, { ref: false }).value.then(v => console.log('settled', v))
process.on('exit', () => console.log('exit with', sabsync.waiters(ta, 0), 'waiting'))`)
  t.equal(r.code, 0)
  // Had it sat out the 5 s timeout, that wait would have settled first.
  t.equal(r.stdout.trim(), 'exit with 2 waiting', 'exited without waiting for them')
})

t.test('a ref\'d wait woken by a worker, microtasks drain after it', async t => {
  const r = await child(`
const { Worker } = require('worker_threads')
const sab = new SharedArrayBuffer(8)
const ta = new Int32Array(sab)
sabsync.waitAsync(ta, 0, 0).value
  .then(v => Promise.resolve(v))
  .then(v => { queueMicrotask(() => console.log('microtask after', v)) })
new Worker(${JSON.stringify(fixtureSource('wait-loop/notifier'))}, { eval: true, workerData: sab }).unref()`)
  t.equal(r.code, 0, r.stderr)
  t.equal(r.stdout.trim(), 'microtask after ok')
})

t.test('many pending waits do not hold the threadpool', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const N = 64 // far more than UV_THREADPOOL_SIZE (4)
  const ps = []
  for (let i = 0; i < N; i++) ps.push(sabsync.waitAsync(ta, 0, 0).value)
  t.equal(sabsync.waiters(ta, 0), N)
  // Threadpool work completes while every wait is still pending.
  const work = []
  for (let i = 0; i < 8; i++) {
    work.push(fs.promises.readFile(__filename, 'utf8'))
    work.push(new Promise((resolve, reject) => crypto.pbkdf2('pw', 'salt', 1000, 32, 'sha256', (e, k) => e ? reject(e) : resolve(k))))
  }
  const done = await Promise.all(work)
  t.equal(done.length, 16)
  t.equal(sabsync.waiters(ta, 0), N, 'all still pending while the threadpool worked')
  t.equal(sabsync.notify(ta, 0), N)
  const results = await Promise.all(ps)
  t.ok(results.every(v => v === 'ok'))
})

t.test('async waits in a worker, woken by the main thread', async t => {
  const sab = new SharedArrayBuffer(16)
  const ta = new Int32Array(sab)
  const w = fixture('wait-loop/async-waits', sab)
  const msg = message(w)
  await until(() => sabsync.waiters(ta, 0) === 3)
  t.equal(sabsync.notify(ta, 0), 3)
  t.same(await msg, ['ok', 'ok', 'ok'])
  await exited(w)
})

t.test('thousands of pending waits, all woken', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const N = 10000
  const ps = new Array(N)
  for (let i = 0; i < N; i++) ps[i] = sabsync.waitAsync(ta, 0, 0, i % 2 ? Infinity : 60000).value
  t.equal(sabsync.waiters(ta, 0), N)
  t.equal(sabsync.notify(ta, 0), N)
  const rs = await Promise.all(ps)
  t.equal(rs.filter(v => v === 'ok').length, N)
  t.equal(sabsync.waiters(ta, 0), 0)
})
