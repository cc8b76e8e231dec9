package meta

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

var errDisk = errors.New("disk on fire")

// topicsStep is what a shell does after an input: take Ready, run its
// write with the outcome writeErr, take the replies released by it.
type topicsStep struct {
	publish map[string]storage.TopicConfig
	saves   []*storage.TopicTable
	replies []Reply
}

func drainTopics(t *testing.T, c *Topics, writeErr error) topicsStep {
	t.Helper()
	var s topicsStep
	for i := 0; ; i++ {
		if i > 10 {
			t.Fatal("Ready never settles")
		}
		rd := c.Ready()
		if rd.Publish != nil {
			s.publish = rd.Publish
		}
		s.replies = append(s.replies, rd.Replies...)
		for _, topic := range rd.Delete {
			c.Deleted(topic, nil) // the writer and the queue owners cut it away
		}
		if rd.Save == nil && len(rd.Delete) == 0 {
			return s
		}
		if rd.Save == nil {
			continue
		}
		s.saves = append(s.saves, rd.Save)
		c.Persisted(writeErr)
	}
}

func tc(name string, n int32, perm int32) storage.TopicConfig {
	return storage.TopicConfig{TopicName: name, ReadQueueNums: n, WriteQueueNums: n, Perm: perm}
}

func pc(name string, r, w, perm int32) protocol.TopicConfig {
	return protocol.TopicConfig{Topic: name, ReadQueueNums: r, WriteQueueNums: w, Perm: perm}
}

func TestTopicsRequests(t *testing.T) {
	existing := map[string]storage.TopicConfig{"a": tc("a", 4, 6)}
	cases := []struct {
		name     string
		slave    bool
		req      protocol.Request
		writeErr error
		want     protocol.Status
		saved    bool             // a write was asked for
		after    map[string]int32 // topic -> queues afterwards (nil: unchanged)
		perm     map[string]int32 // topic -> perm afterwards, where checked
	}{
		{name: "create", req: &protocol.CreateTopicRequest{TopicConfig: pc("b", 2, 2, 6)}, want: protocol.StatusOK, saved: true,
			after: map[string]int32{"a": 4, "b": 2}},
		{name: "create perm 0 means read+write", req: &protocol.CreateTopicRequest{TopicConfig: pc("b", 1, 1, 0)}, want: protocol.StatusOK, saved: true,
			after: map[string]int32{"a": 4, "b": 1}, perm: map[string]int32{"b": storage.PermRead | storage.PermWrite}},
		{name: "create existing", req: &protocol.CreateTopicRequest{TopicConfig: pc("a", 2, 2, 6)}, want: protocol.StatusTopicExistAlready},
		{name: "update existing", req: &protocol.UpdateTopicRequest{TopicConfig: pc("a", 8, 8, 4)}, want: protocol.StatusOK, saved: true,
			after: map[string]int32{"a": 8}, perm: map[string]int32{"a": 4}},
		{name: "update creates", req: &protocol.UpdateTopicRequest{TopicConfig: pc("c", 3, 3, 6)}, want: protocol.StatusOK, saved: true,
			after: map[string]int32{"a": 4, "c": 3}},
		{name: "bad name", req: &protocol.CreateTopicRequest{TopicConfig: pc("b c", 1, 1, 6)}, want: protocol.StatusInvalidParameter},
		{name: "empty name", req: &protocol.CreateTopicRequest{TopicConfig: pc("", 1, 1, 6)}, want: protocol.StatusInvalidParameter},
		{name: "no read queues", req: &protocol.CreateTopicRequest{TopicConfig: pc("b", 0, 1, 6)}, want: protocol.StatusInvalidParameter},
		{name: "too many queues", req: &protocol.UpdateTopicRequest{TopicConfig: pc("b", 1, 1025, 6)}, want: protocol.StatusInvalidParameter},
		{name: "1024 queues", req: &protocol.UpdateTopicRequest{TopicConfig: pc("b", 1024, 1024, 6)}, want: protocol.StatusOK, saved: true,
			after: map[string]int32{"a": 4, "b": 1024}},
		{name: "unknown perm bit", req: &protocol.CreateTopicRequest{TopicConfig: pc("b", 1, 1, 8)}, want: protocol.StatusInvalidParameter},
		{name: "delete", req: &protocol.DeleteTopicRequest{Topic: "a"}, want: protocol.StatusOK, saved: true, after: map[string]int32{}},
		{name: "delete missing", req: &protocol.DeleteTopicRequest{Topic: "zz"}, want: protocol.StatusTopicNotExist},
		{name: "list", req: &protocol.ListTopicsRequest{}, want: protocol.StatusOK},
		{name: "write fails: SYSTEM_ERROR, the table keeps the change", req: &protocol.CreateTopicRequest{TopicConfig: pc("b", 2, 2, 6)},
			writeErr: errDisk, want: protocol.StatusSystemError, saved: true, after: map[string]int32{"a": 4, "b": 2}},
		{name: "delete write fails", req: &protocol.DeleteTopicRequest{Topic: "a"}, writeErr: errDisk, want: protocol.StatusSystemError,
			saved: true, after: map[string]int32{}},
		{name: "slave refuses create", slave: true, req: &protocol.CreateTopicRequest{TopicConfig: pc("b", 2, 2, 6)}, want: protocol.StatusNotMaster},
		{name: "slave refuses update", slave: true, req: &protocol.UpdateTopicRequest{TopicConfig: pc("a", 2, 2, 6)}, want: protocol.StatusNotMaster},
		{name: "slave refuses delete", slave: true, req: &protocol.DeleteTopicRequest{Topic: "a"}, want: protocol.StatusNotMaster},
		{name: "slave lists", slave: true, req: &protocol.ListTopicsRequest{}, want: protocol.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			core := NewTopics(8)
			core.Load(storage.TopicTable{Topics: maps.Clone(existing), DataVersion: 7}, nil)
			core.SetRole(c.slave)
			drainTopics(t, core, nil)
			core.Handle("tok", c.req)
			s := drainTopics(t, core, c.writeErr)
			if len(s.replies) != 1 || s.replies[0].To != "tok" || s.replies[0].Status != c.want {
				t.Fatalf("replies %+v, want one %v to tok", s.replies, c.want)
			}
			if got := len(s.saves) == 1; got != c.saved {
				t.Fatalf("wrote %d tables, want a write: %v", len(s.saves), c.saved)
			}
			if !c.saved {
				if s.publish != nil {
					t.Fatalf("published %v without a change", s.publish)
				}
				return
			}
			if s.saves[0].DataVersion != 8 {
				t.Fatalf("data version %d after one change from 7", s.saves[0].DataVersion)
			}
			for what, m := range map[string]map[string]storage.TopicConfig{"published": s.publish, "written": s.saves[0].Topics} {
				got := map[string]int32{}
				for k, v := range m {
					got[k] = v.WriteQueueNums
					if p, ok := c.perm[k]; ok && v.Perm != p {
						t.Errorf("%s %s perm %d, want %d", what, k, v.Perm, p)
					}
				}
				if !maps.Equal(got, c.after) {
					t.Errorf("%s %v, want %v", what, got, c.after)
				}
			}
		})
	}
}

