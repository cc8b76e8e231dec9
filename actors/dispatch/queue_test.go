package dispatch

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

var host = netip.MustParseAddrPort("127.0.0.1:10911")

// record encodes a stored message with tags.
func record(t testing.TB, tags string, body string) []byte {
	t.Helper()
	props, err := storage.EncodeProperties(storage.PropTags, tags)
	if err != nil {
		t.Fatal(err)
	}
	m := &storage.Message{Topic: "t", Body: []byte(body), Properties: props, BornTimestamp: 1, BornHost: host}
	n, err := storage.RecordSize(m, host)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	storage.EncodeRecord(b, m, 0, 0, 1, host)
	return b
}

type fakeMsg struct {
	raw  []byte
	code int64 // tags hash code of its ConsumeQueue entry
	phy  int64
}

// fakeSource is a queue holding msgs at queue offsets min, min+1, ... with
// the store's statuses.
type fakeSource struct {
	min    int64
	msgs   []fakeMsg
	maxPhy int64
	err    error
	lims   []storage.GetLimits // every read's limits
}

func (f *fakeSource) add(t testing.TB, tags string) {
	f.msgs = append(f.msgs, fakeMsg{raw: record(t, tags, "m"), code: storage.TagsHashCode(tags)})
}

func (f *fakeSource) ConsumeQueueBounds(storage.QueueKey) (int64, int64) {
	return f.min, f.min + int64(len(f.msgs))
}

func (f *fakeSource) GetMessages(_ storage.QueueKey, from int64, lim storage.GetLimits, filter func(int64) bool) (storage.GetResult, error) {
	f.lims = append(f.lims, lim)
	min, max := f.ConsumeQueueBounds(storage.QueueKey{})
	res := storage.GetResult{MinOffset: min, MaxOffset: max, NextBeginOffset: from, MaxPhyOffset: f.maxPhy}
	switch {
	case f.err != nil:
		return res, f.err
	case max == 0:
		res.Status = storage.GetNoMessageInQueue
		return res, nil
	case from < min:
		res.Status, res.NextBeginOffset = storage.GetOffsetTooSmall, min
		return res, nil
	case from == max:
		res.Status = storage.GetOffsetOverflowOne
		return res, nil
	case from > max:
		res.Status, res.NextBeginOffset = storage.GetOffsetOverflowBadly, max
		return res, nil
	}
	for qo := from; qo < max && len(res.Records) < lim.Msgs; qo++ {
		m := f.msgs[qo-min]
		res.NextBeginOffset, res.LastPhyOffset = qo+1, m.phy
		if filter == nil || filter(m.code) {
			res.Records = append(res.Records, m.raw)
		}
	}
	res.Status = storage.GetNoMatchedMessage
	if len(res.Records) > 0 {
		res.Status = storage.GetFound
	}
	return res, nil
}

type waiter struct {
	name string
	gone bool
}

func (w *waiter) Gone() bool { return w.gone }

var testCfg = QueueConfig{MaxMsgs: 32, MaxBytes: 1 << 20, LongPolling: true, ShortPolling: time.Second, MaxSuspend: 30 * time.Second}

var t0 = time.Unix(1_700_000_000, 0)

