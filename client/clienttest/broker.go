// Package clienttest provides an in-memory Wharf broker for tests: it speaks
// the wire protocol on a loopback port and keeps topics, queues of messages
// and consumer offsets in memory, with long polling, query by key and id.
// Tests steer it with status hooks and stalls, stop and restart it.
// It is no model of the real broker's storage or durability.
package clienttest

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Broker is an in-memory broker speaking the wire protocol on a
// loopback port: topics, queues of messages, consumer offsets, long polling,
// query by key and id. Tests steer it with statusHook and stall.
type Broker struct {
	t    testing.TB
	addr string

	mu         sync.Mutex
	ln         net.Listener
	conns      map[*fakeConn]struct{}
	topics     map[string]*fakeTopic
	byPhys     map[int64]*protocol.MessageExt
	offsets    map[string]int64 // group \x00 topic \x00 queue
	physNext   int64
	autoCreate bool
	requests   map[protocol.Code]int
	heartbeats int
	// statusHook, if set, is asked for every request (n counts requests
	// of that code, from 1). A non-zero status for a SEND is applied after
	// storing if it is a Stored status, instead of storing otherwise; for
	// other codes it replaces the answer.
	statusHook func(code protocol.Code, n int) protocol.Status
	// stall: requests of these codes are never answered.
	stall map[protocol.Code]bool
	// suggest is the SuggestWhichBrokerID of pull responses.
	suggest int64
	// grp is the consumer-group coordinator (groups.go).
	grp fakeGroups
	// role is the last UPDATE_BROKER_ROLE accepted (brokerRole
	// ASYNC_MASTER until one is), reported by GET_BROKER_RUNTIME_INFO.
	role protocol.UpdateBrokerRoleRequest

	stopped chan struct{} // closed by stop; replaced by restart
	wg      sync.WaitGroup
	store   netip.AddrPort
}

type fakeTopic struct {
	cfg    protocol.TopicConfig
	queues []*fakeQueue
	rr     int
}

type fakeQueue struct {
	msgs   []*protocol.MessageExt
	notify chan struct{} // closed and replaced when a message is appended
}

type fakeConn struct {
	nc   net.Conn
	wmu  sync.Mutex
	done chan struct{}
	once sync.Once
}

func (c *fakeConn) close() {
	c.once.Do(func() { close(c.done); c.nc.Close() })
}

// NewBroker starts a broker on a loopback port; t.Cleanup stops it.
func NewBroker(t testing.TB) *Broker {
	t.Helper()
	b := &Broker{
		t:        t,
		conns:    map[*fakeConn]struct{}{},
		topics:   map[string]*fakeTopic{},
		byPhys:   map[int64]*protocol.MessageExt{},
		offsets:  map[string]int64{},
		requests: map[protocol.Code]int{},
		stall:    map[protocol.Code]bool{},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	b.store = netip.MustParseAddrPort(b.addr)
	b.start(ln)
	t.Cleanup(b.Stop)
	return b
}

func (b *Broker) start(ln net.Listener) {
	b.mu.Lock()
	b.ln = ln
	b.stopped = make(chan struct{})
	b.mu.Unlock()
	b.wg.Add(1)
	go b.accept(ln)
}

// Stop closes the listener and every connection (the data stays). It is
// registered with t.Cleanup by NewBroker.
func (b *Broker) Stop() {
	b.mu.Lock()
	if b.ln == nil {
		b.mu.Unlock()
		return
	}
	b.ln.Close()
	b.ln = nil
	close(b.stopped)
	conns := b.conns
	b.conns = map[*fakeConn]struct{}{}
	b.mu.Unlock()
	for c := range conns {
		c.close()
	}
	b.wg.Wait()
}

// Restart listens again on the same address, with the data kept.
func (b *Broker) Restart() {
	b.t.Helper()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ln, err = net.Listen("tcp", b.addr); err == nil {
			break
		}
	}
	if err != nil {
		b.t.Fatalf("restart: %v", err)
	}
	b.start(ln)
}

