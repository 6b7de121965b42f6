#!/usr/bin/env bash
# `npm run test:all`: every check, as .ci/run runs them, each part once and
# each run of tap files side by side (scripts/test.js). What each part
# covers, and why that is enough: CONTRIBUTING.md, "What CI runs".
#
# Each part prints its own lines; this script prints after each a line
# `part NAME: N passed, M failed (S s)` (a tap file, a C program, a fuzz
# target, a stress scenario each count one), and at the end the ten
# slowest tap files of all the runs, what failed with the path of its log,
# and `N passed, M failed`, the sum.
# Exits non-zero if any part failed. Logs: build/test-logs/ (npm test, the
# long files), .flavours/NAME/logs/, build/matrix/vX/, build/arm64/logs/,
# build/win32/ (the Wine run's logs and TAP).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
total_pass=0
total_fail=0
times=$(mktemp)
failures=$(mktemp)
trap 'rm -f "$times" "$failures"' EXIT

# part NAME COMMAND...: runs COMMAND; its count is the sum of the last
# `[LABEL: ]N passed, M failed` line of each run it made (a run of
# scripts/test.js, a C build, a fuzz target), or 1 passed / 1 failed by
# its exit status when it printed none.
part () {
  local name=$1; shift
  local log s rc p q
  log=$(mktemp)
  s=$(date +%s)
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  p=$(grep -aE '^([A-Za-z0-9_ .+-]+: )?[0-9]+ passed, [0-9]+ failed$' "$log" | grep -avE '^arm64 files: ' | sed -nE 's/^(.*: )?([0-9]+) passed.*/\2/p' | awk '{ n += $1 } END { print n + 0 }')
  q=$(grep -aE '^([A-Za-z0-9_ .+-]+: )?[0-9]+ passed, [0-9]+ failed$' "$log" | grep -avE '^arm64 files: ' | sed -nE 's/.* ([0-9]+) failed$/\1/p' | awk '{ n += $1 } END { print n + 0 }')
  if ! grep -aqE '[0-9]+ passed, [0-9]+ failed$' "$log"; then
    if [ "$rc" -eq 0 ]; then p=1; q=0; else p=0; q=1; fi
  fi
  [ "$rc" -ne 0 ] && [ "$q" -eq 0 ] && q=1
  [ "$rc" -ne 0 ] && status=1
  grep -aE '^slowest files: ' "$log" | sed -E 's/^slowest files: //; s/, /\n/g' | sed -E "s/^/$name | /" >>"$times"
  grep -aE '^--- .* failed' "$log" | sed -E "s/^--- /  $name: /" >>"$failures"
  [ "$rc" -ne 0 ] && ! grep -aqE '^--- .* failed' "$log" && echo "  $name: exit $rc (its output is above)" >>"$failures"
  rm -f "$log"
  total_pass=$((total_pass + p)); total_fail=$((total_fail + q))
  echo "part $name: $p passed, $q failed ($(( $(date +%s) - s )) s)"
}

# The C tests of one build: a program that passes prints `all checks
# passed`, one that fails `check(s) failed`.
ctests () {
  local log rc
  log=$(mktemp)
  make -s -C test/c -j"$(nproc)" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local p q
  p=$(grep -ac 'all checks passed' "$log"); q=$(grep -ac 'check(s) failed' "$log")
  rm -f "$log"
  [ "$rc" -ne 0 ] && [ "$q" -eq 0 ] && q=1
  echo "C tests $*: $p passed, $q failed"
  return "$rc"
}

# What npm test runs (linters, the plain C tests with the fuzz smoke run,
# the quick tap files) and the long tap files, in one run: the longest file
# (package) starts first, beside the others.
part 'npm test and the long files' node scripts/test.js --all --checks
# The C tests in the other builds (plain ran in npm test).
part 'C tests (ASan+UBSan, TSan, portable parker)' ctests asan tsan uv
# libFuzzer, FUZZ_SECONDS a target, the targets side by side.
part fuzz make -s -C test/c -j"$(nproc)" fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
# The tap files a build can change, against the ASan+UBSan and the portable
# parker builds.
part 'flavour asan' bash scripts/test-flavour.sh asan
part 'flavour uv' bash scripts/test-flavour.sh uv
# The files the Node version can change, on the other supported majors.
for v in 18 22 24; do part "node $v" bash scripts/test-matrix.sh "$v"; done
# linux-arm64 under emulation; win32-x64 under Wine; macOS compiled and
# linked for x64 and arm64 (not run).
if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
  part arm64 bash scripts/test-arm64.sh
  part win32 bash scripts/test-win32.sh
  part macos bash scripts/test-macos.sh
fi
# Stress and soak: its last line is `N passed, M failed`.
part stress npm run stress --silent

echo
echo "slowest tap files of all runs:"
sort -t'|' -k2 -rn <(sed -E 's/^(.*) \| (.*) ([0-9.]+) s$/\1 | \3 | \2/' "$times") | head -n 10 | awk -F' [|] ' '{ printf "  %6.1f s  %s (%s)\n", $2, $3, $1 }'
if [ -s "$failures" ]; then
  echo "failed, and where the log is:"
  cat "$failures"
fi
echo "${total_pass} passed, ${total_fail} failed"
exit "$status"
