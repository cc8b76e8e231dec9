package sendpath

import (
	"fmt"
	"slices"
	"time"
)

// QueueRef is one queue of a topic on one broker.
type QueueRef struct {
	// Broker names the broker (its address today). "" is the caller's
	// default broker: the one a single-broker producer talks to.
	Broker string
	// QueueID is the queue; -1 lets the broker pick (and maybe create the
	// topic).
	QueueID int32
}

// AnyQueue, given to Begin, leaves the queue to the Table.
var AnyQueue = QueueRef{QueueID: -1}

func (q QueueRef) String() string {
	b := q.Broker
	if b == "" {
		b = "default"
	}
	return fmt.Sprintf("%s/%d", b, q.QueueID)
}

// Queues lists the queues 0..n-1 of broker, as a route has them for a
// broker that hosts a topic with n write queues (none for n <= 0).
func Queues(broker string, n int32) []QueueRef {
	qs := make([]QueueRef, max(n, 0))
	for i := range qs {
		qs[i] = QueueRef{Broker: broker, QueueID: int32(i)}
	}
	return qs
}

// Route is what the producer knows of a topic: its writable queues over
// all the brokers that host it. No queues: the topic is unknown, and sends
// let the broker pick.
type Route struct {
	Topic string
	// Version orders the routes of one topic: a route older than the
	// Table's is ignored, so a client never goes back to what it has seen
	// superseded. A single-broker producer numbers its fetches.
	Version int64
	// Queues are the writable queues, in the order round robin visits
	// them.
	Queues []QueueRef
	// Fetched is when the route was read; it is trusted until Fetched +
	// Config.RouteTTL.
	Fetched time.Time
}

// Config is the producer's send policy.
type Config struct {
	// RouteTTL is how long a route is trusted after it was fetched.
	RouteTTL time.Duration
	// Retries is how many times a failed send is repeated (so at most
	// Retries+1 attempts).
	Retries int
	// Backoff is the pause before the first retry; it doubles for each
	// further one, up to MaxBackoff (0: no bound but the deadline).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// AvoidFor is how long a broker whose attempt failed (a retryable
	// status, a broken connection, a timeout) is skipped by queue choice,
	// while another broker has writable queues. 0: only a send's own
	// retry prefers another broker than the one that just failed.
	AvoidFor time.Duration
	// Latency is the latency-based avoidance: a broker whose answer took
	// at least a step's Over is skipped for that step's AvoidFor (the
	// largest step that applies), as RocketMQ's latencyMax and
	// notAvailableDuration tables. Steps in ascending Over. Empty: none.
	// A caller reports latencies with Table.Observe.
	Latency []LatencyStep
}

// LatencyStep is one row of Config.Latency.
type LatencyStep struct {
	Over     time.Duration // an answer at least this slow ...
	AvoidFor time.Duration // ... skips its broker this long
}

// DefaultLatency is RocketMQ's MQFaultStrategy table: answers under
// 550 ms cost nothing; slower ones skip the broker for 2 s to 30 s.
var DefaultLatency = []LatencyStep{
	{Over: 550 * time.Millisecond, AvoidFor: 2 * time.Second},
	{Over: 1800 * time.Millisecond, AvoidFor: 5 * time.Second},
	{Over: 3 * time.Second, AvoidFor: 6 * time.Second},
	{Over: 5 * time.Second, AvoidFor: 10 * time.Second},
	{Over: 15 * time.Second, AvoidFor: 30 * time.Second},
}

// AvoidForLatency is how long an answer that took latency skips its
// broker under c (0: not at all). It reads no Table state, so a caller
// can test an answer without taking the Table's lock and report only the
// slow ones (Table.Observe).
func (c Config) AvoidForLatency(latency time.Duration) time.Duration {
	var d time.Duration
	for _, st := range c.Latency {
		if latency >= st.Over {
			d = st.AvoidFor
		}
	}
	return d
}

// Table holds the routes and the fault latch of one producer. Its zero
// value is not usable: use NewTable.
type Table struct {
	cfg    Config
	topics map[string]*topicRoute
	avoid  map[string]time.Time // broker -> avoided until
}

type topicRoute struct {
	r    Route
	next uint64 // round robin position
	gone bool   // forgotten: the version stays, as a floor
}