func TestQueuePullAnsweredAtOnce(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, f *fakeSource, c *QueueConfig)
		req      protocol.PullRequest
		want     protocol.Status
		wantRecs int
		wantNext int64
	}{
		{"found", nil, protocol.PullRequest{QueueOffset: 1, MaxMsgNums: 2, SuspendTimeoutMillis: 1000}, protocol.StatusOK, 2, 3},
		{"maxMsgNums 0 takes the cap", func(t *testing.T, f *fakeSource, c *QueueConfig) { c.MaxMsgs = 3 },
			protocol.PullRequest{}, protocol.StatusOK, 3, 3},
		{"maxMsgNums above the cap", func(t *testing.T, f *fakeSource, c *QueueConfig) { c.MaxMsgs = 2 },
			protocol.PullRequest{MaxMsgNums: 100}, protocol.StatusOK, 2, 2},
		{"tag filter", nil, protocol.PullRequest{Subscription: "b", MaxMsgNums: 10}, protocol.StatusOK, 1, 4},
		{"no tag matches", nil, protocol.PullRequest{Subscription: "zz", MaxMsgNums: 10, SuspendTimeoutMillis: 1000}, protocol.StatusPullRetryImmediately, 0, 4},
		{"hash collision never reaches the consumer", func(t *testing.T, f *fakeSource, c *QueueConfig) {
			f.msgs = append(f.msgs, fakeMsg{raw: record(t, "other", "m"), code: storage.TagsHashCode("a")})
		}, protocol.PullRequest{QueueOffset: 4, Subscription: "a", MaxMsgNums: 10}, protocol.StatusPullRetryImmediately, 0, 5},
		{"offset too small", func(t *testing.T, f *fakeSource, c *QueueConfig) { f.min = 2; f.msgs = f.msgs[2:] },
			protocol.PullRequest{QueueOffset: 1, SuspendTimeoutMillis: 1000}, protocol.StatusPullOffsetMoved, 0, 2},
		{"offset too large", nil, protocol.PullRequest{QueueOffset: 9, SuspendTimeoutMillis: 1000}, protocol.StatusPullOffsetMoved, 0, 4},
		{"nothing new, no suspend", nil, protocol.PullRequest{QueueOffset: 4}, protocol.StatusPullNotFound, 0, 4},
		{"empty queue, no suspend", func(t *testing.T, f *fakeSource, c *QueueConfig) { f.msgs = nil },
			protocol.PullRequest{}, protocol.StatusPullNotFound, 0, 0},
		{"bad subscription", nil, protocol.PullRequest{Subscription: "a || ", SuspendTimeoutMillis: 1000}, protocol.StatusSubscriptionParseFailed, 0, -1},
		{"store error", func(t *testing.T, f *fakeSource, c *QueueConfig) { f.err = errors.New("boom") },
			protocol.PullRequest{SuspendTimeoutMillis: 1000}, protocol.StatusSystemError, 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSource{}
			for _, tags := range []string{"a", "a", "b", "a"} {
				f.add(t, tags)
			}
			cfg := testCfg
			if tt.setup != nil {
				tt.setup(t, f, &cfg)
			}
			q := NewQueue(storage.QueueKey{Topic: "t"}, cfg, f)
			w := &waiter{}
			rd := q.Pull(t0, w, &tt.req)
			if len(rd.Answers) != 1 || len(rd.Parked) != 0 || len(rd.Dropped) != 0 || !rd.Arm.IsZero() || q.Held() != 0 {
				t.Fatalf("not answered at once: %+v", rd)
			}
			a := rd.Answers[0]
			if a.To != w || a.Unpark || a.Status != tt.want || len(a.Records) != tt.wantRecs {
				t.Fatalf("answer %v (%s) with %d records, unpark %v; want %v with %d", a.Status, a.Remark, len(a.Records), a.Unpark, tt.want, tt.wantRecs)
			}
			if tt.wantNext < 0 {
				if a.Pull != nil {
					t.Fatalf("error answer with pull fields %+v", a.Pull)
				}
				return
			}
			if a.Pull == nil || a.Pull.NextBeginOffset != tt.wantNext {
				t.Fatalf("fields %+v, want next %d", a.Pull, tt.wantNext)
			}
		})
	}
}

