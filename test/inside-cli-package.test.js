'use strict'
// The `sabsync` command as a user gets it: from an installed tarball,
// through npx (`npx sabsync inspect --json`). Runs once (scripts/test.js,
// ONCE), as the package test does: it packs and installs with npm.
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { execFileSync } = require('child_process')
const { root, cli, busySpace } = require('./cli-helpers')

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

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
