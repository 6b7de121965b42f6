#!/usr/bin/env node
'use strict'
// Builds the prebuilt binaries that `npm pack` ships (run by prepack), with
// prebuildify (Node-API: one binary for every Node version), pointing
// node-gyp at the running Node's headers as scripts/build.js does.
//
// Which: this platform's, and on linux-x64 also linux-arm64, cross-compiled
// with Debian's gcc-aarch64-linux-gnu (the headers are the same: Node-API
// and libuv's are not specific to an architecture). `--arch A[,B]` or
// SABSYNC_PREBUILD_ARCH=A[,B] picks others (`x64` alone packs without the
// cross compiler). On linux-x64 also win32-x64, cross-compiled with
// mingw-w64 by scripts/cross.js (node-gyp does not build for Windows from
// Linux); `win32-x64` in the list asks for it alone, and a list without it
// (`x64,arm64`) packs without it. Linux binaries are named for glibc (sabsync.glibc.node),
// so node-gyp-build passes them over on musl, and each is checked to need
// no glibc newer than 2.17 (scripts/glibc-symbols.js): a binary that would
// not load on older systems fails the pack rather than ship.
//
// prebuilds/ is emptied first: only what this run builds ships. prebuildify
// builds in build/ and moves the binary out, leaving no
// build/Release/sabsync.node; when there was one (a working tree), it is
// built again afterwards so that the tree's own tests keep their addon.
const { spawnSync } = require('child_process')
const fs = require('fs')
const path = require('path')
const { glibcSymbols, tooNew, compareVersions, GLIBC_FLOOR } = require('./glibc-symbols')

const root = path.join(__dirname, '..')
const prefix = path.join(path.dirname(process.execPath), '..')
const linux = process.platform === 'linux'

// Cross compilers by target arch, on a linux host (Debian's package names).
const CROSS = { arm64: 'aarch64-linux-gnu-', x64: 'x86_64-linux-gnu-' }

function archsWanted () {
  const i = process.argv.indexOf('--arch')
  const list = i > 0 ? process.argv[i + 1] : process.env.SABSYNC_PREBUILD_ARCH
  if (list) return list.split(',').map(s => s.trim()).filter(Boolean)
  // Cross first: the host's build comes last, so build/ holds the host's
  // objects when this ends.
  return linux && process.arch === 'x64' ? ['arm64', 'win32-x64', 'x64'] : [process.arch]
}

function fail (msg) {
  console.error('sabsync prebuild: ' + msg)
  process.exit(1)
}

function onPath (cmd) {
  const r = spawnSync(cmd, ['--version'], { stdio: 'ignore' })
  return !r.error && r.status === 0
}

function prebuild (arch) {
  const env = { ...process.env }
  if (fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h'))) env.npm_config_nodedir = prefix
  // Build against the running Node (its headers, above), never a download.
  const args = [require.resolve('prebuildify/bin.js'), '--napi', '--strip', '--target', 'node@' + process.versions.node, '--arch', arch]
  if (linux) args.push('--tag-libc')
  if (arch !== process.arch) {
    const cross = CROSS[arch]
    if (!linux || cross === undefined) fail(`cannot cross-compile for ${process.platform}-${arch} here`)
    if (!onPath(cross + 'gcc')) {
      fail(`the ${process.platform}-${arch} binary needs the cross compiler ${cross}gcc ` +
        `(Debian/Ubuntu: apt-get install gcc-${cross.slice(0, -1)}); ` +
        `SABSYNC_PREBUILD_ARCH=${process.arch} packs this platform's binary only`)
    }
    Object.assign(env, { CC: cross + 'gcc', CXX: cross + 'g++', LINK: cross + 'gcc', AR: cross + 'ar' })
    args.push('--strip-bin', cross + 'strip')
  }
  // Build output goes to stderr: `npm pack --json` prints its JSON on stdout.
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['inherit', 2, 'inherit'], env })
  if (r.status !== 0) fail(`prebuildify for ${process.platform}-${arch} failed`)
  if (linux) {
    const file = path.join(root, 'prebuilds', `linux-${arch}`, 'sabsync.glibc.node')
    const refs = glibcSymbols(file, arch)
    if (refs.length === 0) fail(`${file}: objdump -T shows no glibc symbol; cannot check it`)
    const bad = tooNew(refs)
    if (bad.length > 0) {
      fail(`${path.relative(root, file)} needs a glibc newer than ${GLIBC_FLOOR}: ` +
        bad.map(b => `${b.name}@GLIBC_${b.version}`).join(', ') +
        ' (avoid the symbol, or bind it to an old version; see scripts/glibc-symbols.js)')
    }
    console.error(`sabsync prebuild: ${path.relative(root, file)}: newest glibc symbol ` +
      refs.map(r => r.version).sort((a, b) => compareVersions(b, a))[0])
  }
}

const hadBuild = fs.existsSync(path.join(root, 'build', 'Release', 'sabsync.node'))
// Only what this run builds ships: no binary left from an earlier run.
fs.rmSync(path.join(root, 'prebuilds'), { recursive: true, force: true })
// Another OS's binary, cross-compiled by scripts/cross.js.
function crossBuild (target) {
  if (!linux || process.arch !== 'x64') fail(`cannot cross-compile for ${target} here (linux-x64 only)`)
  if (!onPath('x86_64-w64-mingw32-gcc')) {
    fail(`the ${target} binary needs mingw-w64's x86_64-w64-mingw32-gcc (Debian/Ubuntu: apt-get install mingw-w64); ` +
      'SABSYNC_PREBUILD_ARCH=x64,arm64 packs without it')
  }
  const r = spawnSync(process.execPath, [path.join(__dirname, 'cross.js'), target], { cwd: root, stdio: ['inherit', 2, 'inherit'] })
  if (r.status !== 0) fail(`cross-compiling ${target} failed`)
}

for (const arch of archsWanted()) {
  if (arch.includes('-')) crossBuild(arch)
  else prebuild(arch)
}
if (hadBuild) {
  const r = spawnSync(process.execPath, [path.join(__dirname, 'build.js')], { cwd: root, stdio: ['inherit', 2, 'inherit'] })
  process.exit(r.status === null ? 1 : r.status)
}
