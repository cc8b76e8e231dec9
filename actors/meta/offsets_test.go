package meta

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

func commit(group, topic string, q int32, off int64) *protocol.UpdateConsumerOffsetRequest {
	return &protocol.UpdateConsumerOffsetRequest{ConsumerGroup: group, Topic: topic, QueueID: q, CommitOffset: off}
}

// offsetsStep is one shell pass: Ready, run the write with writeErr, take
// what it released.
type offsetsStep struct {
	saves   []*storage.ConsumerOffsetTable
	arm     time.Duration
	replies []Reply
}

func drainOffsets(t *testing.T, o *Offsets, writeErr error) offsetsStep {
	t.Helper()
	var s offsetsStep
	for i := 0; ; i++ {
		if i > 10 {
			t.Fatal("Ready never settles")
		}
		rd := o.Ready()
		s.replies = append(s.replies, rd.Replies...)
		if rd.ArmSoon > 0 {
			s.arm = rd.ArmSoon
		}
		if rd.Save == nil {
			return s
		}
		s.saves = append(s.saves, rd.Save)
		o.Persisted(writeErr)
	}
}

func statuses(rs []Reply) map[any]protocol.Status {
	m := map[any]protocol.Status{}
	for _, r := range rs {
		m[r.To] = r.Status
	}
	return m
}

