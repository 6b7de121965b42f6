'use strict'
// Freeing objects in a space (issue 31): space.free(key) for keyed objects
// (a lock per order), the room of a freed or replaced object reclaimed only
// once no live thread of any process uses it, and ERR_SABSYNC_SHARED_FULL
// saying which limit was met. Real processes for the racing opener and
// holder.
const t = require('tap')
const { openShared } = require('..')
const { spaceName, spawn } = require('./space-helpers')

if (process.platform !== 'linux') {
  t.plan(0, 'shared spaces need Linux')
  process.exit(0)
}

t.test('a lock per key, freed when done: 5,000 keys in a space of 512 objects', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  for (let i = 0; i < 5000; i++) {
    const m = space.mutex(`order:${i}`)
    await m.runExclusive(() => {})
    if (!space.free(`order:${i}`)) t.fail(`order:${i} not freed`)
  }
  const u = space.usage()
  t.equal(u.objects, 0, 'nothing left')
  t.equal(u.retired, 0, 'nothing waiting to be reclaimed')
  t.ok(u.bytesUsed <= 64, `one object's bytes reused 5,000 times (${u.bytesUsed} bytes used)`)
  const m = space.mutex('order:1')
  const old = space.mutex('order:2')
  space.free('order:2')
  t.throws(() => old.tryLock(), { code: 'ERR_SABSYNC_SHARED_CLOSED', message: /this object's key was freed in this thread \(space\.free\(key\)/ })
  t.equal(m.tryLock(), true, 'other keys untouched')
  m.unlock()
  t.equal(space.free('never made'), true, 'a key that names nothing: nothing left of it')
})

t.test('ERR_SABSYNC_SHARED_FULL says which limit was met, and what to do', async t => {
  const name = spaceName(t)
  const space = openShared(name, { size: 512 * 1024 })
  t.teardown(() => space.close())
  let err
  for (let i = 0; i < 1000 && err === undefined; i++) {
    try { space.int32Array('big' + i, 4096) } catch (e) { err = e }
  }
  t.match(err, {
    code: 'ERR_SABSYNC_SHARED_FULL',
    message: /^openShared: no room for "big\d+" in the space ".*" \(\/dev\/shm\/sabsync\..*\): this object needs 16384 bytes and \d+ of the space's \d+ bytes for objects are left\. Free objects no longer used \(space\.free\(key\)\), or open a bigger space under a new name \(openShared\(name, \{ size \}\), size now 524288/
  })
  const other = openShared(spaceName(t))
  t.teardown(() => other.close())
  let keys
  for (let i = 0; i < 600 && keys === undefined; i++) {
    try { other.atomicFlag('f' + i) } catch (e) { keys = e }
  }
  t.match(keys, {
    code: 'ERR_SABSYNC_SHARED_FULL',
    message: /^openShared: no room for "f512" .*: it holds 512 objects, the most a space has\. Free the keys no longer used \(space\.free\(key\)/
  })
  other.free('f7')
  t.equal(typeof other.atomicFlag('f512').test(), 'boolean', 'a freed key makes room for another')
})

t.test('a free while another process holds the object: its room waits for that process', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const mine = space.mutex('k')
  const child = spawn(t, name, `
    const m = space.mutex('k')
    m.lock()
    send({ held: m.byteOffset })
    await next()
    m.unlock()
    return 'let go'`)
  const { held } = await child.message(m => 'held' in m)
  t.equal(held, mine.byteOffset)
  t.equal(space.free('k'), false, 'another process uses it: not reclaimed now')
  t.equal(space.usage().retired, 1)
  // Made meanwhile: never in the room of the object the child holds.
  const arrays = Array.from({ length: 20 }, (_, i) => space.int32Array('fill' + i, 16).fill(-1))
  t.ok(arrays.every(a => a.byteOffset !== held), 'no new object in a room in use')
  // A racing opener finds the same object, still held.
  const again = space.mutex('k')
  t.equal(again.byteOffset, held, 'a lookup of a freed key in use finds it')
  t.equal(again.tryLock(), false, 'held by the child')
  space.free('k') // this thread lets go again
  child.send('go')
  t.equal(await child.done, 'let go')
  await child.exited
  space.mutex('any') // the next lookup reclaims it
  t.equal(space.usage().retired, 0, 'reclaimed once the child was gone')
  t.ok(arrays.every(a => a.every(v => v === -1)), 'no object was written by another')
})

t.test('free racing openers and holders in other processes: no object shares another\'s room', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const N = 300
  // Three processes on the directory at once: an untimed call that waits
  // past 250 ms for its lock answers ERR_SABSYNC_SHARED_BUSY, "try again"
  // (a loaded machine, a sanitizer): so they do.
  const retry = `
    const retry = f => {
      for (;;) {
        try { return f() } catch (e) { if (e.code !== 'ERR_SABSYNC_SHARED_BUSY') throw e }
      }
    }`
  const body = `${retry}
    const cells = retry(() => space.int32Array('count', 4))
    for (let i = 0; i < ${N}; i++) {
      const m = retry(() => space.mutex('race'))
      m.lock()
      const n = Atomics.add(cells, 0, 1)
      if (n !== 0) throw new Error('two holders at once: ' + n)
      for (let j = 0; j < 50; j++) Atomics.load(cells, 0)
      Atomics.sub(cells, 0, 1)
      m.unlock()
      if (i % 3 === 0) retry(() => space.free('race'))
    }
    return 'done'`
  const kids = [spawn(t, name, body), spawn(t, name, body)]
  // This process frees the key and makes objects that would land in its
  // room if a free reclaimed it under a user: filled, they would break the
  // children's lock.
  const retryHere = f => {
    for (;;) {
      try { return f() } catch (e) { if (e.code !== 'ERR_SABSYNC_SHARED_BUSY') throw e }
    }
  }
  let rounds = 0
  const kidsDone = Promise.all(kids.map(k => k.done))
  let finished = false
  kidsDone.then(() => { finished = true }, () => { finished = true })
  while (!finished) { // eslint-disable-line no-unmodified-loop-condition
    retryHere(() => space.free('race'))
    retryHere(() => space.int32Array('probe' + (rounds % 8), 16)).fill(-1)
    retryHere(() => space.free('probe' + ((rounds + 4) % 8)))
    rounds++
    await new Promise(resolve => setImmediate(resolve))
  }
  t.same(await kidsDone, ['done', 'done'], 'every lock held alone, no error in either process')
  t.ok(rounds > 0, `${rounds} rounds of free and make`)
})
