#!/usr/bin/env bash
# Runs the tap files under each supported Node major against the one addon
# built by `npm install` (Node-API is ABI-stable: no rebuild). Other Nodes
# come from the npm registry's `node` package, cached in build/matrix/.
# Usage: scripts/test-matrix.sh [MAJOR ...]  (default: 18 20 22 24)
# Prints `matrix node vX: N passed, M failed` per version.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Each file runs under plain node, where tap's own limit for a file is 30 s
# (TAP_TIMEOUT): a sanitizer, an emulator or a loaded machine passes it with
# tests that are merely slow. `timeout 600` below is the hang guard.
export TAP_TIMEOUT="${TAP_TIMEOUT:-600}"
status=0
for major in "${@:-18 20 22 24}"; do
  for v in $major; do
    if [ "$(node -p 'process.versions.node.split(".")[0]')" = "$v" ]; then
      bin=$(command -v node)
    else
      dir="$root/build/matrix/node$v"
      bin="$dir/node_modules/node/bin/node"
      if [ ! -x "$bin" ]; then
        # A package.json of its own, or npm would install into ours.
        mkdir -p "$dir" && echo '{"private":true}' >"$dir/package.json"
        (cd "$dir" && npm install --no-audit --no-fund --no-save --loglevel=error "node@$v" >/dev/null) ||
          { echo "matrix node v$v: 0 passed, 1 failed (could not install node@$v)"; status=1; continue; }
      fi
      bin=$(readlink -f "$bin")
    fi
    version=$("$bin" --version)
    pass=0; fail=0
    for f in "$root"/test/*.test.js; do
      log="$root/build/matrix/$version-$(basename "$f").log"
      mkdir -p "$root/build/matrix"
      (cd "$root" && PATH="$(dirname "$bin"):$PATH" timeout 600 "$bin" "$f" >"$log" 2>&1)
      rc=$?
      summary=$(grep -aE '^# \{ total: [0-9]+' "$log" | tail -n 1)
      p=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); q=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary")
      pass=$((pass + ${p:-0})); fail=$((fail + ${q:-0}))
      if [ "$rc" -ne 0 ]; then
        echo "--- node $version: $(basename "$f") failed (rc $rc); log: $log"
        bash "$root/scripts/show-failures.sh" "$log"
        fail=$((fail + 1)); status=1
      fi
    done
    echo "matrix node $version: $pass passed, $fail failed"
  done
done
exit $status
