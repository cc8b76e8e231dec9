package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// recorder is a Metrics that keeps what the shells reported.
type recorder struct {
	mu                      sync.Mutex
	requests                map[protocol.Code]int
	storedMsgs, storedBytes map[string]int64
	pulledMsgs              map[string]int64
	fsyncs                  int
	fsyncBytes, logBytes    int64
	snaps                   []*BrokerSnapshot
}

func newRecorder() *recorder {
	return &recorder{requests: map[protocol.Code]int{}, storedMsgs: map[string]int64{},
		storedBytes: map[string]int64{}, pulledMsgs: map[string]int64{}}
}

func (r *recorder) Request(code protocol.Code, _ protocol.Status, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[code]++
}

func (r *recorder) Stored(topic string, msgs int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.storedMsgs[topic] += int64(msgs)
	r.storedBytes[topic] += bytes
}

func (r *recorder) Pulled(topic string, msgs int, _ int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pulledMsgs[topic] += int64(msgs)
}

func (r *recorder) Fsync(_ time.Duration, bytes, logBytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fsyncs++
	r.fsyncBytes += bytes
	r.logBytes = logBytes
}

func (r *recorder) Snapshot(s *BrokerSnapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snaps = append(r.snaps, s)
}

func (r *recorder) last() *BrokerSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.snaps) == 0 {
		return nil
	}
	return r.snaps[len(r.snaps)-1]
}

func (r *recorder) Connections(int) {}
func (r *recorder) LongPolls(int)   {}

// The shells report sends, pulls and fsyncs to Env.Metrics.
func TestMetricsSeam(t *testing.T) {
	for _, mode := range []FlushDiskType{AsyncFlush, SyncFlush} {
		t.Run(string(mode), func(t *testing.T) {
			rec := newRecorder()
			h := startBrokerEnv(t, vfs.NewMem(), func(c *Config) { c.FlushDiskType = mode }, Env{Metrics: rec})
			for _, body := range []string{"a", "bb", "ccc"} {
				h.ok(h.send(sendReq("T", 0, body))[0], nil)
			}
			got, st := h.pullBodies("T", 0)
			if st != protocol.StatusOK || len(got) != 3 {
				t.Fatalf("pull: %v %v", st, got)
			}
			h.loop.RunUntil(func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.fsyncs > 0 }, time.Minute) // ASYNC_FLUSH: the thorough flush
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.storedMsgs["T"] != 3 || rec.storedBytes["T"] != 6 {
				t.Errorf("stored %d msgs %d bytes, want 3 and 6", rec.storedMsgs["T"], rec.storedBytes["T"])
			}
			if rec.pulledMsgs["T"] != 3 {
				t.Errorf("pulled %d, want 3", rec.pulledMsgs["T"])
			}
			if rec.requests[protocol.CodeSendMessage] != 3 || rec.requests[protocol.CodePullMessage] != 1 {
				t.Errorf("requests %v, want 3 sends and 1 pull", rec.requests)
			}
			if rec.fsyncs == 0 || rec.fsyncBytes <= 0 || rec.logBytes < rec.fsyncBytes {
				t.Errorf("fsyncs %d, %d bytes, log %d bytes", rec.fsyncs, rec.fsyncBytes, rec.logBytes)
			}
		})
	}
}

// storedRun reports one Stored per run of one topic's items, and the sums
// of every item.
func TestStoredRun(t *testing.T) {
	type item struct {
		topic string
		msgs  int
		bytes int64
	}
	for _, tc := range []struct {
		name  string
		items []item
		calls int
		want  map[string]int64 // messages
	}{
		{"none", nil, 0, map[string]int64{}},
		{"one topic", []item{{"A", 1, 10}, {"A", 3, 30}, {"A", 1, 10}}, 1, map[string]int64{"A": 5}},
		{"runs", []item{{"A", 1, 10}, {"A", 1, 10}, {"B", 2, 20}, {"A", 1, 10}}, 3, map[string]int64{"A": 3, "B": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &callCounter{recorder: newRecorder()}
			var run storedRun
			for _, it := range tc.items {
				run.add(rec, it.topic, it.msgs, it.bytes)
			}
			run.flush(rec)
			run.flush(rec) // a flushed run reports nothing again
			if rec.calls != tc.calls {
				t.Errorf("%d Stored calls, want %d", rec.calls, tc.calls)
			}
			for topic, n := range tc.want {
				if rec.storedMsgs[topic] != n || rec.storedBytes[topic] != 10*n {
					t.Errorf("%s: %d msgs %d bytes, want %d and %d", topic, rec.storedMsgs[topic], rec.storedBytes[topic], n, 10*n)
				}
			}
			if len(rec.storedMsgs) != len(tc.want) {
				t.Errorf("topics %v, want %v", rec.storedMsgs, tc.want)
			}
		})
	}
}

// callCounter counts Stored calls.
type callCounter struct {
	*recorder
	calls int
}

func (c *callCounter) Stored(topic string, msgs int, bytes int64) {
	c.calls++
	c.recorder.Stored(topic, msgs, bytes)
}
