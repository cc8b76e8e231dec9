package clienttest

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// A simple consumer-group coordinator, enough for client tests: members
// join with heartbeats and leave by UNREGISTER_CLIENT or after 3 silent
// intervals; queues (the subscribed topics' and the group's retry topic's)
// are spread with the average strategy (every queue to every member when
// broadcasting); a queue reaches its new owner only once no other member
// lists it as owned; a membership change is pushed to the other members
// with NOTIFY_CONSUMER_IDS_CHANGED. CONSUMER_SEND_MSG_BACK re-stores the
// message in %RETRY%<group> (after RetryDelay of its level, immediately by
// default) or in %DLQ%<group>. It does not model the real coordinator's
// minimal movement or consistent hashing.

type fakeGroups struct {
	interval   time.Duration // 0: 1 s
	retryDelay func(level int) time.Duration
	groups     map[string]*fakeGroup
	sendBacks  []SendBack
}

type fakeGroup struct {
	name     string
	model    string
	strategy string
	orderly  bool
	gen      int64
	members  map[string]*fakeMember
}

type fakeMember struct {
	id    string
	conn  *fakeConn
	last  time.Time
	subs  []protocol.Subscription
	owned map[protocol.QueueRef]bool
	// granted is what the last answer to this member's heartbeat handed
	// it: it may be consuming those already, though it reports them only
	// in its next heartbeat, so they are not free for anybody else.
	granted map[protocol.QueueRef]bool
}

// SendBack is one CONSUMER_SEND_MSG_BACK the fake broker received.
type SendBack struct {
	Group           string
	CommitLogOffset int64
	DelayLevel      int32
	ReconsumeTimes  int32 // of the message given back
	ToDLQ           bool
}

// SetHeartbeatInterval sets the interval heartbeat responses ask for
// (default 1 s); members silent for 3 intervals are dropped.
func (b *Broker) SetHeartbeatInterval(d time.Duration) {
	b.mu.Lock()
	b.grp.interval = d
	b.mu.Unlock()
}

// SetRetryDelay sets the delay of a retry of a given delay level (the
// default stores retries at once).
func (b *Broker) SetRetryDelay(f func(level int) time.Duration) {
	b.mu.Lock()
	b.grp.retryDelay = f
	b.mu.Unlock()
}

// SendBacks returns the CONSUMER_SEND_MSG_BACK requests received so far.
func (b *Broker) SendBacks() []SendBack {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]SendBack(nil), b.grp.sendBacks...)
}

// GroupMembers returns each member's owned queues (as its last heartbeat
// listed them), by client id.
func (b *Broker) GroupMembers(group string) map[string][]protocol.QueueRef {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string][]protocol.QueueRef{}
	if g := b.grp.groups[group]; g != nil {
		for id, m := range g.members {
			out[id] = sortedRefs(m.owned)
		}
	}
	return out
}

func (fg *fakeGroups) iv() time.Duration {
	if fg.interval <= 0 {
		return time.Second
	}
	return fg.interval
}

func sortedRefs(set map[protocol.QueueRef]bool) []protocol.QueueRef {
	out := make([]protocol.QueueRef, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	slices.SortFunc(out, cmpRef)
	return out
}

func cmpRef(a, b protocol.QueueRef) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.QueueID - b.QueueID)
}

// notifyLocked pushes NOTIFY_CONSUMER_IDS_CHANGED to every member but skip.
func (b *Broker) notifyLocked(g *fakeGroup, skip string) {
	for id, m := range g.members {
		if id == skip || m.conn == nil {
			continue
		}
		frame, err := protocol.AppendRequest(nil, 0, protocol.FlagOneway, &protocol.NotifyConsumerIDsChangedRequest{Group: g.name})
		if err != nil {
			panic(err)
		}
		c := m.conn
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.reply(c, frame)
		}()
	}
}

// expireLocked drops members silent for 3 intervals.
func (b *Broker) expireLocked(now time.Time) {
	for _, g := range b.grp.groups {
		changed := false
		for id, m := range g.members {
			if now.Sub(m.last) > 3*b.grp.iv() {
				delete(g.members, id)
				changed = true
			}
		}
		if changed {
			g.gen++
			b.notifyLocked(g, "")
		}
	}
}

func (b *Broker) ensureTopicLocked(name string, queues int32) {
	if b.topics[name] == nil {
		b.putTopicLocked(protocol.TopicConfig{Topic: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6})
	}
}