// NewTable returns an empty table with policy cfg.
func NewTable(cfg Config) *Table {
	return &Table{cfg: cfg, topics: map[string]*topicRoute{}, avoid: map[string]time.Time{}}
}

// Config returns the table's policy.
func (t *Table) Config() Config { return t.cfg }

// Update installs r unless the table knows a newer version of the topic's
// route; it reports whether r was installed. An installed route keeps the
// round robin position of the one it replaces, so a refresh does not send
// the next message to the first queue again.
func (t *Table) Update(r Route) bool {
	tr := t.topics[r.Topic]
	if tr != nil && r.Version < tr.r.Version {
		return false
	}
	if tr == nil {
		tr = &topicRoute{}
		t.topics[r.Topic] = tr
	}
	r.Queues = slices.Clone(r.Queues)
	tr.r, tr.gone = r, false
	return true
}

// Forget drops topic's queues (the broker said TOPIC_NOT_EXIST): the next
// send fetches the route again. The version is kept, so a route older than
// the forgotten one is still ignored.
func (t *Table) Forget(topic string) {
	if tr := t.topics[topic]; tr != nil {
		tr.gone = true
		tr.r.Queues = nil
	}
}

// Stale marks topic's route as past its TTL, keeping its queues: the next
// send fetches it again (a broker of the route broke its connection, so
// the route may have changed), and meanwhile Pick still has queues to
// choose from.
func (t *Table) Stale(topic string) {
	if tr := t.topics[topic]; tr != nil {
		tr.r.Fetched = time.Time{}
	}
}

// Topics lists the topics with a known route (in no order): what a
// refresh fetches again.
func (t *Table) Topics() []string {
	var ts []string
	for topic, tr := range t.topics {
		if !tr.gone {
			ts = append(ts, topic)
		}
	}
	return ts
}

// Route returns topic's route as known (fresh or not) and whether there is
// one.
func (t *Table) Route(topic string) (Route, bool) {
	tr := t.topics[topic]
	if tr == nil || tr.gone {
		return Route{}, false
	}
	return tr.r, true
}

// Fresh reports whether topic's route is known and within its TTL at now:
// a send can pick a queue without fetching it.
func (t *Table) Fresh(topic string, now time.Time) bool {
	tr := t.topics[topic]
	return tr != nil && !tr.gone && now.Sub(tr.r.Fetched) <= t.cfg.RouteTTL
}

// Pick is the next queue for topic in round robin, skipping the queues of
// the broker avoid and of brokers the latch avoids at now, unless every
// queue is on such a broker (then plain round robin: a send is never
// refused for want of a healthy broker). A topic without queues (unknown
// or forgotten) gives QueueID -1 on the default broker. Pick does not
// look at the TTL: see Fresh.
func (t *Table) Pick(topic string, now time.Time, avoid string) QueueRef {
	tr := t.topics[topic]
	if tr == nil || len(tr.r.Queues) == 0 {
		return AnyQueue
	}
	qs := tr.r.Queues
	n := uint64(len(qs))
	for i := range n {
		q := qs[(tr.next+i)%n]
		if q.Broker != avoid && !t.Avoided(q.Broker, now) {
			tr.next += i + 1
			return q
		}
	}
	q := qs[tr.next%n]
	tr.next++
	return q
}

// Blame latches broker as avoided until now + AvoidFor.
func (t *Table) Blame(broker string, now time.Time) { t.latch(broker, now, t.cfg.AvoidFor) }

// Observe reports that an answer of broker took latency, at now: a slow
// one latches the broker (Config.Latency). A fast answer does not lift a
// latch: the latch ends by itself, and the broker is probed back in by
// round robin then.
func (t *Table) Observe(broker string, latency time.Duration, now time.Time) {
	t.latch(broker, now, t.cfg.AvoidForLatency(latency))
}

// latch avoids broker until now + d, unless it is avoided longer already:
// a latch only ever extends (an error's long latch is not shortened by a
// slow answer's short one).
func (t *Table) latch(broker string, now time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	for b, until := range t.avoid { // a handful of brokers: prune as we go
		if !now.Before(until) {
			delete(t.avoid, b)
		}
	}
	if until := now.Add(d); until.After(t.avoid[broker]) {
		t.avoid[broker] = until
	}
}

// Avoided reports whether the latch avoids broker at now.
func (t *Table) Avoided(broker string, now time.Time) bool {
	until, ok := t.avoid[broker]
	return ok && now.Before(until)
}
