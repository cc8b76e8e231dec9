package sendpath

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

var (
	ok      = Outcome{Status: protocol.StatusOK}
	busy    = Outcome{Status: protocol.StatusSystemBusy}
	noTopic = Outcome{Status: protocol.StatusTopicNotExist}
	flush   = Outcome{Status: protocol.StatusFlushDiskTimeout}
	illegal = Outcome{Status: protocol.StatusMessageIllegal}
	broken  = Outcome{Failure: Broken}
	timeout = Outcome{Failure: TimedOut}
)

// run feeds outcomes, one per attempt, to a send begun at t0 with cfg,
// each answer arriving 1 ms after its attempt and each retry made at the
// decision's At, and returns the trace: "<step> -> <verdict>[+pause]"
// for every attempt.
func run(cfg Config, deadline time.Duration, outs ...Outcome) string {
	tab := NewTable(cfg)
	tab.Update(Route{Topic: "T", Version: 1, Queues: queues(1, "a", "b"), Fetched: t0})
	var dl time.Time
	if deadline > 0 {
		dl = t0.Add(deadline)
	}
	s := tab.Begin("T", AnyQueue, dl)
	now := t0
	var trace []string
	for _, o := range outs {
		st := s.Next(now)
		now = now.Add(ms(1))
		d := s.Outcome(now, st.To, o)
		e := fmt.Sprintf("%v -> %v", st.To, d.Verdict)
		if d.Verdict == Retry {
			e += fmt.Sprintf("+%v", d.At.Sub(now))
			now = d.At
		}
		trace = append(trace, e)
		if d.Verdict != Retry {
			break
		}
	}
	return strings.Join(trace, "; ")
}