// targetLocked computes every member's target queues.
func (b *Broker) targetLocked(g *fakeGroup) map[string][]protocol.QueueRef {
	topics := map[string]bool{}
	for _, m := range g.members {
		for _, s := range m.subs {
			topics[s.Topic] = true
		}
	}
	var all []protocol.QueueRef
	for t := range topics {
		if tc := b.topics[t]; tc != nil {
			for q := int32(0); q < tc.cfg.ReadQueueNums; q++ {
				all = append(all, protocol.QueueRef{Topic: t, QueueID: q})
			}
		}
	}
	b.ensureTopicLocked(protocol.RetryTopic(g.name), 1)
	all = append(all, protocol.QueueRef{Topic: protocol.RetryTopic(g.name), QueueID: 0})
	slices.SortFunc(all, cmpRef)
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := map[string][]protocol.QueueRef{}
	if len(ids) == 0 {
		return out
	}
	if g.model == protocol.Broadcasting {
		for _, id := range ids {
			out[id] = all
		}
		return out
	}
	// RocketMQ's AllocateMessageQueueAveragely.
	n, k := len(all), len(ids)
	for i, id := range ids {
		mod := n % k
		size := n / k
		if i < mod {
			size++
		}
		start := i * (n / k)
		if i < mod {
			start += i
		} else {
			start += mod
		}
		out[id] = all[min(start, n):min(start+size, n)]
	}
	return out
}

func (b *Broker) heartbeatLocked(c *fakeConn, r *protocol.HeartbeatRequest) *protocol.HeartbeatResponse {
	now := time.Now()
	if b.grp.groups == nil {
		b.grp.groups = map[string]*fakeGroup{}
	}
	b.expireLocked(now)
	out := &protocol.HeartbeatResponse{HeartbeatIntervalMillis: b.grp.iv().Milliseconds()}
	for _, info := range r.ConsumerGroups {
		g := b.grp.groups[info.Group]
		if g == nil {
			g = &fakeGroup{name: info.Group, model: info.MessageModel, strategy: info.AllocateStrategy,
				orderly: info.ConsumeOrderly, members: map[string]*fakeMember{}}
			if g.model == "" {
				g.model = protocol.Clustering
			}
			b.grp.groups[info.Group] = g
		}
		m := g.members[r.ClientID]
		if m == nil {
			m = &fakeMember{id: r.ClientID}
			g.members[r.ClientID] = m
			g.gen++
			b.notifyLocked(g, r.ClientID)
		}
		if !slices.Equal(m.subs, info.Subscriptions) && m.subs != nil {
			g.gen++
			b.notifyLocked(g, r.ClientID)
		}
		m.conn, m.last, m.subs = c, now, info.Subscriptions
		owned := map[protocol.QueueRef]bool{}
		for _, q := range info.Owned {
			owned[q] = true
		}
		for q := range m.owned {
			if !owned[q] {
				// Released: its next owner may take it now.
				b.notifyLocked(g, r.ClientID)
				break
			}
		}
		m.owned = owned
		target := b.targetLocked(g)[r.ClientID]
		var mine []protocol.QueueRef
		for _, q := range target {
			free := true
			if g.model != protocol.Broadcasting {
				for id, o := range g.members {
					if id != r.ClientID && (o.owned[q] || o.granted[q]) {
						free = false
					}
				}
			}
			if free {
				mine = append(mine, q)
			}
		}
		m.granted = map[protocol.QueueRef]bool{}
		for _, q := range mine {
			m.granted[q] = true
		}
		out.Assignments = append(out.Assignments, protocol.GroupAssignment{Group: g.name, Generation: g.gen, Queues: mine})
	}
	return out
}

