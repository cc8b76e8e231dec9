package jepsen

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"
)

// q0 and q1 are two queues of group a, b0 a queue of group b.
var (
	q0 = Queue{Group: "a", Topic: "t", ID: 0}
	q1 = Queue{Group: "a", Topic: "t", ID: 1}
	b0 = Queue{Group: "b", Topic: "t", ID: 0}
)

func at(q Queue, off int64) Pos { return Pos{Queue: q, Offset: off} }

// step is one record of a hand-made history.
type step func(h *History)

func ack(key string, p Pos) step {
	return func(h *History) { h.Invoke("p", key); h.Complete("p", key, Acked, p, nil) }
}
func fail(key string) step {
	return func(h *History) {
		h.Invoke("p", key)
		h.Complete("p", key, Failed, Pos{}, errors.New("TOPIC_NOT_EXIST"))
	}
}
func unsure(key string) step {
	return func(h *History) {
		h.Invoke("p", key)
		h.Complete("p", key, Indeterminate, Pos{}, errors.New("timeout"))
	}
}
func invoke(key string) step { return func(h *History) { h.Invoke("p", key) } }
func read(reader, node string, p Pos, key string) step {
	return func(h *History) { h.Read(reader, node, p, key) }
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		steps   []step
		want    map[string]int // anomaly name -> count
		sum     Summary
		unacked int
	}{
		{name: "clean: acked keys read from master and slave at their positions",
			steps: []step{ack("k1", at(q0, 0)), ack("k2", at(q0, 1)), ack("k3", at(b0, 0)),
				read("m", "master", at(q0, 0), "k1"), read("m", "master", at(q0, 1), "k2"),
				read("s", "slave", at(q0, 0), "k1"), read("s", "slave", at(q0, 1), "k2"),
				read("m", "b-master", at(b0, 0), "k3")},
			sum: Summary{Sent: 3, Acked: 3, Read: 3, Reads: 5}},
		{name: "lost-write: an acked key never read",
			steps: []step{ack("k1", at(q0, 0)), ack("k2", at(q0, 1)), read("m", "master", at(q0, 0), "k1")},
			want:  map[string]int{LostWrite: 1},
			sum:   Summary{Sent: 2, Acked: 2, Read: 1, Reads: 1}},
		{name: "duplicate: one key at two positions",
			steps: []step{ack("k1", at(q0, 0)), read("m", "master", at(q0, 0), "k1"), read("m", "master", at(q1, 0), "k1")},
			want:  map[string]int{Duplicate: 1},
			sum:   Summary{Sent: 1, Acked: 1, Read: 1, Reads: 2}},
		{name: "duplicate across groups",
			steps: []step{unsure("k1"), read("a", "a-master", at(q0, 0), "k1"), read("b", "b-master", at(b0, 0), "k1")},
			want:  map[string]int{Duplicate: 1},
			sum:   Summary{Sent: 1, Indeterminate: 1, Read: 1, Reads: 2}, unacked: 1},
		{name: "inconsistent-offsets: master and slave disagree at one position",
			steps: []step{unsure("k1"), unsure("k2"), read("m", "master", at(q0, 0), "k1"), read("s", "slave", at(q0, 0), "k2")},
			want:  map[string]int{InconsistentOffsets: 1},
			sum:   Summary{Sent: 2, Indeterminate: 2, Read: 2, Reads: 2}, unacked: 2},
		{name: "inconsistent-offsets: the acknowledged position holds another key",
			steps: []step{ack("k1", at(q0, 0)), unsure("k2"), read("m", "master", at(q0, 0), "k2"), read("m", "master", at(q0, 1), "k1")},
			want:  map[string]int{InconsistentOffsets: 1},
			sum:   Summary{Sent: 2, Acked: 1, Indeterminate: 1, Read: 2, Reads: 2}, unacked: 1},
		{name: "inconsistent-offsets: an acked key read only elsewhere",
			steps: []step{ack("k1", at(q0, 3)), read("m", "master", at(q0, 0), "k1")},
			want:  map[string]int{InconsistentOffsets: 1},
			sum:   Summary{Sent: 1, Acked: 1, Read: 1, Reads: 1}},
		{name: "nonmonotonic: a reader's offsets go back in one queue",
			steps: []step{ack("k1", at(q0, 0)), ack("k2", at(q0, 1)),
				read("m", "master", at(q0, 1), "k2"), read("m", "master", at(q0, 0), "k1")},
			want: map[string]int{Nonmonotonic: 1},
			sum:  Summary{Sent: 2, Acked: 2, Read: 2, Reads: 2}},
		{name: "nonmonotonic: the same offset twice",
			steps: []step{ack("k1", at(q0, 0)), read("m", "master", at(q0, 0), "k1"), read("m", "master", at(q0, 0), "k1")},
			want:  map[string]int{Nonmonotonic: 1},
			sum:   Summary{Sent: 1, Acked: 1, Read: 1, Reads: 2}},
		{name: "monotonic per reader and queue: two readers, two queues interleaved",
			steps: []step{ack("k1", at(q0, 0)), ack("k2", at(q1, 0)), ack("k3", at(q0, 1)),
				read("m", "master", at(q0, 1), "k3"), read("m", "master", at(q1, 0), "k2"),
				read("s", "slave", at(q0, 0), "k1"), read("s", "slave", at(q0, 1), "k3")},
			want: map[string]int{},
			sum:  Summary{Sent: 3, Acked: 3, Read: 3, Reads: 4}},
		{name: "G1a: a refused send read",
			steps: []step{fail("k1"), read("m", "master", at(q0, 0), "k1")},
			want:  map[string]int{G1a: 1},
			sum:   Summary{Sent: 1, Failed: 1, Read: 1, Reads: 1}},
		{name: "unexpected: a key no one sent",
			steps: []step{read("m", "master", at(q0, 0), "ghost")},
			want:  map[string]int{Unexpected: 1},
			sum:   Summary{Read: 1, Reads: 1}},
		{name: "informational: indeterminate sends read or not, one never completed",
			steps: []step{unsure("k1"), unsure("k2"), invoke("k3"), read("m", "master", at(q0, 0), "k1"), read("m", "master", at(q0, 1), "k3")},
			sum:   Summary{Sent: 3, Indeterminate: 3, Read: 2, Reads: 2}, unacked: 2},
		{name: "a failed send not read, an indeterminate retry of a key acked",
			steps: []step{fail("k1"), unsure("k2"), ack("k2", at(q0, 0)), read("m", "master", at(q0, 0), "k2")},
			sum:   Summary{Sent: 2, Acked: 1, Failed: 1, Read: 1, Reads: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h History
			for _, s := range tc.steps {
				s(&h)
			}
			r := Check(h.Ops())
			got := map[string]int{}
			for _, a := range r.Anomalies {
				got[a.Name]++
			}
			if tc.want == nil {
				tc.want = map[string]int{}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("anomalies %v, want %v:\n%v", got, tc.want, r.Anomalies)
			}
			if r.Summary != tc.sum || r.UnackedRead != tc.unacked {
				t.Errorf("summary %+v unacked-read %d, want %+v %d", r.Summary, r.UnackedRead, tc.sum, tc.unacked)
			}
			if r.OK() != (len(tc.want) == 0) {
				t.Errorf("OK() = %v with anomalies %v", r.OK(), r.Anomalies)
			}
		})
	}
}

