#!/usr/bin/env bash
# Like ab.sh, but each round alternates which binary runs first (A B, then
# B A, ...): on this VM the second of two back-to-back runs is often the
# slower (fresh pages, write-back of the first run's log), so a fixed order
# biases the comparison. Prints one line per run, sorted by binary:
# msgs/s, p50 ms, p99 ms, broker CPU s per million messages (for
# sync-master-64, the SYNC_MASTER line then the ASYNC_MASTER line).
#
#   bench/scripts/abba.sh 4 sync-16 /tmp/wharf-before bin/wharf
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 ROUNDS SCENARIO BIN_A BIN_B [wharf bench flags...]" >&2
  exit 2
fi
n=$1; sc=$2; a=$3; b=$4; shift 4
for i in $(seq "$n"); do
  if [ $((i % 2)) -eq 1 ]; then order="$a $b"; else order="$b $a"; fi
  for bin in $order; do
    r=$("$bin" bench --scenario "$sc" --duration 3s --warmup 1s --settle 2s --json "$@" 2>/dev/null |
      grep -o '"msgs_per_s":[0-9]*\|"p50_ms":[0-9.]*\|"p99_ms":[0-9.]*\|"broker_cpu_s_per_m_msgs":[0-9.]*' |
      cut -d: -f2 | tr '\n' ' ')
    echo "$bin $r"
  done
done | sort