func TestTopicsReplyWaitsForWrite(t *testing.T) {
	core := NewTopics(8)
	core.Load(storage.TopicTable{}, nil)
	core.Ready()
	core.Handle(1, &protocol.CreateTopicRequest{TopicConfig: pc("b", 2, 2, 6)})
	core.Handle(2, &protocol.CreateTopicRequest{TopicConfig: pc("c", 2, 2, 6)})
	rd := core.Ready()
	if rd.Save == nil || len(rd.Replies) != 0 {
		t.Fatalf("before the write: save %v, replies %+v", rd.Save, rd.Replies)
	}
	if rd.Publish == nil || len(rd.Publish) != 2 || len(rd.Save.Topics) != 2 {
		t.Fatalf("one write covers both changes: publish %v, save %v", rd.Publish, rd.Save)
	}
	// A change while the write is out waits for the next write.
	core.Handle(3, &protocol.DeleteTopicRequest{Topic: "b"})
	core.Deleted("b", nil)
	core.Persisted(nil)
	rd2 := core.Ready()
	if len(rd2.Replies) != 2 || rd2.Replies[0].To != 1 || rd2.Replies[1].To != 2 || rd2.Save == nil {
		t.Fatalf("after the write: %+v", rd2)
	}
	core.Persisted(errDisk)
	rd3 := core.Ready()
	if len(rd3.Replies) != 1 || rd3.Replies[0].To != 3 || rd3.Replies[0].Status != protocol.StatusSystemError {
		t.Fatalf("after the failed write: %+v", rd3.Replies)
	}
	// The handed-out table is a copy: later changes do not reach it.
	if _, ok := rd.Save.Topics["b"]; !ok {
		t.Fatal("a later delete changed a table already handed out")
	}
}

func TestTopicsList(t *testing.T) {
	core := NewTopics(8)
	core.Load(storage.TopicTable{Topics: map[string]storage.TopicConfig{"b": tc("b", 2, 6), "a": tc("a", 1, 4), "c": tc("c", 3, 2)}}, nil)
	core.Handle(nil, &protocol.ListTopicsRequest{})
	s := drainTopics(t, core, nil)
	resp := s.replies[0].Fields.(*protocol.TopicListResponse)
	want := []protocol.TopicConfig{pc("a", 1, 1, 4), pc("b", 2, 2, 6), pc("c", 3, 3, 2)}
	if !slices.Equal(resp.Topics, want) {
		t.Fatalf("list %+v, want %+v", resp.Topics, want)
	}
}

