package sim

import "testing"

// TestMetricsDeterministic: the brokers' metrics seam, recorded in the
// simulator, is an output of the seed like the trace: two runs of a seed
// report the same calls at the same virtual times, and the figures move
// with the load (messages stored and pulled, fsyncs, the broker's
// snapshots with consumer lag).
func TestMetricsDeterministic(t *testing.T) {
	for _, sc := range []string{"sync-flush", "rebalance", "ctl-master-crash"} {
		a := Run(Options{Seed: 3, Scenario: sc, Metrics: true})
		b := Run(Options{Seed: 3, Scenario: sc, Metrics: true})
		if len(a.Violations) > 0 {
			t.Fatalf("%s: %v", sc, a.Violations)
		}
		if a.MetricsHash == "" || a.MetricsHash != b.MetricsHash || *a.Metrics != *b.Metrics {
			t.Fatalf("%s: metrics %s %+v, then %s %+v", sc, a.MetricsHash, a.Metrics, b.MetricsHash, b.Metrics)
		}
		m := a.Metrics
		if m.StoredMsgs < a.AcksOK || m.PulledMsgs == 0 || m.Fsyncs == 0 || m.Snapshots == 0 || m.Requests == 0 {
			t.Fatalf("%s: %+v for %d acknowledged sends", sc, m, a.AcksOK)
		}
		t.Logf("%s: %+v (%d acknowledged), hash %s", sc, *m, a.AcksOK, a.MetricsHash)
	}
}
