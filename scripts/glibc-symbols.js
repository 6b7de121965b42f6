'use strict'
// The glibc symbol versions a Linux binary references, from `objdump -T`.
// A binary loads only on a glibc that defines every version it references,
// so the newest one is the oldest glibc it runs on. The prebuilt binaries
// must stay at GLIBC_2.17 or older (RHEL/CentOS 7 and 8, Amazon Linux 2,
// Ubuntu 18.04 and 20.04, Debian 10 and 11 have 2.17 to 2.31). A symbol
// that glibc versioned anew after 2.17 (pthread_once at 2.34, memcpy at
// 2.14 on x86-64, the fortified __*_chk ones at various versions) is
// avoided in the source or bound to its old version.
// Used by scripts/prebuild.js (every binary it packs) and
// test/package.test.js (the binaries in the packed tarball).
const { execFileSync } = require('child_process')

const GLIBC_FLOOR = '2.17'

// objdump for a binary of `arch` (Node's names): the cross binutils'
// when it is not the host's, as the host's may not know the machine.
function objdumpFor (arch) {
  if (arch === process.arch) return 'objdump'
  const prefix = { arm64: 'aarch64-linux-gnu-', x64: 'x86_64-linux-gnu-' }[arch]
  if (prefix === undefined) throw new Error('no objdump known for arch ' + arch)
  return prefix + 'objdump'
}

// [{ name, version }] for every dynamic symbol with a GLIBC_ version.
// `version` is the text after GLIBC_ ('2.17', or 'PRIVATE').
function glibcSymbols (file, arch = process.arch) {
  const out = execFileSync(objdumpFor(arch), ['-T', file], { encoding: 'utf8' })
  const refs = []
  for (const line of out.split('\n')) {
    // `0000000000000000      DF *UND*  0000000000000000 (GLIBC_2.17) clock_gettime`
    // (the parentheses mark a version that is not the default: objdump
    // prints some without them).
    const m = /\s\(?GLIBC_([A-Za-z0-9._]+)\)?\s+(\S+)\s*$/.exec(line)
    if (m) refs.push({ name: m[2], version: m[1] })
  }
  return refs
}

function compareVersions (a, b) {
  const x = a.split('.').map(Number)
  const y = b.split('.').map(Number)
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] || 0) - (y[i] || 0)
    if (d !== 0) return d
  }
  return 0
}

// The references that need a glibc newer than `floor` (or a private one).
function tooNew (refs, floor = GLIBC_FLOOR) {
  return refs.filter(r => !/^[0-9]+(\.[0-9]+)*$/.test(r.version) || compareVersions(r.version, floor) > 0)
}

module.exports = { GLIBC_FLOOR, glibcSymbols, tooNew, compareVersions, objdumpFor }