func TestTopicsLoad(t *testing.T) {
	queues := []storage.QueueKey{{Topic: "a", QueueID: 0}, {Topic: "lost", QueueID: 0}, {Topic: "lost", QueueID: 11},
		{Topic: "few", QueueID: 1}, {Topic: "%SYS", QueueID: 0}, {Topic: storage.ScheduleTopic, QueueID: 2}}
	core := NewTopics(8)
	core.Load(storage.TopicTable{Topics: map[string]storage.TopicConfig{"a": tc("a", 1, 4)}}, queues)
	s := drainTopics(t, core, nil)
	if len(s.saves) != 0 {
		t.Fatal("loading wrote the table")
	}
	got := map[string]int32{}
	for k, v := range s.publish {
		got[k] = v.WriteQueueNums
		if k != "a" && (v.Perm != storage.PermRead|storage.PermWrite || v.ReadQueueNums != v.WriteQueueNums) {
			t.Errorf("recovered topic %+v", v)
		}
	}
	// A topic's own config wins; a lost one gets enough queues for what is
	// on disk and at least the default; internal (%) topics get none.
	want := map[string]int32{"a": 1, "lost": 12, "few": 8, storage.ScheduleTopic: 8}
	if !maps.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
}

// TestTopicsAdopt: a slave made master adopts, and saves, the topics its
// log's queues name that its table lacks (its old master created them
// after the last metadata sync); a table that lacks none is not written.
func TestTopicsAdopt(t *testing.T) {
	core := NewTopics(8)
	core.Load(storage.TopicTable{Topics: map[string]storage.TopicConfig{"a": tc("a", 1, 4)}}, nil)
	drainTopics(t, core, nil)
	core.Adopt([]storage.QueueKey{{Topic: "a", QueueID: 0}})
	if s := drainTopics(t, core, nil); s.publish != nil || len(s.saves) != 0 {
		t.Fatalf("nothing to adopt changed the table: %+v", s)
	}
	core.Adopt([]storage.QueueKey{{Topic: "a", QueueID: 0}, {Topic: "late", QueueID: 3}})
	s := drainTopics(t, core, nil)
	if len(s.saves) != 1 || s.publish["late"].WriteQueueNums != 8 || s.publish["a"].WriteQueueNums != 1 {
		t.Fatalf("adopting a late topic: %+v", s)
	}
}

func TestTopicsEnsure(t *testing.T) {
	core := NewTopics(8)
	core.Load(storage.TopicTable{Topics: map[string]storage.TopicConfig{"a": tc("a", 1, 4)}}, nil)
	drainTopics(t, core, nil)
	if core.Ensure(tc("a", 8, 6)) {
		t.Fatal("an existing topic was created again")
	}
	if s := drainTopics(t, core, nil); s.publish != nil || len(s.saves) != 0 {
		t.Fatalf("an existing topic changed the table: %+v", s)
	}
	if !core.Ensure(tc("%RETRY%g", 1, 6)) {
		t.Fatal("a new topic was not created")
	}
	s := drainTopics(t, core, errDisk)
	if len(s.saves) != 1 || len(s.replies) != 0 || s.publish["%RETRY%g"].WriteQueueNums != 1 || s.publish["a"].WriteQueueNums != 1 {
		t.Fatalf("auto-create: %+v", s)
	}
	// A failed write of an auto-created topic keeps it.
	if core.Ensure(tc("%RETRY%g", 1, 6)) {
		t.Fatal("created twice after a failed write")
	}
}

func TestTopicsImport(t *testing.T) {
	cases := []struct {
		name    string
		data    string
		wantErr bool
		saved   bool
		want    []string
	}{
		{name: "same", data: `{"a":{"topicName":"a","readQueueNums":1,"writeQueueNums":1,"perm":4}}`, want: []string{"a"}},
		{name: "different", data: `{"b":{"topicName":"b","readQueueNums":2,"writeQueueNums":2,"perm":6}}`, saved: true, want: []string{"b"}},
		{name: "empty", data: `{}`, saved: true, want: []string{}},
		{name: "null", data: `null`, saved: true, want: []string{}},
		{name: "garbage", data: `{"a":`, wantErr: true, want: []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			core := NewTopics(8)
			core.SetRole(true)
			core.Load(storage.TopicTable{Topics: map[string]storage.TopicConfig{"a": tc("a", 1, 4)}}, nil)
			drainTopics(t, core, nil)
			if err := core.Import([]byte(c.data)); (err != nil) != c.wantErr {
				t.Fatalf("err %v", err)
			}
			s := drainTopics(t, core, nil)
			if (len(s.saves) == 1) != c.saved {
				t.Fatalf("%d writes, want a write: %v", len(s.saves), c.saved)
			}
			core.Handle(nil, &protocol.ListTopicsRequest{})
			var got []string
			for _, tc := range drainTopics(t, core, nil).replies[0].Fields.(*protocol.TopicListResponse).Topics {
				got = append(got, tc.Topic)
			}
			if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
				t.Fatalf("topics %v, want %v", got, c.want)
			}
			// The table stays usable after any import.
			core.Ensure(tc("x", 1, 6))
		})
	}
}