func TestRetryPlan(t *testing.T) {
	base := Config{RouteTTL: time.Hour, Retries: 2, Backoff: ms(100)}
	with := func(f func(*Config)) Config { c := base; f(&c); return c }
	tests := []struct {
		name     string
		cfg      Config
		deadline time.Duration
		outs     []Outcome
		want     string
	}{
		{"stored at once", base, 0, []Outcome{ok}, "a/0 -> done"},
		{"unconfirmed is final: never resent", base, 0, []Outcome{flush, ok}, "a/0 -> done"},
		{"a rejection fails at once", base, 0, []Outcome{illegal, ok}, "a/0 -> fail"},
		{"a timeout is not resent", base, 0, []Outcome{timeout, ok}, "a/0 -> fail"},
		{"retry on the other broker, then stored", base, 0, []Outcome{busy, ok},
			"a/0 -> retry+100ms; b/0 -> done"},
		{"retries spent", base, 0, []Outcome{busy, broken, busy, ok},
			"a/0 -> retry+100ms; b/0 -> retry+200ms; a/0 -> fail"},
		{"no retries", with(func(c *Config) { c.Retries = 0 }), 0, []Outcome{busy, ok}, "a/0 -> fail"},
		{"backoff doubles", with(func(c *Config) { c.Retries = 4 }), 0, []Outcome{busy, busy, busy, busy, ok},
			"a/0 -> retry+100ms; b/0 -> retry+200ms; a/0 -> retry+400ms; b/0 -> retry+800ms; a/0 -> done"},
		{"backoff is bounded", with(func(c *Config) { c.Retries = 4; c.MaxBackoff = ms(300) }), 0,
			[]Outcome{busy, busy, busy, busy, busy},
			"a/0 -> retry+100ms; b/0 -> retry+200ms; a/0 -> retry+300ms; b/0 -> retry+300ms; a/0 -> fail"},
		{"a first pause above the bound is the bound", with(func(c *Config) { c.MaxBackoff = ms(50) }), 0,
			[]Outcome{busy, busy, ok}, "a/0 -> retry+50ms; b/0 -> retry+50ms; a/0 -> done"},
		{"zero backoff retries at once", with(func(c *Config) { c.Backoff = 0 }), 0, []Outcome{busy, busy, ok},
			"a/0 -> retry+0s; b/0 -> retry+0s; a/0 -> done"},
		{"no retry that would start at or after the deadline", base, ms(302), []Outcome{busy, busy, ok},
			"a/0 -> retry+100ms; b/0 -> fail"},
		{"a retry before the deadline goes", base, ms(303), []Outcome{busy, busy, ok},
			"a/0 -> retry+100ms; b/0 -> retry+200ms; a/0 -> done"},
	}
	for _, tt := range tests {
		if got := run(tt.cfg, tt.deadline, tt.outs...); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestBackoffNeverOverflows(t *testing.T) {
	tab := NewTable(Config{Retries: 1000, Backoff: time.Hour})
	s := tab.Begin("T", QueueRef{QueueID: 0}, time.Time{})
	var last time.Time
	for i := range 200 {
		d := s.Outcome(t0, QueueRef{QueueID: 0}, busy)
		if d.Verdict != Retry || d.At.Before(last) {
			t.Fatalf("failure %d: %v after %v", i+1, d, last)
		}
		last = d.At
	}
}

func TestFixedQueueNeedsNoRoute(t *testing.T) {
	tab := NewTable(Config{RouteTTL: time.Hour, Retries: 1})
	s := tab.Begin("T", QueueRef{QueueID: 3}, time.Time{})
	for i := range 2 {
		if st := s.Next(t0); st.Fetch || st.To != (QueueRef{QueueID: 3}) || st.Attempt != i+1 {
			t.Fatalf("Next = %v, want attempt %d to default/3", st, i+1)
		}
		s.Outcome(t0, QueueRef{QueueID: 3}, busy)
	}
}

// TestRouteFetch: an unknown or stale route is fetched once per attempt,
// a failed fetch is a failed attempt, and TOPIC_NOT_EXIST forgets the
// route so the retry fetches it again.
func TestRouteFetch(t *testing.T) {
	tab := NewTable(Config{RouteTTL: 0, Retries: 3, Backoff: ms(10)}) // TTL 0: fetch before every attempt
	s := tab.Begin("T", AnyQueue, time.Time{})
	route := Route{Topic: "T", Version: 1, Queues: queues(2, "a"), Fetched: t0}
	steps := []struct {
		do   func() string
		want string
	}{
		{func() string { return s.Next(t0).String() }, "attempt 1: fetch the route"},
		{func() string { return s.Outcome(t0, QueueRef{Broker: "a", QueueID: -1}, broken).Verdict.String() }, "retry"},
		{func() string { return s.Next(t0.Add(ms(10))).String() }, "attempt 2: fetch the route"},
		{func() string { s.Routed(route); return s.Next(t0.Add(ms(20))).String() }, "attempt 2: send to a/0"},
		{func() string { return s.Outcome(t0.Add(ms(20)), QueueRef{"a", 0}, noTopic).Verdict.String() }, "retry"},
		{func() string { _, known := tab.Route("T"); return fmt.Sprint("known ", known) }, "known false"},
		{func() string { return s.Next(t0.Add(ms(40))).String() }, "attempt 3: fetch the route"},
		// The broker still does not know the topic: a route without queues.
		{func() string {
			s.Routed(Route{Topic: "T", Version: 2, Fetched: t0})
			return s.Next(t0.Add(ms(40))).String()
		},
			"attempt 3: send to default/-1"},
		{func() string { return s.Outcome(t0.Add(ms(41)), AnyQueue, ok).String() }, "done (stored)"},
	}
	for i, st := range steps {
		if got := st.do(); got != st.want {
			t.Fatalf("step %d: got %q, want %q", i, got, st.want)
		}
	}
}

// TestFailureLatchesTheBroker: a failure that blames a broker steers the
// other sends of the table away from it, not only the failed send's retry.
func TestFailureLatchesTheBroker(t *testing.T) {
	tests := []struct {
		out  Outcome
		want QueueRef // the other send's next pick
	}{
		{busy, QueueRef{"b", 0}},
		{broken, QueueRef{"b", 0}},
		{timeout, QueueRef{"b", 0}},
		{illegal, QueueRef{"a", 1}}, // the message's fault: the broker is fine
		{flush, QueueRef{"b", 0}},   // stored, its disk behind
		{Outcome{Status: protocol.StatusSlaveNotAvailable}, QueueRef{"b", 0}}, // stored, its slave behind
		{ok, QueueRef{"a", 1}},
	}
	for _, tt := range tests {
		tab := NewTable(Config{RouteTTL: time.Hour, Retries: 2, AvoidFor: time.Second})
		tab.Update(Route{Topic: "T", Version: 1, Queues: queues(2, "a", "b"), Fetched: t0})
		s1, s2 := tab.Begin("T", AnyQueue, time.Time{}), tab.Begin("T", AnyQueue, time.Time{})
		st := s1.Next(t0)
		s1.Outcome(t0, st.To, tt.out)
		if got := s2.Next(t0).To; got != tt.want {
			t.Errorf("after %+v on %v: the other send picks %v, want %v", tt.out, st.To, got, tt.want)
		}
	}
}

// TestRetryPrefersAnotherBroker: without the latch, a send's own retry
// still goes to another broker than the one that just failed, and comes
// back when that one fails too.
func TestRetryPrefersAnotherBroker(t *testing.T) {
	tab := NewTable(Config{RouteTTL: time.Hour, Retries: 3})
	tab.Update(Route{Topic: "T", Version: 1, Queues: []QueueRef{{"a", 0}, {"a", 1}, {"b", 0}}, Fetched: t0})
	s := tab.Begin("T", AnyQueue, time.Time{})
	var got []QueueRef
	for range 3 {
		st := s.Next(t0)
		got = append(got, st.To)
		s.Outcome(t0, st.To, busy)
	}
	want := []QueueRef{{"a", 0}, {"b", 0}, {"a", 0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("attempts went to %v, want %v", got, want)
	}
}

// TestStoredOutcomeTouchesOnlyTheSend holds Outcome's promise that the
// producer relies on to skip its lock and the clock for stored and
// confirmed answers (unconfirmed ones latch the broker: see
// TestFailureLatchesTheBroker).
func TestStoredOutcomeTouchesOnlyTheSend(t *testing.T) {
	for _, o := range []Outcome{ok, {Status: protocol.StatusOK, Failure: Answered}} {
		tab := NewTable(Config{RouteTTL: time.Hour, Retries: 2, AvoidFor: time.Hour})
		tab.Update(Route{Topic: "T", Version: 1, Queues: queues(1, "a"), Fetched: t0})
		d := tab.Begin("T", AnyQueue, time.Time{}).Outcome(time.Time{}, QueueRef{"a", 0}, o)
		r, known := tab.Route("T")
		if d.Verdict != Done || !known || r.Version != 1 || len(tab.avoid) != 0 || tab.topics["T"].next != 0 {
			t.Errorf("%v: %v; the table changed: route %v %v, latch %v", o.Status, d, r, known, tab.avoid)
		}
	}
}