// DropConns closes every client connection but keeps listening.
func (b *Broker) DropConns() {
	b.mu.Lock()
	conns := b.conns
	b.conns = map[*fakeConn]struct{}{}
	b.mu.Unlock()
	for c := range conns {
		c.close()
	}
}

// Addr returns the broker's "127.0.0.1:port".
func (b *Broker) Addr() string { return b.addr }

// StoreHost returns the address message ids are made of.
func (b *Broker) StoreHost() netip.AddrPort { return b.store }

// SetAutoCreate makes sends to an unknown topic create it (4 queues).
func (b *Broker) SetAutoCreate(on bool) {
	b.mu.Lock()
	b.autoCreate = on
	b.mu.Unlock()
}

// Heartbeats returns how many HEART_BEAT requests arrived.
func (b *Broker) Heartbeats() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.heartbeats
}

// Count returns how many requests of code arrived.
func (b *Broker) Count(code protocol.Code) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests[code]
}

// SetStatusHook sets the status hook (see the statusHook field); nil
// removes it.
func (b *Broker) SetStatusHook(h func(code protocol.Code, n int) protocol.Status) {
	b.mu.Lock()
	b.statusHook = h
	b.mu.Unlock()
}

// SetStall makes requests of code go unanswered (on) or answered again.
func (b *Broker) SetStall(code protocol.Code, on bool) {
	b.mu.Lock()
	b.stall[code] = on
	b.mu.Unlock()
}

// SetPullSuggestion sets the SuggestWhichBrokerID of every pull response
// (0, the default: no suggestion; 1: read from a slave), as a master does
// for consumers far behind the head.
func (b *Broker) SetPullSuggestion(brokerID int64) {
	b.mu.Lock()
	b.suggest = brokerID
	b.mu.Unlock()
}

// SyncFrom makes b a copy of src, as replication would: the topics and
// every message src has that b lacks (appended at the same queue offsets and
// commit log positions, waking b's long polls), and the consumer offsets
// merged by max. b's own extra messages stay. b may be stopped.
func (b *Broker) SyncFrom(src *Broker) {
	type queueCopy struct {
		topic string
		cfg   protocol.TopicConfig
		msgs  [][]*protocol.MessageExt
	}
	src.mu.Lock()
	var topics []queueCopy
	for name, t := range src.topics {
		qc := queueCopy{topic: name, cfg: t.cfg}
		for _, q := range t.queues {
			qc.msgs = append(qc.msgs, append([]*protocol.MessageExt(nil), q.msgs...))
		}
		topics = append(topics, qc)
	}
	offsets := make(map[string]int64, len(src.offsets))
	for k, v := range src.offsets {
		offsets[k] = v
	}
	physNext := src.physNext
	src.mu.Unlock()

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, qc := range topics {
		b.putTopicLocked(qc.cfg)
		t := b.topics[qc.topic]
		for i, msgs := range qc.msgs {
			fq := t.queues[i]
			if len(fq.msgs) >= len(msgs) {
				continue
			}
			for _, m := range msgs[len(fq.msgs):] {
				cp := *m
				fq.msgs = append(fq.msgs, &cp)
				b.byPhys[cp.CommitLogOffset] = &cp
			}
			close(fq.notify)
			fq.notify = make(chan struct{})
		}
	}
	for k, v := range offsets {
		if cur, ok := b.offsets[k]; !ok || v > cur {
			b.offsets[k] = v
		}
	}
	b.physNext = max(b.physNext, physNext)
}

// CommittedOffset returns a group's committed offset of one queue, and
// whether there is one.
func (b *Broker) CommittedOffset(group, topic string, q int32) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	off, ok := b.offsets[key3(group, topic, q)]
	return off, ok
}

// CreateTopic creates (or resizes) a read-write topic with queues queues.
func (b *Broker) CreateTopic(name string, queues int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.putTopicLocked(protocol.TopicConfig{Topic: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6})
}

