package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// views are the broker state its owners publish for readers on other
// goroutines (the transport's, other actors'): immutable snapshots and
// atomics, written only by the owner named on each.
type views struct {
	// topics is the topic table, replaced whole on every change by the
	// topic manager; the writer adds the topics sends auto-create
	// (addTopics) and tells the manager at once.
	topics atomic.Pointer[map[string]storage.TopicConfig]
	// bounds are each queue's min and max offsets, published by the
	// queue's DispatchActor.
	bounds sync.Map // storage.QueueKey -> *queueBounds
	// role is the broker's role, published by the writer as it takes one
	// (the role supervisor publishes the first), so a restarted writer
	// resumes the role in force. gens numbers the writer's roles: a dial
	// or timer of an earlier role, or of an earlier incarnation of the
	// writer, is recognised as stale.
	role atomic.Pointer[roleState]
	gens atomic.Int64
	// slaves describe a master's slaves; haStatus and masterMax a slave's
	// link. Published by the writer.
	slaves    atomic.Pointer[[]protocol.SlaveInfo]
	haStatus  atomic.Pointer[string]
	masterMax atomic.Int64
	// fence, if set, is why this broker refuses sends (controller mode:
	// not the master of the current epoch), or until when it may take them
	// (its master lease). Published by the controller client, read by the
	// writer at each batch; nil in classic mode.
	fence atomic.Pointer[fence]
	// ackSet is the broker ids a SYNC send waits for (controller mode),
	// published by the controller client for the durability actor.
	ackSet atomic.Pointer[[]int64]
	// confirm is how far this broker's log is confirmed (controller
	// mode: a master's confirm offset, a slave's as its master last said),
	// for the controller heartbeat. Published by the durability actor on a
	// master, by the writer on a slave.
	confirm atomic.Int64
	// ctlID is the brokerId the controllers assigned (controller mode; a
	// master is brokerId 0 to clients but this in the SyncStateSet),
	// published by the controller client.
	ctlID atomic.Int64
	// snapshot is the latest BrokerSnapshot, published by the snapshot
	// actor (snapshot.go) for Broker.Snapshot.
	snapshot atomic.Pointer[BrokerSnapshot]
}

// fence is the controller client's word on sends: refused with why, or,
// if why is "", taken until the lease end (zero: no end).
type fence struct {
	why   string
	until time.Time
}

func (v *views) publishConfirm(off int64) { v.confirm.Store(off) }

func (v *views) confirmOffset() int64 { return v.confirm.Load() }

// publishFence sets why sends are refused ("": they are not, until until).
func (v *views) publishFence(why string, until time.Time) {
	v.fence.Store(&fence{why: why, until: until})
}

// fenced returns why sends are refused at now, or "".
func (v *views) fenced(now time.Time) string {
	f := v.fence.Load()
	switch {
	case f == nil:
		return ""
	case f.why != "":
		return f.why
	case !f.until.IsZero() && !now.Before(f.until):
		return "the master lease expired (the controllers did not answer in time)"
	}
	return ""
}

func (v *views) publishAckSet(ids []int64) { v.ackSet.Store(&ids) }

func (v *views) ackSetSnapshot() []int64 {
	if p := v.ackSet.Load(); p != nil {
		return *p
	}
	return nil
}

func (v *views) publishRole(r roleState) { v.role.Store(&r) }

// nextGen returns a role generation never returned before.
func (v *views) nextGen() int { return int(v.gens.Add(1)) }

// currentRole returns the broker's role.
func (v *views) currentRole() roleState {
	if r := v.role.Load(); r != nil {
		return *r
	}
	return roleState{}
}

func (v *views) publishSlaves(s []protocol.SlaveInfo) { v.slaves.Store(&s) }

func (v *views) slavesSnapshot() []protocol.SlaveInfo {
	if p := v.slaves.Load(); p != nil {
		return *p
	}
	return nil
}

func (v *views) publishFollower(status string, masterMax int64) {
	if p := v.haStatus.Load(); p == nil || *p != status {
		v.haStatus.Store(&status)
	}
	v.masterMax.Store(masterMax)
}

func (v *views) followerSnapshot() (string, int64) {
	s := ""
	if p := v.haStatus.Load(); p != nil {
		s = *p
	}
	return s, v.masterMax.Load()
}

// queueBounds are a queue's min and max offsets.
type queueBounds struct{ min, max atomic.Int64 }

func newViews() *views {
	v := &views{}
	empty := map[string]storage.TopicConfig{}
	v.topics.Store(&empty)
	return v
}

// topicsSnapshot returns the current topic table; callers must not modify it.
func (v *views) topicsSnapshot() map[string]storage.TopicConfig { return *v.topics.Load() }

// publishTopics replaces the topic table (its owner, the topic manager).
func (v *views) publishTopics(t map[string]storage.TopicConfig) { v.topics.Store(&t) }

// addTopics adds topics a send auto-created to the published table, on
// top of whatever the topic manager published last (compare and swap: a
// table the manager publishes meanwhile, a deletion say, is never
// overwritten by an older copy). The manager is told and takes them into
// its own table, which it publishes next.
func (v *views) addTopics(tcs []storage.TopicConfig) {
	for {
		cur := v.topics.Load()
		next := make(map[string]storage.TopicConfig, len(*cur)+len(tcs))
		for k, c := range *cur {
			next[k] = c
		}
		for _, tc := range tcs {
			if _, ok := next[tc.TopicName]; !ok {
				next[tc.TopicName] = tc
			}
		}
		if v.topics.CompareAndSwap(cur, &next) {
			return
		}
	}
}

func (v *views) queueBounds(k storage.QueueKey) (int64, int64) {
	if x, ok := v.bounds.Load(k); ok {
		qb := x.(*queueBounds)
		return qb.min.Load(), qb.max.Load()
	}
	return 0, 0
}

// queueKnown reports whether a DispatchActor ever published bounds for k.
func (v *views) queueKnown(k storage.QueueKey) bool {
	_, ok := v.bounds.Load(k)
	return ok
}

func (v *views) publishBounds(k storage.QueueKey, min, max int64) {
	x, ok := v.bounds.Load(k)
	if !ok {
		x, _ = v.bounds.LoadOrStore(k, &queueBounds{})
	}
	qb := x.(*queueBounds)
	qb.min.Store(min)
	qb.max.Store(max)
}

// dropBounds forgets k's bounds: its topic was deleted (its DispatchActor
// only).
func (v *views) dropBounds(k storage.QueueKey) { v.bounds.Delete(k) }

// knownQueues is how many queues of topic have entries here (highest queue
// id + 1), from the bounds the DispatchActors publish.
func (v *views) knownQueues(topic string) int32 {
	n := int32(0)
	v.bounds.Range(func(k, _ any) bool {
		if qk := k.(storage.QueueKey); qk.Topic == topic && qk.QueueID+1 > n {
			n = qk.QueueID + 1
		}
		return true
	})
	return n
}
