#!/usr/bin/env node
'use strict'
// Builds the addon with node-gyp (`npm run build`), or, with --install (the
// package's install script), first tries the prebuilt binary:
//
// 1. A prebuilt binary for this platform is used if it loads here. It is
//    loaded in a child process first: one that needs a newer glibc than
//    this system's, or a glibc on musl, fails there with the loader's own
//    message (and one that crashes, crashes there), and we build from
//    source instead. SABSYNC_BUILD_FROM_SOURCE=1 skips this step.
// 2. A platform the code cannot build on (Windows, where the prebuilt
//    win32-x64 binary is the only way) stops there, with one message that
//    says why the prebuilt binary was not used and why nothing builds.
// 3. Building needs a C compiler, make and Python 3 (node-gyp's). When one
//    is missing, one message says what failed to load, what is missing and
//    how to get it, instead of node-gyp's errors.
//
// node-gyp downloads Node's headers unless told where they are; Node
// installs them beside its binary (<prefix>/include/node), so point
// --nodedir there when they exist. SABSYNC_PARKER=uv selects the portable
// parker; SABSYNC_CFLAGS/SABSYNC_LDFLAGS add flags (sanitizers).
const { spawnSync } = require('child_process')
const fs = require('fs')
const path = require('path')
const platform = require('../lib/platform')

const root = path.join(__dirname, '..')
const prefix = path.join(path.dirname(process.execPath), '..')
const install = process.argv.includes('--install')

function stop (lines) {
  console.error([`sabsync: cannot ${install ? 'install' : 'build'} on ${platform.describe()}.`, ...lines].join('\n  '))
  process.exit(1)
}

// Uses the prebuilt binary and exits, or answers why not (a sentence).
function tryPrebuilt () {
  // SABSYNC_BUILD_FROM_SOURCE=1 asks; so does npm's --build-from-source of
  // the prebuild tools (npm_config_build_from_source), which current npm
  // warns is an unknown config.
  if (/^(true|1)$/.test(process.env.SABSYNC_BUILD_FROM_SOURCE || '') ||
    /^(true|1|sabsync)$/.test(process.env.npm_config_build_from_source || '')) return 'A build from source was asked for.'
  let found
  try {
    found = require('node-gyp-build').path(root)
  } catch (err) {
    return 'There is no prebuilt binary for this platform: ' + err.message.split('\n')[0]
  }
  if (!found.includes(path.sep + 'prebuilds' + path.sep)) return `An earlier build is here (${path.relative(root, found)}).`
  const rel = path.relative(root, found)
  const r = spawnSync(process.execPath, ['-e', `
    try { process.dlopen({ exports: {} }, ${JSON.stringify(found)}) } catch (err) {
      process.stderr.write(err.message); process.exit(3)
    }`], { encoding: 'utf8' })
  if (r.status === 0) {
    console.log('sabsync: using the prebuilt binary ' + rel)
    process.exit(0)
  }
  const why = r.status === 3 ? r.stderr.trim() : `loading it ended with ${r.signal || 'status ' + r.status}`
  return `The prebuilt binary ${rel} does not load here: ${why}`
}

// The first of `names` that runs (`NAME --version`), or undefined.
function found (names) {
  return names.filter(Boolean).find(cmd => {
    const r = spawnSync(cmd, ['--version'], { stdio: 'ignore' })
    return !r.error && r.status === 0
  })
}

// Missing tools, named as the messages name them.
function missingTools () {
  const missing = []
  if (!found([(process.env.CC || 'cc').trim().split(/\s+/)[0]])) missing.push('a C compiler (' + (process.env.CC || 'cc') + ')')
  if (!found([process.platform === 'linux' || process.platform === 'darwin' ? 'make' : 'gmake'])) missing.push('make')
  if (!found([process.env.npm_config_python, process.env.PYTHON, 'python3', 'python'])) missing.push('Python 3')
  return missing
}

function nodeGyp () {
  let gyp = process.env.npm_config_node_gyp
  if (gyp && fs.existsSync(gyp)) return gyp
  const candidates = [path.join(prefix, 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')]
  try { candidates.unshift(require.resolve('node-gyp/bin/node-gyp.js')) } catch {}
  gyp = candidates.find(p => fs.existsSync(p))
  return gyp
}

const why = install ? tryPrebuilt() : null
const unsupported = platform.unsupported()
if (unsupported) stop([...(why ? [why] : []), unsupported])
const missing = missingTools()
if (missing.length > 0) {
  stop([
    ...(why ? [why] : []),
    'Building from source needs ' + missing.join(', ') + ': not found.',
    platform.advice()
  ])
}
if (why) console.error('sabsync: building from source. ' + why)
const gyp = nodeGyp()
if (!gyp) stop(['node-gyp (it ships with npm) was not found; cannot build the addon.'])

const args = [gyp, 'rebuild']
if (fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h'))) args.push('--nodedir=' + prefix)
if (process.env.SABSYNC_PARKER === 'uv') args.push('--sab_parker_uv=1')
if (process.argv.includes('--debug')) args.push('--debug')

const env = { ...process.env }
if (process.env.SABSYNC_CFLAGS) env.CFLAGS = process.env.SABSYNC_CFLAGS
if (process.env.SABSYNC_LDFLAGS) env.LDFLAGS = process.env.SABSYNC_LDFLAGS
const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit', env })
if (r.status !== 0 && install) {
  console.error('sabsync: the build from source failed (the compiler\'s output is above). ' + platform.advice())
}
process.exit(r.status === null ? 1 : r.status)
