package actors

import (
	"reflect"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// snapshotOf derives the behind counts, the lag in time and the
// SyncStateSet, and sorts what it lists.
func TestSnapshotOf(t *testing.T) {
	now := time.UnixMilli(100_000)
	bounds := map[storage.QueueKey][2]int64{{Topic: "a", QueueID: 0}: {0, 10}, {Topic: "a", QueueID: 1}: {2, 5}}
	base := func() snapInput {
		return snapInput{
			now: now, boot: now.Add(-time.Minute), cfg: Config{BrokerName: "b", BrokerClusterName: "c", BrokerAddr: "h:1"},
			role: roleState{role: RoleAsyncMaster},
			log:  LogSnapshot{MinOffset: 100, MaxOffset: 1000, FlushedOffset: 900, DispatchedOffset: 1000},
			topics: map[string]storage.TopicConfig{
				"z": {TopicName: "z", ReadQueueNums: 1, WriteQueueNums: 1},
				"a": {TopicName: "a", ReadQueueNums: 2, WriteQueueNums: 1},
			},
			bounds: func(k storage.QueueKey) (int64, int64) { b := bounds[k]; return b[0], b[1] },
			known:  func(string) int32 { return 0 },
			groups: map[string]*protocol.ConsumerGroupDescription{
				"g2": {Group: "g2"},
				"g1": {Group: "g1", Queues: []protocol.GroupQueue{
					{Topic: "a", QueueID: 0, CommittedOffset: 4, MaxOffset: 10, Lag: 6},
					{Topic: "a", QueueID: 1, CommittedOffset: 5, MaxOffset: 5, Lag: 0},
				}},
			},
			ages: map[ageKey]int64{
				{"g1", storage.QueueKey{Topic: "a", QueueID: 0}}: 97_500,
				{"g1", storage.QueueKey{Topic: "a", QueueID: 1}}: 1, // stale: no lag now
			},
			slaves: []protocol.SlaveInfo{{BrokerID: 2, LagBytes: 7}, {BrokerID: 1, InSync: true}},
			ackSet: []int64{2},
		}
	}
	for _, c := range []struct {
		name  string
		mut   func(*snapInput)
		check func(t *testing.T, s *BrokerSnapshot)
	}{
		{"log", nil, func(t *testing.T, s *BrokerSnapshot) {
			if s.CommitLog.FlushBehindBytes != 100 || s.CommitLog.DispatchBehindBytes != 0 || s.CommitLog.SizeBytes != 900 {
				t.Errorf("commit log %+v", s.CommitLog)
			}
			if s.UptimeMs != 60_000 || s.BrokerAddr != "h:1" {
				t.Errorf("uptime %d addr %q", s.UptimeMs, s.BrokerAddr)
			}
		}},
		{"topics sorted, every queue", nil, func(t *testing.T, s *BrokerSnapshot) {
			if len(s.Topics) != 2 || s.Topics[0].Topic != "a" || s.Topics[1].Topic != "z" {
				t.Fatalf("topics %+v", s.Topics)
			}
			want := []QueueSnapshot{{0, 0, 10}, {1, 2, 5}}
			if !reflect.DeepEqual(s.Topics[0].Queues, want) {
				t.Errorf("queues of a %+v, want %+v", s.Topics[0].Queues, want)
			}
		}},
		{"lag in messages and time", nil, func(t *testing.T, s *BrokerSnapshot) {
			if len(s.Groups) != 2 || s.Groups[0].Group != "g1" {
				t.Fatalf("groups %+v", s.Groups)
			}
			g := s.Groups[0]
			if g.Lag != 6 || g.Queues[0].LagMs != 2500 || g.Queues[1].LagMs != 0 {
				t.Errorf("g1 %+v", g)
			}
		}},
		{"a store time in the future is no lag", func(in *snapInput) {
			in.ages[ageKey{"g1", storage.QueueKey{Topic: "a", QueueID: 0}}] = 200_000
		}, func(t *testing.T, s *BrokerSnapshot) {
			if ms := s.Groups[0].Queues[0].LagMs; ms != 0 {
				t.Errorf("lagMs %d, want 0", ms)
			}
		}},
		{"classic master: slaves sorted, no set", nil, func(t *testing.T, s *BrokerSnapshot) {
			r := s.Replication
			if len(r.Slaves) != 2 || r.Slaves[0].BrokerID != 1 || r.InSyncSlaves != 1 || r.SyncStateSet != nil {
				t.Errorf("replication %+v", r)
			}
		}},
		{"controller master: the set has the master", func(in *snapInput) {
			in.cfg.EnableControllerMode = true
			in.role = roleState{role: RoleSyncMaster, epoch: 4} // brokerId 0 to clients
			in.ctlID = 3
		}, func(t *testing.T, s *BrokerSnapshot) {
			if r := s.Replication; !reflect.DeepEqual(r.SyncStateSet, []int64{2, 3}) || r.Epoch != 4 || r.ControllerBrokerID != 3 {
				t.Errorf("replication %+v", r)
			}
		}},
		{"slave: its link, not slaves", func(in *snapInput) {
			in.role = roleState{role: RoleSlave, master: "m:2", brokerID: 1}
			in.haStatus, in.masterMax = "streaming", 5000
		}, func(t *testing.T, s *BrokerSnapshot) {
			if r := s.Replication; r.Master != "m:2" || r.HAStatus != "streaming" || r.MasterMaxOffset != 5000 || len(r.Slaves) != 0 {
				t.Errorf("replication %+v", r)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := base()
			if c.mut != nil {
				c.mut(&in)
			}
			c.check(t, snapshotOf(in))
		})
	}
}

// With Env.Metrics set, the broker hands the seam a snapshot each
// SnapshotInterval: the queue bounds, the group's lag as DESCRIBE says,
// its age from the store time, and mailbox depths; Broker.Snapshot
// returns the same.
func TestSnapshotSeam(t *testing.T) {
	rec := newRecorder()
	h := startBrokerEnv(t, vfs.NewMem(), nil, Env{Metrics: rec})
	for _, body := range []string{"a", "bb", "ccc"} {
		h.ok(h.send(sendReq("t", 0, body))[0], nil)
	}
	c := h.newMemberConn()
	h.heartbeat(c, "c1", sub("g"))
	h.ok(h.send(&protocol.UpdateConsumerOffsetRequest{ConsumerGroup: "g", Topic: "t", QueueID: 0, CommitOffset: 1})[0], nil)
	h.loop.Advance(1500 * time.Millisecond) // the message is that old; the member's lease runs on
	want := h.describe("g")
	var got *GroupSnapshot
	ok := h.loop.RunUntil(func() bool {
		s := rec.last()
		if s == nil || len(s.Groups) == 0 {
			return false
		}
		got = &s.Groups[0]
		for _, q := range got.Queues {
			if q.Topic == "t" && q.QueueID == 0 {
				return got.Lag == 2 && q.LagMs >= 1500
			}
		}
		return false
	}, 2*time.Second)
	if !ok {
		t.Fatalf("no snapshot with the lag of g: %+v", rec.last())
	}
	var lag int64
	for _, q := range want.Queues {
		lag += q.Lag
	}
	if got.Lag != lag || got.Group != "g" || len(got.Members) != 1 || got.Members[0].ClientID != "c1" {
		t.Errorf("snapshot group %+v, describe lag %d", got, lag)
	}
	s := h.b.Snapshot()
	if s == nil || s.Topics[0].Topic != "t" || s.Topics[0].Queues[0].MaxOffset != 3 {
		t.Fatalf("published snapshot %+v", s)
	}
	if _, ok := s.MailboxDepths["writer"]; !ok || s.CommitLog.MaxOffset == 0 {
		t.Errorf("mailboxes %v, log %+v", s.MailboxDepths, s.CommitLog)
	}
	if seg := testStoreConfig().MappedFileSizeCommitLog; s.CommitLog.DiskBytes != seg {
		t.Errorf("disk bytes %d, want one segment of %d", s.CommitLog.DiskBytes, seg)
	}
}