// TestQueueLimits: the client's maxMsgBytes is a payload cap; the broker's
// MaxBytes caps the records.
func TestQueueLimits(t *testing.T) {
	f := &fakeSource{}
	f.add(t, "a")
	q := NewQueue(storage.QueueKey{Topic: "t"}, QueueConfig{MaxMsgs: 16, MaxBytes: 1000}, f)
	q.Pull(t0, &waiter{}, &protocol.PullRequest{MaxMsgNums: 4, MaxMsgBytes: 300})
	q.Pull(t0, &waiter{}, &protocol.PullRequest{MaxMsgNums: 40})
	want := []storage.GetLimits{{Msgs: 4, BodyBytes: 300, RecordBytes: 1000}, {Msgs: 16, RecordBytes: 1000}}
	if len(f.lims) != 2 || f.lims[0] != want[0] || f.lims[1] != want[1] {
		t.Fatalf("limits %+v, want %+v", f.lims, want)
	}
}

func TestQueueSuggestsSlave(t *testing.T) {
	for _, tt := range []struct {
		beyond, maxPhy, lastPhy int64
		want                    int64
	}{
		{0, 1 << 30, 10, 0},            // off
		{1000, 5000, 4500, 0},          // near the head
		{1000, 5000, 3999, 1},          // far behind
		{1000, 5000, 0, 0},             // nothing read
		{1000, 5000, 4000, 0},          // exactly at the limit
		{1, 1 << 40, 1<<40 - 2, 1},     // small limit
		{1 << 40, 1 << 41, 1 << 40, 0}, // large values
	} {
		f := &fakeSource{maxPhy: tt.maxPhy}
		f.add(t, "a")
		f.msgs[0].phy = tt.lastPhy
		cfg := testCfg
		cfg.SuggestSlaveBeyond = tt.beyond
		rd := NewQueue(storage.QueueKey{Topic: "t"}, cfg, f).Pull(t0, &waiter{}, &protocol.PullRequest{})
		if got := rd.Answers[0].Pull.SuggestWhichBrokerID; got != tt.want {
			t.Errorf("beyond %d, log end %d, read at %d: suggest %d, want %d", tt.beyond, tt.maxPhy, tt.lastPhy, got, tt.want)
		}
	}
}

func TestQueueSuspendCaps(t *testing.T) {
	for _, tt := range []struct {
		longPolling bool
		suspend     time.Duration
		want        time.Duration
	}{
		{true, 5 * time.Second, 5 * time.Second},
		{true, time.Minute, 30 * time.Second}, // MaxSuspend
		{false, 5 * time.Second, time.Second}, // ShortPolling
		{false, 200 * time.Millisecond, 200 * time.Millisecond},
	} {
		cfg := testCfg
		cfg.LongPolling = tt.longPolling
		q := NewQueue(storage.QueueKey{Topic: "t"}, cfg, &fakeSource{})
		rd := q.Pull(t0, &waiter{}, &protocol.PullRequest{SuspendTimeoutMillis: tt.suspend.Milliseconds()})
		if got := rd.Arm.Sub(t0); got != tt.want || len(rd.Parked) != 1 {
			t.Errorf("long polling %v, suspend %v: held %v (parked %d), want %v", tt.longPolling, tt.suspend, got, len(rd.Parked), tt.want)
		}
	}
}

// summary is a Ready in a form a test can compare: each answer as
// "name status", with "+unpark" when it counts a held pull out.
type summary struct {
	dropped, answers, parked []string
	arm                      time.Duration // after t0; -1: none
}

func summarize(rd Ready) summary {
	s := summary{arm: -1}
	for _, w := range rd.Dropped {
		s.dropped = append(s.dropped, w.(*waiter).name)
	}
	for _, a := range rd.Answers {
		x := a.To.(*waiter).name + " " + a.Status.String()
		if a.Unpark {
			x += "+unpark"
		}
		s.answers = append(s.answers, x)
	}
	for _, w := range rd.Parked {
		s.parked = append(s.parked, w.(*waiter).name)
	}
	if !rd.Arm.IsZero() {
		s.arm = rd.Arm.Sub(t0)
	}
	return s
}

func (s summary) equal(o summary) bool {
	eq := func(a, b []string) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	return eq(s.dropped, o.dropped) && eq(s.answers, o.answers) && eq(s.parked, o.parked) && s.arm == o.arm
}

