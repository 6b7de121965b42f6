#!/usr/bin/env node
'use strict'
// Builds the prebuilt binary for this platform into prebuilds/ with
// prebuildify (Node-API: one binary for every Node version), pointing
// node-gyp at the running Node's headers as scripts/build.js does, then
// rebuilds build/Release (prebuildify leaves it empty).
const { spawnSync } = require('child_process')
const fs = require('fs')
const path = require('path')

const root = path.join(__dirname, '..')
const prefix = path.join(path.dirname(process.execPath), '..')
const env = { ...process.env }
if (fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h'))) env.npm_config_nodedir = prefix

const bin = require.resolve('prebuildify/bin.js')
// Build against the running Node (its headers, above), never a download.
const target = 'node@' + process.versions.node
// Build output goes to stderr: `npm pack --json` prints its JSON on stdout.
let r = spawnSync(process.execPath, [bin, '--napi', '--strip', '--target', target], { cwd: root, stdio: ['inherit', 2, 'inherit'], env })
if (r.status !== 0) process.exit(r.status === null ? 1 : r.status)
r = spawnSync(process.execPath, [path.join(__dirname, 'build.js')], { cwd: root, stdio: ['inherit', 2, 'inherit'] })
process.exit(r.status === null ? 1 : r.status)
