'use strict'
// What to tell someone whose platform has no working addon: which platform
// and C library this is, and what to do. Used by lib/native.js (the load
// error) and scripts/build.js (the install script); never loads the addon.
const fs = require('fs')

// 'glibc 2.31', 'musl', or '' where there is no libc to name (not Linux).
function libc () {
  if (process.platform !== 'linux') return ''
  let glibc
  try {
    glibc = process.report.getReport().header.glibcVersionRuntime
  } catch {}
  if (glibc) return 'glibc ' + glibc
  try {
    if (fs.readdirSync('/lib').some(f => f.startsWith('ld-musl-'))) return 'musl'
  } catch {}
  return 'an unknown libc'
}

// 'linux-x64, glibc 2.31, Node 20.20.2'
function describe () {
  return [process.platform + '-' + process.arch, libc(), 'Node ' + process.versions.node].filter(Boolean).join(', ')
}

// The platforms the package ships a binary for (scripts/prebuild.js).
const PREBUILT = 'linux-x64 and linux-arm64 with glibc 2.17 or newer, and win32-x64'

// Why the addon cannot be built from source here, or null. Windows runs the
// prebuilt win32-x64 binary (cross-compiled with mingw-w64) and builds
// nothing: the core is C for GCC or Clang, and node-gyp there uses MSVC.
function unsupported () {
  if (process.platform === 'win32') {
    return 'Windows builds nothing from source: the core is C for GCC or Clang (GNU atomic builtins, ' +
      'POSIX threads), which MSVC does not compile. sabsync ships a prebuilt win32-x64 binary; on ' +
      'another architecture, or where it does not load, run sabsync under WSL 2 or in a Linux container.'
  }
  return null
}

// What to do when no binary loads and none was built.
function advice () {
  return unsupported() || ('Prebuilt binaries cover ' + PREBUILT + '; elsewhere sabsync builds from ' +
    'source at install, which needs a C compiler, make and Python 3 (Debian/Ubuntu: ' +
    'apt-get install build-essential python3; Alpine: apk add build-base python3; ' +
    'RHEL/Fedora: dnf install gcc make python3; macOS: xcode-select --install), then ' +
    '`SABSYNC_BUILD_FROM_SOURCE=1 npm rebuild sabsync`.')
}

module.exports = { libc, describe, unsupported, advice, PREBUILT }