func (b *Broker) putTopicLocked(cfg protocol.TopicConfig) {
	t := b.topics[cfg.Topic]
	if t == nil {
		t = &fakeTopic{}
		b.topics[cfg.Topic] = t
	}
	t.cfg = cfg
	for int32(len(t.queues)) < max(cfg.ReadQueueNums, cfg.WriteQueueNums) {
		t.queues = append(t.queues, &fakeQueue{notify: make(chan struct{})})
	}
}

// Messages returns the messages stored in one queue.
func (b *Broker) Messages(topic string, q int) []*protocol.MessageExt {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[topic]
	if t == nil || q >= len(t.queues) {
		return nil
	}
	return append([]*protocol.MessageExt(nil), t.queues[q].msgs...)
}

// Total returns the number of messages stored in a topic.
func (b *Broker) Total(topic string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	if t := b.topics[topic]; t != nil {
		for _, q := range t.queues {
			n += len(q.msgs)
		}
	}
	return n
}

func (b *Broker) accept(ln net.Listener) {
	defer b.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c := &fakeConn{nc: nc, done: make(chan struct{})}
		b.mu.Lock()
		if b.ln != ln {
			b.mu.Unlock()
			nc.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go b.serve(c)
	}
}

func (b *Broker) serve(c *fakeConn) {
	defer b.wg.Done()
	defer func() {
		c.close()
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
	}()
	br := bufio.NewReader(c.nc)
	lim := protocol.DefaultLimits()
	for {
		var prefix [8]byte
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			return
		}
		if _, err := protocol.Split(prefix[:], lim); err != nil {
			b.reply(c, protocol.AppendErrorResponse(nil, 0, 0, protocol.StatusFrameIllegal, err.Error()))
			return
		}
		buf := make([]byte, 4+binary.BigEndian.Uint32(prefix[:]))
		copy(buf, prefix[:])
		if _, err := io.ReadFull(br, buf[8:]); err != nil {
			return
		}
		f, err := protocol.DecodeFrame(buf, lim)
		if err != nil {
			b.reply(c, protocol.AppendErrorResponse(nil, 0, 0, protocol.StatusFrameIllegal, err.Error()))
			return
		}
		req, err := protocol.DecodeRequest(f, lim)
		if err != nil {
			st := protocol.StatusOf(err)
			b.reply(c, protocol.AppendErrorResponse(nil, f.Code, f.Opaque, st, err.Error()))
			if st.ClosesConnection() {
				return
			}
			continue
		}
		b.mu.Lock()
		b.requests[f.Code]++
		n := b.requests[f.Code]
		var hooked protocol.Status
		if b.statusHook != nil {
			hooked = b.statusHook(f.Code, n)
		}
		stall := b.stall[f.Code]
		if f.Code == protocol.CodeHeartbeat {
			b.heartbeats++
		}
		b.mu.Unlock()
		if stall {
			continue
		}
		if pr, ok := req.(*protocol.PullRequest); ok && hooked == 0 {
			// Long polling must not hold up the connection's other requests.
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				out := b.pull(c, f, pr)
				if !f.IsOneway() {
					b.reply(c, out)
				}
			}()
			continue
		}
		out := b.handle(c, f, req, hooked)
		if !f.IsOneway() {
			b.reply(c, out)
		}
	}
}

func (b *Broker) reply(c *fakeConn, frame []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.Write(frame)
}

func resp(f *protocol.Frame, st protocol.Status, remark string, v protocol.Fields) []byte {
	out, err := protocol.AppendResponse(nil, f.Code, f.Opaque, st, remark, v)
	if err != nil {
		panic(err)
	}
	return out
}

func key3(group, topic string, q int32) string {
	return group + "\x00" + topic + "\x00" + strconv.Itoa(int(q))
}

