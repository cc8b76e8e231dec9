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

// memStore opens a fresh store under /s on a new Mem FS, closed when the
// test ends.
func memStore(t testing.TB) (*Store, Config) {
	t.Helper()
	cfg := testConfig("/s")
	s, _ := mustOpen(t, vfs.NewMem(), cfg)
	t.Cleanup(func() { s.Close() })
	return s, cfg
}

// mustAppend appends msgs as one batch or fails the test.
func mustAppend(t testing.TB, s *Store, msgs ...*Message) []AppendResult {
	t.Helper()
	res, err := s.AppendBatch(msgs, 1, nil)
	if err != nil {
		t.Fatalf("append %d messages: %v", len(msgs), err)
	}
	return res
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

// checkStore asserts the store's invariants (Check) and, if want is not
// nil, that every record in the log is byte for byte what was appended at
// its offset.
func checkStore(t testing.TB, s *Store, want map[int64][]byte) {
	t.Helper()
	if err := Check(s); err != nil {
		t.Fatal(err)
	}
	if want == nil {
		return
	}
	cl := s.CommitLog()
	_, err := s.ForEachRecord(cl.MinOffset(), cl.MaxOffset(), false, func(off int64, r *Record) error {
		w, ok := want[off]
		if !ok {
			return fmt.Errorf("record at %d was never written", off)
		}
		b, err := cl.Read(off, int(r.TotalSize))
		if err != nil {
			return err
		}
		if !bytes.Equal(w, b) {
			i := 0
			for i < len(b) && i < len(w) && b[i] == w[i] {
				i++
			}
			return fmt.Errorf("record at %d differs from what was written at byte %d of %d/%d: got %x want %x",
				off, i, len(b), len(w), b[i:min(i+16, len(b))], w[i:min(i+16, len(w))])
		}
		return nil
	})
	if err != nil {
		t.Fatalf("log differs from what was appended: %v", err)
	}
}
