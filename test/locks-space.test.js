'use strict'
// The processes tier of the Web Locks API (space.locks) across real
// processes: exclusion per name under contention, a SIGKILLed holder's lock
// going to the next request, steal across processes, query() naming each
// process, a million names in a space of unchanged size, a full table, and
// a co-tenant scribbling the table.
const t = require('tap')
const fs = require('fs')
const sabsync = require('..')
const { spaceName, spawn, file } = require('./space-helpers')

const { openShared } = sabsync

if (process.platform !== 'linux') {
  t.pass('shared spaces need Linux')
  process.exit(0)
}

t.test('4 processes x 2,000 requests on 200 names: a counter per name proves exclusion, nothing lost', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const counters = space.int32Array('counters', 200)
  const inside = space.int32Array('inside', 201) // per name; [200]: entries that found another inside
  const K = 2000
  const kids = []
  for (let p = 0; p < 4; p++) {
    kids.push(spawn(t, name, `
      const counters = space.int32Array('counters', 200)
      const inside = space.int32Array('inside', 201)
      let seed = ${p + 1}
      const rand = n => { seed = (seed * 1103515245 + 12345) >>> 0; return seed % n }
      for (let k = 0; k < ${K}; k++) {
        const i = rand(200)
        await space.locks.request('n' + i, async () => {
          if (Atomics.add(inside, i, 1) !== 0) Atomics.add(inside, 200, 1)
          const v = counters[i]
          if (k % 16 === 0) await null
          counters[i] = v + 1
          Atomics.sub(inside, i, 1)
        })
      }
      return 'done'
    `))
  }
  for (const k of kids) t.equal(await k.done, 'done')
  let sum = 0
  for (let i = 0; i < 200; i++) sum += counters[i]
  t.equal(sum, 4 * K, 'the counters add up to processes x requests')
  t.equal(inside[200], 0, 'no entry found another holder of its name inside')
  const q = await space.locks.query()
  t.same([q.held.length, q.pending.length], [0, 0], 'nothing left held or waiting')
  space.close()
})

t.test('a SIGKILLed holder: the next request is granted', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const holder = spawn(t, name, `
    space.locks.request('job', () => { send({ holding: process.pid }); return new Promise(() => {}) })
    await new Promise(() => {})
  `)
  await holder.message(m => m && m.holding)
  const q = await space.locks.query()
  t.same(q.held.map(i => [i.name, i.clientId]), [['job', `${holder.pid}:0`]], 'query names the holder process')
  let grantedAt = 0
  const next = space.locks.request('job', lock => { grantedAt = performance.now(); return lock.mode })
  await new Promise(resolve => setTimeout(resolve, 50))
  const killedAt = performance.now()
  holder.kill('SIGKILL')
  t.equal(await next, 'exclusive', 'granted after the holder died')
  const ms = grantedAt - killedAt
  t.ok(ms < 2000, `granted ${ms.toFixed(1)} ms after the SIGKILL (a quiet machine: a few ms; bound for a loaded one)`)
  space.close()
})

t.test('steal across processes: the robbed process\'s request rejects with AbortError', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const victim = spawn(t, name, `
    const p = space.locks.request('prize', () => { send({ holding: true }); return new Promise(() => {}) })
    try { await p; return 'resolved?' } catch (e) { return e.name + ':' + (e instanceof DOMException) }
  `)
  await victim.message(m => m && m.holding)
  t.equal(await space.locks.request('prize', { steal: true }, l => l.name), 'prize')
  t.equal(await victim.done, 'AbortError:true', 'the robbed holder was told')
  space.close()
})

t.test('1,000,000 distinct names through a space: its file keeps its size, its table its room', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const before = fs.statSync(file(name)).size
  const usage = space.usage()
  // In a child process: tap's async hooks here make each promise costly.
  const child = spawn(t, name, `
    const t0 = Date.now()
    for (let i = 0; i < 1000000; i += 10) {
      const batch = []
      for (let j = i; j < i + 10; j++) batch.push(space.locks.request('k' + j, () => {}))
      await Promise.all(batch)
    }
    return Date.now() - t0
  `)
  t.comment(`1,000,000 requests in ${await child.done} ms`)
  t.equal(fs.statSync(file(name)).size, before, 'the file has the size it had')
  t.same(space.usage(), { ...usage, objects: usage.objects + 2, bytesUsed: space.usage().bytesUsed }, 'two objects (the table and its mutex) and nothing else')
  const q = await space.locks.query()
  t.same([q.held.length, q.pending.length], [0, 0])
  space.close()
})

