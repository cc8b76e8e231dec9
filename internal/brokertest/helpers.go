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

// offsets is a queue's min and max offset.
func (b *Broker) offsets(topic string, q int32) (lo, hi int64) {
	b.t.Helper()
	var minOff, maxOff protocol.OffsetResponse
	b.ask(&protocol.GetMinOffsetRequest{Topic: topic, QueueID: q}, &minOff)
	b.ask(&protocol.GetMaxOffsetRequest{Topic: topic, QueueID: q}, &maxOff)
	return minOff.Offset, maxOff.Offset
}

// WaitDispatched waits until the broker has dispatched everything it has
// written to its ConsumeQueues: a send is answered once it is in the log,
// and its queue entry follows a moment later, so a pull or a max offset
// asked right after a send may not see it yet (as with RocketMQ).
func (b *Broker) WaitDispatched() {
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
// once the broker has indexed all it has written.
func (b *Broker) Total(topic string) int {
	b.t.Helper()
	b.WaitDispatched()
	n := int64(0)
	for q := range b.queueCount(topic) {
		lo, hi := b.offsets(topic, q)
		n += hi - lo
	}
	return int(n)
}

// Messages are the messages stored in one queue, from its min offset on,
// once the broker has indexed all it has written.
func (b *Broker) Messages(topic string, q int32) []protocol.MessageExt {
	b.t.Helper()
	b.WaitDispatched()
	var minOff, maxOff protocol.OffsetResponse
	if b.ask(&protocol.GetMinOffsetRequest{Topic: topic, QueueID: q}, &minOff, protocol.StatusTopicNotExist) != protocol.StatusOK {
		return nil // a queue the broker has never written (a topic it does not list may have some)
	}
	b.ask(&protocol.GetMaxOffsetRequest{Topic: topic, QueueID: q}, &maxOff)
	off, hi := minOff.Offset, maxOff.Offset
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
