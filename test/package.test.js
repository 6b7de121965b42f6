'use strict'
// The package as users get it: `npm pack` (which prebuilds the binaries),
// installed into an empty project without compiling, then require, import
// and TypeScript; the glibc versions the packed binaries need; and the
// install script and the load error when the prebuilt binary does not load.
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { execFileSync, spawnSync } = require('child_process')
const { blocks, runBlock, spaceNames, emptyDb } = require('./fixtures/markdown/blocks')
const { sharedServer } = require('./fixtures/redis/server')
const { openShared } = require('..')

const root = path.join(__dirname, '..')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

// Two prebuilds (one cross-compiled), two builds from source and tsc: more
// than the suite's 120 s per file on a loaded machine (132 s was seen).
t.setTimeout(600000)

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

// On linux-x64 the pack carries linux-arm64 too, cross-compiled with
// gcc-aarch64-linux-gnu (.ci/run installs it). Without it, `npm pack`
// fails, saying what to install and how to pack this platform's binary
// alone (SABSYNC_PREBUILD_ARCH=x64), which is what this test then packs; the
// arm64 checks say they were left out.
const linux = process.platform === 'linux'
const cross = linux && process.arch === 'x64' && spawnSync('aarch64-linux-gnu-gcc', ['--version']).status === 0
// And win32-x64, cross-compiled with mingw-w64 (scripts/cross.js; .ci/run
// installs it; scripts/test-win32.sh runs it under Wine): packed and
// checked for its imports when x86_64-w64-mingw32-gcc is here.
const mingw = linux && process.arch === 'x64' && spawnSync('x86_64-w64-mingw32-gcc', ['--version']).status === 0
const archs = [...(cross ? ['x64', 'arm64'] : [process.arch]), ...(mingw ? ['win32-x64'] : [])]
const binary = arch => arch.includes('-')
  ? `prebuilds/${arch}/sabsync.node`
  : `prebuilds/${process.platform}-${arch}/sabsync${linux ? '.glibc' : ''}.node`

