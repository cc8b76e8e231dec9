package sendpath

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// queues lists n queues on each broker, broker by broker.
func queues(n int32, brokers ...string) []QueueRef {
	var qs []QueueRef
	for _, b := range brokers {
		qs = append(qs, Queues(b, n)...)
	}
	return qs
}

func TestQueues(t *testing.T) {
	if got, want := Queues("a", 3), []QueueRef{{"a", 0}, {"a", 1}, {"a", 2}}; !slices.Equal(got, want) {
		t.Errorf("Queues(a, 3) = %v, want %v", got, want)
	}
	if got := Queues("a", -1); len(got) != 0 {
		t.Errorf("Queues(a, -1) = %v, want none", got)
	}
}

// picks is n picks of topic, one per millisecond from at, the broker avoid
// skipped.
func picks(t *Table, topic string, at time.Time, n int, avoid string) []QueueRef {
	var got []QueueRef
	for i := range n {
		got = append(got, t.Pick(topic, at.Add(ms(i)), avoid))
	}
	return got
}

func TestPick(t *testing.T) {
	a0, a1, b0, b1 := QueueRef{"a", 0}, QueueRef{"a", 1}, QueueRef{"b", 0}, QueueRef{"b", 1}
	tests := []struct {
		name     string
		queues   []QueueRef // nil: no route at all
		blame    []string   // brokers latched at t0
		avoidFor time.Duration
		avoid    string
		want     []QueueRef
	}{
		{name: "unknown topic: the broker picks", want: []QueueRef{AnyQueue, AnyQueue}},
		{name: "route without queues: the broker picks", queues: []QueueRef{}, want: []QueueRef{AnyQueue}},
		{name: "round robin on one broker", queues: queues(3, "a"),
			want: []QueueRef{a0, a1, {"a", 2}, a0, a1}},
		{name: "round robin across brokers, in route order", queues: queues(2, "a", "b"),
			want: []QueueRef{a0, a1, b0, b1, a0}},
		{name: "a send's retry skips the broker that failed", queues: queues(2, "a", "b"), avoid: "a",
			want: []QueueRef{b0, b1, b0, b1}},
		{name: "the latch skips a failed broker", queues: queues(2, "a", "b"), blame: []string{"b"}, avoidFor: time.Second,
			want: []QueueRef{a0, a1, a0, a1}},
		{name: "the latch ends after AvoidFor", queues: queues(1, "a", "b"), blame: []string{"b"}, avoidFor: ms(2),
			want: []QueueRef{a0, a0, b0, a0, b0}},
		{name: "every broker avoided: plain round robin", queues: queues(2, "a", "b"), blame: []string{"a", "b"}, avoidFor: time.Second,
			want: []QueueRef{a0, a1, b0, b1}},
		{name: "one broker, avoided: plain round robin (today's producer)", queues: queues(2, "a"), avoid: "a",
			want: []QueueRef{a0, a1, a0}},
		{name: "no latch without AvoidFor", queues: queues(1, "a", "b"), blame: []string{"a"},
			want: []QueueRef{a0, b0, a0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable(Config{RouteTTL: time.Minute, AvoidFor: tt.avoidFor})
			if tt.queues != nil {
				tab.Update(Route{Topic: "T", Version: 1, Queues: tt.queues, Fetched: t0})
			}
			for _, b := range tt.blame {
				tab.Blame(b, t0)
			}
			if got := picks(tab, "T", t0, len(tt.want), tt.avoid); !slices.Equal(got, tt.want) {
				t.Errorf("picks = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUpdateVersions(t *testing.T) {
	r := func(v int64, qs ...QueueRef) Route { return Route{Topic: "T", Version: v, Queues: qs, Fetched: t0} }
	a0, a1, b0 := QueueRef{"a", 0}, QueueRef{"a", 1}, QueueRef{"b", 0}
	tests := []struct {
		name   string
		routes []Route // installed in order
		forget int     // Forget after this many routes (0: never)
		want   []bool  // Update's answers
		queues []QueueRef
	}{
		{name: "newer replaces", routes: []Route{r(1, a0), r(2, b0)}, want: []bool{true, true}, queues: []QueueRef{b0}},
		{name: "older is ignored", routes: []Route{r(2, b0), r(1, a0)}, want: []bool{true, false}, queues: []QueueRef{b0}},
		{name: "equal refreshes", routes: []Route{r(2, a0), r(2, a0, a1)}, want: []bool{true, true}, queues: []QueueRef{a0, a1}},
		{name: "forgotten: the version stays a floor", routes: []Route{r(3, a0), r(2, b0)}, forget: 1,
			want: []bool{true, false}},
		{name: "forgotten: the same version comes back", routes: []Route{r(3, a0), r(3, b0)}, forget: 1,
			want: []bool{true, true}, queues: []QueueRef{b0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable(Config{RouteTTL: time.Minute})
			for i, rt := range tt.routes {
				if i == tt.forget && i > 0 {
					tab.Forget("T")
				}
				if got := tab.Update(rt); got != tt.want[i] {
					t.Errorf("Update(version %d) = %v, want %v", rt.Version, got, tt.want[i])
				}
			}
			got, ok := tab.Route("T")
			if ok != (tt.queues != nil) || !slices.Equal(got.Queues, tt.queues) {
				t.Errorf("Route = %v %v, want queues %v", got.Queues, ok, tt.queues)
			}
		})
	}
}

func TestUpdateKeepsRoundRobinAndCopies(t *testing.T) {
	tab := NewTable(Config{RouteTTL: time.Minute})
	qs := queues(3, "a")
	tab.Update(Route{Topic: "T", Version: 1, Queues: qs, Fetched: t0})
	tab.Pick("T", t0, "")
	qs[1].QueueID = 7 // the caller's slice is not the table's
	tab.Update(Route{Topic: "T", Version: 2, Queues: queues(3, "a"), Fetched: t0})
	if got := tab.Pick("T", t0, ""); got != (QueueRef{"a", 1}) {
		t.Errorf("after a refresh Pick = %v, want a/1 (the position kept)", got)
	}
}

func TestFresh(t *testing.T) {
	tests := []struct {
		name   string
		ttl    time.Duration
		at     time.Duration // after the fetch
		forget bool
		want   bool
	}{
		{"within the TTL", time.Second, ms(999), false, true},
		{"at the TTL", time.Second, time.Second, false, true},
		{"past the TTL", time.Second, ms(1001), false, false},
		{"TTL 0, same instant", 0, 0, false, true},
		{"TTL 0, later", 0, 1, false, false},
		{"forgotten", time.Second, 0, true, false},
	}
	for _, tt := range tests {
		tab := NewTable(Config{RouteTTL: tt.ttl})
		tab.Update(Route{Topic: "T", Version: 1, Queues: queues(1, "a"), Fetched: t0})
		if tt.forget {
			tab.Forget("T")
		}
		if got := tab.Fresh("T", t0.Add(tt.at)); got != tt.want {
			t.Errorf("%s: Fresh = %v, want %v", tt.name, got, tt.want)
		}
	}
	if NewTable(Config{RouteTTL: time.Hour}).Fresh("T", t0) {
		t.Error("Fresh on an unknown topic")
	}
}
