#!/usr/bin/env bash
# Builds the addon in another flavour, in a copy of the tree under
# .flavours/<name>, and runs against it the tap files that flavour can change
# (scripts/test.js, SETS: a sanitizer every file that runs the addon's C, the
# portable parker the files that park in process memory), side by side:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan  ThreadSanitizer (suppressions for Node/V8 only: test/sanitize/tsan.supp)
#   uv    the portable (libuv mutex/condvar) parker instead of the futex one
# Node itself is not instrumented: the sanitizer runtime is preloaded.
# Prints `flavour NAME: N passed, M failed` and exits non-zero on failure.
# FLAVOUR_TESTS="memory-safety scribble" runs only the files of the set whose
# names contain one of those words. Logs: .flavours/<name>/logs/. The copies live in .flavours/, outside
# build/, which every `node-gyp rebuild` of the tree deletes.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
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
  # The files this flavour can change (scripts/test.js, SETS), side by side.
  names=()
  if [ -n "${FLAVOUR_TESTS:-}" ]; then
    for f in $(node "$root/scripts/test.js" --list --set "$flavour" | grep '^test/'); do
      for w in $FLAVOUR_TESTS; do case "$(basename "$f")" in *"$w"*) names+=("$f"); break ;; esac; done
    done
    [ ${#names[@]} -gt 0 ] || { echo "flavour $flavour: no file matches FLAVOUR_TESTS"; continue; }
  fi
  set_args=(--set "$flavour")
  [ ${#names[@]} -gt 0 ] && set_args=()
  node "$root/scripts/test.js" "${set_args[@]}" "${names[@]}" --dir "$dir" --logs "$dir/logs" --label "flavour $flavour" --timeout 600 \
    --env "LD_PRELOAD=$preload" --fail-on 'ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer' || status=1
done
exit $status
