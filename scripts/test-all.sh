#!/usr/bin/env bash
# `npm run test:all`: every check, as .ci/run runs them. Each part prints its
# own lines and one `NAME: N passed, M failed` (tap's parts print tap's
# `# { total: N, pass: P, fail: F }` line, the C tests `all checks passed`
# per program); .ci/run adds them up. Exits non-zero if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
part () { # NAME COMMAND...: a part that prints no count of its own
  local name=$1; shift
  if "$@"; then echo "$name: 1 passed, 0 failed"; else echo "$name: 0 passed, 1 failed"; status=1; fi
}

# Linters, the C tests (plain, ASan), the quick tap files.
npm test || status=1
# The long tap files.
node scripts/test.js --long || status=1
# The C tests in every build (TSan and the portable parker too), then
# libFuzzer, FUZZ_SECONDS a target.
make -s -C test/c || status=1
part fuzz make -s -C test/c fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
# The tap suite against the ASan+UBSan and portable builds: `flavour NAME: …`.
bash scripts/test-flavour.sh asan uv || status=1
# The Node matrix: `matrix node vX: …`.
bash scripts/test-matrix.sh 18 22 24 || status=1
# linux-arm64 under emulation: `arm64 node vX: …`.
if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
  bash scripts/test-arm64.sh || status=1
fi
# Stress and soak: its last line is `N passed, M failed`.
slog=$(mktemp)
npm run stress --silent 2>&1 | tee "$slog"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$slog" | tail -n 1)
echo "stress: ${line:-0 passed, 1 failed}"
rm -f "$slog"
exit "$status"
