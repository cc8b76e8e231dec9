package writer

import (
	"fmt"
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

var t0 = time.Unix(1_700_000_000, 0)

func openStore(t *testing.T) *storage.Store {
	t.Helper()
	cfg := storage.DefaultConfig("/w")
	cfg.MappedFileSizeCommitLog = 64 << 10
	cfg.MappedFileSizeConsumeQueue = 64
	cfg.MaxMessageSize = 8 << 10
	cfg.MaxHashSlotNum, cfg.MaxIndexNum = 16, 64
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	st, _, err := storage.Open(vfs.NewMem(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newWriter(t *testing.T, autoCreate bool) (*Writer, *storage.Store) {
	st := openStore(t)
	return New(Config{StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"), AutoCreateTopicEnable: autoCreate,
		DefaultTopicQueueNums: 4, DelayLevels: []time.Duration{time.Second, 5 * time.Second}}, st), st
}

func msg(body string, kv ...string) protocol.Message {
	m := protocol.Message{Body: []byte(body)}
	for i := 0; i+1 < len(kv); i += 2 {
		if m.Properties == nil {
			m.Properties = map[string]string{}
		}
		m.Properties[kv[i]] = kv[i+1]
	}
	return m
}

// Every way a send can be refused, and where the accepted ones go.
func TestWriteOutcomes(t *testing.T) {
	topics := map[string]storage.TopicConfig{
		"rw":   {TopicName: "rw", ReadQueueNums: 2, WriteQueueNums: 2, Perm: storage.PermRead | storage.PermWrite},
		"ro":   {TopicName: "ro", ReadQueueNums: 2, WriteQueueNums: 2, Perm: storage.PermRead},
		"noqs": {TopicName: "noqs", ReadQueueNums: 1, WriteQueueNums: 0, Perm: storage.PermRead | storage.PermWrite},
	}
	cases := []struct {
		name       string
		autoCreate bool
		item       Item
		status     protocol.Status
		queue      int32 // of the answer, when stored
	}{
		{"known topic, chosen queue", false, Item{Topic: "rw", QueueID: 1, Msgs: []protocol.Message{msg("a")}}, protocol.StatusOK, 1},
		{"queue out of range", false, Item{Topic: "rw", QueueID: 2, Msgs: []protocol.Message{msg("a")}}, protocol.StatusInvalidParameter, 0},
		{"not writable", false, Item{Topic: "ro", QueueID: 0, Msgs: []protocol.Message{msg("a")}}, protocol.StatusNoPermission, 0},
		{"no write queues", false, Item{Topic: "noqs", QueueID: -1, Msgs: []protocol.Message{msg("a")}}, protocol.StatusNoPermission, 0},
		{"unknown topic, no auto-create", false, Item{Topic: "new", QueueID: 0, Msgs: []protocol.Message{msg("a")}}, protocol.StatusTopicNotExist, 0},
		{"unknown topic, auto-create", true, Item{Topic: "new", QueueID: 3, Msgs: []protocol.Message{msg("a")}}, protocol.StatusOK, 3},
		{"retry topics are created without auto-create", false, Item{Topic: "%RETRY%g", QueueID: 0, Msgs: []protocol.Message{msg("a")}}, protocol.StatusOK, 0},
		{"retry topics have one queue", false, Item{Topic: "%RETRY%g", QueueID: 1, Msgs: []protocol.Message{msg("a")}}, protocol.StatusInvalidParameter, 0},
		{"bad topic name", true, Item{Topic: "a b", QueueID: 0, Msgs: []protocol.Message{msg("a")}}, protocol.StatusMessageIllegal, 0},
		{"bad delay level", false, Item{Topic: "rw", QueueID: 0, Msgs: []protocol.Message{msg("a", protocol.PropertyDelay, "9")}}, protocol.StatusMessageIllegal, 0},
		{"batch message for another topic", false, Item{Topic: "rw", QueueID: 0, Batch: true,
			Msgs: []protocol.Message{msg("a"), {Topic: "ro", Body: []byte("b")}}}, protocol.StatusMessageIllegal, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, st := newWriter(t, c.autoCreate)
			it := c.item
			res := w.Write(t0, topics, []*Item{&it})
			o := res.Outcomes[0]
			if o.Status != c.status {
				t.Fatalf("status %v (%s), want %v", o.Status, o.Remark, c.status)
			}
			if o.Stored != (c.status == protocol.StatusOK) {
				t.Fatalf("stored %v with status %v", o.Stored, o.Status)
			}
			if !o.Stored {
				if st.CommitLog().MaxOffset() != 0 || res.Stored != 0 {
					t.Fatalf("a refused item was appended")
				}
				return
			}
			if sr := o.Fields.(*protocol.SendResponse); sr.QueueID != c.queue || o.End != st.CommitLog().MaxOffset() {
				t.Fatalf("answer %+v end %d, log end %d", sr, o.End, st.CommitLog().MaxOffset())
			}
		})
	}
}

// The broker chooses queues round robin per topic, and a topic created by
// one item of a write is seen by the next items of the same write.
func TestRoundRobinAndAutoCreateWithinAWrite(t *testing.T) {
	w, _ := newWriter(t, true)
	var items []*Item
	for i := 0; i < 6; i++ {
		items = append(items, &Item{Topic: "fresh", QueueID: -1, Msgs: []protocol.Message{msg(fmt.Sprint(i))}})
	}
	res := w.Write(t0, map[string]storage.TopicConfig{}, items)
	if len(res.Created) != 1 || res.Created[0].TopicName != "fresh" || res.Created[0].WriteQueueNums != 4 {
		t.Fatalf("created %+v", res.Created)
	}
	for i, o := range res.Outcomes {
		sr := o.Fields.(*protocol.SendResponse)
		if sr.QueueID != int32(i%4) || sr.QueueOffset != int64(i/4) {
			t.Fatalf("item %d: queue %d offset %d", i, sr.QueueID, sr.QueueOffset)
		}
	}
}

// A delayed send is stored in the schedule topic, and its answer names the
// real topic's queue (defect: it named the schedule queue) with the offset
// in the schedule queue (PROTOCOL.md 10.3).
func TestDelayedSendAnswersTheRealQueue(t *testing.T) {
	w, st := newWriter(t, true)
	topics := map[string]storage.TopicConfig{"t": {TopicName: "t", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}
	items := []*Item{
		{Topic: "t", QueueID: 2, Msgs: []protocol.Message{msg("lvl2", protocol.PropertyDelay, "2")}},
		{Topic: "t", QueueID: 3, Msgs: []protocol.Message{msg("abs", protocol.PropertyTimerDeliverMs, fmt.Sprint(t0.Add(time.Hour).UnixMilli()))}},
		{Topic: "t", QueueID: 1, Msgs: []protocol.Message{msg("past", protocol.PropertyTimerDeliverMs, fmt.Sprint(t0.Add(-time.Hour).UnixMilli()))}},
	}
	res := w.Write(t0, topics, items)
	wantStored := []storage.QueueKey{{Topic: storage.ScheduleTopic, QueueID: 1}, {Topic: storage.ScheduleTopic, QueueID: 2}, {Topic: "t", QueueID: 1}}
	for i, o := range res.Outcomes {
		sr := o.Fields.(*protocol.SendResponse)
		if sr.QueueID != items[i].QueueID || sr.QueueOffset != 0 {
			t.Errorf("item %d answered queue %d offset %d, want the real queue %d", i, sr.QueueID, sr.QueueOffset, items[i].QueueID)
		}
		_, off, err := protocol.ParseOffsetMsgID(sr.MsgID)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := st.CommitLog().ReadRecord(off, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := (storage.QueueKey{Topic: string(rec.Topic), QueueID: rec.QueueID}); got != wantStored[i] {
			t.Errorf("item %d stored in %v, want %v", i, got, wantStored[i])
		}
	}
}

// A batch is all or nothing: one bad message refuses the whole item, and
// the other items of the write are stored.
func TestBatchAllOrNothing(t *testing.T) {
	w, st := newWriter(t, true)
	good := &Item{Topic: "t", QueueID: 0, Batch: true, Msgs: []protocol.Message{msg("1"), msg("2")}}
	bad := &Item{Topic: "t", QueueID: 0, Batch: true, Msgs: []protocol.Message{msg("3"), msg("4", protocol.PropertyDelay, "x")}}
	res := w.Write(t0, map[string]storage.TopicConfig{}, []*Item{good, bad})
	if !res.Outcomes[0].Stored || res.Outcomes[1].Stored || res.Stored != 2 {
		t.Fatalf("outcomes %+v stored %d", res.Outcomes, res.Stored)
	}
	br := res.Outcomes[0].Fields.(*protocol.SendBatchResponse)
	if len(br.MsgIDs) != 2 || br.QueueOffset != 0 || st.CommitLog().QueueOffset(storage.QueueKey{Topic: "t", QueueID: 0}) != 2 {
		t.Fatalf("batch answer %+v", br)
	}
	first, err := st.CommitLog().ReadRecord(0, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	if want := []string{protocol.OffsetMsgID(host, 0), protocol.OffsetMsgID(host, int64(first.TotalSize))}; !slices.Equal(br.MsgIDs, want) {
		t.Fatalf("batch ids %v, want %v", br.MsgIDs, want)
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

// Items refused between stored ones (the arena rolled back mid-item) do
// not shift the others' messages, every answer has fields of its own, and
// they stay as they were after the next write (the gate holds them until
// a flush under SYNC_FLUSH).
func TestWriteMixedItemsKeepTheirAnswers(t *testing.T) {
	w, st := newWriter(t, false)
	topics := map[string]storage.TopicConfig{
		"rw": {TopicName: "rw", ReadQueueNums: 2, WriteQueueNums: 2, Perm: storage.PermRead | storage.PermWrite},
	}
	items := []*Item{
		{Topic: "rw", QueueID: 0, Msgs: []protocol.Message{msg("first")}},
		{Topic: "rw", QueueID: 0, Batch: true, Msgs: []protocol.Message{msg("x"), {Topic: "other", Body: []byte("y")}}},
		{Topic: "rw", QueueID: 1, Msgs: []protocol.Message{msg("second")}},
		{Topic: "rw", QueueID: 5, Msgs: []protocol.Message{msg("bad queue")}},
		{Topic: "rw", QueueID: 1, Msgs: []protocol.Message{msg("third")}},
	}
	res := w.Write(t0, topics, items)
	want := []protocol.Status{protocol.StatusOK, protocol.StatusMessageIllegal, protocol.StatusOK, protocol.StatusInvalidParameter, protocol.StatusOK}
	var answers []*protocol.SendResponse
	var copies []protocol.SendResponse
	for i, o := range res.Outcomes {
		if o.Status != want[i] {
			t.Fatalf("item %d: status %v (%s), want %v", i, o.Status, o.Remark, want[i])
		}
		if o.Stored {
			sr := o.Fields.(*protocol.SendResponse)
			answers, copies = append(answers, sr), append(copies, *sr)
		}
	}
	if res.Stored != 3 || answers[0] == answers[1] || answers[1] == answers[2] {
		t.Fatalf("stored %d, answers %p %p %p", res.Stored, answers[0], answers[1], answers[2])
	}
	if copies[1].QueueID != 1 || copies[1].QueueOffset != 0 || copies[2].QueueOffset != 1 {
		t.Fatalf("answers %+v", copies)
	}
	var bodies []string
	for off := int64(0); off < st.CommitLog().MaxOffset(); {
		rec, err := st.CommitLog().ReadRecord(off, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		if id := protocol.OffsetMsgID(netip.MustParseAddrPort("127.0.0.1:10911"), off); copies[len(bodies)].MsgID != id {
			t.Fatalf("answer %d: id %s, want %s", len(bodies), copies[len(bodies)].MsgID, id)
		}
		bodies = append(bodies, string(rec.Body))
		off += int64(rec.TotalSize)
	}
	if !slices.Equal(bodies, []string{"first", "second", "third"}) {
		t.Fatalf("log holds %q", bodies)
	}
	w.Write(t0, topics, []*Item{{Topic: "rw", QueueID: 0, Msgs: []protocol.Message{msg("later")}}})
	for i, sr := range answers {
		if *sr != copies[i] {
			t.Fatalf("answer %d changed by the next write: %+v, was %+v", i, *sr, copies[i])
		}
	}
}

// BenchmarkWrite16x1KiB: one write of 16 SENDs of 1 KiB, properties raw
// as they come off the wire. allocs/op is per write of 16.
func BenchmarkWrite16x1KiB(b *testing.B) {
	cfg := storage.DefaultConfig("/w")
	cfg.MappedFileSizeCommitLog = 8 << 20
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	st, _, err := storage.Open(vfs.NewMem(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	w := New(Config{StoreHost: cfg.StoreHost, DefaultTopicQueueNums: 4}, st)
	topics := map[string]storage.TopicConfig{
		"bench": {TopicName: "bench", ReadQueueNums: 4, WriteQueueNums: 4, Perm: storage.PermRead | storage.PermWrite},
	}
	raw := []byte("\x82\xa4TAGS\xa1t\xa8UNIQ_KEY\xd9\x200A0102032345DEADBEEF01020304ABCD")
	body := make([]byte, 1024)
	items := make([]Item, 16)
	ptrs := make([]*Item, 16)
	msgs := make([]protocol.Message, 16)
	b.ReportAllocs()
	b.SetBytes(16 * 1024)
	for b.Loop() {
		for i := range items {
			msgs[i] = protocol.Message{Body: body, RawProperties: raw}
			items[i] = Item{Topic: "bench", QueueID: -1, Msgs: msgs[i : i+1 : i+1]}
			ptrs[i] = &items[i]
		}
		if res := w.Write(t0, topics, ptrs); res.Stored != 16 {
			b.Fatalf("stored %d: %v", res.Stored, res.Outcomes[0].Remark)
		}
	}
}