// handleGroupLocked answers the group requests other than HEART_BEAT.
func (b *Broker) handleGroupLocked(c *fakeConn, f *protocol.Frame, req protocol.Request) ([]byte, bool) {
	if b.grp.groups == nil {
		b.grp.groups = map[string]*fakeGroup{}
	}
	switch r := req.(type) {
	case *protocol.UnregisterClientRequest:
		for name, g := range b.grp.groups {
			if r.Group != "" && name != r.Group {
				continue
			}
			if g.members[r.ClientID] != nil {
				delete(g.members, r.ClientID)
				g.gen++
				b.notifyLocked(g, "")
			}
		}
		return resp(f, protocol.StatusOK, "", nil), true
	case *protocol.ConsumerSendMsgBackRequest:
		orig := b.byPhys[r.CommitLogOffset]
		if orig == nil {
			return resp(f, protocol.StatusSystemError, "no message at that offset", nil), true
		}
		maxTimes := r.MaxReconsumeTimes
		if maxTimes == 0 {
			maxTimes = 16
		}
		level := int(r.DelayLevel)
		if level == 0 {
			level = 3 + int(orig.ReconsumeTimes)
		}
		dlq := r.DelayLevel < 0 || orig.ReconsumeTimes >= maxTimes
		b.grp.sendBacks = append(b.grp.sendBacks, SendBack{Group: r.Group, CommitLogOffset: r.CommitLogOffset,
			DelayLevel: r.DelayLevel, ReconsumeTimes: orig.ReconsumeTimes, ToDLQ: dlq})
		props := map[string]string{}
		for k, v := range orig.Properties {
			props[k] = v
		}
		if props[protocol.PropertyRetryTopic] == "" {
			props[protocol.PropertyRetryTopic] = orig.Topic
		}
		if props[protocol.PropertyOriginMessageID] == "" {
			props[protocol.PropertyOriginMessageID] = orig.MsgID
		}
		times := orig.ReconsumeTimes + 1
		props[protocol.PropertyReconsumeTime] = strconv.Itoa(int(times))
		props[protocol.PropertyMaxReconsumeTimes] = strconv.Itoa(int(maxTimes))
		topic := protocol.RetryTopic(r.Group)
		if dlq {
			topic = protocol.DLQTopic(r.Group)
		}
		msg := protocol.Message{Topic: topic, Flag: orig.Flag, Body: orig.Body, Properties: props}
		store := func() {
			b.ensureTopicLocked(topic, 1)
			q, off, _, _, _ := b.storeLocked(c, topic, 0, orig.BornTimestamp, []protocol.Message{msg})
			b.topics[topic].queues[q].msgs[off].ReconsumeTimes = times
		}
		var delay time.Duration
		if !dlq && b.grp.retryDelay != nil {
			delay = b.grp.retryDelay(level)
		}
		if delay <= 0 {
			store()
		} else {
			time.AfterFunc(delay, func() {
				b.mu.Lock()
				defer b.mu.Unlock()
				store()
			})
		}
		return resp(f, protocol.StatusOK, "", nil), true
	case *protocol.GetConsumerGroupsRequest:
		b.expireLocked(time.Now())
		var out protocol.ConsumerGroupsResponse
		names := make([]string, 0, len(b.grp.groups))
		for n := range b.grp.groups {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			g := b.grp.groups[n]
			d := b.describeLocked(g)
			s := protocol.GroupSummary{Group: n, MessageModel: g.model, Members: int32(len(g.members))}
			seen := map[string]bool{}
			for _, q := range d.Queues {
				if !seen[q.Topic] {
					seen[q.Topic] = true
					s.Topics = append(s.Topics, q.Topic)
				}
				s.Lag += q.Lag
			}
			out.Groups = append(out.Groups, s)
		}
		return resp(f, protocol.StatusOK, "", &out), true
	case *protocol.DescribeConsumerGroupRequest:
		b.expireLocked(time.Now())
		g := b.grp.groups[r.Group]
		if g == nil {
			return resp(f, protocol.StatusQueryNotFound, "no such group", nil), true
		}
		d := b.describeLocked(g)
		return resp(f, protocol.StatusOK, "", &d), true
	}
	return nil, false
}

func (b *Broker) describeLocked(g *fakeGroup) protocol.ConsumerGroupDescription {
	d := protocol.ConsumerGroupDescription{Group: g.name, MessageModel: g.model, AllocateStrategy: g.strategy,
		ConsumeOrderly: g.orderly, Generation: g.gen}
	target := b.targetLocked(g)
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	owner := map[protocol.QueueRef]string{}
	pending := map[protocol.QueueRef]string{}
	for _, id := range ids {
		m := g.members[id]
		d.Members = append(d.Members, protocol.GroupMember{ClientID: id, LastHeartbeatMs: m.last.UnixMilli(), Queues: target[id]})
		for q := range m.owned {
			owner[q] = id
		}
		for _, q := range target[id] {
			if owner[q] != id {
				pending[q] = id
			}
		}
	}
	var all []protocol.QueueRef
	seen := map[protocol.QueueRef]bool{}
	for _, id := range ids {
		for _, q := range target[id] {
			if !seen[q] {
				seen[q] = true
				all = append(all, q)
			}
		}
	}
	slices.SortFunc(all, cmpRef)
	for _, q := range all {
		gq := protocol.GroupQueue{Topic: q.Topic, QueueID: q.QueueID, Owner: owner[q], CommittedOffset: -1}
		if p := pending[q]; p != "" && p != owner[q] {
			gq.Pending = p
		}
		if off, ok := b.offsets[key3(g.name, q.Topic, q.QueueID)]; ok {
			gq.CommittedOffset = off
		}
		if t := b.topics[q.Topic]; t != nil && int(q.QueueID) < len(t.queues) {
			gq.MaxOffset = int64(len(t.queues[q.QueueID].msgs))
		}
		gq.Lag = gq.MaxOffset - max(gq.CommittedOffset, 0)
		d.Queues = append(d.Queues, gq)
	}
	return d
}
