package storage

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// delMsg is message seq of topic in queue q; its body and key name both.
func delMsg(topic string, q int32, gen string, seq int) *Message {
	key := fmt.Sprintf("%s-%s-%d", topic, gen, seq)
	props, _ := EncodeProperties(PropKeys, key, PropUniqKey, "U-"+key)
	return &Message{Topic: topic, QueueID: q, Body: []byte(key), Properties: props}
}

// appendGen appends n messages of generation gen, alternating between
// queues 0 and 1 of topic and a message of the topic "kept", and returns
// the queue offsets topic's messages got.
func appendGen(t *testing.T, s *Store, topic, gen string, n int) []int64 {
	t.Helper()
	var qos []int64
	for i := range n {
		msgs := []*Message{delMsg(topic, int32(i%2), gen, i), delMsg("kept", 0, gen, i)}
		out, err := s.AppendBatch(msgs, fixedNow.UnixMilli(), nil)
		if err != nil || out[0].Err != nil {
			t.Fatalf("append %s %d: %v %v", gen, i, err, out)
		}
		qos = append(qos, out[0].QueueOffset)
	}
	return qos
}

// dropTopicQueues is what the owners of a deleted topic's ConsumeQueues do.
func dropTopicQueues(t *testing.T, s *Store, topic string) {
	t.Helper()
	for _, k := range s.Queues() {
		if k.Topic == topic {
			if err := s.DropConsumeQueue(k); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// queueBodies reads queue k from offset 0 and returns the bodies.
func queueBodies(t *testing.T, s *Store, k QueueKey) []string {
	t.Helper()
	res, err := s.GetMessages(k, 0, GetLimits{Msgs: 1000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range res.Records {
		r, err := DecodeRecord(raw, true)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(r.Body))
	}
	return out
}

// checkOnlyGen asserts that topic's queues hold exactly the messages of
// generation gen (n of them), from queue offset 0, and that no query by key
// finds an older one.
func checkOnlyGen(t *testing.T, s *Store, topic, gen string, n int, old []string) {
	t.Helper()
	var got []string
	for q := range int32(2) {
		bodies := queueBodies(t, s, QueueKey{topic, q})
		for _, b := range bodies {
			if !strings.Contains(b, "-"+gen+"-") {
				t.Fatalf("queue %s-%d holds %q, not of generation %s: %q", topic, q, b, gen, bodies)
			}
		}
		got = append(got, bodies...)
		if max := s.CommitLog().QueueOffset(QueueKey{topic, q}); max != int64(len(bodies)) {
			t.Fatalf("queue %s-%d: offset table says %d, queue holds %d from 0", topic, q, max, len(bodies))
		}
	}
	if len(got) != n {
		t.Fatalf("topic %s holds %d messages, want %d: %q", topic, len(got), n, got)
	}
	for _, key := range old {
		for _, k := range []string{key, "U-" + key} {
			if recs, err := s.QueryByKey(topic, k, 0, 1<<62, 8); err != nil || len(recs) != 0 {
				t.Fatalf("query %q of the deleted topic found %d records (%v)", k, len(recs), err)
			}
		}
	}
	if bodies := queueBodies(t, s, QueueKey{"kept", 0}); len(bodies) == 0 {
		t.Fatal("the deletion took another topic's messages")
	}
	if err := Check(s); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteTopic deletes a topic, re-creates it by appending, and checks
// that its queues restart at 0 and hold only the new messages, live and
// after a clean or crashed restart, whether or not the old records were
// dispatched and the old queues dropped before the stop.
func TestDeleteTopic(t *testing.T) {
	const before, after = 9, 5
	var oldKeys []string
	for i := range before {
		oldKeys = append(oldKeys, fmt.Sprintf("gone-old-%d", i))
	}
	for _, tc := range []struct {
		name       string
		dispatch   bool // old records dispatched before the deletion
		drop       bool // the old queues dropped by their owners before the stop
		dispatchNw bool // new records dispatched before the stop
		restart    string
	}{
		{name: "live", dispatch: true, drop: true, dispatchNw: true},
		{name: "live, old records never dispatched", drop: true, dispatchNw: true},
		{name: "clean restart", dispatch: true, drop: true, dispatchNw: true, restart: "clean"},
		{name: "crash before the queues were dropped", dispatch: true, restart: "crash"},
		{name: "crash before anything was dispatched", restart: "crash"},
		{name: "crash after all", dispatch: true, drop: true, dispatchNw: true, restart: "crash"},
		{name: "crash with new records undispatched", dispatch: true, drop: true, restart: "crash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := testConfig("/store")
			s, _ := mustOpen(t, mem, cfg)
			appendGen(t, s, "gone", "old", before)
			if tc.dispatch {
				if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
					t.Fatal(err)
				}
				if err := s.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			w, err := s.DeleteTopic("gone", -1)
			if err != nil || w != s.CommitLog().MaxOffset() {
				t.Fatalf("delete: watermark %d, %v; log ends at %d", w, err, s.CommitLog().MaxOffset())
			}
			if tc.drop {
				dropTopicQueues(t, s, "gone")
			}
			qos := appendGen(t, s, "gone", "new", after)
			for i, qo := range qos {
				if want := int64(i / 2); qo != want {
					t.Fatalf("message %d of the re-created topic got queue offset %d, want %d", i, qo, want)
				}
			}
			if tc.dispatchNw {
				if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Flush(s.CommitLog().MaxOffset()); err != nil {
				t.Fatal(err)
			}
			switch tc.restart {
			case "clean":
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s, _ = mustOpen(t, mem, cfg)
			case "crash":
				img := mem.Crash(7, vfs.CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true})
				s.closeFiles()
				s, _ = mustOpen(t, img, cfg)
			default:
				if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
					t.Fatal(err)
				}
			}
			defer s.Close()
			checkOnlyGen(t, s, "gone", "new", after, oldKeys)
			// Appends after it continue the new queues.
			if qos := appendGen(t, s, "gone", "more", 2); qos[0] != int64((after+1)/2) || qos[1] != int64(after/2) {
				t.Fatalf("appends after the restart got queue offsets %v, want [%d %d]", qos, (after+1)/2, after/2)
			}
		})
	}
}

// TestDeleteTopicTwice: a second deletion of the re-created topic moves the
// watermark; deleting again at a lower offset changes nothing.
func TestDeleteTopicTwice(t *testing.T) {
	s, _ := mustOpen(t, vfs.NewMem(), testConfig("/store"))
	defer s.Close()
	appendGen(t, s, "gone", "a", 4)
	w1, err := s.DeleteTopic("gone", -1)
	if err != nil {
		t.Fatal(err)
	}
	dropTopicQueues(t, s, "gone")
	appendGen(t, s, "gone", "b", 4)
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	if w, err := s.DeleteTopic("gone", w1-1); err != nil || w != w1 {
		t.Fatalf("deleting below the watermark: %d, %v; want %d unchanged", w, err, w1)
	}
	w2, err := s.DeleteTopic("gone", -1)
	if err != nil || w2 <= w1 {
		t.Fatalf("second deletion at %d (first %d): %v", w2, w1, err)
	}
	dropTopicQueues(t, s, "gone")
	appendGen(t, s, "gone", "c", 2)
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	checkOnlyGen(t, s, "gone", "c", 2, []string{"gone-a-0", "gone-b-3"})
}

// TestCheckFindsDeletedEntries: Check rejects a ConsumeQueue that still
// points at a deleted topic's records, and an offset table that still
// counts them.
func TestCheckFindsDeletedEntries(t *testing.T) {
	s, _ := mustOpen(t, vfs.NewMem(), testConfig("/store"))
	defer s.Close()
	appendGen(t, s, "gone", "old", 4)
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteTopic("gone", -1); err != nil {
		t.Fatal(err)
	}
	if err := Check(s); !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("Check with the deleted topic's queues still there: %v", err)
	}
	dropTopicQueues(t, s, "gone")
	if err := Check(s); err != nil {
		t.Fatal(err)
	}
	s.CommitLog().queueOffsets[QueueKey{"gone", 1}] = 2
	if err := Check(s); !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), "deleted at") {
		t.Fatalf("Check with the offset table counting deleted records: %v", err)
	}
}

