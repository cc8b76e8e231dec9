package storage

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/storage/cq"
	"github.com/wharfmq/wharf/storage/index"
	"github.com/wharfmq/wharf/storage/vfs"
)

// oldRequest is the dispatch request as it was built before the key
// hashes: the golden reference of what a dispatch must produce.
type oldRequest struct {
	Key            QueueKey
	QueueOffset    int64
	Entry          cq.Entry
	StoreTimestamp int64
	Keys, UniqKey  string
}

func oldDispatchRequest(off int64, r *Record) oldRequest {
	d := oldRequest{Key: QueueKey{string(r.Topic), r.QueueID}, QueueOffset: r.QueueOffset,
		Entry: cq.Entry{Offset: off, Size: r.TotalSize}, StoreTimestamp: r.StoreTimestamp}
	schedule := string(r.Topic) == ScheduleTopic
	EachProperty(r.Properties, func(k, v []byte) {
		switch string(k) {
		case PropDeliverMs:
			if schedule {
				d.Entry.TagsCode, _ = strconv.ParseInt(string(v), 10, 64)
			}
		case PropTags:
			if !schedule {
				d.Entry.TagsCode = TagsHashCode(string(v))
			}
		case PropKeys:
			d.Keys = string(v)
		case PropUniqKey:
			d.UniqKey = string(v)
		}
	})
	return d
}

// hashes are what the old applyIndex put: the hash of "topic#key" for
// the unique key, then each key.
func (o oldRequest) hashes() []int32 {
	var keys []string
	if o.UniqKey != "" {
		keys = append(keys, o.UniqKey)
	}
	keys = slices.AppendSeq(keys, strings.FieldsSeq(o.Keys))
	var hs []int32
	for _, k := range keys {
		h := index.JavaHashCode(index.KeyOf(o.Key.Topic, k))
		switch {
		case h == math.MinInt32:
			h = 0
		case h < 0:
			h = -h
		}
		hs = append(hs, h)
	}
	return hs
}

// sameRequest reports how d differs from the old request o, "" if not.
func sameRequest(d DispatchRequest, o oldRequest) string {
	if d.Key != o.Key || d.QueueOffset != o.QueueOffset || d.Entry != o.Entry || d.StoreTimestamp != o.StoreTimestamp ||
		!slices.Equal(d.KeyHashes, o.hashes()) {
		return fmt.Sprintf("%+v, want %+v (hashes %v)", d, o, o.hashes())
	}
	if len(d.KeyHashes) != cap(d.KeyHashes) {
		return fmt.Sprintf("key hashes %v with room to grow into another request's", d.KeyHashes)
	}
	return ""
}

// variedProps are the properties of the varied log's records: tags, ASCII
// and not, several keys separated by any white space, none, repeated
// properties (the last counts), an empty unique key, a delivery time.
var variedProps = [][]string{
	{PropKeys, "k1", PropUniqKey, "U1"},
	{PropKeys, "a b\tc  d\u00a0e", PropTags, "TagA", PropUniqKey, "U2"},
	{PropTags, "étiquette\U0001F600"},
	{},
	{PropKeys, "first", PropKeys, "second third", PropUniqKey, "", PropUniqKey, "U3"},
	{PropUniqKey, ""},
	{PropKeys, " \t "},
	{PropDeliverMs, "1700000009999", PropTags, "ignored in the schedule topic", PropKeys, "sk"},
	{PropDeliverMs, "not a number", "OTHER", "x"},
}

