package writer

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

func TestAppendStoreProperties(t *testing.T) {
	// raw encodes pairs in the order given, as a client might.
	raw := func(kv ...string) []byte {
		b := []byte{0x80 | byte(len(kv)/2)}
		for _, s := range kv {
			b = append(b, 0xa0|byte(len(s)))
			b = append(b, s...)
		}
		return b
	}
	tests := []struct {
		name    string
		raw     []byte
		want    string // the log's encoding, when ok
		ok      bool
		wantErr bool
	}{
		{"none", nil, "", true, false},
		{"sorted", raw("KEYS", "k1 k2", "TAGS", "t", "UNIQ_KEY", "id"), "KEYS\x01k1 k2\x02TAGS\x01t\x02UNIQ_KEY\x01id\x02", true, false},
		{"unsorted takes the map", raw("TAGS", "t", "KEYS", "k"), "", false, false},
		{"repeated key takes the map", raw("A", "1", "A", "2"), "", false, false},
		{"delay takes the map", raw("DELAY", "3", "TAGS", "t"), "", false, false},
		{"absolute delay takes the map", raw("A", "1", "TIMER_DELIVER_MS", "9"), "", false, false},
		{"separator in a value", raw("A", "x\x01y"), "", true, true},
		{"separator in a key", raw("A\x02", "v"), "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("before")
			out, ok, err := appendStoreProperties(prefix, tt.raw)
			if (err != nil) != tt.wantErr || ok != tt.ok {
				t.Fatalf("ok %v err %v, want ok %v err %v", ok, err, tt.ok, tt.wantErr)
			}
			if err == nil && ok {
				if got := string(out[len(prefix):]); got != tt.want {
					t.Fatalf("encoded %q, want %q", got, tt.want)
				}
				// The same bytes the map path writes.
				m := protocol.Message{RawProperties: tt.raw}
				slow, err := EncodeProperties(m.PropertyMap())
				if err != nil || string(slow) != tt.want {
					t.Fatalf("map path gives %q (%v)", slow, err)
				}
			} else if string(out) != "before" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}

// TestOversizedRefusedBeforeAppend: a message above maxMessageSize is
// refused by CheckMessage before the append, and takes its whole batch
// with it; the log never sees it. The writer's invariant (no per-message
// refusal from the log) rests on this; it guards a bug (CheckMessage and
// the append disagreeing on a message's size) and cannot be provoked
// through Write.
func TestOversizedRefusedBeforeAppend(t *testing.T) {
	cfg := storage.DefaultConfig("/s")
	cfg.MappedFileSizeCommitLog = 64 << 10
	cfg.MaxMessageSize = 4 << 10
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	st, _, err := storage.Open(vfs.NewMem(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := New(Config{StoreHost: cfg.StoreHost}, st)
	topics := map[string]storage.TopicConfig{"t": {TopicName: "t", ReadQueueNums: 1, WriteQueueNums: 1, Perm: storage.PermRead | storage.PermWrite}}
	small, big := protocol.Message{Body: make([]byte, 100)}, protocol.Message{Body: make([]byte, 5<<10)}
	items := []*Item{
		{Topic: "t", QueueID: 0, Msgs: []protocol.Message{small}},
		{Topic: "t", QueueID: 0, Msgs: []protocol.Message{small, big}, Batch: true},
		{Topic: "t", QueueID: 0, Msgs: []protocol.Message{small}},
	}
	res := w.Write(time.Unix(1_700_000_000, 0), topics, items)
	got := []protocol.Status{res.Outcomes[0].Status, res.Outcomes[1].Status, res.Outcomes[2].Status}
	if want := []protocol.Status{protocol.StatusOK, protocol.StatusMessageIllegal, protocol.StatusOK}; !slices.Equal(got, want) || res.Stored != 2 || res.AppendErr != nil {
		t.Fatalf("statuses %v (want %v), %d stored, append error %v", got, want, res.Stored, res.AppendErr)
	}
	if end := st.CommitLog().MaxOffset(); res.Outcomes[2].End != end || res.Bytes != end {
		t.Fatalf("the last send ends at %d, %d bytes stored, the log ends at %d", res.Outcomes[2].End, res.Bytes, end)
	}
}
