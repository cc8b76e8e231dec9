#!/usr/bin/env bash
# Alternates two wharf binaries on one bench scenario, N rounds, and prints
# one line per run, sorted by binary: msgs/s, p50 ms, p99 ms, p999 ms,
# broker CPU s per million messages. For comparing a change with the build before it on
# a noisy machine: read the medians.
#
#   go build -o /tmp/wharf-before ./cmd/wharf   # (on the old commit)
#   make build
#   bench/scripts/ab.sh 3 sync-16 /tmp/wharf-before bin/wharf
#   bench/scripts/ab.sh 3 consume-backlog /tmp/wharf-before bin/wharf --backlog 500000
#   bench/scripts/ab.sh 5 async-256 /tmp/wharf-before bin/wharf --send-coalescing=false
#
# With REPORT=FILE.html it also draws every run's curves, A1 B1 A2 B2 ...,
# in one HTML report (wharf bench report, of BIN_B).
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: [REPORT=FILE.html] $0 ROUNDS SCENARIO BIN_A BIN_B [wharf bench flags...]" >&2
  exit 2
fi
n=$1; sc=$2; a=$3; b=$4; shift 4
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
for i in $(seq "$n"); do
  for bin in "$a" "$b"; do
    label=A$i; [ "$bin" = "$b" ] && label=B$i
    "$bin" bench --scenario "$sc" --duration 3s --warmup 1s --settle 2s --json "$@" 2>/dev/null >"$runs/$label.jsonl" || true
    r=$(grep -o '"msgs_per_s":[0-9]*\|"p50_ms":[0-9.]*\|"p99_ms":[0-9.]*\|"p999_ms":[0-9.]*\|"broker_cpu_s_per_m_msgs":[0-9.]*' "$runs/$label.jsonl" |
      cut -d: -f2 | tr '\n' ' ' || true)
    echo "$bin $r"
  done
done | sort
if [ -n "${REPORT:-}" ]; then
  args=()
  for i in $(seq "$n"); do args+=("$runs/A$i.jsonl" "$runs/B$i.jsonl"); done
  "$b" bench report --out "$REPORT" --title "A: $a, B: $b, $sc" "${args[@]}"
fi