t.test('a full table answers ERR_SABSYNC_LOCKS_FULL, and has room again once requests end', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const { SLOTS } = require('../lib/locks/processes')
  let release
  const hold = new Promise(resolve => { release = resolve })
  const all = []
  for (let i = 0; i < SLOTS; i++) all.push(space.locks.request('h' + i, () => hold))
  await new Promise(resolve => setTimeout(resolve, 20))
  await t.rejects(space.locks.request('one-more', () => {}), { code: 'ERR_SABSYNC_LOCKS_FULL' })
  release()
  await Promise.all(all)
  t.equal(await space.locks.request('one-more', () => 'room'), 'room')
  space.close()
})

t.test('a co-tenant scribbling the table: no crash, no hang, every request settles', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const victim = spawn(t, name, `
    const answers = {}
    const until = Date.now() + 1500
    let k = 0
    while (Date.now() < until) {
      const p = space.locks.request('s' + (k++ % 5), { mode: k % 3 ? 'exclusive' : 'shared' }, () => null)
      const timeout = new Promise(resolve => setTimeout(resolve, 3000, 'hang'))
      let r
      try { r = await Promise.race([p.then(() => 'ok'), timeout]) } catch (e) { r = e.code || e.name }
      answers[r] = (answers[r] || 0) + 1
    }
    return answers
  `)
  await space.locks.request('s0', () => {}) // the table exists
  const { WORDS, TABLE_KEY } = require('../lib/locks/processes')
  const words = space.int32Array(TABLE_KEY, WORDS)
  let seed = 7
  const rand = n => { seed = (seed * 1103515245 + 12345) >>> 0; return seed % n }
  const end = Date.now() + 1200
  while (Date.now() < end) {
    for (let i = 0; i < 64; i++) words[8 + rand(WORDS - 8)] = [0, 1, 2, 3, -1, 0x7fffffff, process.pid, victim.pid][rand(8)]
    await new Promise(resolve => setImmediate(resolve))
  }
  const answers = await victim.done
  t.notOk(answers.hang, `no request hung (${JSON.stringify(answers)})`)
  t.ok(Object.keys(answers).every(a => a === 'ok' || a.startsWith('ERR_SABSYNC_')), 'every answer a grant or a sabsync error code')
  t.ok(answers.ok > 0, 'requests kept being granted')
  space.close()
})

t.test('space.inspect() lists the locks held and waiting, and an ABBA cycle of two processes as a deadlock', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  const abba = (first, second) => spawn(t, name, `
    space.locks.request('${first}', async () => {
      send({ holding: '${first}' })
      await next()
      await space.locks.request('${second}', () => {})
    })
    await new Promise(() => {})
  `)
  const a = abba('x', 'y')
  const b = abba('y', 'x')
  await a.message(m => m && m.holding)
  await b.message(m => m && m.holding)
  a.send('go')
  b.send('go')
  let snap
  for (let i = 0; i < 200; i++) {
    snap = space.inspect()
    if (snap.locks.pending.length === 2) break
    await new Promise(resolve => setTimeout(resolve, 10))
  }
  t.same(snap.locks.held.map(l => [l.name, l.clientId]).sort(), [['x', `${a.pid}:0`], ['y', `${b.pid}:0`]], 'held, with the processes')
  t.same(snap.locks.pending.map(l => [l.name, l.clientId]).sort(), [['x', `${b.pid}:0`], ['y', `${a.pid}:0`]], 'pending, with the processes')
  t.notOk(snap.objects.some(o => /sabsync\.locks/.test(o.key)), 'the table is not listed among the objects')
  t.equal(snap.deadlocks.length, 1, 'one cycle')
  t.same(snap.deadlocks[0].parties.map(p => [p.pid, p.waitsFor.kind]).sort(), [[a.pid, 'locks'], [b.pid, 'locks']].sort(), 'naming both processes and the named locks they wait for')
  JSON.stringify(snap)
  a.kill('SIGKILL')
  b.kill('SIGKILL')
  await a.exited
  await b.exited
  space.close()
})

t.test('a lock held when its space is closed: the request settles as its callback did', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  let release
  const p = space.locks.request('closing', () => new Promise(resolve => { release = resolve }))
  await new Promise(resolve => setTimeout(resolve, 10))
  space.close()
  release('done')
  t.equal(await p, 'done')
})
