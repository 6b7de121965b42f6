'use strict'
// The package as users get it: `npm pack` (which prebuilds the binary),
// installed into an empty project, then require, import and TypeScript.
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { execFileSync, spawnSync } = require('child_process')

const root = path.join(__dirname, '..')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

function sh (cmd, args, cwd, env = {}) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, ...env }, timeout: 300000 })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

// Building needs the running Node's headers (<prefix>/include/node): Node
// from the registry's `node` package (the test matrix) has none, and there
// is no network to fetch them.
const headers = fs.existsSync(path.join(path.dirname(process.execPath), '..', 'include', 'node', 'node_api.h'))
const skip = !headers && 'this Node has no headers to build with (offline)'

// Packing builds the addon and tsc compiles: minutes on a loaded machine,
// beyond the suite's per-file timeout.
t.setTimeout(600000)

t.test('npm pack, install into an empty project, require / import / tsc', { skip }, async t => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'sabsync-pack-'))
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }))
  // Pack from a copy of the tracked tree, so this test's build never
  // touches the addon the other tests are using.
  const src = path.join(work, 'src')
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
    .split('\0').filter(Boolean)
  for (const f of files) {
    if (!fs.existsSync(path.join(root, f))) continue
    fs.mkdirSync(path.dirname(path.join(src, f)), { recursive: true })
    fs.copyFileSync(path.join(root, f), path.join(src, f))
  }
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(src, 'node_modules'))
  sh(process.execPath, ['scripts/prebuild.js'], src) // what `prepack` runs
  const out = JSON.parse(sh(npm, ['pack', '--json', '--ignore-scripts', '--pack-destination', work], src))
  const listed = out[0].files.map(f => f.path)
  t.ok(listed.includes('prebuilds/linux-x64/sabsync.node') || process.platform !== 'linux', 'the prebuilt binary ships')
  t.ok(listed.includes('index.d.ts') && listed.includes('index.mjs') && listed.includes('LICENSE'))
  t.notOk(listed.some(f => /^(test|bench|build|examples|node_modules|\.ci)\//.test(f)), 'no tests, benches or build leftovers')

  const app = path.join(work, 'app')
  fs.mkdirSync(app)
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }))
  sh(npm, ['install', '--no-audit', '--no-fund', '--prefer-offline', path.join(work, out[0].filename)], app)
  t.notOk(fs.existsSync(path.join(app, 'node_modules', 'sabsync', 'build', 'Release', 'sabsync.node')),
    'installed without compiling (the prebuild was used)')

  const cjs = sh(process.execPath, ['-e', `
    const s = require('sabsync')
    const ta = new Int32Array(new SharedArrayBuffer(8))
    console.log(JSON.stringify({ keys: Object.keys(s).sort(), r: s.wait(ta, 0, 1) }))`], app)
  const esm = sh(process.execPath, ['--input-type=module', '-e', `
    import * as s from 'sabsync'
    import d from 'sabsync'
    const ta = new Int32Array(new SharedArrayBuffer(8))
    console.log(JSON.stringify({ keys: Object.keys(s).filter(k => k !== 'default').sort(), same: d.wait === s.wait, r: s.wait(ta, 0, 1) }))`], app)
  const c = JSON.parse(cjs)
  const e = JSON.parse(esm)
  t.equal(c.r, 'not-equal')
  t.equal(e.r, 'not-equal')
  t.same(e.keys, c.keys, 'ESM and CommonJS give the same exports')
  t.equal(e.same, true, 'the default export is the CommonJS module')

  fs.copyFileSync(path.join(__dirname, 'types', 'usage.ts'), path.join(app, 'usage.ts'))
  const tsc = require.resolve('typescript/bin/tsc')
  sh(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext',
    '--moduleResolution', 'nodenext', '--types', 'node', '--typeRoots', path.join(root, 'node_modules', '@types'), 'usage.ts'], app)
  t.pass('index.d.ts type-checks a sample that uses every export')

  // --build-from-source compiles even though a prebuild fits.
  sh(npm, ['rebuild', 'sabsync', '--build-from-source'], app)
  t.ok(fs.existsSync(path.join(app, 'node_modules', 'sabsync', 'build', 'Release', 'sabsync.node')), '--build-from-source built the addon')
  t.equal(sh(process.execPath, ['-p', 'require(\'sabsync\').wait(new Int32Array(new SharedArrayBuffer(8)), 0, 0, 0)'], app).trim(), 'timed-out')
})