// storeLocked appends msgs to one queue of topic (picking one if q < 0).
func (b *Broker) storeLocked(c *fakeConn, topic string, q int32, born int64, msgs []protocol.Message) (int32, int64, []string, protocol.Status, string) {
	t := b.topics[topic]
	if t == nil {
		if !b.autoCreate {
			return 0, 0, nil, protocol.StatusTopicNotExist, "topic " + topic + " does not exist"
		}
		b.putTopicLocked(protocol.TopicConfig{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
		t = b.topics[topic]
	}
	if q < 0 {
		q = int32(t.rr % int(t.cfg.WriteQueueNums))
		t.rr++
	}
	if q >= t.cfg.WriteQueueNums {
		return 0, 0, nil, protocol.StatusInvalidParameter, "queueId out of range"
	}
	fq := t.queues[q]
	first := int64(len(fq.msgs))
	var ids []string
	for _, m := range msgs {
		body := append([]byte(nil), m.Body...)
		props := map[string]string{}
		for k, v := range m.Properties {
			props[k] = v
		}
		phys := b.physNext
		size := int32(100 + len(body))
		b.physNext += int64(size)
		x := &protocol.MessageExt{
			Message:         protocol.Message{Topic: topic, Flag: m.Flag, Body: body, Properties: props},
			QueueID:         q,
			QueueOffset:     int64(len(fq.msgs)),
			CommitLogOffset: phys,
			StoreSize:       size,
			BornTimestamp:   born,
			StoreTimestamp:  time.Now().UnixMilli(),
			BornHost:        c.nc.RemoteAddr().String(),
			StoreHost:       b.store.String(),
			MsgID:           protocol.OffsetMsgID(b.store, phys),
			BodyCRC:         crc32.ChecksumIEEE(body) & 0x7FFFFFFF,
		}
		fq.msgs = append(fq.msgs, x)
		b.byPhys[phys] = x
		ids = append(ids, x.MsgID)
	}
	close(fq.notify)
	fq.notify = make(chan struct{})
	return q, first, ids, protocol.StatusOK, ""
}

func (b *Broker) handle(c *fakeConn, f *protocol.Frame, req protocol.Request, hooked protocol.Status) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if hooked != 0 && !(hooked.Stored() && (f.Code == protocol.CodeSendMessage || f.Code == protocol.CodeSendBatchMessage)) {
		return resp(f, hooked, "injected", nil)
	}
	switch r := req.(type) {
	case *protocol.SendRequest:
		q, off, ids, st, remark := b.storeLocked(c, r.Topic, r.QueueID, r.BornTimestamp, []protocol.Message{r.Message()})
		if st != protocol.StatusOK {
			return resp(f, st, remark, nil)
		}
		if hooked != 0 {
			st = hooked
		}
		return resp(f, st, "", &protocol.SendResponse{MsgID: ids[0], QueueID: q, QueueOffset: off})
	case *protocol.SendBatchRequest:
		q, off, ids, st, remark := b.storeLocked(c, r.Topic, r.QueueID, r.BornTimestamp, r.Messages)
		if st != protocol.StatusOK {
			return resp(f, st, remark, nil)
		}
		if hooked != 0 {
			st = hooked
		}
		return resp(f, st, "", &protocol.SendBatchResponse{QueueID: q, QueueOffset: off, MsgIDs: ids})
	case *protocol.GetMaxOffsetRequest, *protocol.GetMinOffsetRequest:
		var topic string
		var q int32
		isMax := false
		if m, ok := r.(*protocol.GetMaxOffsetRequest); ok {
			topic, q, isMax = m.Topic, m.QueueID, true
		} else {
			m := r.(*protocol.GetMinOffsetRequest)
			topic, q = m.Topic, m.QueueID
		}
		t := b.topics[topic]
		if t == nil || q < 0 || int(q) >= len(t.queues) {
			return resp(f, protocol.StatusTopicNotExist, "no such queue", nil)
		}
		off := int64(0)
		if isMax {
			off = int64(len(t.queues[q].msgs))
		}
		return resp(f, protocol.StatusOK, "", &protocol.OffsetResponse{Offset: off})
	case *protocol.QueryConsumerOffsetRequest:
		off, ok := b.offsets[key3(r.ConsumerGroup, r.Topic, r.QueueID)]
		if !ok {
			return resp(f, protocol.StatusQueryNotFound, "no offset", nil)
		}
		return resp(f, protocol.StatusOK, "", &protocol.OffsetResponse{Offset: off})
	case *protocol.UpdateConsumerOffsetRequest:
		b.offsets[key3(r.ConsumerGroup, r.Topic, r.QueueID)] = r.CommitOffset
		return resp(f, protocol.StatusOK, "", nil)
	case *protocol.GetConsumerOffsetsRequest:
		var out protocol.ConsumerOffsetsResponse
		for name, t := range b.topics {
			if r.Topic != "" && name != r.Topic {
				continue
			}
			for q := range t.queues {
				off, ok := b.offsets[key3(r.ConsumerGroup, name, int32(q))]
				if !ok {
					continue
				}
				out.Offsets = append(out.Offsets, protocol.ConsumerQueueOffset{
					Topic: name, QueueID: int32(q), ConsumerOffset: off, MaxOffset: int64(len(t.queues[q].msgs)),
				})
			}
		}
		return resp(f, protocol.StatusOK, "", &out)
	case *protocol.CreateTopicRequest:
		if b.topics[r.Topic] != nil {
			return resp(f, protocol.StatusTopicExistAlready, "exists", nil)
		}
		b.putTopicLocked(r.TopicConfig)
		return resp(f, protocol.StatusOK, "", nil)
	case *protocol.UpdateTopicRequest:
		b.putTopicLocked(r.TopicConfig)
		return resp(f, protocol.StatusOK, "", nil)
	case *protocol.DeleteTopicRequest:
		if b.topics[r.Topic] == nil {
			return resp(f, protocol.StatusTopicNotExist, "no such topic", nil)
		}
		delete(b.topics, r.Topic)
		return resp(f, protocol.StatusOK, "", nil)
	case *protocol.ListTopicsRequest:
		var out protocol.TopicListResponse
		for _, t := range b.topics {
			out.Topics = append(out.Topics, t.cfg)
		}
		return resp(f, protocol.StatusOK, "", &out)
	case *protocol.QueryMessageRequest:
		var out protocol.QueryMessageResponse
		if t := b.topics[r.Topic]; t != nil {
			for _, q := range t.queues {
				for _, m := range q.msgs {
					if int32(len(out.Messages)) >= r.MaxNum {
						break
					}
					if m.StoreTimestamp < r.BeginTimestamp || m.StoreTimestamp > r.EndTimestamp {
						continue
					}
					match := m.UniqKey() == r.Key
					for _, k := range m.Keys() {
						match = match || k == r.Key
					}
					if match {
						out.Messages = append(out.Messages, *m)
					}
				}
			}
		}
		if len(out.Messages) == 0 {
			return resp(f, protocol.StatusQueryNotFound, "no match", nil)
		}
		return resp(f, protocol.StatusOK, "", &out)
	case *protocol.ViewMessageRequest:
		_, phys, err := protocol.ParseOffsetMsgID(r.MsgID)
		if err != nil {
			return resp(f, protocol.StatusInvalidParameter, err.Error(), nil)
		}
		m := b.byPhys[phys]
		if m == nil {
			return resp(f, protocol.StatusQueryNotFound, "no message", nil)
		}
		return resp(f, protocol.StatusOK, "", &protocol.ViewMessageResponse{Message: *m})
	case *protocol.UpdateBrokerRoleRequest:
		return b.updateRoleLocked(f, r)
	case *protocol.GetBrokerRuntimeInfoRequest:
		role := b.role.BrokerRole
		if role == "" {
			role = "ASYNC_MASTER"
		}
		return resp(f, protocol.StatusOK, "", &protocol.BrokerRuntimeInfo{
			BrokerName: "fake", BrokerRole: role, BrokerID: b.role.BrokerID, TopicCount: int32(len(b.topics)),
			CommitLogMaxOffset: b.physNext, ConnectionCount: int32(len(b.conns)),
		})
	case *protocol.HeartbeatRequest:
		return resp(f, protocol.StatusOK, "", b.heartbeatLocked(c, r))
	}
	if out, ok := b.handleGroupLocked(c, f, req); ok {
		return out
	}
	return resp(f, protocol.StatusRequestCodeNotSupported, "fake broker", nil)
}

// updateRoleLocked accepts a role the way the broker checks it (no
// replication follows: the fake has no log to copy).
func (b *Broker) updateRoleLocked(f *protocol.Frame, r *protocol.UpdateBrokerRoleRequest) []byte {
	switch {
	case r.BrokerRole == "SLAVE" && r.HAMasterAddress != "":
		if r.BrokerID == 0 {
			r.BrokerID = 1
		}
	case (r.BrokerRole == "ASYNC_MASTER" || r.BrokerRole == "SYNC_MASTER") && r.HAMasterAddress == "":
		r.BrokerID = 0
	default:
		return resp(f, protocol.StatusInvalidParameter, "bad role "+r.BrokerRole+" with master "+r.HAMasterAddress, nil)
	}
	b.role = *r
	return resp(f, protocol.StatusOK, "", nil)
}

// pull answers a PULL, holding it while the queue is empty and a suspend
// time was given (until a message, the timeout, or the connection ends).
func (b *Broker) pull(c *fakeConn, f *protocol.Frame, r *protocol.PullRequest) []byte {
	expr, err := protocol.ParseTagExpr(r.Subscription)
	if err != nil {
		return resp(f, protocol.StatusSubscriptionParseFailed, err.Error(), nil)
	}
	suspend := time.Duration(r.SuspendTimeoutMillis) * time.Millisecond
	deadline := time.Now().Add(suspend)
	b.mu.Lock()
	stopped := b.stopped
	if r.CommitOffset != nil {
		b.offsets[key3(r.ConsumerGroup, r.Topic, r.QueueID)] = *r.CommitOffset
	}
	b.mu.Unlock()
	for {
		b.mu.Lock()
		t := b.topics[r.Topic]
		if t == nil || r.QueueID < 0 || int(r.QueueID) >= len(t.queues) {
			b.mu.Unlock()
			return resp(f, protocol.StatusTopicNotExist, "no such queue", nil)
		}
		q := t.queues[r.QueueID]
		maxOff := int64(len(q.msgs))
		out := protocol.PullResponse{MinOffset: 0, MaxOffset: maxOff, SuggestWhichBrokerID: b.suggest}
		switch {
		case r.QueueOffset < 0:
			out.NextBeginOffset = 0
			b.mu.Unlock()
			return resp(f, protocol.StatusPullOffsetMoved, "", &out)
		case r.QueueOffset > maxOff:
			out.NextBeginOffset = maxOff
			b.mu.Unlock()
			return resp(f, protocol.StatusPullOffsetMoved, "", &out)
		case r.QueueOffset == maxOff:
			notify := q.notify
			b.mu.Unlock()
			wait := time.Until(deadline)
			if wait <= 0 {
				out.NextBeginOffset = r.QueueOffset
				return resp(f, protocol.StatusPullNotFound, "", &out)
			}
			timer := time.NewTimer(wait)
			select {
			case <-notify:
			case <-timer.C:
			case <-c.done:
			case <-stopped:
			}
			timer.Stop()
			deadline = time.Now() // re-run once without suspending
			continue
		}
		next := r.QueueOffset
		for ; next < maxOff && int32(len(out.Messages)) < r.MaxMsgNums; next++ {
			if m := q.msgs[next]; expr.Matches(m.Tags()) {
				out.Messages = append(out.Messages, *m)
			}
		}
		out.NextBeginOffset = next
		b.mu.Unlock()
		if len(out.Messages) == 0 {
			return resp(f, protocol.StatusPullRetryImmediately, "", &out)
		}
		return resp(f, protocol.StatusOK, "", &out)
	}
}
