package storage

import (
	"bytes"
	"fmt"
	"math/rand"
	"net/netip"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// testConfig is a store with tiny files, so tests roll segments, ConsumeQueue
// files and index files often.
func testConfig(root string) Config {
	cfg := DefaultConfig(root)
	cfg.MappedFileSizeCommitLog = 16 << 10
	cfg.MappedFileSizeConsumeQueue = 32
	cfg.MaxMessageSize = 4 << 10
	cfg.MaxHashSlotNum = 16
	cfg.MaxIndexNum = 64
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	return cfg
}

func mustOpen(t testing.TB, fsys vfs.FS, cfg Config) (*Store, *RecoveryReport) {
	t.Helper()
	s, rep, err := Open(fsys, cfg)
	if err != nil {
		t.Fatalf("open: %v (report %v)", err, rep)
	}
	return s, rep
}

// genMessage makes a deterministic message of topic t, queue q.
func genMessage(rng *rand.Rand, topic string, q int32, seq int) *Message {
	body := make([]byte, 1+rng.Intn(700))
	rng.Read(body)
	props, _ := EncodeProperties(PropKeys, fmt.Sprintf("k%d %s-%d", seq, topic, seq), PropTags, fmt.Sprintf("tag%d", seq%5),
		PropUniqKey, fmt.Sprintf("U%08d", seq))
	return &Message{Topic: topic, QueueID: q, Flag: int32(seq), Body: body, Properties: props,
		BornTimestamp: 1_700_000_000_000 + int64(seq), BornHost: netip.MustParseAddrPort("10.0.0.9:4242")}
}

// appended remembers what a workload stored: offset -> exact record bytes.
type appended struct {
	off  int64
	data []byte
	key  QueueKey
	qo   int64
}

// checkStore asserts the store's invariants: every record in the log decodes
// with a valid CRC and equals what was appended at that offset (if want is
// not nil); per queue, ConsumeQueue entries are contiguous and each points at
// a valid record of its topic and queue with the matching queue offset.
func checkStore(t testing.TB, s *Store, want map[int64][]byte) {
	t.Helper()
	cl := s.CommitLog()
	perQueue := map[QueueKey]int64{}
	_, err := s.ForEachRecord(cl.MinOffset(), cl.MaxOffset(), true, func(off int64, r *Record) error {
		if want != nil {
			w, ok := want[off]
			b, _ := cl.Read(off, int(r.TotalSize))
			if !ok {
				return fmt.Errorf("record at %d was never written", off)
			}
			if !bytes.Equal(w, b) {
				i := 0
				for i < len(b) && i < len(w) && b[i] == w[i] {
					i++
				}
				return fmt.Errorf("record at %d differs from what was written at byte %d of %d/%d: got %x want %x", off, i, len(b), len(w), b[i:min(i+16, len(b))], w[i:min(i+16, len(w))])
			}
		}
		if u, ok := Property(r.Properties, PropUniqKey); ok && s.idx != nil {
			recs, err := s.QueryByKey(string(r.Topic), u, 0, 1<<62, 4)
			if err != nil || len(recs) != 1 || recs[0].PhysicalOffset != off {
				return fmt.Errorf("record at %d: query by its unique key %q found %d records (%v)", off, u, len(recs), err)
			}
		}
		k := QueueKey{string(r.Topic), r.QueueID}
		if r.QueueOffset != perQueue[k] {
			return fmt.Errorf("record at %d: queue %s offset %d, want %d (not contiguous)", off, k, r.QueueOffset, perQueue[k])
		}
		perQueue[k]++
		return nil
	})
	if err != nil {
		t.Fatalf("log invalid: %v", err)
	}
	if s.idx != nil && cl.MaxOffset() > 0 && s.idx.MaxPhyOffset() >= cl.MaxOffset() {
		t.Fatalf("index claims records up to %d, the log ends at %d", s.idx.MaxPhyOffset(), cl.MaxOffset())
	}
	for k, n := range perQueue {
		q, err := s.ConsumeQueue(k, false)
		if err != nil || q == nil {
			t.Fatalf("queue %s has %d records but no consume queue (%v)", k, n, err)
		}
		if q.MaxOffset() != n {
			t.Fatalf("queue %s: consume queue max %d, log has %d records", k, q.MaxOffset(), n)
		}
		if got := cl.QueueOffset(k); got != n {
			t.Fatalf("queue %s: offset table says next %d, log has %d", k, got, n)
		}
	}
	for _, k := range s.Queues() {
		q, _ := s.ConsumeQueue(k, false)
		for qo := q.MinOffset(); qo < q.MaxOffset(); qo++ {
			e, err := q.Get(qo)
			if err != nil {
				t.Fatalf("queue %s offset %d: %v", k, qo, err)
			}
			r, err := cl.ReadRecord(e.Offset, e.Size, true)
			if err != nil {
				t.Fatalf("queue %s offset %d -> %d: %v", k, qo, e.Offset, err)
			}
			if string(r.Topic) != k.Topic || r.QueueID != k.QueueID || r.QueueOffset != qo {
				t.Fatalf("queue %s offset %d points at a record of %s-%d offset %d", k, qo, r.Topic, r.QueueID, r.QueueOffset)
			}
		}
	}
}