// TestQueueLongPoll runs a script of pulls, new entries, ticks and a stop
// against one queue and checks every step's Ready.
func TestQueueLongPoll(t *testing.T) {
	f := &fakeSource{}
	q := NewQueue(storage.QueueKey{Topic: "t"}, testCfg, f)
	ws := map[string]*waiter{}
	pull := func(name string, offset int64, suspend time.Duration, sub string) func(time.Time) Ready {
		return func(now time.Time) Ready {
			ws[name] = &waiter{name: name}
			return q.Pull(now, ws[name], &protocol.PullRequest{QueueOffset: offset, MaxMsgNums: 8, Subscription: sub, SuspendTimeoutMillis: suspend.Milliseconds()})
		}
	}
	arrive := func(tags string) func(time.Time) Ready {
		return func(now time.Time) Ready { f.add(t, tags); return q.Entries(now) }
	}
	ok, nf, retry := protocol.StatusOK.String(), protocol.StatusPullNotFound.String(), protocol.StatusPullRetryImmediately.String()
	steps := []struct {
		at   time.Duration
		what string
		do   func(time.Time) Ready
		want summary
		held int
	}{
		{0, "p1 waits 1s", pull("p1", 0, time.Second, ""), summary{parked: []string{"p1"}, arm: time.Second}, 1},
		{0, "p2 waits 500ms: an earlier tick", pull("p2", 0, 500*time.Millisecond, ""), summary{parked: []string{"p2"}, arm: 500 * time.Millisecond}, 2},
		{0, "p3 waits 2s: the armed tick comes first", pull("p3", 0, 2*time.Second, "b"), summary{parked: []string{"p3"}, arm: -1}, 3},
		{100 * time.Millisecond, "entries with no message change nothing", func(now time.Time) Ready { return q.Entries(now) }, summary{arm: -1}, 3},
		{500 * time.Millisecond, "tick: p2 expires, the tick for p1 is armed", q.Tick, summary{answers: []string{"p2 " + nf + "+unpark"}, arm: time.Second}, 2},
		{600 * time.Millisecond, "p1's peer goes away", func(time.Time) Ready { ws["p1"].gone = true; return Ready{} }, summary{arm: -1}, 2},
		{700 * time.Millisecond, "a message: p1 dropped, p3 does not match", arrive("a"), summary{dropped: []string{"p1"}, answers: []string{"p3 " + retry + "+unpark"}, arm: -1}, 0},
		{800 * time.Millisecond, "p4 finds it at once", pull("p4", 0, time.Second, ""), summary{answers: []string{"p4 " + ok}, arm: -1}, 0},
		{800 * time.Millisecond, "p5 waits past it", pull("p5", 1, time.Second, ""), summary{parked: []string{"p5"}, arm: -1}, 1},
		{time.Second, "the stale tick re-arms for p5", q.Tick, summary{arm: 1800 * time.Millisecond}, 1},
		{1200 * time.Millisecond, "p6 waits too", pull("p6", 1, time.Second, ""), summary{parked: []string{"p6"}, arm: -1}, 2},
		{1500 * time.Millisecond, "a message answers both, in order", arrive("b"), summary{answers: []string{"p5 " + ok + "+unpark", "p6 " + ok + "+unpark"}, arm: -1}, 0},
		{1600 * time.Millisecond, "p7 waits", pull("p7", 2, 5*time.Second, ""), summary{parked: []string{"p7"}, arm: -1}, 1},
		{1600 * time.Millisecond, "stop answers what is held", func(time.Time) Ready { return q.Stop() }, summary{answers: []string{"p7 " + nf + "+unpark"}, arm: -1}, 0},
	}
	for _, st := range steps {
		got := summarize(st.do(t0.Add(st.at)))
		if !got.equal(st.want) || q.Held() != st.held {
			t.Fatalf("at %v, %s: got %+v with %d held, want %+v with %d", st.at, st.what, got, q.Held(), st.want, st.held)
		}
	}
}
