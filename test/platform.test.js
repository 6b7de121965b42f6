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
  t.match(code('src/core/parker_futex.c'), /^#ifndef SAB_PARKER_UV\b/m, 'and compiles to nothing with the portable parker')
  const gyp = fs.readFileSync(path.join(root, 'binding.gyp'), 'utf8')
  t.match(gyp, /\["sab_parker_uv==1 or OS!='linux'", \{ "defines": \["SAB_PARKER_UV"\] \}\]/,
    'binding.gyp picks the portable parker on every OS but Linux')
})

t.test('the install script stops on Windows with one message', async t => {
  // The script as it runs on win32: process.platform is all it looks at.
  const r = spawnSync(process.execPath, ['-e', `
    Object.defineProperty(process, 'platform', { value: 'win32' })
    process.argv.push('--install')
    require(${JSON.stringify(path.join(root, 'scripts', 'build.js'))})`], { encoding: 'utf8', env: { ...process.env, npm_config_node_gyp: '' } })
  t.equal(r.status, 1, 'the install fails')
  t.equal(r.stdout, '', 'nothing on stdout')
  t.match(r.stderr, new RegExp(`^sabsync: cannot install on win32-${process.arch}, Node ${process.versions.node}\\.\\n`), 'naming the platform')
  t.match(r.stderr, /Windows is not supported: .*MSVC\. Run it under WSL 2, or in a Linux container\.\n$/, 'why, and what to do')
  t.equal(r.stderr.trim().split('\n').length, 2, 'in two lines, no compiler output')
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