// TestOffsetsCommit drives commits through the timers: which are answered
// when, which writes happen, and what a failed write does.
func TestOffsetsCommit(t *testing.T) {
	type input struct {
		commit   *protocol.UpdateConsumerOffsetRequest
		tok      string
		oneway   bool
		fire     string // "soon", "tick", "stop" instead of a commit
		writeErr error
	}
	type want struct {
		replies map[any]protocol.Status
		saves   int
		arm     bool
	}
	ok, sysErr := protocol.StatusOK, protocol.StatusSystemError
	cases := []struct {
		name  string
		ackBP bool
		steps []input
		wants []want
	}{
		{name: "acknowledged: answered after the group-commit write",
			steps: []input{{commit: commit("g", "t", 0, 5), tok: "a"}, {fire: "soon"}},
			wants: []want{{arm: true}, {replies: map[any]protocol.Status{"a": ok}, saves: 1}}},
		{name: "two acknowledged share one write and one timer",
			steps: []input{{commit: commit("g", "t", 0, 5), tok: "a"}, {commit: commit("g", "t", 1, 6), tok: "b"}, {fire: "soon"}},
			wants: []want{{arm: true}, {}, {replies: map[any]protocol.Status{"a": ok, "b": ok}, saves: 1}}},
		{name: "oneway: answered at once, written on the interval",
			steps: []input{{commit: commit("g", "t", 0, 5), tok: "a", oneway: true}, {fire: "tick"}, {fire: "tick"}},
			wants: []want{{replies: map[any]protocol.Status{"a": ok}}, {saves: 1}, {}}},
		{name: "the interval write answers waiting commits too",
			steps: []input{{commit: commit("g", "t", 0, 5), tok: "a"}, {fire: "tick"}, {fire: "soon"}},
			wants: []want{{arm: true}, {replies: map[any]protocol.Status{"a": ok}, saves: 1}, {}}},
		{name: "write fails: SYSTEM_ERROR, written again next time",
			steps: []input{{commit: commit("g", "t", 0, 5), tok: "a"}, {fire: "soon", writeErr: errDisk}, {fire: "tick"}},
			wants: []want{{arm: true}, {replies: map[any]protocol.Status{"a": sysErr}, saves: 1}, {saves: 1}}},
		{name: "stop writes and answers",
			steps: []input{{commit: commit("g", "t", 0, 5), tok: "a"}, {fire: "stop"}},
			wants: []want{{arm: true}, {replies: map[any]protocol.Status{"a": ok}, saves: 1}}},
		{name: "nothing changed: no write",
			steps: []input{{fire: "tick"}, {fire: "stop"}},
			wants: []want{{}, {}}},
		{name: "no group: INVALID_PARAMETER, nothing written",
			steps: []input{{commit: commit("", "t", 0, 5), tok: "a"}, {fire: "tick"}},
			wants: []want{{replies: map[any]protocol.Status{"a": protocol.StatusInvalidParameter}}, {}}},
		{name: "negative offset: INVALID_PARAMETER",
			steps: []input{{commit: commit("g", "t", 0, -1), tok: "a"}},
			wants: []want{{replies: map[any]protocol.Status{"a": protocol.StatusInvalidParameter}}}},
		{name: "planted bug: acknowledged before the write",
			ackBP: true,
			steps: []input{{commit: commit("g", "t", 0, 5), tok: "a"}, {fire: "tick"}},
			wants: []want{{replies: map[any]protocol.Status{"a": ok}}, {saves: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := NewOffsets(OffsetsConfig{AckBeforePersist: c.ackBP})
			o.Load(storage.ConsumerOffsetTable{})
			for i, in := range c.steps {
				switch in.fire {
				case "soon":
					o.SoonFired()
				case "tick":
					o.Tick()
				case "stop":
					o.Stop()
				default:
					o.Handle(in.tok, in.commit, in.oneway)
				}
				s := drainOffsets(t, o, in.writeErr)
				w := c.wants[i]
				if w.replies == nil {
					w.replies = map[any]protocol.Status{}
				}
				if got := statuses(s.replies); !maps.Equal(got, w.replies) {
					t.Fatalf("step %d: replies %v, want %v", i, got, w.replies)
				}
				if len(s.saves) != w.saves || (s.arm > 0) != w.arm {
					t.Fatalf("step %d: %d writes, armed %v; want %d, %v", i, len(s.saves), s.arm, w.saves, w.arm)
				}
			}
		})
	}
}

func TestOffsetsWriteHoldsCommit(t *testing.T) {
	o := NewOffsets(OffsetsConfig{})
	o.Handle("a", commit("g", "t", 3, 42), false)
	o.SoonFired()
	rd := o.Ready()
	if rd.Save == nil || rd.Save.Offsets["t@g"][3] != 42 || len(rd.Replies) != 0 {
		t.Fatalf("write %+v, replies %+v", rd.Save, rd.Replies)
	}
	// A commit while the write is out waits for a write of its own, and
	// does not change the table handed out.
	o.Handle("b", commit("g", "t", 3, 50), false)
	o.SoonFired()
	if rd := o.Ready(); rd.Save != nil || len(rd.Replies) != 0 || rd.ArmSoon != 0 {
		t.Fatalf("second write while the first is out: %+v", rd)
	}
	if rd.Save.Offsets["t@g"][3] != 42 {
		t.Fatal("the table handed out changed")
	}
	o.Persisted(nil)
	rd = o.Ready()
	if st := statuses(rd.Replies); !maps.Equal(st, map[any]protocol.Status{"a": protocol.StatusOK}) || rd.ArmSoon == 0 {
		t.Fatalf("after the first write: replies %v, arm %v", st, rd.ArmSoon)
	}
	o.SoonFired()
	rd = o.Ready()
	if rd.Save == nil || rd.Save.Offsets["t@g"][3] != 50 {
		t.Fatalf("second write %+v", rd.Save)
	}
	o.Persisted(nil)
	if st := statuses(o.Ready().Replies); st["b"] != protocol.StatusOK {
		t.Fatalf("second commit: %v", st)
	}
}

func TestOffsetsQuery(t *testing.T) {
	o := NewOffsets(OffsetsConfig{})
	o.Load(storage.ConsumerOffsetTable{Offsets: map[string]map[int32]int64{"t@g": {0: 7, 2: 0}}})
	cases := []struct {
		group, topic string
		q            int32
		want         protocol.Status
		off          int64
	}{
		{"g", "t", 0, protocol.StatusOK, 7},
		{"g", "t", 2, protocol.StatusOK, 0},
		{"g", "t", 1, protocol.StatusQueryNotFound, 0},
		{"h", "t", 0, protocol.StatusQueryNotFound, 0},
		{"g", "u", 0, protocol.StatusQueryNotFound, 0},
	}
	for _, c := range cases {
		o.Handle(nil, &protocol.QueryConsumerOffsetRequest{ConsumerGroup: c.group, Topic: c.topic, QueueID: c.q}, false)
		r := drainOffsets(t, o, nil).replies
		if len(r) != 1 || r[0].Status != c.want {
			t.Fatalf("%+v: replies %+v", c, r)
		}
		if c.want == protocol.StatusOK && r[0].Fields.(*protocol.OffsetResponse).Offset != c.off {
			t.Fatalf("%+v: offset %+v", c, r[0].Fields)
		}
	}
}

func TestOffsetsGetConsumerOffsets(t *testing.T) {
	bounds := func(k storage.QueueKey) (int64, int64) { return int64(k.QueueID), int64(100 + k.QueueID) }
	o := NewOffsets(OffsetsConfig{Bounds: bounds})
	o.Load(storage.ConsumerOffsetTable{Offsets: map[string]map[int32]int64{
		"b@g": {1: 5, 0: 4}, "a@g": {3: 9}, "a@h": {0: 1}, "x@y@g": {0: 2},
	}})
	cases := []struct {
		topic string
		want  []protocol.ConsumerQueueOffset
	}{
		{"", []protocol.ConsumerQueueOffset{
			{Topic: "a", QueueID: 3, ConsumerOffset: 9, MinOffset: 3, MaxOffset: 103},
			{Topic: "b", QueueID: 0, ConsumerOffset: 4, MinOffset: 0, MaxOffset: 100},
			{Topic: "b", QueueID: 1, ConsumerOffset: 5, MinOffset: 1, MaxOffset: 101},
		}},
		{"b", []protocol.ConsumerQueueOffset{
			{Topic: "b", QueueID: 0, ConsumerOffset: 4, MinOffset: 0, MaxOffset: 100},
			{Topic: "b", QueueID: 1, ConsumerOffset: 5, MinOffset: 1, MaxOffset: 101},
		}},
		{"none", nil},
	}
	for _, c := range cases {
		o.Handle(nil, &protocol.GetConsumerOffsetsRequest{ConsumerGroup: "g", Topic: c.topic}, false)
		r := drainOffsets(t, o, nil).replies
		got := r[0].Fields.(*protocol.ConsumerOffsetsResponse).Offsets
		if r[0].Status != protocol.StatusOK || !slices.Equal(got, c.want) {
			t.Fatalf("topic %q: %v %+v, want %+v", c.topic, r[0].Status, got, c.want)
		}
	}
}

func TestOffsetsImportMergesByMaximum(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		want  map[string]map[int32]int64
		dirty bool
		err   bool
	}{
		{name: "higher wins", in: `{"t@g":{"0":9}}`, want: map[string]map[int32]int64{"t@g": {0: 9, 1: 3}}, dirty: true},
		{name: "lower loses", in: `{"t@g":{"0":1,"1":2}}`, want: map[string]map[int32]int64{"t@g": {0: 5, 1: 3}}},
		{name: "new queue and group", in: `{"t@g":{"2":4},"u@h":{"0":1}}`,
			want: map[string]map[int32]int64{"t@g": {0: 5, 1: 3, 2: 4}, "u@h": {0: 1}}, dirty: true},
		{name: "empty", in: `{}`, want: map[string]map[int32]int64{"t@g": {0: 5, 1: 3}}},
		{name: "garbage", in: `[`, want: map[string]map[int32]int64{"t@g": {0: 5, 1: 3}}, err: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := NewOffsets(OffsetsConfig{})
			o.Load(storage.ConsumerOffsetTable{Offsets: map[string]map[int32]int64{"t@g": {0: 5, 1: 3}}})
			if err := o.Import([]byte(c.in)); (err != nil) != c.err {
				t.Fatalf("err %v", err)
			}
			if rd := o.Ready(); rd.Save != nil || rd.ArmSoon != 0 {
				t.Fatal("an import was written at once")
			}
			o.Tick()
			rd := o.Ready()
			if (rd.Save != nil) != c.dirty {
				t.Fatalf("written %v, want %v", rd.Save != nil, c.dirty)
			}
			data, err := o.Export()
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]map[int32]int64
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if !maps.EqualFunc(got, c.want, maps.Equal) {
				t.Fatalf("exported %v, want %v", got, c.want)
			}
		})
	}
}