// A copy of `file` that asks for GLIBC_2.99 where it asked for GLIBC_2.17:
// what an older glibc than the binary needs says when it is loaded
// (same length, so nothing else in the file moves).
function needsNewerGlibc (file) {
  const bytes = fs.readFileSync(file)
  const at = bytes.indexOf('GLIBC_2.17\0')
  if (at < 0) throw new Error(file + ' names no GLIBC_2.17')
  bytes.write('GLIBC_2.99', at)
  fs.writeFileSync(file, bytes)
}

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
  if (linux && process.arch === 'x64' && !cross) {
    // What `npm pack` (prepack) does here without the cross compiler: a
    // release never ships silently without its arm64 binary.
    const env = { ...process.env }
    delete env.SABSYNC_PREBUILD_ARCH
    const r = spawnSync(process.execPath, ['scripts/prebuild.js'], { cwd: src, encoding: 'utf8', env, timeout: 300000 })
    t.not(r.status, 0, 'prepack without aarch64-linux-gnu-gcc fails')
    t.match(r.stderr, /apt-get install gcc-aarch64-linux-gnu.*SABSYNC_PREBUILD_ARCH=x64 packs this platform's binary only/,
      'and says what to install, or how to pack without it')
  }
  // What `prepack` runs.
  sh(process.execPath, ['scripts/prebuild.js'], src, { SABSYNC_PREBUILD_ARCH: archs.join(',') })
  const out = JSON.parse(sh(npm, ['pack', '--json', '--ignore-scripts', '--pack-destination', work], src))
  const listed = out[0].files.map(f => f.path)
  for (const arch of archs) t.ok(listed.includes(binary(arch)), binary(arch) + ' ships')
  t.equal(listed.filter(f => f.startsWith('prebuilds/')).length, archs.length, 'and no other binary')
  t.ok(listed.includes('index.d.ts') && listed.includes('index.mjs') && listed.includes('LICENSE'))
  t.ok(listed.includes('redis.d.ts') && listed.includes('redis.mjs') && listed.includes('lib/redis/index.js'), 'sabsync/redis ships')
  t.notOk(listed.some(f => /^(test|bench|build|node_modules|\.ci)\//.test(f) && f !== 'bench/README.md'), 'no tests, benches or build leftovers (the benchmarks\' README, which the README links to, ships)')
  t.ok(listed.includes('docs/api.md') && listed.includes('CONTRIBUTING.md'), 'docs/ and CONTRIBUTING.md ship')
  const examples = fs.readdirSync(path.join(root, 'examples')).filter(f => f.endsWith('.js'))
  t.same(examples.filter(f => !listed.includes('examples/' + f)), [], 'every example ships')

  const app = path.join(work, 'app')
  const pkg = path.join(app, 'node_modules', 'sabsync')
  fs.mkdirSync(app)
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }))
  const log = sh(npm, ['install', '--no-audit', '--no-fund', '--prefer-offline', '--foreground-scripts', path.join(work, out[0].filename)], app)
  t.match(log, 'sabsync: using the prebuilt binary ' + binary(process.arch), 'the install script chose the prebuilt binary')
  t.notOk(fs.existsSync(path.join(pkg, 'build')), 'and compiled nothing')
  // The README's links resolve inside the installed package (docs/ ships).
  for (const f of ['README.md', ...fs.readdirSync(path.join(pkg, 'docs')).map(f => 'docs/' + f)]) {
    const text = fs.readFileSync(path.join(pkg, f), 'utf8')
    for (const [, target] of text.matchAll(/\]\(((?!https?:|#)[^)#\s]+)(?:#[^)]*)?\)/g)) {
      t.ok(fs.existsSync(path.join(pkg, path.dirname(f), target)), `node_modules/sabsync/${f} links to ${target}, which is installed`)
    }
  }

  // The binaries as packed: no glibc symbol newer than 2.17 (objdump -T).
  await t.test('the packed Linux binaries need glibc 2.17 at most', { skip: !linux && 'not Linux' }, async t => {
    const { glibcSymbols, tooNew } = require('../scripts/glibc-symbols')
    for (const arch of ['x64', 'arm64']) {
      if (!archs.includes(arch)) {
        t.skip(`${binary(arch)}: not packed here (no aarch64-linux-gnu-gcc: apt-get install gcc-aarch64-linux-gnu)`)
        continue
      }
      const refs = glibcSymbols(path.join(pkg, binary(arch)), arch)
      const names = refs.map(r => r.name)
      t.ok(['pthread_mutex_lock', 'clock_gettime', 'calloc'].every(n => names.includes(n)),
        `${arch}: objdump -T lists the glibc symbols the core uses (${refs.length})`)
      t.same(tooNew(refs).map(r => `${r.name}@GLIBC_${r.version}`), [], `${arch}: none newer than GLIBC_2.17`)
    }
  })

  // The packed Windows binary: a PE DLL for x86-64 that imports Node-API
  // and libuv from node.exe and nothing but Windows' own DLLs besides.
  await t.test('the packed win32-x64 binary', { skip: !mingw && 'not packed here (no x86_64-w64-mingw32-gcc: apt-get install mingw-w64)' }, async t => {
    const dump = sh('x86_64-w64-mingw32-objdump', ['-p', path.join(pkg, binary('win32-x64'))], work)
    t.match(dump, /file format pei-x86-64/, 'a PE file for x86-64')
    t.match(dump, /^\s*DLL$/m, 'a DLL (its characteristics say so)')
    const dlls = [...dump.matchAll(/DLL Name: (\S+)/g)].map(m => m[1].toLowerCase())
    t.ok(dlls.includes('node.exe'), 'importing from node.exe')
    t.same(dlls.filter(d => !/^(node\.exe|kernel32\.dll|msvcrt\.dll|api-ms-win-[a-z0-9-]+\.dll)$/.test(d)), [], `and Windows' own DLLs only (${dlls.join(', ')})`)
    t.match(dump, /\bnapi_create_function\b/, 'Node-API among its imports')
    t.match(dump, /\buv_async_send\b/, 'and libuv')
  })

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
  // sabsync/redis needs no Redis client installed to load (ioredis is an
  // optional peer: the caller passes its own).
  t.notOk(fs.existsSync(path.join(app, 'node_modules', 'ioredis')), 'ioredis was not installed with sabsync')
  t.equal(sh(process.execPath, ['-p', 'Object.keys(require(\'sabsync/redis\')).sort().join()'], app).trim(), 'LockManager,Mutex,RateLimit,RateLimiter,SabsyncError,Sema,letGo')
  t.equal(sh(process.execPath, ['--input-type=module', '-e', 'import { Mutex } from \'sabsync/redis\'; console.log(typeof Mutex)'], app).trim(), 'function')

  fs.copyFileSync(path.join(__dirname, 'types', 'usage.ts'), path.join(app, 'usage.ts'))
  const tsc = require.resolve('typescript/bin/tsc')
  sh(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext',
    '--moduleResolution', 'nodenext', '--types', 'node', '--typeRoots', path.join(root, 'node_modules', '@types'), 'usage.ts'], app)
  t.pass('index.d.ts type-checks a sample that uses every export')

  // The README's examples (threads, named locks, processes, machines), as a user copies them into the app, run
  // against the installed tarball; and a shipped example runs from there.
  await t.test('the README\'s examples run from the installed package', async t => {
    fs.symlinkSync(path.join(root, 'node_modules', 'ioredis'), path.join(app, 'node_modules', 'ioredis'), 'dir')
    t.teardown(() => fs.rmSync(path.join(app, 'node_modules', 'ioredis')))
    const readme = blocks(path.join(root, 'README.md'))
    t.equal(readme.length, 4, 'four examples: threads, named locks, processes, machines')
    let redisUrl = null
    let noRedis = null
    try {
      redisUrl = await sharedServer(t)
    } catch (e) {
      if (process.env.CI) throw e
      noRedis = e.message
    }
    for (const block of readme) {
      const skip = block.mode === 'redis' && noRedis && `no Redis server, not under CI: ${noRedis}`
      await t.test(`README.md:${block.line} (${block.mode})`, { skip }, async t => {
        const env = {}
        const db = block.mode === 'redis' ? await emptyDb(redisUrl) : null
        if (db) env.REDIS_URL = db.url
        try {
          const r = await runBlock(block, app, { env })
          t.ok(r.ok, `${r.why}\n${r.out}`)
        } finally {
          for (const name of spaceNames(block.code)) openShared.unlink(name)
          if (db) await db.clear()
        }
      })
    }
    const r = spawnSync(process.execPath, [path.join('node_modules', 'sabsync', 'examples', 'mutex-counter.js')], { cwd: app, encoding: 'utf8', timeout: 60000 })
    t.equal(r.status, 0, r.stderr)
    t.match(r.stdout, /counter (\d+), expected \1 /, 'node node_modules/sabsync/examples/mutex-counter.js runs from the install')
  })

  const probe = ['-p', 'require(\'sabsync\').wait(new Int32Array(new SharedArrayBuffer(8)), 0, 0, 0)']

  // SABSYNC_BUILD_FROM_SOURCE=1 compiles even though a prebuild fits, and
  // npm says nothing of an unknown config (it warns of npm's own
  // --build-from-source and npm_config_build_from_source).
  const fromSource = spawnSync(npm, ['rebuild', 'sabsync'], { cwd: app, encoding: 'utf8', env: { ...process.env, SABSYNC_BUILD_FROM_SOURCE: '1' }, timeout: 300000 })
  t.equal(fromSource.status, 0, 'SABSYNC_BUILD_FROM_SOURCE=1 npm rebuild sabsync succeeds')
  t.notMatch(fromSource.stderr, /[Uu]nknown (cli|env|project|user) config/, 'with no warning from npm')
  t.ok(fs.existsSync(path.join(pkg, 'build', 'Release', 'sabsync.node')), 'SABSYNC_BUILD_FROM_SOURCE=1 built the addon')
  t.equal(sh(process.execPath, probe, app).trim(), 'timed-out')

  // A prebuilt binary that this system's glibc is too old for.
  fs.rmSync(path.join(pkg, 'build'), { recursive: true })
  needsNewerGlibc(path.join(pkg, binary(process.arch)))
  const loaded = spawnSync(process.execPath, probe, { cwd: app, encoding: 'utf8' })
  t.not(loaded.status, 0, 'with nothing that loads, require throws')
  t.match(loaded.stderr, /sabsync: the native addon did not load: .*version `GLIBC_2\.99' not found/,
    'the error leads with the loader\'s own message')
  t.match(loaded.stderr, new RegExp(`on ${process.platform}-${process.arch}, (glibc [0-9.]+|musl), Node`), 'then the platform and libc')
  t.match(loaded.stderr, /SABSYNC_BUILD_FROM_SOURCE=1 npm rebuild sabsync/, 'then what to do')
  t.match(loaded.stderr, /code: 'ERR_SABSYNC_NOT_BUILT'/)

  // The install script, without a compiler, make or Python on PATH (only
  // node): one message, not node-gyp's errors, and a failed install.
  const bare = path.join(work, 'bare-bin')
  fs.mkdirSync(bare)
  fs.symlinkSync(process.execPath, path.join(bare, 'node'))
  const noCc = spawnSync(process.execPath, ['scripts/build.js', '--install'], { cwd: pkg, encoding: 'utf8', env: { ...process.env, PATH: bare, CC: '' } })
  t.equal(noCc.status, 1, 'no compiler: the install fails')
  t.match(noCc.stderr, new RegExp(`^sabsync: cannot install on ${process.platform}-${process.arch}, `), 'naming the platform')
  t.match(noCc.stderr, /does not load here: .*GLIBC_2\.99/, 'with the loader\'s message')
  t.match(noCc.stderr, /Building from source needs a C compiler \(cc\), make, Python 3: not found/, 'and what is missing')
  t.notMatch(noCc.stderr + noCc.stdout, /gyp/, 'and node-gyp never ran')

  // With a compiler, the install script builds from source instead.
  const rebuilt = spawnSync(npm, ['rebuild', 'sabsync', '--foreground-scripts'], { cwd: app, encoding: 'utf8' })
  t.equal(rebuilt.status, 0, 'npm rebuild succeeds')
  t.match(rebuilt.stderr, /sabsync: building from source\. The prebuilt binary .* does not load here: .*GLIBC_2\.99/, 'a prebuilt binary that does not load: built from source')
  t.ok(fs.existsSync(path.join(pkg, 'build', 'Release', 'sabsync.node')))
  t.equal(sh(process.execPath, probe, app).trim(), 'timed-out', 'and that build loads')
})
