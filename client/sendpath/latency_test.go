package sendpath

import (
	"slices"
	"testing"
	"time"
)

func TestAvoidForLatency(t *testing.T) {
	cfg := Config{Latency: DefaultLatency}
	tests := []struct {
		latency time.Duration
		want    time.Duration
	}{
		{0, 0},
		{ms(549), 0},
		{ms(550), 2 * time.Second},
		{ms(1799), 2 * time.Second},
		{ms(1800), 5 * time.Second},
		{3 * time.Second, 6 * time.Second},
		{5 * time.Second, 10 * time.Second},
		{15 * time.Second, 30 * time.Second},
		{time.Hour, 30 * time.Second},
	}
	for _, tt := range tests {
		if got := cfg.AvoidForLatency(tt.latency); got != tt.want {
			t.Errorf("AvoidForLatency(%v) = %v, want %v", tt.latency, got, tt.want)
		}
	}
	if got := (Config{}).AvoidForLatency(time.Hour); got != 0 {
		t.Errorf("no table: AvoidForLatency = %v, want 0", got)
	}
}

// TestObserve: a slow answer latches its broker for the table's time; a
// latch only ever extends (a short latch after a long one changes
// nothing), and fast answers do not lift it.
func TestObserve(t *testing.T) {
	a0, b0 := QueueRef{"a", 0}, QueueRef{"b", 0}
	type obs struct {
		at      time.Duration // after t0
		broker  string
		latency time.Duration // < 0: Blame instead
	}
	tests := []struct {
		name string
		obs  []obs
		at   time.Duration // the picks start here, one per ms
		want []QueueRef
	}{
		{name: "fast answers: plain round robin", obs: []obs{{0, "a", ms(10)}, {0, "b", ms(549)}},
			want: []QueueRef{a0, b0, a0}},
		{name: "a slow answer skips its broker", obs: []obs{{0, "a", ms(600)}},
			want: []QueueRef{b0, b0, b0}},
		{name: "the latency latch ends", obs: []obs{{0, "a", ms(600)}}, at: 2 * time.Second,
			want: []QueueRef{a0, b0, a0}},
		{name: "a short latch does not cut an error's longer one", obs: []obs{{0, "a", -1}, {0, "a", ms(600)}},
			at: 5 * time.Second, want: []QueueRef{b0, b0}},
		{name: "a fast answer does not lift a latch", obs: []obs{{0, "a", ms(2000)}, {ms(1), "a", ms(1)}},
			at: 4 * time.Second, want: []QueueRef{b0, b0}},
		{name: "a longer latch extends a shorter one", obs: []obs{{0, "a", ms(600)}, {time.Second, "a", ms(600)}},
			at: 2500 * time.Millisecond, want: []QueueRef{b0, b0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable(Config{RouteTTL: time.Hour, AvoidFor: 10 * time.Second, Latency: DefaultLatency})
			tab.Update(Route{Topic: "T", Version: 1, Queues: queues(1, "a", "b"), Fetched: t0})
			for _, o := range tt.obs {
				if o.latency < 0 {
					tab.Blame(o.broker, t0.Add(o.at))
				} else {
					tab.Observe(o.broker, o.latency, t0.Add(o.at))
				}
			}
			if got := picks(tab, "T", t0.Add(tt.at), len(tt.want), ""); !slices.Equal(got, tt.want) {
				t.Errorf("picks = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStale: a stale route is fetched again but keeps its queues for
// picks meanwhile; Topics lists the routes a refresh renews.
func TestStale(t *testing.T) {
	tab := NewTable(Config{RouteTTL: time.Hour})
	tab.Update(Route{Topic: "T", Version: 1, Queues: queues(1, "a"), Fetched: t0})
	tab.Update(Route{Topic: "U", Version: 1, Queues: queues(1, "b"), Fetched: t0})
	tab.Stale("T")
	tab.Stale("unknown") // nothing to mark
	if tab.Fresh("T", t0) {
		t.Error("Fresh after Stale")
	}
	if !tab.Fresh("U", t0) {
		t.Error("Stale(T) made U stale")
	}
	if got := tab.Pick("T", t0, ""); got != (QueueRef{"a", 0}) {
		t.Errorf("Pick after Stale = %v, want a/0 (queues kept)", got)
	}
	tab.Forget("U")
	if got := tab.Topics(); !slices.Equal(got, []string{"T"}) {
		t.Errorf("Topics = %v, want [T] (U forgotten)", got)
	}
}
