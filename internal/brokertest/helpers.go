package brokertest

import (
	"slices"
	"strconv"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// The helpers ask the broker itself, on connections of their own that
// bypass the proxy (so they are not counted, stalled or rewritten). A
// failed call fails the test.

// ask is call to the running broker that fails the test on a transport
// error or a status not in ok.
func (b *Broker) ask(req protocol.Request, into protocol.Fields, ok ...protocol.Status) protocol.Status {
	b.t.Helper()
	b.mu.Lock()
	r := b.run
	b.mu.Unlock()
	if r == nil {
		b.t.Fatalf("brokertest: %v asked of a stopped broker", req.RequestCode())
	}
	st, remark, err := call(r.srv.Addr(), req, into)
	if err != nil {
		b.t.Fatalf("brokertest: %v", err)
	}
	if st != protocol.StatusOK && !slices.Contains(ok, st) {
		b.t.Fatalf("brokertest: %v: %v %s", req.RequestCode(), st, remark)
	}
	return st
}

// CreateTopic creates (or reconfigures) a read-write topic with queues
// queues.
func (b *Broker) CreateTopic(name string, queues int32) {
	b.t.Helper()
	b.ask(&protocol.UpdateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: name,
		ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}}, nil)
}

// CommittedOffset is a group's committed offset of one queue, and
// whether it has one.
func (b *Broker) CommittedOffset(group, topic string, q int32) (int64, bool) {
	b.t.Helper()
	var out protocol.OffsetResponse
	st := b.ask(&protocol.QueryConsumerOffsetRequest{ConsumerGroup: group, Topic: topic, QueueID: q}, &out,
		protocol.StatusQueryNotFound)
	return out.Offset, st == protocol.StatusOK
}

// QueueCount is the number of queues of topic (0 if there is none).
func (b *Broker) QueueCount(topic string) int {
	b.t.Helper()
	return int(b.queueCount(topic))
}

// queueCount is QueueCount as a queue id.
func (b *Broker) queueCount(topic string) int32 {
	b.t.Helper()
	var out protocol.TopicListResponse
	b.ask(&protocol.ListTopicsRequest{}, &out)
	for _, tc := range out.Topics {
		if tc.Topic == topic {
			return max(tc.ReadQueueNums, tc.WriteQueueNums)
		}
	}
	return 0
}

// WaitDispatched waits until the broker has dispatched everything it has
// written to its ConsumeQueues, and their owners have published their
// bounds (what GET_MAX_OFFSET answers). A send is answered once it is in
// the log and its queue entry follows a moment later, so a pull or a max
// offset asked right after a send may not see it yet (as with RocketMQ).
func (b *Broker) WaitDispatched() {
	b.t.Helper()
	b.waitReput()
	var out protocol.TopicListResponse
	b.ask(&protocol.ListTopicsRequest{}, &out)
	for _, tc := range out.Topics {
		for q := range max(tc.ReadQueueNums, tc.WriteQueueNums) {
			b.bounds(tc.Topic, q) // answered by the queue's owner once it applied what came before
		}
	}
}

// waitReput waits until the Reput actor has read all the log holds and
// handed each entry to its queue's owner.
func (b *Broker) waitReput() {
	b.t.Helper()
	caughtUp := func() bool {
		var info protocol.BrokerRuntimeInfo
		b.ask(&protocol.GetBrokerRuntimeInfoRequest{}, &info)
		d, err := strconv.ParseInt(info.Extra["dispatched"], 10, 64)
		return err == nil && d >= info.CommitLogMaxOffset
	}
	if !testwait.Until(testwait.Wall, 5*time.Second, caughtUp) {
		b.t.Fatal("brokertest: the broker's queues did not catch up with its log within 5s")
	}
}

// Total is the number of messages stored in topic (0 if there is none),
// once the broker has dispatched all it has written.
func (b *Broker) Total(topic string) int {
	b.t.Helper()
	b.waitReput()
	n := int64(0)
	for q := range b.queueCount(topic) {
		lo, hi, _ := b.bounds(topic, q)
		n += hi - lo
	}
	return int(n)
}

// bounds is one queue's min and max offset as the queue's owner has
// them, asked with a pull (false if the broker knows no such queue). A
// pull reaches the owner through the Reput actor, after every entry the
// Reput actor handed it before (waitReput); the published bounds that
// GET_MAX_OFFSET reads may lag those by a moment.
func (b *Broker) bounds(topic string, q int32) (lo, hi int64, ok bool) {
	b.t.Helper()
	var res protocol.PullResponse
	st := b.ask(&protocol.PullRequest{ConsumerGroup: "brokertest", Topic: topic, QueueID: q, MaxMsgNums: 1}, &res,
		protocol.StatusPullNotFound, protocol.StatusPullRetryImmediately, protocol.StatusPullOffsetMoved, protocol.StatusTopicNotExist)
	if st == protocol.StatusTopicNotExist {
		return 0, 0, false
	}
	return res.MinOffset, res.MaxOffset, true
}

// Messages are the messages stored in one queue, from its min offset on,
// once the broker has dispatched all it has written.
func (b *Broker) Messages(topic string, q int32) []protocol.MessageExt {
	b.t.Helper()
	b.waitReput()
	off, hi, ok := b.bounds(topic, q)
	if !ok {
		return nil
	}
	var out []protocol.MessageExt
	for off < hi {
		var res protocol.PullResponse
		b.ask(&protocol.PullRequest{ConsumerGroup: "brokertest", Topic: topic, QueueID: q, QueueOffset: off, MaxMsgNums: 256},
			&res, protocol.StatusPullNotFound, protocol.StatusPullRetryImmediately)
		if res.NextBeginOffset <= off {
			b.t.Fatalf("brokertest: pull of %s/%d at %d made no progress (next %d, max %d)", topic, q, off, res.NextBeginOffset, hi)
		}
		out = append(out, res.Messages...)
		off = res.NextBeginOffset
	}
	return out
}

// GroupMembers are the queues the broker's coordinator assigns each live
// member of group, by client id (none if the group is unknown).
func (b *Broker) GroupMembers(group string) map[string][]protocol.QueueRef {
	b.t.Helper()
	var d protocol.ConsumerGroupDescription
	st := b.ask(&protocol.DescribeConsumerGroupRequest{Group: group}, &d, protocol.StatusQueryNotFound)
	out := map[string][]protocol.QueueRef{}
	if st != protocol.StatusOK {
		return out
	}
	for _, m := range d.Members {
		out[m.ClientID] = m.Queues
	}
	return out
}
