#!/usr/bin/env bash
# Prints what a failed tap log says went wrong: each failing assertion with
# its diagnostics (the YAML block under it; at most 80 lines in all), then
# the log's last lines (a crash or a timeout shows there).
# Usage: scripts/show-failures.sh LOG [TAIL_LINES]
log=$1
awk '/^ *not ok /{ show = 1 } show { print; if (++n >= 80) exit } /^ *\.\.\.$/{ show = 0 }' "$log"
echo "[last lines of $log]"
tail -n "${2:-15}" "$log"
