#!/usr/bin/env node
'use strict'
// Builds the addon with node-gyp. node-gyp downloads Node's headers unless
// told where they are; Node installs them beside its binary
// (<prefix>/include/node), so point --nodedir there when they exist and fall
// back to node-gyp's default otherwise. SABSYNC_PARKER=uv selects the
// portable parker; SABSYNC_CFLAGS/SABSYNC_LDFLAGS add flags (sanitizers).
const { spawnSync } = require('child_process')
const fs = require('fs')
const path = require('path')

const root = path.join(__dirname, '..')
const prefix = path.join(path.dirname(process.execPath), '..')
const install = process.argv.includes('--install')

// At install time, a prebuilt binary for this platform makes compiling
// unnecessary, unless `npm install --build-from-source` asks for it.
if (install && !/^(true|1|sabsync)$/.test(process.env.npm_config_build_from_source || '')) {
  try {
    const found = require('node-gyp-build').path(root)
    if (found.includes(path.sep + 'prebuilds' + path.sep)) {
      console.log('sabsync: using the prebuilt binary ' + path.relative(root, found))
      process.exit(0)
    }
  } catch {
    // no prebuild fits: build from source below
  }
}
const headers = path.join(prefix, 'include', 'node', 'node_api.h')

let gyp = process.env.npm_config_node_gyp
if (!gyp || !fs.existsSync(gyp)) {
  const candidates = [
    path.join(prefix, 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')
  ]
  try { candidates.unshift(require.resolve('node-gyp/bin/node-gyp.js')) } catch {}
  gyp = candidates.find(p => fs.existsSync(p))
}
if (!gyp) {
  console.error('sabsync: node-gyp not found (it ships with npm); cannot build the addon')
  process.exit(1)
}

const args = [gyp, 'rebuild']
if (fs.existsSync(headers)) args.push('--nodedir=' + prefix)
if (process.env.SABSYNC_PARKER === 'uv') args.push('--sab_parker_uv=1')
if (process.argv.includes('--debug')) args.push('--debug')

const env = { ...process.env }
if (process.env.SABSYNC_CFLAGS) env.CFLAGS = process.env.SABSYNC_CFLAGS
if (process.env.SABSYNC_LDFLAGS) env.LDFLAGS = process.env.SABSYNC_LDFLAGS
const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit', env })
process.exit(r.status === null ? 1 : r.status)