func TestTopicsSetRole(t *testing.T) {
	core := NewTopics(8)
	core.Load(storage.TopicTable{}, nil)
	create := func(name string) protocol.Status {
		core.Handle(nil, &protocol.CreateTopicRequest{TopicConfig: pc(name, 1, 1, 6)})
		return drainTopics(t, core, nil).replies[0].Status
	}
	if st := create("m1"); st != protocol.StatusOK {
		t.Fatalf("master: %v", st)
	}
	core.SetRole(true)
	if st := create("s1"); st != protocol.StatusNotMaster {
		t.Fatalf("demoted: %v", st)
	}
	core.SetRole(false)
	if st := create("m2"); st != protocol.StatusOK {
		t.Fatalf("promoted: %v", st)
	}
}

// TestTopicsDeletion: DELETE_TOPIC takes the topic out of the published
// table at once, asks for its messages to be cut away, and is answered only
// after that and the write; a failed cut puts the topic back; creations of
// the topic meanwhile wait for the deletion.
func TestTopicsDeletion(t *testing.T) {
	type step struct {
		in          func(c *Topics)
		wantDelete  []string
		wantSave    bool
		wantReplies []Reply
		wantTopics  []string // published afterwards, if not nil
	}
	ok := func(tok any) Reply { return Reply{To: tok, Status: protocol.StatusOK} }
	cases := []struct {
		name  string
		steps []step
	}{
		{"answered after the cut and the write", []step{
			{in: func(c *Topics) { c.Handle(1, &protocol.DeleteTopicRequest{Topic: "a"}) }, wantDelete: []string{"a"}, wantTopics: []string{"z"}},
			{in: func(c *Topics) { c.Deleted("a", nil) }, wantSave: true},
			{in: func(c *Topics) { c.Persisted(nil) }, wantReplies: []Reply{ok(1)}},
		}},
		{"a failed cut puts the topic back", []step{
			{in: func(c *Topics) { c.Handle(1, &protocol.DeleteTopicRequest{Topic: "a"}) }, wantDelete: []string{"a"}},
			{in: func(c *Topics) { c.Deleted("a", errDisk) }, wantTopics: []string{"a", "z"},
				wantReplies: []Reply{{To: 1, Status: protocol.StatusSystemError, Remark: `topic "a" not deleted: disk on fire`}}},
		}},
		{"a creation meanwhile waits", []step{
			{in: func(c *Topics) { c.Handle(1, &protocol.DeleteTopicRequest{Topic: "a"}) }, wantDelete: []string{"a"}},
			{in: func(c *Topics) { c.Handle(2, &protocol.CreateTopicRequest{TopicConfig: pc("a", 1, 1, 6)}) }},
			{in: func(c *Topics) { c.Handle(3, &protocol.DeleteTopicRequest{Topic: "a"}) },
				wantReplies: []Reply{{To: 3, Status: protocol.StatusTopicNotExist, Remark: `topic "a" does not exist`}}},
			{in: func(c *Topics) { c.Deleted("a", nil) }, wantSave: true, wantTopics: []string{"a", "z"}},
			{in: func(c *Topics) { c.Persisted(nil) }, wantReplies: []Reply{ok(1), ok(2)}},
		}},
		{"a deletion it did not ask for changes nothing", []step{
			{in: func(c *Topics) { c.Deleted("a", nil) }},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewTopics(8)
			c.Load(storage.TopicTable{Topics: map[string]storage.TopicConfig{"a": tc2("a"), "z": tc2("z")}}, nil)
			c.Ready()
			for i, st := range tc.steps {
				st.in(c)
				rd := c.Ready()
				if !slices.Equal(rd.Delete, st.wantDelete) || (rd.Save != nil) != st.wantSave || !slices.Equal(rd.Replies, st.wantReplies) {
					t.Fatalf("step %d: delete %v save %v replies %+v; want %v %v %+v", i, rd.Delete, rd.Save != nil, rd.Replies,
						st.wantDelete, st.wantSave, st.wantReplies)
				}
				if st.wantTopics != nil {
					got := slices.Sorted(maps.Keys(rd.Publish))
					if !slices.Equal(got, st.wantTopics) {
						t.Fatalf("step %d: published %v, want %v", i, got, st.wantTopics)
					}
				}
			}
		})
	}
}

func tc2(name string) storage.TopicConfig { return tc(name, 2, 6) }
