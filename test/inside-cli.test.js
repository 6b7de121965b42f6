'use strict'
// `npx sabsync` (bin/sabsync.js): ls, inspect NAME [--json], rm NAME
// [--force] and their exit codes, against real processes holding and
// waiting in a space; and the command as a user gets it, from an installed
// tarball (`npx sabsync inspect --json`).
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { spawnSync, execFileSync } = require('child_process')
const sabsync = require('..')
const { spaceName, spawn } = require('./space-helpers')

const root = path.join(__dirname, '..')
const bin = path.join(root, 'bin', 'sabsync.js')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

function cli (args, cwd = root, command = process.execPath, pre = [bin]) {
  const r = spawnSync(command, [...pre, ...args], { cwd, encoding: 'utf8', timeout: 120000 })
  return { code: r.status, out: r.stdout, err: r.stderr }
}

async function until (t, fn, what) {
  const end = Date.now() + 15000
  let got
  while (!(got = fn()) && Date.now() < end) await new Promise(resolve => setTimeout(resolve, 20))
  t.ok(got, what)
  return got
}

// A space with a mutex held by one child, a Sema whose token it holds, a
// second child waiting for the Sema, and a limiter with two keys.
async function busySpace (t) {
  const name = spaceName(t)
  const holder = spawn(t, name, `
    space.mutex('jobs').lock()
    space.sema('pool', 1).tryAcquire()
    const limiter = space.rateLimiter('api', { limit: 5, window: 60000, keys: 32 })
    limiter.consume('1.2.3.4'); limiter.consume('5.6.7.8')
    send('ready')
    await next()
  `)
  await holder.message(m => m === 'ready')
  const waiter = spawn(t, name, `
    const pool = space.sema('pool', 1)
    send('asking')
    pool.release(await pool.acquire())
  `)
  await waiter.message(m => m === 'asking')
  return { name, holder, waiter }
}

t.test('inspect --json and the table; ls; rm refusing, then forcing; exit codes', async t => {
  const { name, holder, waiter } = await busySpace(t)
  const snap = await until(t, () => {
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
  await until(t, () => JSON.parse(cli(['ls', '--json']).out).find(r => r.name === name).processes.length === 0, 'the children are gone')
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

t.test('npx sabsync inspect --json from an installed tarball', async t => {
  const { name, holder } = await busySpace(t)
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'sabsync-cli-'))
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }))
  // Packed from a copy of the tracked tree (no scripts: no prebuilds), and
  // installed without its build step; this checkout's addon goes where
  // node-gyp-build looks (build/Release).
  const src = path.join(work, 'src')
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
    .split('\0').filter(Boolean)
  for (const f of files) {
    if (!fs.existsSync(path.join(root, f))) continue
    fs.mkdirSync(path.dirname(path.join(src, f)), { recursive: true })
    fs.copyFileSync(path.join(root, f), path.join(src, f))
  }
  const packed = JSON.parse(execFileSync(npm, ['pack', '--json', '--ignore-scripts', '--pack-destination', work], { cwd: src, encoding: 'utf8' }))
  t.ok(packed[0].files.some(f => f.path === 'bin/sabsync.js'), 'bin/sabsync.js ships')
  const app = path.join(work, 'app')
  fs.mkdirSync(app)
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }))
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts', path.join(work, packed[0].filename)], { cwd: app, encoding: 'utf8' })
  const release = path.join(app, 'node_modules', 'sabsync', 'build', 'Release')
  fs.mkdirSync(release, { recursive: true })
  fs.copyFileSync(path.join(root, 'build', 'Release', 'sabsync.node'), path.join(release, 'sabsync.node'))
  t.ok(fs.existsSync(path.join(app, 'node_modules', '.bin', 'sabsync')), 'npm linked the command')

  const r = cli(['--no-install', 'sabsync', 'inspect', name, '--json'], app, 'npx', [])
  t.equal(r.code, 0, r.err)
  const snap = JSON.parse(r.out)
  t.same(snap.objects.find(o => o.key === 'jobs').holder, { pid: holder.pid, threadId: 0 })
  t.equal(cli(['--no-install', 'sabsync', 'inspect', 'no-such-space-' + process.pid], app, 'npx', []).code, 2, 'exit codes through npx')
  holder.send('go')
  await holder.done
})