func TestOffsetsExportRoundTrip(t *testing.T) {
	a := NewOffsets(OffsetsConfig{})
	a.Handle(nil, commit("g", "t", 0, 5), true)
	a.Handle(nil, commit("g", "u", 7, 1<<40), true)
	data, err := a.Export()
	if err != nil {
		t.Fatal(err)
	}
	b := NewOffsets(OffsetsConfig{})
	if err := b.Import(data); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		topic string
		qid   int32
		off   int64
	}{{"t", 0, 5}, {"u", 7, 1 << 40}} {
		if off, ok := b.Committed(q.topic, "g", q.qid); !ok || off != q.off {
			t.Fatalf("%s/%d: %d %v", q.topic, q.qid, off, ok)
		}
	}
	if _, ok := b.Committed("t", "g", 1); ok {
		t.Fatal("a queue never committed has an offset")
	}
}

// TestOffsetsDropTopic: a deleted topic's offsets are forgotten for every
// group and written at once; an import from the peer broker does not bring
// them back until the topic is committed here again.
func TestOffsetsDropTopic(t *testing.T) {
	o := NewOffsets(OffsetsConfig{})
	o.Load(storage.ConsumerOffsetTable{Offsets: map[string]map[int32]int64{
		"t@g1": {0: 5}, "t@g2": {1: 7}, "u@g1": {0: 3}}})
	o.DropTopic("t")
	s := drainOffsets(t, o, nil)
	if len(s.saves) != 1 || !maps.Equal(s.saves[0].Offsets["u@g1"], map[int32]int64{0: 3}) || len(s.saves[0].Offsets) != 1 {
		t.Fatalf("writes after the drop: %+v", s.saves)
	}
	if _, ok := o.Committed("t", "g1", 0); ok {
		t.Fatal("a dropped offset is still committed")
	}
	peer, _ := json.Marshal(map[string]map[int32]int64{"t@g1": {0: 5}, "u@g1": {0: 4}})
	if err := o.Import(peer); err != nil {
		t.Fatal(err)
	}
	if _, ok := o.Committed("t", "g1", 0); ok {
		t.Fatal("an import brought a dropped topic's offset back")
	}
	if off, _ := o.Committed("u", "g1", 0); off != 4 {
		t.Fatalf("the import of another topic: %d, want 4", off)
	}
	o.Handle("c", commit("g1", "t", 0, 1), false)
	if err := o.Import(peer); err != nil {
		t.Fatal(err)
	}
	if off, _ := o.Committed("t", "g1", 0); off != 5 {
		t.Fatalf("after a commit of the re-created topic, imports merge again: %d, want 5", off)
	}
}
