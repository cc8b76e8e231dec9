#!/usr/bin/env bash
# Rotates the broker's GOMAXPROCS over the values given, N rounds, one
# binary: each run's broker gets GOMAXPROCS=P through a wrapper of the
# binary (the bench's own process, the clients, keeps the default). Prints
# one line per run, sorted by P: msgs/s, p50, p99, p999, max ms, broker and
# client CPU s per million messages.
#
#   bench/scripts/gomaxprocs.sh 3 async-256 bin/wharf 2 3 4
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 ROUNDS SCENARIO BIN P [P...]" >&2
  exit 2
fi
n=$1; sc=$2; bin=$(realpath "$3"); shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for p in "$@"; do
  cat >"$dir/wharf-$p" <<W
#!/bin/sh
if [ "\$1" = bench ] && [ "\$2" = serve ]; then export GOMAXPROCS=$p; fi
exec "$bin" "\$@"
W
  chmod +x "$dir/wharf-$p"
done
for i in $(seq "$n"); do
  for p in "$@"; do
    "$bin" bench --wharf-bin "$dir/wharf-$p" --scenario "$sc" --size 1024 --duration 5s --warmup 1s --settle 2s --json 2>/dev/null |
      python3 -c "import json,sys; [print('GOMAXPROCS=$p', round(d['msgs_per_s']), d['p50_ms'], d['p99_ms'], d['p999_ms'], d.get('max_ms'), d['broker_cpu_s_per_m_msgs'], d.get('client_cpu_s_per_m_msgs')) for d in map(json.loads, sys.stdin)]"
  done
done | sort -s -k1,1