// TestDeleteTopicCrashLoop crashes a workload that deletes and re-creates a
// topic after each of its file-system operations and checks recovery: the
// store is consistent (Check: no entry of a deleted record, queues of the
// re-created topic from 0) and the deleted generation never comes back.
func TestDeleteTopicCrashLoop(t *testing.T) {
	cfg := testConfig("/store")
	counter := &vfs.Counter{}
	if err := deleteWorkload(vfs.NewFaulty(vfs.NewMem(), counter), cfg); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	total := counter.Count()
	step := 1
	if testing.Short() {
		step = 5
	}
	for k := 0; k < total; k += step {
		mem := vfs.NewMem()
		var img *vfs.Mem
		inj := vfs.OnOp(func(n int, op vfs.Op) error {
			if n == k {
				img = mem.Crash(int64(k), vfs.CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true})
			}
			if n >= k {
				return errCrashed
			}
			return nil
		})
		if err := deleteWorkload(vfs.NewFaulty(mem, inj), cfg); !errors.Is(err, errCrashed) {
			t.Fatalf("k=%d: workload ended with %v, want the injected crash", k, err)
		}
		s, rep, err := Open(img, cfg)
		if err != nil {
			t.Fatalf("k=%d: recovery: %v (%v)", k, err, rep)
		}
		if err := Check(s); err != nil {
			t.Fatalf("k=%d: %v (report %v)", k, err, rep)
		}
		if _, deleted := s.Deleted()["gone"]; deleted {
			for q := range int32(2) {
				for _, b := range queueBodies(t, s, QueueKey{"gone", q}) {
					if !strings.Contains(b, "-new-") {
						t.Fatalf("k=%d: after recovery queue gone-%d holds %q of the deleted generation", k, q, b)
					}
				}
			}
		}
		// A send after recovery is the re-created topic's, never swallowed
		// by a watermark beyond a log end the crash cut.
		k0 := QueueKey{"gone", 0}
		next := s.CommitLog().QueueOffset(k0)
		out, err := s.AppendBatch([]*Message{delMsg("gone", 0, "new", 99)}, fixedNow.UnixMilli(), nil)
		if err != nil || out[0].QueueOffset != next {
			t.Fatalf("k=%d: append after recovery: %v %v, want queue offset %d", k, out, err, next)
		}
		if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
			t.Fatal(err)
		}
		if bodies := queueBodies(t, s, k0); len(bodies) == 0 || bodies[len(bodies)-1] != "gone-new-99" {
			t.Fatalf("k=%d: the message sent after recovery is not in its queue: %q", k, bodies)
		}
		if err := Check(s); err != nil {
			t.Fatalf("k=%d: after an append: %v", k, err)
		}
		s.Close()
	}
	t.Logf("crashed at each of %d operations", total)
}

