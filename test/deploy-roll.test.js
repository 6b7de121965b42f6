'use strict'
// A rolling restart that changes a Sema's nr from 3 to 4 (issue 31): four
// real processes of the old release, replaced one at a time by processes
// of the new one, each told to stop with SIGTERM as PM2 and cluster
// restarts do (test/fixtures/deploy/sema-user.js lets go and exits 0).
// Judged: no error in any process, during or after the roll; the bound
// during the roll (a space: each version holds its own bound, so at most
// 3 + 4; Redis: the caller's nr, so at most 4 in all, and a waiter of the
// old release may be served up to the newer nr); after it, at most 4 hold at
// once and 4 do (eight loops want tokens); in a space, the old version's
// room is reclaimed once its last process is gone.
const t = require('tap')
const path = require('path')
const { fork } = require('child_process')
const { openShared } = require('..')
const { spaceName } = require('./space-helpers')
const { redisSuite } = require('./fixtures/redis/suite')

t.setTimeout(300000)
const linux = process.platform === 'linux'
const fixture = path.join(__dirname, 'fixtures', 'deploy', 'sema-user.js')
const tick = ms => new Promise(resolve => setTimeout(resolve, ms))

function instance (t, args) {
  const p = fork(fixture, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] })
  const st = { acquires: 0, errors: [], exiting: null }
  p.on('message', m => {
    if (m.error) st.errors.push(m.error)
    if (m.acquires !== undefined) st.acquires = m.acquires
    if (m.exiting) st.exiting = m
  })
  p.ready = new Promise(resolve => p.on('message', m => { if (m.ready) resolve() }))
  p.exited = new Promise(resolve => p.once('exit', (code, signal) => resolve({ code, signal })))
  p.st = st
  t.teardown(() => { if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL') })
  return p
}

async function until (cond, what, ms = 60000) {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting for ' + what)
    await tick(10)
  }
}

// The roll: 4 of nr 3, then each replaced by one of nr 4. Answers the
// counters seen during the roll and after it.
async function roll (t, name, tier, extra = []) {
  const space = openShared(name)
  t.teardown(() => space.close())
  const c = space.int32Array('roll-counters', 16)
  const start = nr => instance(t, [tier, name, String(nr), '2', ...extra])
  const old = [0, 1, 2, 3].map(() => start(3))
  await Promise.all(old.map(p => p.ready))
  await until(() => old.every(p => p.st.acquires >= 5), 'the old release at work')
  const fresh = []
  for (let i = 0; i < 4; i++) {
    old[i].kill('SIGTERM')
    const exit = await old[i].exited
    t.same(exit, { code: 0, signal: null }, `old instance ${i} let go and exited 0 on SIGTERM`)
    t.equal(old[i].st.exiting && old[i].st.exiting.exiting, 'SIGTERM')
    const p = start(4)
    fresh.push(p)
    await p.ready
    await until(() => p.st.acquires >= 5, `new instance ${i} at work`)
  }
  const during = { most: c[1], most3: c[5], most4: c[7] }
  Atomics.store(c, 1, Atomics.load(c, 0)) // the most from now on
  const before = c[12]
  await until(() => c[12] >= before + 200, 'the new release at work')
  const after = { most: c[1], acquires: c[12] - before }
  for (const p of fresh) p.kill('SIGINT') // PM2's signal
  const exits = await Promise.all(fresh.map(p => p.exited))
  t.same(exits, fresh.map(() => ({ code: 0, signal: null })), 'the new instances let go and exit 0 on SIGINT')
  const errors = [...old, ...fresh].flatMap(p => p.st.errors)
  t.same(errors, [], 'no error in any process, during or after the roll')
  t.equal(c[13], 0, 'no error counted')
  t.equal(c[0], 0, 'nobody holds a token at the end')
  return { during, after, space }
}

t.test('a space: a Sema from 3 to 4 across a rolling restart of 4 processes', { skip: !linux && 'shared spaces need Linux' }, async t => {
  const name = spaceName(t)
  const { during, after, space } = await roll(t, name, 'space')
  t.ok(during.most3 <= 3, `the old release never held more than 3 (most: ${during.most3})`)
  t.ok(during.most4 <= 4, `the new release never held more than 4 (most: ${during.most4})`)
  t.ok(during.most <= 7, `during the roll at most 3 + 4 held (most: ${during.most})`)
  t.ok(after.most <= 4, `after the roll at most 4 hold at once (most: ${after.most})`)
  t.equal(after.most, 4, 'and 4 do: the new bound is in force')
  t.comment(`space roll: most held during ${during.most} (nr 3: ${during.most3}, nr 4: ${during.most4}), after ${after.most}`)
  // The old version's room: retired when the new one was made, reclaimed
  // at the first lookup after its last user went.
  space.mutex('any lookup')
  t.equal(space.usage().retired, 0, 'the old Sema\'s room is reclaimed')
  t.equal(space.sema('pool', 4).nr, 4)
})

redisSuite(t, async s => {
  s.test('Redis: a Sema from 3 to 4 across a rolling restart of 4 processes', async (t, k) => {
    if (!linux) return t.skip('the counters live in a space')
    const name = spaceName(t)
    const { during, after } = await roll(t, name, 'redis', [s.url, k.prefix])
    t.ok(during.most <= 4, `during the roll at most 4 held: the larger nr (most: ${during.most})`)
    t.ok(after.most <= 4, `after the roll at most 4 hold at once (most: ${after.most})`)
    t.equal(after.most, 4, 'and 4 do: the new bound is in force')
    t.comment(`redis roll: most held during ${during.most} (nr 3: ${during.most3}, nr 4: ${during.most4}), after ${after.most}`)
  })
})
