package metrics

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wharfmq/wharf/protocol"
)

// NewRegistry is a daemon's registry, with the Go runtime and process
// collectors on it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// latencyBuckets span 50µs to about 3 s: a sync send on a fast disk to a
// long poll answered late.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2.5, 13)

// Broker is a broker's instruments; it implements actors.Metrics.
type Broker struct {
	msgsIn, bytesIn, msgsOut, bytesOut *prometheus.CounterVec // {topic}
	send, pull, requests               *prometheus.HistogramVec
	fsync, fsyncBytes                  prometheus.Histogram
	logBytes, conns, longPolls         prometheus.Gauge
	// The children the hot path uses, by (code, status) and by topic.
	observers, in, out sync.Map
	// hot caches observers in front of the map: a send's observation
	// looked its child up in the sync.Map on every answer (a third of
	// Request's cost on the broker's hot path).
	hot [hotSlots]atomic.Pointer[hotObserver]
	*gauges
	reg prometheus.Registerer
}

// NewBroker registers a broker's instruments on reg.
func NewBroker(reg prometheus.Registerer) *Broker {
	f := factory{reg}
	return &Broker{reg: reg, gauges: newGauges(f),
		msgsIn:   f.counter("wharf_messages_in_total", "Messages stored, by topic.", "topic"),
		bytesIn:  f.counter("wharf_bytes_in_total", "Message body bytes stored, by topic.", "topic"),
		msgsOut:  f.counter("wharf_messages_out_total", "Messages returned by pulls, by topic.", "topic"),
		bytesOut: f.counter("wharf_bytes_out_total", "Log record bytes returned by pulls, by topic.", "topic"),
		send: f.histogram("wharf_send_latency_seconds",
			"Time from a send's arrival to its answer, by answer status.", latencyBuckets, "code", "status"),
		pull: f.histogram("wharf_pull_latency_seconds",
			"Time from a pull's arrival to its answer (long polls included), by answer status.", latencyBuckets, "status"),
		requests: f.histogram("wharf_request_latency_seconds",
			"Time from a request's arrival to its answer, other than sends and pulls.", latencyBuckets, "code", "status"),
		fsync: f.histogram1("wharf_fsync_latency_seconds", "Duration of one CommitLog fsync.", latencyBuckets),
		fsyncBytes: f.histogram1("wharf_fsync_batch_bytes", "Log bytes one fsync made durable (the group-commit batch).",
			prometheus.ExponentialBuckets(512, 4, 10)),
		logBytes:  f.gauge("wharf_commitlog_bytes", "CommitLog size: bytes from its first to its last durable offset."),
		conns:     f.gauge("wharf_connections", "Client connections open."),
		longPolls: f.gauge("wharf_long_polls", "Pulls held, waiting for messages."),
	}
}

// hotSlots is the size of Broker.hot: a broker answers a handful of
// (code, status) pairs at any time.
const hotSlots = 64

// hotObserver is one slot of Broker.hot.
type hotObserver struct {
	key uint64
	o   prometheus.Observer
}

// Request implements actors.Metrics.
func (b *Broker) Request(code protocol.Code, st protocol.Status, took time.Duration) {
	key := uint64(uint32(code))<<32 | uint64(uint32(st))
	slot := &b.hot[(uint32(code)*31+uint32(st))%hotSlots]
	if h := slot.Load(); h != nil && h.key == key {
		h.o.Observe(took.Seconds())
		return
	}
	o, ok := b.observers.Load(key)
	if !ok {
		o, _ = b.observers.LoadOrStore(key, b.observer(code, st))
	}
	slot.Store(&hotObserver{key: key, o: o.(prometheus.Observer)})
	o.(prometheus.Observer).Observe(took.Seconds())
}

// observer is the histogram child of (code, status): looked up once per
// pair, since WithLabelValues hashes its labels and locks the vector on
// every call (about 200 ns and 3 allocations of a send's path).
func (b *Broker) observer(code protocol.Code, st protocol.Status) prometheus.Observer {
	switch code {
	case protocol.CodeSendMessage, protocol.CodeSendBatchMessage:
		return b.send.WithLabelValues(code.String(), status(st))
	case protocol.CodePullMessage:
		return b.pull.WithLabelValues(status(st))
	}
	c := "other"
	if code.Known() {
		c = code.String()
	}
	return b.requests.WithLabelValues(c, status(st))
}

// status is st's label: its name, or "other" for one protocol does not
// define (never a number a peer chose).
func status(st protocol.Status) string {
	if !st.Known() {
		return "other"
	}
	return st.String()
}

// Stored implements actors.Metrics.
func (b *Broker) Stored(topic string, msgs int, bytes int64) {
	c := b.topic(&b.in, b.msgsIn, b.bytesIn, topic)
	c.msgs.Add(float64(msgs))
	c.bytes.Add(float64(bytes))
}

// Pulled implements actors.Metrics.
func (b *Broker) Pulled(topic string, msgs int, bytes int64) {
	c := b.topic(&b.out, b.msgsOut, b.bytesOut, topic)
	c.msgs.Add(float64(msgs))
	c.bytes.Add(float64(bytes))
}

// topicCounters are one topic's counters of one direction.
type topicCounters struct{ msgs, bytes prometheus.Counter }

// topic is topic's counters in cache (looked up once per topic: the
// series stay, as a counter's must, while the broker runs).
func (b *Broker) topic(cache *sync.Map, msgs, bytes *prometheus.CounterVec, topic string) *topicCounters {
	if c, ok := cache.Load(topic); ok {
		return c.(*topicCounters)
	}
	c, _ := cache.LoadOrStore(topic, &topicCounters{msgs: msgs.WithLabelValues(topic), bytes: bytes.WithLabelValues(topic)})
	return c.(*topicCounters)
}

// Fsync implements actors.Metrics.
func (b *Broker) Fsync(took time.Duration, bytes, logBytes int64) {
	b.fsync.Observe(took.Seconds())
	if bytes > 0 {
		b.fsyncBytes.Observe(float64(bytes))
	}
	b.logBytes.Set(float64(logBytes))
}

// Connections implements actors.Metrics.
func (b *Broker) Connections(delta int) { b.conns.Add(float64(delta)) }

// LongPolls implements actors.Metrics.
func (b *Broker) LongPolls(delta int) { b.longPolls.Add(float64(delta)) }

// Handler serves /metrics from reg and /healthz: 200 "ready" once ready
// returns true, 503 "starting" before.
func Handler(reg *prometheus.Registry, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "starting")
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// factory registers what it builds on reg.
type factory struct{ reg prometheus.Registerer }

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogram1(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}
