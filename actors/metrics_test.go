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
