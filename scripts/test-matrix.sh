#!/usr/bin/env bash
# Runs the tap files that the Node version can change (scripts/test.js, set
# `node`) under each supported Node major against the one addon built by
# `npm install` (Node-API is ABI-stable: no rebuild), side by side. Other Nodes
# come from the npm registry's `node` package, cached in build/matrix/.
# Usage: scripts/test-matrix.sh [MAJOR ...]  (default: 18 20 22 24)
# Prints `matrix node vX: N passed, M failed` per version.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
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
    # The files the Node version can change (scripts/test.js, SETS),
    # side by side; this Node's children start from its directory.
    PATH="$(dirname "$bin"):$PATH" node "$root/scripts/test.js" --set node --node "$bin" \
      --logs "$root/build/matrix/$version" --label "matrix node $version" || status=1
  done
done
exit $status
