package dispatch

import (
	"fmt"
	"math"
	"math/rand"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/cq"
	"github.com/wharfmq/wharf/storage/index"
	"github.com/wharfmq/wharf/storage/vfs"
)

// goldenLog is a store whose small segments (many end in a blank filler)
// hold records of three topics and the schedule topic: tags, several keys,
// none, repeated properties, delivery times; topic "gone" is deleted after
// its first records and re-created.
func goldenLog(t *testing.T) *storage.Store {
	cfg := storage.DefaultConfig("/store")
	cfg.MappedFileSizeCommitLog = 16 << 10
	cfg.MaxMessageSize = 4 << 10
	cfg.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	s, _, err := storage.Open(vfs.NewMem(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	props := [][]string{
		{storage.PropKeys, "k1 k2\tk3", storage.PropTags, "TagA", storage.PropUniqKey, "U1"},
		{},
		{storage.PropTags, "étiquette", storage.PropKeys, "x", storage.PropKeys, "y z", storage.PropUniqKey, ""},
		{storage.PropDeliverMs, "1700000009999", storage.PropTags, "T", storage.PropUniqKey, "U2"},
		{storage.PropUniqKey, "U3"},
	}
	topics := []string{"a", "gone", storage.ScheduleTopic, "b", "gone"}
	rng := rand.New(rand.NewSource(17))
	for i := range 240 {
		if i == 100 {
			if _, err := s.DeleteTopic("gone", -1); err != nil {
				t.Fatal(err)
			}
		}
		p, _ := storage.EncodeProperties(props[i%len(props)]...)
		m := &storage.Message{Topic: topics[i%len(topics)], QueueID: int32(i % 4), Body: make([]byte, rng.Intn(1500)), Properties: p}
		if _, err := s.AppendBatch([]*storage.Message{m}, 1_700_000_000_000+int64(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// goldenRequest is what the dispatch of a record was before the key
// hashes, its keys as the index hashed them.
func goldenRequest(off int64, r *storage.Record) string {
	tags := int64(0)
	var keys, uniq string
	schedule := string(r.Topic) == storage.ScheduleTopic
	storage.EachProperty(r.Properties, func(k, v []byte) {
		switch string(k) {
		case storage.PropDeliverMs:
			if schedule {
				tags, _ = strconv.ParseInt(string(v), 10, 64)
			}
		case storage.PropTags:
			if !schedule {
				tags = storage.TagsHashCode(string(v))
			}
		case storage.PropKeys:
			keys = string(v)
		case storage.PropUniqKey:
			uniq = string(v)
		}
	})
	var hs []int32
	for _, k := range append([]string{uniq}, strings.Fields(keys)...) {
		if k == "" {
			continue
		}
		h := index.JavaHashCode(index.KeyOf(string(r.Topic), k))
		if h == math.MinInt32 {
			h = 0
		}
		hs = append(hs, max(h, -h))
	}
	return describeRequest(storage.DispatchRequest{Key: storage.QueueKey{Topic: string(r.Topic), QueueID: r.QueueID}, QueueOffset: r.QueueOffset,
		Entry: cq.Entry{Offset: off, Size: r.TotalSize, TagsCode: tags}, StoreTimestamp: r.StoreTimestamp, KeyHashes: hs})
}

func describeRequest(d storage.DispatchRequest) string {
	return fmt.Sprintf("%s@%d %+v ts %d keys %v", d.Key, d.QueueOffset, d.Entry, d.StoreTimestamp, d.KeyHashes)
}

// describeBatches is a dispatch as text: each queue's requests, in the
// order the queues come, then every request for the index.
func describeBatches(queues []QueueBatch, all []storage.DispatchRequest) string {
	var sb strings.Builder
	for _, qb := range queues {
		fmt.Fprintf(&sb, "queue %s:\n", qb.Key)
		for _, d := range qb.Reqs {
			if d.Key != qb.Key {
				fmt.Fprintf(&sb, "  WRONG QUEUE ")
			}
			fmt.Fprintf(&sb, "  %s\n", describeRequest(*d))
		}
	}
	for _, d := range all {
		fmt.Fprintf(&sb, "index %s\n", describeRequest(d))
	}
	return sb.String()
}

// goldenDispatch is the dispatch of [from, to) as it was built: the full
// decode, the deleted topic's records skipped, a map of queues sorted.
func goldenDispatch(t *testing.T, s *storage.Store, from, to int64, only string) string {
	perQueue := map[storage.QueueKey][]string{}
	var all []string
	del := s.Deleted()
	if _, err := s.ForEachRecord(from, to, false, func(off int64, r *storage.Record) error {
		if del.Covers(r.Topic, off) || only != "" && string(r.Topic) != only {
			return nil
		}
		k := storage.QueueKey{Topic: string(r.Topic), QueueID: r.QueueID}
		perQueue[k] = append(perQueue[k], goldenRequest(off, r))
		all = append(all, goldenRequest(off, r))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, k := range SortedKeys(perQueue) {
		fmt.Fprintf(&sb, "queue %s:\n", k)
		for _, d := range perQueue[k] {
			fmt.Fprintf(&sb, "  %s\n", d)
		}
	}
	if only == "" {
		for _, d := range all {
			fmt.Fprintf(&sb, "index %s\n", d)
		}
	}
	return sb.String()
}

// TestDispatchGolden: the Reput core's batches over a varied log, in steps
// of several sizes, are what the full decode and the old grouping made,
// request for request and in the same order; a batch stays as it was
// after later dispatches (nothing of it is reused: the queue owners and
// the index actor may still be reading it); Replay is the old one too.
func TestDispatchGolden(t *testing.T) {
	s := goldenLog(t)
	defer s.Close()
	end := s.CommitLog().MaxOffset()
	var ends []int64 // where each record ends: the writer makes only whole records visible
	if _, err := s.ForEachRecord(0, end, true, func(off int64, r *storage.Record) error {
		ends = append(ends, off+int64(r.TotalSize))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []int{1, 7, 50, len(ends)} {
		t.Run(fmt.Sprint("step ", step), func(t *testing.T) {
			r := NewReput(false, 0, 0, 0)
			var kept []Batch // every batch, to check none changed
			var was []string
			for pos, n := int64(0), 0; pos < end; n += step {
				r.Appended(ends[min(n+step, len(ends))-1])
				b, err := r.Dispatch(s)
				if err != nil {
					t.Fatal(err)
				}
				next, _ := r.Position()
				if got, want := describeBatches(b.Queues, b.All), goldenDispatch(t, s, pos, next, ""); got != want {
					t.Fatalf("[%d, %d):\n%s\nwant\n%s", pos, next, got, want)
				}
				kept, was = append(kept, b), append(was, describeBatches(b.Queues, b.All))
				pos = next
			}
			for i, b := range kept {
				if got := describeBatches(b.Queues, b.All); got != was[i] {
					t.Fatalf("batch %d changed after later dispatches:\n%s\nwas\n%s", i, got, was[i])
				}
			}
			if len(kept) < 2 && step < len(ends) {
				t.Fatalf("%d dispatches in steps of %d", len(kept), step)
			}
		})
	}
	r := NewReput(false, 0, end, 0)
	if _, err := r.Dispatch(s); err != nil {
		t.Fatal(err)
	}
	from := s.Deleted()["gone"]
	replay, err := r.Replay(s, "gone", from)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describeBatches(replay, nil), goldenDispatch(t, s, from, end, "gone"); got != want || !strings.Contains(got, "queue gone") {
		t.Fatalf("replay:\n%s\nwant\n%s", got, want)
	}
	if !slices.ContainsFunc(replay, func(qb QueueBatch) bool { return len(qb.Reqs) > 1 }) {
		t.Fatal("the replay holds no queue of several records")
	}
}
