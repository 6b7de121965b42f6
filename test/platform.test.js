'use strict'
// What keeps sabsync portable beyond Linux, and what it says where it cannot
// build. Everything Linux-specific lives in src/core/futex.c (the futex,
// private or shared), used by src/core/parker_futex.c, which non-Linux
// builds leave out (binding.gyp selects the portable parker), and by the
// shared spaces, whose other system calls are src/core/space_sys.c's;
// binding.gyp compiles futex.c and the spaces on Linux only (openShared
// answers ERR_SABSYNC_UNSUPPORTED elsewhere); the install script stops on
// Windows with one message.
const t = require('tap')
const fs = require('fs')
const path = require('path')
const { spawnSync } = require('child_process')
const { root } = require('./helpers')

// C sources and headers of the addon, relative to the root.
function cFiles (dir) {
  const out = []
  for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = path.join(dir, e.name)
    if (e.isDirectory()) out.push(...cFiles(rel))
    else if (/\.[ch]$/.test(e.name)) out.push(rel)
  }
  return out
}

// The code of a C file without its comments and string literals.
function code (file) {
  return fs.readFileSync(path.join(root, file), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/\/\/.*$/gm, ' ')
    .replace(/"(\\.|[^"\\\n])*"/g, '""')
}

t.test('only the futex, the futex parker and the space\'s system calls include <linux/...> or call syscall()', async t => {
  const files = [...cFiles('src'), ...cFiles('include')]
  t.ok(files.includes(path.join('src', 'core', 'parker_futex.c')) && files.length > 5, `${files.length} C files read`)
  const linuxOnly = /#\s*include\s*<(linux\/|sys\/syscall\.h)|\bsyscall\s*\(/
  const allowed = [path.join('src', 'core', 'futex.c'), path.join('src', 'core', 'space_sys.c')]
  const offenders = files.filter(f => !allowed.includes(f) && linuxOnly.test(code(f)))
  t.same(offenders, [], 'no other file uses Linux headers or raw syscalls')
  const gypText = fs.readFileSync(path.join(root, 'binding.gyp'), 'utf8')
  const linuxSources = /\["OS=='linux'", \{\s*"sources": \[([^\]]*)\]/.exec(gypText)
  t.ok(linuxSources && linuxSources[1].includes('"src/core/space_sys.c"'), 'space_sys.c is compiled on Linux only')
  t.ok(linuxSources && linuxSources[1].includes('"src/core/futex.c"'), 'and so is futex.c')
  t.notOk(/"sources": \[[^\]]*"src\/core\/space_sys\.c"[^\]]*\][^]*\["OS=='linux'"/.test(gypText), 'and not among the sources of every OS')
  t.match(code('src/core/futex.c'), linuxOnly, 'the futex does (the check sees them)')
  t.ok(linuxSources && linuxSources[1].includes('"src/core/parker_futex.c"'), 'and so is the futex parker')
  t.match(code('src/core/parker_futex.c'), /^#ifndef SAB_PARKER_UV\b/m, 'which compiles to nothing with the portable parker')
  t.match(code('src/core/parker_win.c'), /^#ifdef SAB_PARKER_WIN\b/m, 'the Windows parker compiles only where it is chosen')
  const { gypFor } = require('../scripts/cross')
  const defines = os => gypFor(os).defines.filter(d => /^SAB_PARKER_/.test(d))
  t.same(defines('linux'), [], 'binding.gyp: the futex parker on Linux')
  t.same(defines('win'), ['SAB_PARKER_WIN'], 'WaitOnAddress on Windows')
  t.same(defines('mac'), ['SAB_PARKER_UV'], 'the portable parker on macOS')
  t.same(defines('freebsd'), ['SAB_PARKER_UV'], 'and on any other OS')
  t.notOk(gypFor('mac').sources.some(f => /^src\/core\/(futex|parker_futex|space)/.test(f)), 'no futex or space file of the core outside Linux')
  t.ok(gypFor('win').sources.includes('src/core/parker_win.c') && !gypFor('linux').sources.includes('src/core/parker_win.c'), 'parker_win.c on Windows only')
})

t.test('the install script on Windows: the prebuilt binary or one message, never a compiler', async t => {
  // The script as it runs on win32 where the prebuilt binary is not used
  // (here: node-gyp-build finds this tree's Linux build first):
  // process.platform is all it looks at. Where the win32-x64 binary loads,
  // it exits 0 (scripts/test-win32.sh runs it under Wine).
  const r = spawnSync(process.execPath, ['-e', `
    Object.defineProperty(process, 'platform', { value: 'win32' })
    process.argv.push('--install')
    require(${JSON.stringify(path.join(root, 'scripts', 'build.js'))})`], { encoding: 'utf8', env: { ...process.env, npm_config_node_gyp: '' } })
  t.equal(r.status, 1, 'the install fails')
  t.equal(r.stdout, '', 'nothing on stdout')
  t.match(r.stderr, new RegExp(`^sabsync: cannot install on win32-${process.arch}, Node ${process.versions.node}\\.\\n`), 'naming the platform')
  const lines = r.stderr.trim().split('\n')
  t.equal(lines.length, 3, 'in three lines, no compiler output')
  t.match(lines[1], /^ {2}(An earlier build is here|There is no prebuilt binary|The prebuilt binary .* does not load here)/, 'why the prebuilt binary was not used')
  t.match(lines[2], /Windows builds nothing from source: .*MSVC.*ships a prebuilt win32-x64 binary.*WSL 2/, 'why nothing builds, and what to do')
})

t.test('the libc the messages name', { skip: process.platform !== 'linux' && 'not Linux' }, async t => {
  const { libc } = require('../lib/platform')
  // Without the sanitizer runtime a flavour preloads (scripts/test-flavour.sh):
  // ldd under a preloaded libtsan prints nothing.
  const { LD_PRELOAD, ...env } = process.env
  const ldd = spawnSync('ldd', ['--version'], { encoding: 'utf8', env })
  const glibc = /GNU libc|GLIBC/.test(ldd.stdout + ldd.stderr) && /([0-9]+\.[0-9]+)\s*$/m.exec(ldd.stdout.split('\n')[0])
  if (glibc) t.equal(libc(), 'glibc ' + glibc[1], 'glibc, at the version ldd reports')
  else t.equal(libc(), 'musl', 'musl')
})