// deleteWorkload appends a generation of "gone", dispatches part of it,
// deletes the topic, drops its queues, re-creates it and checkpoints, with
// the store's only owner doing everything.
func deleteWorkload(fsys vfs.FS, cfg Config) error {
	s, _, err := Open(fsys, cfg)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(3))
	step := func(gen string, n int) error {
		for i := range n {
			msgs := []*Message{delMsg("gone", int32(i%2), gen, i), delMsg("kept", 0, gen, i)}
			if _, err := s.AppendBatch(msgs, fixedNow.UnixMilli(), nil); err != nil {
				return err
			}
			if rng.Intn(3) == 0 {
				if _, err := s.Flush(s.CommitLog().MaxOffset()); err != nil {
					return err
				}
			}
			if rng.Intn(3) == 0 {
				if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
					return err
				}
			}
			if rng.Intn(4) == 0 {
				if err := s.Checkpoint(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := step("old", 12); err != nil {
		return err
	}
	if _, err := s.DeleteTopic("gone", -1); err != nil {
		return err
	}
	for _, k := range s.Queues() {
		if k.Topic == "gone" {
			if err := s.DropConsumeQueue(k); err != nil {
				return err
			}
		}
	}
	if err := step("new", 8); err != nil {
		return err
	}
	return s.Close()
}

// TestDeleteTopicSlave: a slave applies its master's watermark whether it
// has copied less than, exactly or more than the log up to it, and ends
// with the master's offset table and a consistent store.
func TestDeleteTopicSlave(t *testing.T) {
	master, _ := mustOpen(t, vfs.NewMem(), testConfig("/m"))
	defer master.Close()
	appendGen(t, master, "gone", "old", 10)
	w, err := master.DeleteTopic("gone", -1)
	if err != nil {
		t.Fatal(err)
	}
	appendGen(t, master, "gone", "new", 5)
	for _, tc := range []struct {
		name   string
		copied int64 // bytes copied before the slave learns the watermark
	}{
		{"behind", w / 2}, {"at", w}, {"ahead", master.CommitLog().MaxOffset()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slave, _ := mustOpen(t, vfs.NewMem(), testConfig("/s"))
			defer slave.Close()
			copyTo := func(from, to int64) int64 {
				for from < to {
					chunk, err := master.CommitLog().ReadRecords(from, int(to-from))
					if err != nil || len(chunk) == 0 {
						t.Fatalf("read records at %d: %v", from, err)
					}
					if err := slave.CommitLog().AppendRaw(from, chunk); err != nil {
						t.Fatal(err)
					}
					from += int64(len(chunk))
				}
				return from
			}
			at := copyTo(0, tc.copied)
			if _, err := slave.Dispatch(slave.CommitLog().MaxOffset(), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := slave.DeleteTopic("gone", w); err != nil {
				t.Fatal(err)
			}
			// The slave's queue owners drop the queues and replay what
			// was dispatched of the re-created topic (the broker's reput
			// does this); Dispatch from the watermark stands in for it.
			dropTopicQueues(t, slave, "gone")
			if d := slave.Dispatched(); d > w {
				slave.SetDispatched(w, 0)
			}
			copyTo(at, master.CommitLog().MaxOffset())
			if _, err := slave.Dispatch(slave.CommitLog().MaxOffset(), nil); err != nil {
				t.Fatal(err)
			}
			for _, k := range []QueueKey{{"gone", 0}, {"gone", 1}, {"kept", 0}} {
				if got, want := slave.CommitLog().QueueOffset(k), master.CommitLog().QueueOffset(k); got != want {
					t.Fatalf("queue %s: slave's offset table %d, master's %d", k, got, want)
				}
			}
			checkOnlyGen(t, slave, "gone", "new", 5, []string{"gone-old-0", "gone-old-9"})
		})
	}
}

// staleListFS lists the directories under a topic as empty: what an owner
// dropping its queue saw when it listed the topic's directory just before
// the owner of another queue of the topic made its own in it.
type staleListFS struct {
	vfs.FS
	topicDir string
}

func (f staleListFS) List(dir string) ([]string, error) {
	if dir == f.topicDir {
		return nil, nil
	}
	return f.FS.List(dir)
}

// TestDropQueueKeepsANewSibling: dropping a deleted topic's last queue
// removes the topic's directory only if nothing is in it. A queue of the
// re-created topic whose directory was made meanwhile (its owner runs
// beside the dropping one) keeps it and its entries.
func TestDropQueueKeepsANewSibling(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig("/store")
	s, _ := mustOpen(t, staleListFS{FS: mem, topicDir: "/store/consumequeue/gone"}, cfg)
	defer s.Close()
	appendGen(t, s, "gone", "a", 4) // queues gone-0 and gone-1
	if _, err := s.Dispatch(s.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DropConsumeQueue(QueueKey{"gone", 0}); err != nil {
		t.Fatal(err)
	}
	q, err := s.ConsumeQueue(QueueKey{"gone", 1}, false)
	if err != nil || q == nil {
		t.Fatalf("gone-1 after gone-0 was dropped: %v, %v", q, err)
	}
	if names, err := mem.List("/store/consumequeue/gone/1"); err != nil || len(names) == 0 {
		t.Fatalf("gone-1's files after gone-0 was dropped: %v, %v (the topic's directory was removed with a queue in it)", names, err)
	}
	if err := s.DropConsumeQueue(QueueKey{"gone", 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.List("/store/consumequeue/gone"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("the topic's directory after its last queue was dropped: %v, want it gone", err)
	}
}