// variedLog is a store whose log holds the varied records of several
// topics, the schedule topic included, over segments small enough that
// many end in a blank filler.
func variedLog(t testing.TB) *Store {
	cfg := testConfig("/store")
	s, _ := mustOpen(t, vfs.NewMem(), cfg)
	rng := rand.New(rand.NewSource(17))
	topics := []string{"a", "bb", ScheduleTopic, "a"}
	for i := range 300 {
		props, err := EncodeProperties(variedProps[i%len(variedProps)]...)
		if err != nil {
			t.Fatal(err)
		}
		m := &Message{Topic: topics[i%len(topics)], QueueID: int32(i % 3), Body: make([]byte, rng.Intn(2000)), Properties: props,
			BornHost: netip.MustParseAddrPort("10.0.0.9:4242")}
		if i%7 == 0 {
			m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:4242")
		}
		if _, err := s.AppendBatch([]*Message{m}, 1_700_000_000_000+int64(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

type walked struct {
	offs []int64
	recs []DispatchRecord
	next int64
	err  string
}

func walkBoth(s *Store, from, to int64) (full, lean walked) {
	n, err := s.ForEachRecord(from, to, false, func(off int64, r *Record) error {
		full.offs, full.recs = append(full.offs, off), append(full.recs, r.DispatchRecord())
		return nil
	})
	full.next, full.err = n, fmt.Sprint(err)
	n, err = s.ForEachDispatch(from, to, func(off int64, r *DispatchRecord) error {
		lean.offs, lean.recs = append(lean.offs, off), append(lean.recs, *r)
		return nil
	})
	lean.next, lean.err = n, fmt.Sprint(err)
	return full, lean
}

func sameWalk(a, b walked) bool {
	return slices.Equal(a.offs, b.offs) && a.next == b.next && a.err == b.err &&
		slices.EqualFunc(a.recs, b.recs, func(x, y DispatchRecord) bool {
			return x.TotalSize == y.TotalSize && x.QueueID == y.QueueID && x.QueueOffset == y.QueueOffset &&
				x.PhysicalOffset == y.PhysicalOffset && x.StoreTimestamp == y.StoreTimestamp &&
				bytes.Equal(x.Topic, y.Topic) && bytes.Equal(x.Properties, y.Properties)
		})
}

// TestForEachDispatchLikeForEachRecord: the lean walk reads the same
// records as ForEachRecord without the CRC check and stops at the same
// offset with the same error: over the whole varied log, over ranges that
// end inside a record, and over the log with one record damaged in each of
// the fields the lean decoder checks.
func TestForEachDispatchLikeForEachRecord(t *testing.T) {
	s := variedLog(t)
	defer s.Close()
	min, max := s.cl.MinOffset(), s.cl.MaxOffset()
	full, lean := walkBoth(s, min, max)
	if !sameWalk(full, lean) || full.err != "<nil>" || len(full.offs) != 300 {
		t.Fatalf("whole log: %d records to %d (%s), lean %d to %d (%s)", len(full.offs), full.next, full.err, len(lean.offs), lean.next, lean.err)
	}
	for _, cut := range []int64{1, 7, 90, 300} { // the range ends inside the tenth record
		full, lean := walkBoth(s, min, full.offs[10]+cut)
		if !sameWalk(full, lean) || full.err == "<nil>" {
			t.Fatalf("range cut %d into a record: %s at %d, lean %s at %d", cut, full.err, full.next, lean.err, lean.next)
		}
	}
	const v = 43 // a record with IPv4 hosts (the offsets below assume them)
	victim := full.offs[v]
	seg := s.cl.findSegment(victim)
	rec := seg.data[victim-seg.start:][:full.recs[v].TotalSize]
	topicAt := len(rec) - 2 - (len(full.recs[v].Properties) + propCRCLen) - len(full.recs[v].Topic) - 1
	damages := []struct {
		name    string
		at      int
		b       []byte
		decodes bool // the record still decodes (differently)
	}{
		{"magic", 4, []byte{1, 2, 3, 4}, false},
		{"V2 magic", 4, []byte{0xDA, 0xA3, 0x20, 0xAB}, false},
		{"total size below the minimum", 0, []byte{0, 0, 0, 10}, false},
		{"total size past the segment", 0, []byte{0x7f, 0, 0, 0}, false},
		{"physical offset", 28, []byte{0, 0, 0, 0, 0, 0, 0, 1}, false},
		{"host flags", 36, []byte{0, 0, 0, 0x30}, false},
		{"body length", 48 + 8 + 8 + 8 + 12, []byte{0, 0, 0xff, 0xff}, false},
		{"topic length", topicAt, []byte{0xff}, false},
		{"properties length", len(rec) - len(full.recs[v].Properties) - propCRCLen - 2, []byte{0xff, 0xff}, false},
		{"record CRC property", len(rec) - 3, []byte{'x'}, true}, // no longer stripped from the properties
	}
	for _, dm := range damages {
		t.Run(dm.name, func(t *testing.T) {
			saved := slices.Clone(rec)
			defer copy(rec, saved)
			copy(rec[dm.at:], dm.b)
			full, lean := walkBoth(s, min, max)
			t.Logf("%d records to %d: %s", len(full.offs), full.next, full.err)
			if !sameWalk(full, lean) || (full.err == "<nil>") != dm.decodes {
				t.Fatalf("%d records to %d (%s), lean %d to %d (%s)", len(full.offs), full.next, full.err, len(lean.offs), lean.next, lean.err)
			}
		})
	}
}

// TestDispatchRequestLikeBefore: over the varied log, every request is the
// one the old builder made, the key hashes standing for its key strings.
func TestDispatchRequestLikeBefore(t *testing.T) {
	s := variedLog(t)
	defer s.Close()
	var old []oldRequest
	if _, err := s.ForEachRecord(s.cl.MinOffset(), s.cl.MaxOffset(), true, func(off int64, r *Record) error {
		old = append(old, oldDispatchRequest(off, r))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var hashes []int32 // one arena for the whole walk: requests must not share room
	var got []DispatchRequest
	topic := ""
	if _, err := s.ForEachDispatch(s.cl.MinOffset(), s.cl.MaxOffset(), func(off int64, r *DispatchRecord) error {
		d := NewDispatchRequest(off, r, topic, &hashes)
		topic = d.Key.Topic
		got = append(got, d)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(old) || len(got) != 300 {
		t.Fatalf("%d requests, %d before", len(got), len(old))
	}
	keyed := 0
	for i := range got {
		if diff := sameRequest(got[i], old[i]); diff != "" {
			t.Fatalf("record %d: %s", i, diff)
		}
		keyed += min(len(got[i].KeyHashes), 1)
	}
	if keyed == 0 || keyed == len(got) {
		t.Fatalf("%d of %d records with keys: the log is not varied", keyed, len(got))
	}
}

// FuzzDispatchRequest: for any properties, of any topic, the request is the
// old builder's.
func FuzzDispatchRequest(f *testing.F) {
	for _, kv := range variedProps {
		p, _ := EncodeProperties(kv...)
		f.Add(false, p)
		f.Add(true, p)
	}
	f.Add(false, []byte("KEYS\x01a\x02KEYS"))
	f.Fuzz(func(t *testing.T, schedule bool, props []byte) {
		r := Record{Topic: []byte("topic"), QueueID: 3, QueueOffset: 9, TotalSize: 500, StoreTimestamp: 77, Properties: props}
		if schedule {
			r.Topic = []byte(ScheduleTopic)
		}
		dr := r.DispatchRecord()
		hashes := []int32{-5} // what an arena holds before must stay
		d := NewDispatchRequest(1000, &dr, "", &hashes)
		if diff := sameRequest(d, oldDispatchRequest(1000, &r)); diff != "" || hashes[0] != -5 {
			t.Fatalf("%q: %s (arena %v)", props, diff, hashes)
		}
	})
}

// FuzzDecodeDispatch: on arbitrary bytes the lean decoder never panics nor
// reads outside its input, refuses exactly what DecodeRecord(b, false)
// refuses, and reads the same fields.
func FuzzDecodeDispatch(f *testing.F) {
	for i, kv := range variedProps {
		props, _ := EncodeProperties(kv...)
		m := &Message{Topic: "T", Body: []byte("seed"), Properties: props}
		if i%2 == 1 {
			m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:4242")
		}
		n, _ := RecordSize(m, netip.AddrPort{})
		b := make([]byte, n)
		EncodeRecord(b, m, 1, 2, 3, netip.AddrPort{})
		f.Add(b)
		f.Add(b[:n-5])
	}
	f.Add([]byte{0, 0, 0, 8, 0xCB, 0xD4, 0x31, 0x94})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xDA, 0xA3, 0x20, 0xA7})
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:len(data):len(data)]
		lean, ok := decodeDispatch(data)
		full, err := DecodeRecord(data, false)
		if ok != (err == nil) {
			t.Fatalf("lean decoder ok %v, DecodeRecord %v", ok, err)
		}
		if !ok {
			return
		}
		if want := full.DispatchRecord(); !sameWalk(walked{recs: []DispatchRecord{lean}}, walked{recs: []DispatchRecord{want}}) {
			t.Fatalf("lean %+v, DecodeRecord %+v", lean, want)
		}
	})
}

// TestNewDispatchRequestAllocs: with the record's topic passed and an
// arena with room, building a request allocates nothing.
func TestNewDispatchRequestAllocs(t *testing.T) {
	props, _ := EncodeProperties(PropKeys, "order-1 order-2", PropTags, "TagA", PropUniqKey, "7F00000100002A9F0000000000000001")
	r := DispatchRecord{Topic: []byte("bench"), TotalSize: 1200, Properties: props}
	hashes := make([]int32, 0, 8)
	if n := testing.AllocsPerRun(100, func() {
		hashes = hashes[:0]
		if d := NewDispatchRequest(0, &r, "bench", &hashes); len(d.KeyHashes) != 3 {
			t.Fatalf("%d key hashes", len(d.KeyHashes))
		}
	}); n != 0 {
		t.Fatalf("%.1f allocations per request", n)
	}
}

// TestApplyConsumeQueueBatch: a queue owner's batch lands in its queue in
// order, idempotently, and an entry of another queue stops it there.
func TestApplyConsumeQueueBatch(t *testing.T) {
	s := variedLog(t)
	defer s.Close()
	k := QueueKey{"bb", 1}
	var reqs []*DispatchRequest
	var hashes []int32
	if _, err := s.ForEachDispatch(s.cl.MinOffset(), s.cl.MaxOffset(), func(off int64, r *DispatchRecord) error {
		if d := NewDispatchRequest(off, r, "", &hashes); d.Key == k {
			reqs = append(reqs, &d)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time, every entry is there already
		if err := s.ApplyConsumeQueueBatch(k, reqs); err != nil {
			t.Fatal(err)
		}
	}
	q, _ := s.ConsumeQueue(k, false)
	for i, d := range reqs {
		if e, err := q.Get(d.QueueOffset); err != nil || e != d.Entry || d.QueueOffset != int64(i) {
			t.Fatalf("entry %d: %v %v, want %v", i, e, err, d.Entry)
		}
	}
	other := *reqs[0]
	other.Key = QueueKey{"a", 1}
	if err := s.ApplyConsumeQueueBatch(k, []*DispatchRequest{&other}); err == nil {
		t.Fatal("an entry of another queue was applied")
	}
}
