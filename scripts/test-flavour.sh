#!/usr/bin/env bash
# Builds the addon in another flavour, in a copy of the tree under
# .flavours/<name>, and runs every tap file against it:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan  ThreadSanitizer (suppressions for Node/V8 only: test/sanitize/tsan.supp)
#   uv    the portable (libuv mutex/condvar) parker instead of the futex one
# Node itself is not instrumented: the sanitizer runtime is preloaded.
# Prints `flavour NAME: N passed, M failed` and exits non-zero on failure.
# FLAVOUR_TESTS="memory-safety scribble" runs only the test files whose
# names contain one of those words. The copies live in .flavours/, outside
# build/, which every `node-gyp rebuild` of the tree deletes.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Each file runs under plain node, where tap's own limit for a file is 30 s
# (TAP_TIMEOUT): a sanitizer, an emulator or a loaded machine passes it with
# tests that are merely slow. `timeout 600` below is the hang guard.
export TAP_TIMEOUT="${TAP_TIMEOUT:-600}"
status=0
for flavour in "${@:-asan}"; do
  dir="$root/.flavours/$flavour"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$root" && git ls-files -z --cached --others --exclude-standard | grep -zv '^build/' | xargs -0 cp --parents -t "$dir")
  ln -s "$root/node_modules" "$dir/node_modules"
  preload=""
  unset SABSYNC_CFLAGS SABSYNC_LDFLAGS SABSYNC_PARKER
  case "$flavour" in
    asan)
      export SABSYNC_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -g"
      export SABSYNC_LDFLAGS="-fsanitize=address,undefined"
      preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
      export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" ;;
    tsan)
      export SABSYNC_CFLAGS="-fsanitize=thread -g -O1" SABSYNC_LDFLAGS="-fsanitize=thread"
      preload="$(gcc -print-file-name=libtsan.so)"
      export TSAN_OPTIONS="halt_on_error=1 exitcode=66 report_signal_unsafe=0 suppressions=$root/test/sanitize/tsan.supp" ;;
    uv) export SABSYNC_PARKER=uv ;;
    *) echo "unknown flavour: $flavour"; exit 2 ;;
  esac
  if ! (cd "$dir" && node scripts/build.js >"$dir/build.log" 2>&1); then
    cat "$dir/build.log"; echo "flavour $flavour: 0 passed, 1 failed"; status=1; continue
  fi
  pass=0; fail=0
  for f in "$dir"/test/*.test.js; do
    # Packaging is checked once by npm test; it builds its own addon.
    [ "$(basename "$f")" = package.test.js ] && continue
    # sabsync/redis is plain JS over the caller's Redis client and never
    # loads the addon: another build of it changes nothing those tests run
    # (npm test and the Node matrix run them).
    case "$(basename "$f")" in redis-*.test.js) continue ;; esac
    if [ -n "${FLAVOUR_TESTS:-}" ]; then
      keep=0
      for w in $FLAVOUR_TESTS; do case "$(basename "$f")" in *"$w"*) keep=1 ;; esac; done
      [ "$keep" = 1 ] || continue
    fi
    log="$dir/$(basename "$f").log"
    (cd "$dir" && LD_PRELOAD="$preload" timeout 600 node "$f" >"$log" 2>&1)
    rc=$?
    summary=$(grep -aE '^# \{ total: [0-9]+' "$log" | tail -n 1)
    p=$(sed -nE 's/.*pass: ([0-9]+).*/\1/p' <<<"$summary"); f_=$(sed -nE 's/.*fail: ([0-9]+).*/\1/p' <<<"$summary")
    pass=$((pass + ${p:-0})); fail=$((fail + ${f_:-0}))
    if [ "$rc" -ne 0 ] || grep -qE 'ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer' "$log"; then
      echo "--- $flavour: $(basename "$f") failed (rc $rc); log: $log"; bash "$root/scripts/show-failures.sh" "$log" 25
      fail=$((fail + 1)); status=1
    fi
  done
  echo "flavour $flavour: $pass passed, $fail failed"
done
exit $status
