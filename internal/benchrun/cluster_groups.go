package benchrun

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/wharfmq/wharf/client"
)

// groupsConfig is one way groups-2-vs-1 sends the same load.
type groupsConfig struct {
	label  string // the second half of the result's scenario
	groups int
	viaNS  bool
}

// groupsConfigs in the order of odd rounds; even rounds run them backwards,
// so neither of two neighbours always runs first (the machine's drift
// within a run favours neither).
var groupsConfigs = []groupsConfig{
	{"direct-1g", 1, false},
	{"namesrv-1g", 1, true},
	{"namesrv-2g", 2, true},
}

// groupsLoads are the loads groups-2-vs-1 runs in each configuration.
var groupsLoads = []string{"async-256", "sync-16"}

// groupsRatios: the line a ratio is given on, and the line it is over.
var groupsRatios = [][2]int{{1, 0}, {2, 1}}

// runGroups is groups-2-vs-1: on one name server with two groups, each
// load in three configurations (one group by its address, one group and
// two groups through the name server), o.ABRounds rounds alternating
// their order. One line per load and configuration, of medians over the
// rounds; the name-server lines carry the ratio of their throughput.
func runGroups(ctx context.Context, o *Options, size int, stderr io.Writer) ([]Result, error) {
	c, err := startCluster(ctx, o, 2, stderr)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	if err := c.brokers[0].createTopic(ctx, "bench-one", o.Queues, o.Timeout); err != nil {
		return nil, fmt.Errorf("create topic on one group: %w", err)
	}
	a, err := c.admin(o.Timeout)
	if err != nil {
		return nil, err
	}
	_, err = a.CreateTopicInCluster(ctx, clusterName, "bench-two", int32(o.Queues))
	a.Close()
	if err != nil {
		return nil, err
	}
	for topic, groups := range map[string]int{"bench-one": 1, "bench-two": 2} {
		if err := c.waitRoute(ctx, topic, groups, o.Timeout); err != nil {
			return nil, err
		}
	}
	var out []Result
	for _, load := range groupsLoads {
		rs, err := runGroupsLoad(ctx, o, c, load, size, stderr)
		out = append(out, rs...)
		if err != nil {
			return out, fmt.Errorf("%s: %w", load, err)
		}
	}
	return out, nil
}

// runGroupsLoad runs load in every configuration, o.ABRounds rounds.
func runGroupsLoad(ctx context.Context, o *Options, c *cluster, load string, size int, stderr io.Writer) ([]Result, error) {
	runs := make([][]Result, len(groupsConfigs)) // runs[config][round]
	for round := range o.ABRounds {
		order := []int{0, 1, 2}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			r, err := runGroupsOnce(ctx, o, c, load, groupsConfigs[i], size, stderr)
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", groupsConfigs[i].label, round, err)
			}
			runs[i] = append(runs[i], r)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	out := make([]Result, len(groupsConfigs))
	for i, g := range groupsConfigs {
		out[i] = medianResult(runs[i])
		out[i].Scenario = load + "/" + g.label
		out[i].Groups, out[i].ViaNamesrv, out[i].Rounds = g.groups, ptr(g.viaNS), o.ABRounds
	}
	for _, rr := range groupsRatios {
		var per []float64
		for round := range o.ABRounds {
			if base := runs[rr[1]][round].MsgsPerS; base > 0 {
				per = append(per, runs[rr[0]][round].MsgsPerS/base)
			}
		}
		if len(per) > 0 {
			out[rr[0]].Ratio = roundedPtr(median(per))
			out[rr[0]].RatioOf = out[rr[1]].Scenario
		}
	}
	return out, nil
}

// runGroupsOnce runs load once in configuration g, measuring the CPU of
// the brokers it sends to and, through the name server, the name
// server's.
func runGroupsOnce(ctx context.Context, o *Options, c *cluster, load string, g groupsConfig, size int, stderr io.Writer) (Result, error) {
	settleAll(ctx, o.Settle, stderr, c.brokers...)
	addr, topic := c.brokers[0].addr, "bench-one"
	copts := []client.Option{client.WithTimeout(o.Timeout), client.WithRetries(0)}
	measured := []*broker{c.brokers[0]}
	if g.viaNS {
		addr = ""
		copts = append(copts, client.WithNameServer(c.ns.addr))
		measured = append(measured, c.ns)
	}
	if g.groups == 2 {
		topic = "bench-two"
		measured = append(measured, c.brokers[1])
	}
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	var fn loadFunc
	switch load {
	case "async-256":
		fn = func(ctx context.Context, rec *recorder) error {
			return loadAsync(ctx, addr, topic, body, 256, copts, rec)
		}
	case "sync-16":
		fn = func(ctx context.Context, rec *recorder) error {
			return loadSync(ctx, addr, topic, body, 16, copts, rec)
		}
	default:
		return Result{}, fmt.Errorf("unknown load %q", load)
	}
	rec, res, err := timed(ctx, o, members(measured...), load+"/"+g.label, size, stderr, fn)
	return res, checkCompleted(rec, err)
}

// medianResult is the median of each figure of rs (one configuration's
// rounds), with the counts summed.
func medianResult(rs []Result) Result {
	out := rs[0]
	field := func(get func(Result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = get(r)
		}
		return round(median(xs))
	}
	out.MsgsPerS = field(func(r Result) float64 { return r.MsgsPerS })
	out.MBPerS = field(func(r Result) float64 { return r.MBPerS })
	out.P50Ms = field(func(r Result) float64 { return r.P50Ms })
	out.P99Ms = field(func(r Result) float64 { return r.P99Ms })
	out.P999Ms = field(func(r Result) float64 { return r.P999Ms })
	out.ElapsedS = field(func(r Result) float64 { return r.ElapsedS })
	out.Msgs, out.Errors = 0, 0
	for _, r := range rs {
		out.Msgs += r.Msgs
		out.Errors += r.Errors
	}
	if out.BrokerCPUS != nil {
		out.BrokerCPUS = ptr(field(func(r Result) float64 { return deref(r.BrokerCPUS) }))
		out.BrokerCPUSPerMMsg = ptr(field(func(r Result) float64 { return deref(r.BrokerCPUSPerMMsg) }))
	}
	if out.ClientCPUSPerMMsg != nil {
		out.ClientCPUSPerMMsg = ptr(field(func(r Result) float64 { return deref(r.ClientCPUSPerMMsg) }))
	}
	// The report's curves are one round's: the round of median throughput.
	// The largest latency is the largest of every round.
	mid := medianRound(rs)
	out.LatencyCurve, out.ThroughputPerS = mid.LatencyCurve, mid.ThroughputPerS
	out.MaxMs = nil
	for _, r := range rs {
		if r.MaxMs != nil && (out.MaxMs == nil || *r.MaxMs > *out.MaxMs) {
			out.MaxMs = ptr(*r.MaxMs)
		}
	}
	return out
}

// medianRound is the round of rs whose throughput is the median (the lower
// one of an even count).
func medianRound(rs []Result) Result {
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b Result) int { return cmp.Compare(a.MsgsPerS, b.MsgsPerS) })
	return sorted[(len(sorted)-1)/2]
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// median of xs (which it sorts); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