// TestCheckDetail: an anomaly names its key and position, and the summary
// line counts each kind.
func TestCheckDetail(t *testing.T) {
	var h History
	ack("k1", at(q0, 0))(&h)
	ack("k2", at(q0, 1))(&h)
	read("m", "master", at(q0, 1), "k1")(&h)
	r := Check(h.Ops())
	line := r.String()
	for _, want := range []string{"acked 2", "read 1 keys", "inconsistent-offsets 2", "lost-write 1"} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line %q lacks %q", line, want)
		}
	}
	if r.Count(LostWrite) != 1 || r.Anomalies[2].Key != "k2" || r.Anomalies[2].Pos != at(q0, 1) {
		t.Errorf("anomalies %+v", r.Anomalies)
	}
	if !strings.Contains(r.Anomalies[0].Detail, "a/t/0@1 holds 2 keys: k1 (read), k2 (acknowledged)") {
		t.Errorf("detail %q", r.Anomalies[0].Detail)
	}
}

// TestHistoryConcurrent: records from many goroutines all land, numbered
// in order, each producer's own records in its order.
func TestHistoryConcurrent(t *testing.T) {
	tick := time.Unix(0, 0)
	var mu sync.Mutex
	h := History{Clock: func() time.Time { mu.Lock(); defer mu.Unlock(); tick = tick.Add(time.Millisecond); return tick }}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				key := fmt.Sprintf("g%d-%d", g, i)
				h.Invoke(key[:2], key)
				h.Complete(key[:2], key, Acked, at(q0, int64(g*100+i)), nil)
				h.Read("r"+key[:2], "master", at(q0, int64(g*100+i)), key)
			}
		}()
	}
	wg.Wait()
	ops := h.Ops()
	if len(ops) != 8*300 {
		t.Fatalf("%d ops, want %d", len(ops), 8*300)
	}
	last := map[string]int{}
	for i, op := range ops {
		if op.Seq != i || (i > 0 && !op.Time.After(ops[i-1].Time)) {
			t.Fatalf("op %d has seq %d time %v after %v", i, op.Seq, op.Time, ops[i-1].Time)
		}
		if op.Kind == Read {
			var n int
			fmt.Sscanf(op.Key[3:], "%d", &n)
			if prev, ok := last[op.Process]; ok && n != prev+1 {
				t.Fatalf("reader %s: key %s after %d", op.Process, op.Key, prev)
			}
			last[op.Process] = n
		}
	}
	if r := Check(ops); !r.OK() || r.Acked != 800 || r.Read != 800 {
		t.Errorf("check: %v", r)
	}
}

// TestBetween: a window keeps the sends invoked in it, drops completions
// after it (those sends become indeterminate) and keeps the chosen reads of
// its keys only.
func TestBetween(t *testing.T) {
	var h History
	ack("before", at(q0, 0))(&h)
	from := h.Len()
	ack("in", at(q0, 1))(&h)
	h.Invoke("p", "late")
	h.Invoke("p", "lost")
	h.Complete("p", "lost", Acked, at(q0, 3), nil)
	to := h.Len()
	h.Complete("p", "late", Acked, at(q0, 2), nil)
	read("snap", "slave", at(q0, 0), "before")(&h)
	read("snap", "slave", at(q0, 1), "in")(&h)
	read("other", "master", at(q0, 3), "lost")(&h)
	r := Check(Between(h.Ops(), from, to, func(op Op) bool { return op.Process == "snap" }))
	want := Summary{Sent: 3, Acked: 2, Indeterminate: 1, Read: 1, Reads: 1}
	if r.Summary != want || r.Count(LostWrite) != 1 || len(r.Anomalies) != 1 || r.Anomalies[0].Key != "lost" {
		t.Errorf("got %v %v, want %+v and lost-write of key lost only", r, r.Anomalies, want)
	}
	all := Check(Between(h.Ops(), 0, h.Len(), func(Op) bool { return true }))
	if all.Acked != 4 || len(all.Anomalies) != 1 || all.Anomalies[0].Key != "late" {
		t.Errorf("the whole history: %v %v, want a lost-write of key late only", all, all.Anomalies)
	}
}
