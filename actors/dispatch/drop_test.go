package dispatch

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// TestDrops runs deletions of topics through the Reput actor's bookkeeping:
// which owners are told to drop, what is held for the fresh owners and
// handed over in order, when a deletion is done, and that no checkpoint
// starts meanwhile.
func TestDrops(t *testing.T) {
	t0, t1, u0 := storage.QueueKey{Topic: "t", QueueID: 0}, storage.QueueKey{Topic: "t", QueueID: 1}, storage.QueueKey{Topic: "u", QueueID: 0}
	errRm := errors.New("rm failed")
	type step struct {
		do       func(d *Drops) (drop []storage.QueueKey, held []any, done []Done, holds bool)
		wantDrop []storage.QueueKey
		wantHeld []any
		wantDone []Done
		holds    bool // the step's Hold kept its message
		busy     bool
	}
	cut := func(topic string, owned ...storage.QueueKey) func(d *Drops) ([]storage.QueueKey, []any, []Done, bool) {
		return func(d *Drops) ([]storage.QueueKey, []any, []Done, bool) {
			drop, done := d.Cut(topic, owned)
			return drop, nil, done, false
		}
	}
	hold := func(k storage.QueueKey, msg string) func(d *Drops) ([]storage.QueueKey, []any, []Done, bool) {
		return func(d *Drops) ([]storage.QueueKey, []any, []Done, bool) { return nil, nil, nil, d.Hold(k, msg) }
	}
	dropped := func(k storage.QueueKey, err error) func(d *Drops) ([]storage.QueueKey, []any, []Done, bool) {
		return func(d *Drops) ([]storage.QueueKey, []any, []Done, bool) {
			held, done := d.Dropped(k, err)
			return nil, held, done, false
		}
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"no owners: done at once", []step{{do: cut("t"), wantDone: []Done{{Topic: "t"}}}}},
		{"two queues", []step{
			{do: cut("t", t0, t1, u0), wantDrop: []storage.QueueKey{t0, t1}, busy: true},
			{do: hold(t0, "pull"), holds: true, busy: true},
			{do: hold(u0, "entries of u"), busy: true},
			{do: hold(t0, "entries"), holds: true, busy: true},
			{do: dropped(t0, nil), wantHeld: []any{"pull", "entries"}, busy: true},
			{do: hold(t0, "after"), busy: true},
			{do: dropped(t1, nil), wantDone: []Done{{Topic: "t"}}},
			{do: dropped(t1, nil)},
		}},
		{"a queue that cannot be dropped fails the deletion", []step{
			{do: cut("t", t0), wantDrop: []storage.QueueKey{t0}, busy: true},
			{do: dropped(t0, errRm), wantDone: []Done{{Topic: "t", Err: errRm}}},
		}},
		{"deleted again meanwhile", []step{
			{do: cut("t", t0), wantDrop: []storage.QueueKey{t0}, busy: true},
			{do: cut("t", t0), busy: true},
			{do: dropped(t0, nil), wantDone: []Done{{Topic: "t"}}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDrops()
			for i, st := range tc.steps {
				drop, held, done, holds := st.do(d)
				if !slices.Equal(drop, st.wantDrop) || !slices.Equal(held, st.wantHeld) || fmt.Sprint(done) != fmt.Sprint(st.wantDone) ||
					holds != st.holds || d.Busy() != st.busy {
					t.Fatalf("step %d: drop %v held %v done %v holds %v busy %v; want %v %v %v %v %v", i, drop, held, done, holds, d.Busy(),
						st.wantDrop, st.wantHeld, st.wantDone, st.holds, st.busy)
				}
			}
		})
	}
}

// TestReputSkipsDeletedAndReplays: records of a deleted topic below its
// watermark are not dispatched, and Replay reads again the re-created
// topic's records from the watermark to the position.
func TestReputSkipsDeletedAndReplays(t *testing.T) {
	a0, a1, b0 := storage.QueueKey{Topic: "a", QueueID: 0}, storage.QueueKey{Topic: "a", QueueID: 1}, storage.QueueKey{Topic: "b", QueueID: 0}
	log := &fakeLog{size: 10, keys: []storage.QueueKey{a0, b0, a1, a0, b0, a0, a1}, deleted: storage.Deleted{"a": 40}}
	r := NewReput(false, 0, 70, 0)
	b, err := r.Dispatch(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(b); got != "a-0:1 a-1:1 b-0:2 all:4" {
		t.Fatalf("dispatch: %s, want only a's records from 40 on", got)
	}
	replay, err := r.Replay(log, "a", 40)
	if err != nil {
		t.Fatal(err)
	}
	if got := describe(Batch{Queues: replay}); got != "a-0:1 a-1:1 all:0" || replay[0].Reqs[0].Entry.Offset != 50 {
		t.Fatalf("replay: %s %+v", got, replay)
	}
	if replay, _ := r.Replay(log, "a", 70); replay != nil {
		t.Fatalf("replay from the position: %+v", replay)
	}
}

// TestQueueDrop: a dropped queue answers its held pulls TOPIC_NOT_EXIST.
func TestQueueDrop(t *testing.T) {
	q := NewQueue(storage.QueueKey{Topic: "t"}, testCfg, &fakeSource{})
	w := &waiter{name: "p"}
	q.Pull(t0, w, &protocol.PullRequest{SuspendTimeoutMillis: 5000})
	got := summarize(q.Drop())
	want := summary{answers: []string{"p " + protocol.StatusTopicNotExist.String() + "+unpark"}, arm: -1}
	if !got.equal(want) || q.Held() != 0 {
		t.Fatalf("drop: %+v with %d held, want %+v", got, q.Held(), want)
	}
	if rd := q.Tick(t0.Add(10 * time.Second)); len(rd.Answers) != 0 {
		t.Fatalf("a tick after the drop answered %+v", rd.Answers)
	}
}
