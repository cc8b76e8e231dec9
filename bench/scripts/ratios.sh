#!/usr/bin/env bash
# Paired rounds of two wharf binaries on one scenario, the order
# alternating (A B, B A, ...), and per round the ratios B/A of msgs/s,
# p99, p999, the broker's and the clients' (this bench process's) CPU s per
# million messages; then the median of each ratio over the rounds. On a
# shared, noisy machine the load drifts from one minute to the next: a
# ratio within a round cancels most of it, a median of absolute figures
# does not. On two shared cores the clients' CPU caps the throughput as
# much as the broker's. A scenario that reports two results (sync-master-64
# also gives async-master-64's) is read for its first.
#
#   bench/scripts/ratios.sh 6 async-256 /tmp/wharf-before bin/wharf --send-coalescing=false
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 ROUNDS SCENARIO BIN_A BIN_B [wharf bench flags...]" >&2
  exit 2
fi
n=$1; sc=$2; a=$3; b=$4; shift 4
run() {
  "$1" bench --scenario "$sc" --duration 3s --warmup 1s --settle 2s --json "${@:2}" 2>/dev/null |
    grep -o '"msgs_per_s":[0-9.]*\|"p99_ms":[0-9.]*\|"p999_ms":[0-9.]*\|"broker_cpu_s_per_m_msgs":[0-9.]*\|"client_cpu_s_per_m_msgs":[0-9.]*' |
    cut -d: -f2 | head -n 5 | tr '\n' ' '
}
echo "round  A: msgs/s p99 p999 bcpu/M ccpu/M | B: ... | B/A"
for i in $(seq "$n"); do
  if [ $((i % 2)) -eq 1 ]; then ra=$(run "$a" "$@"); rb=$(run "$b" "$@"); else rb=$(run "$b" "$@"); ra=$(run "$a" "$@"); fi
  echo "$i $ra $rb"
done | awk '
  NF == 11 {
    printf "%s  %s %s %s %s %s | %s %s %s %s %s |", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11
    for (k = 0; k < 5; k++) { r = $(7 + k) / $(2 + k); v[k, n + 0] = r; printf " %.3f", r }
    printf "\n"; n++
  }
  NF != 11 { print "round " $1 ": a run gave no result: " $0 }
  END {
    printf "median of %d rounds, B/A:", n
    for (k = 0; k < 5; k++) {
      for (i = 0; i < n; i++) s[i] = v[k, i]
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
      m = (n % 2) ? s[int(n / 2)] : (s[n / 2 - 1] + s[n / 2]) / 2
      printf " %.3f", m
    }
    printf "  (msgs/s p99 p999 broker-cpu/M client-cpu/M)\n"
  }'
