package benchrun

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// runCluster runs a cluster scenario; with --broker it is skipped, since
// it needs a name server and brokers of its own.
func runCluster(ctx context.Context, o *Options, sc string, size int, stderr io.Writer) ([]Result, error) {
	if o.Broker != "" {
		return []Result{{Scenario: sc, Size: size, Skipped: true,
			Note: "needs a name server and broker groups of its own; not run with --broker"}}, nil
	}
	if sc == "route-propagation" {
		r, err := runRoutePropagation(ctx, o, size, stderr)
		if err != nil {
			return nil, err
		}
		return []Result{r}, nil
	}
	return runGroups(ctx, o, size, stderr)
}

// runRoutePropagation: o.RouteRounds times, the time from
// CreateTopicInCluster of a new topic to the first successful send to it
// of a producer already running on the name server (connected to every
// group by a warm-up topic). The producer tries every millisecond.
func runRoutePropagation(ctx context.Context, o *Options, size int, stderr io.Writer) (Result, error) {
	c, err := startCluster(ctx, o, o.Groups, stderr)
	if err != nil {
		return Result{}, err
	}
	defer c.stop()
	a, err := c.admin(o.Timeout)
	if err != nil {
		return Result{}, err
	}
	defer a.Close()
	p, err := client.NewProducer("", client.WithNameServer(c.ns.addr), client.WithTimeout(o.Timeout), client.WithRetries(0))
	if err != nil {
		return Result{}, err
	}
	defer p.Close()
	body := make([]byte, size)
	if _, err := propagate(ctx, a, p, "bench-warm", o.Queues, body); err != nil {
		return Result{}, fmt.Errorf("warm-up topic: %w", err)
	}
	settleAll(ctx, o.Settle, stderr, c.brokers...)
	hist := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	var attempts int64
	var created []float64 // ms until CreateTopicInCluster returned
	start := time.Now()
	for i := range o.RouteRounds {
		topic := fmt.Sprintf("bench-route-%d-%d", i, time.Now().UnixNano())
		took, err := propagate(ctx, a, p, topic, o.Queues, body)
		if err != nil {
			return Result{}, fmt.Errorf("round %d: %w", i, err)
		}
		attempts += took.attempts
		created = append(created, float64(took.created.Microseconds())/1000)
		_ = hist.RecordValue(max(1, took.d.Microseconds()))
	}
	r := Result{Scenario: "route-propagation", Size: size, Msgs: hist.TotalCount(),
		ElapsedS: round(time.Since(start).Seconds()), Groups: o.Groups, ViaNamesrv: ptr(true), Rounds: o.RouteRounds}
	r.P50Ms, r.P99Ms, r.P999Ms = quantilesMs(hist)
	r.MaxMs = roundedPtr(float64(hist.Max()) / 1000)
	r.LatencyCurve = latencyCurve(hist)
	r.Note = fmt.Sprintf("CreateTopicInCluster on %d groups -> first acked send of a running producer "+
		"(the create call itself: p50 %.3f ms; the producer tries every ms: %.1f sends per topic); msgs counts topics",
		o.Groups, median(created), float64(attempts)/float64(o.RouteRounds))
	return r, nil
}

// propagation is how long a topic took to be sendable (of which created
// in the create call) and in how many sends.
type propagation struct {
	d, created time.Duration
	attempts   int64
}

// propagate creates topic in the cluster and sends to it until a send is
// acked (for at most 30 s).
func propagate(ctx context.Context, a *client.Admin, p *client.Producer, topic string, queues int, body []byte) (propagation, error) {
	t0 := time.Now()
	if _, err := a.CreateTopicInCluster(ctx, clusterName, topic, int32(queues)); err != nil {
		return propagation{}, err
	}
	pr := propagation{created: time.Since(t0)}
	var last error
	for time.Since(t0) < 30*time.Second && ctx.Err() == nil {
		pr.attempts++
		if _, last = p.Send(ctx, &protocol.Message{Topic: topic, Body: body}); last == nil {
			pr.d = time.Since(t0)
			return pr, nil
		}
		sleepCtx(ctx, time.Millisecond)
	}
	return pr, fmt.Errorf("topic %s not sendable 30 s after its creation: %v", topic, last)
}

func ptr[T any](v T) *T { return &v }
