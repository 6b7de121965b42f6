'use strict'
// `npx sabsync` (bin/sabsync.js): ls, inspect NAME [--json], rm NAME
// [--force] and their exit codes, against real processes holding and
// waiting in a space (the command from an installed tarball:
// inside-cli-package.test.js).
const t = require('tap')
const fs = require('fs')
const os = require('os')
const sabsync = require('..')
const { spaceName, spawn, seen } = require('./space-helpers')
const { cli, busySpace } = require('./cli-helpers')

t.test('inspect --json and the table; ls; rm refusing, then forcing; exit codes', async t => {
  const { name, holder, waiter } = await busySpace(t)
  const snap = await seen(t, () => {
    const r = cli(['inspect', name, '--json'])
    if (r.code !== 0) return null
    const s = JSON.parse(r.out)
    return s.objects.find(o => o.key === 'pool')?.waiting === 1 ? s : null
  }, 'inspect --json sees the waiting process')
  const jobs = snap.objects.find(o => o.key === 'jobs')
  t.same(jobs.holder, { pid: holder.pid, threadId: 0 }, 'the mutex\'s holder: the holding process')
  t.same(snap.objects.find(o => o.key === 'pool').waiters, [{ pid: waiter.pid, threadId: 0 }])
  t.same(snap.objects.find(o => o.key === 'api').table, { keys: 32, used: 2, claiming: 0, full: false })
  t.same(snap.processes.map(p => p.pid).sort(), [holder.pid, waiter.pid].sort(), 'the processes attached, the command itself left out')

  const table = cli(['inspect', name])
  t.equal(table.code, 0)
  t.match(table.out, new RegExp(`"jobs"\\s+mutex\\s+-\\s+held by pid ${holder.pid} thread 0`))
  t.match(table.out, /"api"\s+rateLimiter\s+-\s+2 of 32 keys tracked/)
  t.match(table.out, new RegExp(`processes attached: .*pid ${holder.pid}`))

  const ls = JSON.parse(cli(['ls', '--json']).out).find(r => r.name === name)
  t.same(ls.processes, [holder.pid, waiter.pid].sort((a, b) => a - b), 'ls: the processes mapping it')
  t.equal(ls.mode, '0600')
  t.equal(ls.owner, os.userInfo().username)
  t.match(cli(['ls']).out, new RegExp(`^${name}\\s+1\\.0 MiB\\s+\\S+\\s+0600\\s+`, 'm'))

  const refused = cli(['rm', name])
  t.equal(refused.code, 4, 'rm refuses while processes are attached')
  t.match(refused.err, new RegExp(`in use by process\\(es\\) .*${holder.pid}`))
  t.ok(fs.existsSync(`/dev/shm/sabsync.${name}`), 'and the space is still there')

  holder.send('go')
  await holder.done
  await waiter.done
  // This test process has not opened it: once the children have gone, rm
  // goes ahead without --force.
  await seen(t, () => JSON.parse(cli(['ls', '--json']).out).find(r => r.name === name).processes.length === 0, 'the children are gone')
  const removed = cli(['rm', name])
  t.equal(removed.code, 0, removed.err)
  t.notOk(fs.existsSync(`/dev/shm/sabsync.${name}`))

  const name2 = spaceName(t)
  const space = sabsync.openShared(name2)
  t.teardown(() => space.close())
  const user = spawn(t, name2, 'send(\'open\'); await next()')
  await user.message(m => m === 'open')
  t.equal(cli(['rm', name2]).code, 4)
  const forced = cli(['rm', name2, '--force'])
  t.equal(forced.code, 0, 'rm --force unlinks it anyway')
  t.notOk(fs.existsSync(`/dev/shm/sabsync.${name2}`))
  space.mutex('still').lock() // its users keep using it
  user.send('go')
  await user.done

  t.equal(cli(['inspect', 'no-such-space-' + process.pid]).code, 2, 'no such space: 2')
  t.equal(cli(['rm', 'no-such-space-' + process.pid]).code, 2)
  t.equal(cli([]).code, 1, 'no command: 1')
  t.equal(cli(['frobnicate']).code, 1)
  t.equal(cli(['inspect']).code, 1, 'no name: 1')
  t.equal(cli(['inspect', 'a/b']).code, 1)
  t.equal(cli(['ls', '--bogus']).code, 1)
  const help = cli(['--help'])
  t.equal(help.code, 0)
  t.match(help.out, /exit codes: 0 done, 1 usage, 2 no such space/)

  // Not a space: a file at the name that is not one.
  const bogus = `test-bogus-${process.pid}`
  fs.writeFileSync(`/dev/shm/sabsync.${bogus}`, Buffer.alloc(1 << 19), { mode: 0o600 })
  t.teardown(() => fs.rmSync(`/dev/shm/sabsync.${bogus}`, { force: true }))
  const notSpace = cli(['inspect', bogus])
  t.equal(notSpace.code, 3, 'a file that is not a space: 3')
  t.match(notSpace.err, /cannot open/)
})
