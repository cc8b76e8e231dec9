package actors

import (
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Metrics is the observability seam: the actor shells report what
// happened at the few points that matter, and the implementation (the
// daemon's Prometheus registry, or a simulator's recorder) counts it. The
// cores never see it. Calls come from many actors at once, so an
// implementation must be safe for concurrent use; labels it derives must
// stay bounded (topics, codes, statuses: never clients or messages).
// Env.Metrics nil means none: the shells then call a no-op, take no lock
// and read no clock for latencies.
type Metrics interface {
	// Request: a request was answered with st, took after its burst was
	// read (sends, pulls, every other code alike).
	Request(code protocol.Code, st protocol.Status, took time.Duration)
	// Stored: msgs messages of body bytes were appended to topic.
	Stored(topic string, msgs int, bytes int64)
	// Pulled: a pull answer carried msgs records of bytes from topic.
	Pulled(topic string, msgs int, bytes int64)
	// Fsync: one flush of the log took took and made bytes durable;
	// logBytes is the log's size on disk after it.
	Fsync(took time.Duration, bytes, logBytes int64)
	// Connections and LongPolls move the client connections open and the
	// pulls held, by delta.
	Connections(delta int)
	LongPolls(delta int)
	// Snapshot: the broker's state once a SnapshotInterval (snapshot.go),
	// where the gauges come from (flush and dispatch behind, disk usage,
	// consumer lag, replication, mailbox depths). s is shared with the
	// status endpoints: read it, keep it if need be, never modify it.
	Snapshot(s *BrokerSnapshot)
}

// noMetrics is the seam's default: every call returns at once.
type noMetrics struct{}

func (noMetrics) Request(protocol.Code, protocol.Status, time.Duration) {}
func (noMetrics) Stored(string, int, int64)                             {}
func (noMetrics) Pulled(string, int, int64)                             {}
func (noMetrics) Fsync(time.Duration, int64, int64)                     {}
func (noMetrics) Connections(int)                                       {}
func (noMetrics) LongPolls(int)                                         {}
func (noMetrics) Snapshot(*BrokerSnapshot)                              {}

// metricsOf is env's seam with the no-op in place of nil, and whether
// latencies are wanted (a real implementation: then the shells read the
// clock when a burst arrives).
func metricsOf(env Env) (Metrics, bool) {
	if env.Metrics == nil {
		return noMetrics{}, false
	}
	return env.Metrics, true
}

// bodyBytes is the body size of msgs, what wharf_bytes_in_total counts.
// storedRun sums the stored counts of consecutive items of one topic (a
// burst's sends are mostly to one topic), so the topic's counters are
// looked up and added to once per run instead of once per send.
type storedRun struct {
	topic string
	msgs  int
	bytes int64
}

// add counts an item, reporting the run before it if its topic differs.
func (r *storedRun) add(m Metrics, topic string, msgs int, bytes int64) {
	if r.msgs > 0 && topic != r.topic {
		r.flush(m)
	}
	r.topic = topic
	r.msgs += msgs
	r.bytes += bytes
}

// flush reports the run.
func (r *storedRun) flush(m Metrics) {
	if r.msgs > 0 {
		m.Stored(r.topic, r.msgs, r.bytes)
	}
	*r = storedRun{}
}

func bodyBytes(msgs []protocol.Message) int64 {
	var n int64
	for i := range msgs {
		n += int64(len(msgs[i].Body))
	}
	return n
}

// rawBytes is the size of log records as read.
func rawBytes(recs [][]byte) int64 {
	var n int64
	for _, r := range recs {
		n += int64(len(r))
	}
	return n
}
