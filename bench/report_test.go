package main

import (
	"strings"
	"testing"
)

// targets17 gives each of issue 17's targets its verdict from the run's
// figures: a p999 above JetStream's in any publish scenario fails that row.
func TestTargets17(t *testing.T) {
	pr := func(sc string, w, n result) *pair {
		w.Scenario, w.Size, n.Scenario, n.Size = sc, 1024, sc, 1024
		return &pair{scenario: sc, size: 1024, wharf: []result{w}, nats: n}
	}
	cpu := func(x float64) *float64 { return &x }
	disk := []result{{Scenario: "disk-group-commit", MsgsPerS: 100000}}
	base := []*pair{
		pr("e2e-10k", result{Msgs: 1, MsgsPerS: 10000, P99Ms: 0.6, P999Ms: 1.5}, result{MsgsPerS: 10000, P99Ms: 1.0, P999Ms: 9}),
		pr("consume-backlog", result{MsgsPerS: 500000, ClientCPUSPerMMsg: cpu(1.5)}, result{MsgsPerS: 200000, ClientCPUSPerMMsg: cpu(3)}),
		pr("async-256", result{MsgsPerS: 300000, P999Ms: 4}, result{MsgsPerS: 100000, P999Ms: 5}),
		pr(noCoalesce, result{MsgsPerS: 140000, P999Ms: 6}, result{MsgsPerS: 100000, P999Ms: 5}),
		pr("sync-flush-64", result{MsgsPerS: 30000, P999Ms: 6}, result{MsgsPerS: 5000, P999Ms: 20}),
	}
	got := targets17(&opts{backlog: 1000000}, disk, base)
	for _, want := range []string{
		"| end to end at 10 k msg/s, ASYNC_FLUSH | p99 <= 1 ms and <= 0.7x JetStream's, p999 reported | p99 0.600 vs 1.000 ms = 0.60x; p999 1.500 vs 9.000 ms | **met** |",
		"500000 vs 200000 msg/s = 2.50x; client CPU 1.5 vs 3.0 s per M | **met** |",
		"| async publish, 256 in flight | >= 2.5x JetStream | 300000 vs 100000 msg/s = 3.00x | **met** |",
		"| async publish, 256 in flight, coalescing off | >= 1.5x JetStream | 140000 vs 100000 msg/s = 1.40x | not met |",
		"async-256 4.000 vs 5.000; **async-256-nocoalesce 6.000 vs 5.000**; sync-flush-64 6.000 vs 20.000 ms | not met |",
		"| not met |\n| SYNC_FLUSH",
		"30000 msg/s vs 100000 records/s = 0.30x | not met |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}
