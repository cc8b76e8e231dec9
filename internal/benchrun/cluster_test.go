package benchrun

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// With --broker the cluster scenarios are skipped: they need a name server
// and brokers of their own (none is contacted).
func TestBenchClusterSkippedWithBroker(t *testing.T) {
	o := quickRunOptions(t)
	o.Scenarios, o.Broker = []string{"cluster"}, "127.0.0.1:1"
	var out, errOut bytes.Buffer
	rs, err := Run(context.Background(), o, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	if len(rs) != 2 || rs[0].Scenario != "route-propagation" || rs[1].Scenario != "groups-2-vs-1" ||
		!rs[0].Skipped || !rs[1].Skipped || !strings.Contains(rs[1].Note, "name server") {
		t.Fatalf("results %+v", rs)
	}
}

func TestBenchMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

// medianResult takes each figure's median on its own and sums the counts.
func TestBenchMedianResult(t *testing.T) {
	cpu := func(x float64) *float64 { return &x }
	rs := []Result{
		{Scenario: "s", Msgs: 10, MsgsPerS: 100, P50Ms: 9, P99Ms: 1, Errors: 1, BrokerCPUS: cpu(3), BrokerCPUSPerMMsg: cpu(30)},
		{Scenario: "s", Msgs: 20, MsgsPerS: 300, P50Ms: 1, P99Ms: 2, BrokerCPUS: cpu(1), BrokerCPUSPerMMsg: cpu(10)},
		{Scenario: "s", Msgs: 30, MsgsPerS: 200, P50Ms: 5, P99Ms: 3, Errors: 2, BrokerCPUS: cpu(2), BrokerCPUSPerMMsg: cpu(20)},
	}
	got := medianResult(rs)
	if got.Msgs != 60 || got.Errors != 3 || got.MsgsPerS != 200 || got.P50Ms != 5 || got.P99Ms != 2 ||
		*got.BrokerCPUS != 2 || *got.BrokerCPUSPerMMsg != 20 || *rs[0].BrokerCPUS != 3 {
		t.Fatalf("medianResult = %+v", got)
	}
}
