package sim

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

// ClientKind is what a simulated client does.
type ClientKind int

const (
	SyncProducer  ClientKind = iota // one send at a time
	AsyncProducer                   // several sends in flight
	BatchProducer                   // SEND_BATCH, one at a time
	Consumer                        // long-polling pulls over every queue, committing offsets
)

func (k ClientKind) String() string {
	return [...]string{"sync-producer", "async-producer", "batch-producer", "consumer"}[k]
}

// pending is a request waiting for its answer.
type pending struct {
	code   protocol.Code
	conn   *Conn // it was sent on
	keys   []string
	queue  int32
	offset int64 // commit or pull offset
	sentAt time.Time
	cancel func() bool
	out    *outgoing         // a send's message(s)
	to     sendpath.QueueRef // where the send went
	// lagging: a pull from a replica that has not yet received the
	// offset the consumer reached elsewhere: pulled again after a wait.
	lagging bool
}

// Client is a simulated producer or consumer: a state machine driven by
// responses and timers, using the real wire format.
type Client struct {
	s        *Sim
	id       int
	kind     ClientKind
	conns    []*Conn // one per broker group (the static list of groups)
	opaque   uint32
	pend     map[uint32]*pending
	seq      int
	inflight int
	stopAt   time.Time

	// producers: last acknowledged queue offset per queue (order check)
	lastQO map[groupQueue]int64
	// consumer state, per queue of every group
	next        map[groupQueue]int64 // next offset to pull
	pulling     map[groupQueue]bool
	committed   map[groupQueue]int64 // highest commit the broker acknowledged
	sinceCommit map[groupQueue]int
	resuming    []bool // per group: offsets being queried on a new connection
	produced    int

	// producers: the client's own send path (routes, queue choice, retry
	// plan, fault avoidance), under the client's default policy.
	table    *sendpath.Table
	book     client.RouteBook // orders the name servers' routes
	nsConns  []*Conn          // per name server
	nsCur    int              // the name server asked
	fetching bool             // a route fetch is on its way
	waiting  []*outgoing      // sends waiting for that route
	// topicGone: the last route answer was TOPIC_NOT_EXIST
	topicGone   bool
	routeGroups string // the groups of the last route taken (traceRoute)
	// probe: the liveness phase's producer (controller mode), which stops
	// once every group acknowledged a write after healing.
	probe bool
	// commitNode: per queue, the broker that acknowledged its last commit.
	commitNode map[groupQueue]*Node
	// replicas: a consumer (controller mode, half of them) that reads from
	// a slave whenever one is up, as a consumer far behind the head does
	// when its master suggests it (SuggestWhichBrokerID).
	replicas bool
}

// groupQueue is queue q of broker group g.
type groupQueue struct {
	g int
	q int32
}

const (
	simTopic    = "simt"
	simGroup    = "simg"
	simQueues   = 4
	reqTimeout  = 3 * time.Second
	pullSuspend = time.Second
	asyncWindow = 8
)

func (c *Client) own() owner { return owner{} }

func (c *Client) clientNum() int { return c.id }

// readFrom is the node a consumer pulls group g from: its master, or, in
// controller mode, while the master is down (or always, for a consumer
// that prefers replicas) the first of its slaves that is up, as the client
// does with the group's slaves as read replicas (client.WithSlaveAddrs).
// What a replica shows its consumers must be what no election cuts: the
// consumed-offset check holds its answers to that. (Classic mode makes no
// such promise: a slave shows what its master sent it, which under
// SYNC_FLUSH may include bytes whose fsync failed on the master and that
// the master's restart then drops.)
func (c *Client) readFrom(g *brokerGroup) *Node {
	if c.s.cfg.Ctl == nil || (g.master.up && !c.replicas) {
		return g.master
	}
	for _, n := range g.slaves {
		if n.up {
			return n
		}
	}
	if g.master.up {
		return g.master
	}
	return nil
}

// laggingReplicaWait is how long a consumer waits before pulling a replica
// again that has not reached its offset (the client's laggingSlaveWait).
const laggingReplicaWait = 50 * time.Millisecond

// connTo makes sure the client's connection to group g goes to node n's
// current incarnation (in controller mode the master moves: a connection
// to another node is reset); false if n is down.
func (c *Client) connTo(g *brokerGroup, n *Node) bool {
	if conn := c.conns[g.idx]; conn != nil && !conn.dead() && conn.node == n {
		return true
	} else if conn != nil && !conn.dead() {
		conn.closed = true
		c.s.w.at(c.s.w.Now(), owner{}, func() { c.reset(conn) })
	}
	if !n.up {
		return false
	}
	c.s.conns++
	c.conns[g.idx] = &Conn{s: c.s, id: c.s.conns, node: n, epoch: n.epoch, client: c, arrived: map[uint32]time.Time{}}
	if c.kind == Consumer && n == g.master {
		c.resume(g) // a replica is read from the offsets the consumer holds
	}
	return true
}

// request sends one request to group g and arms its timeout.
func (c *Client) request(g *brokerGroup, req protocol.Request, p *pending) {
	c.requestOn(c.conns[g.idx], req, p)
}

// requestOn sends one request on conn and arms its timeout.
func (c *Client) requestOn(conn *Conn, req protocol.Request, p *pending) {
	c.opaque++
	op := c.opaque
	frame, err := protocol.AppendRequest(nil, op, 0, req)
	if err != nil {
		c.s.w.Violationf("client %d: encode %T: %v", c.id, req, err)
		return
	}
	p.code, p.conn, p.sentAt = req.RequestCode(), conn, c.s.w.Now()
	c.pend[op] = p
	p.cancel = c.s.w.at(c.s.w.Now().Add(reqTimeout), c.own(), func() { c.timeout(conn, op, sendpath.TimedOut) })
	conn.send(frame)
}

// timeout ends a request without an answer: it timed out, or its
// connection broke (failure says which).
func (c *Client) timeout(conn *Conn, op uint32, failure sendpath.Failure) {
	p := c.pend[op]
	if p == nil {
		return
	}
	delete(c.pend, op)
	c.s.w.Tracef("client %d: request %d (%v): %v", c.id, op, p.code, failure)
	if conn.node.isNameServer() {
		conn.closed = true
		c.onRoute(conn, nil)
		return
	}
	if !conn.closed && conn == c.conns[conn.node.g.idx] {
		conn.closed = true // give up on this connection
	}
	if p.out != nil {
		if failure == sendpath.Broken {
			c.brokerDown(p.to.Broker)
		}
		c.decide(p.out, p.to, sendpath.Outcome{Failure: failure})
		return
	}
	c.afterReply(p)
}

// reset fails every request pending on conn, as a connection reset does.
func (c *Client) reset(conn *Conn) {
	ops := make([]uint32, 0, len(c.pend))
	for op, p := range c.pend {
		if p.conn == conn {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	for _, op := range ops {
		if p := c.pend[op]; p != nil {
			p.cancel()
			c.timeout(conn, op, sendpath.Broken)
		}
	}
}

// start begins the client's work.
func (c *Client) start() {
	c.pend = map[uint32]*pending{}
	c.lastQO = map[groupQueue]int64{}
	if c.kind != Consumer {
		c.table = sendpath.NewTable(sendPolicy)
		c.nsConns = make([]*Conn, len(c.s.names))
		c.nsCur = (c.id - 1) % max(len(c.s.names), 1) // producers spread over the name servers
		c.refreshLoop()
	}
	if c.kind == Consumer {
		c.next = map[groupQueue]int64{}
		c.pulling = map[groupQueue]bool{}
		c.committed = map[groupQueue]int64{}
		c.commitNode = map[groupQueue]*Node{}
		c.sinceCommit = map[groupQueue]int{}
		c.resuming = make([]bool, len(c.s.groups))
	}
	c.kick()
}

// kick issues as much work as the client's kind allows.
func (c *Client) kick() {
	if (c.s.w.Now().After(c.stopAt) || (c.probe && c.s.probed())) && c.kind != Consumer {
		return
	}
	switch c.kind {
	case SyncProducer, BatchProducer:
		if c.inflight == 0 {
			c.produce()
		}
	case AsyncProducer:
		// A steady rate with up to asyncWindow in flight; answers do not
		// speed it up.
		if c.inflight < asyncWindow {
			c.produce()
		}
		c.s.w.at(c.s.w.Now().Add(time.Duration(200+c.s.w.rng.Intn(1000))*time.Microsecond), c.own(), c.kick)
	case Consumer:
		c.consume()
	}
}

// consume pulls every queue of every group that is not being pulled.
func (c *Client) consume() {
	down := false
	for _, g := range c.s.groups {
		if n := c.readFrom(g); n == nil || !c.connTo(g, n) {
			down = true
			continue
		}
		if c.resuming[g.idx] {
			continue
		}
		for q := int32(0); q < simQueues; q++ {
			if gq := (groupQueue{g.idx, q}); !c.pulling[gq] {
				c.pull(g, q)
			}
		}
	}
	if down {
		c.s.w.at(c.s.w.Now().Add(100*time.Millisecond), c.own(), c.kick)
	}
}

func (c *Client) body(key string) []byte {
	n := 16 + c.s.w.rng.Intn(1500)
	if c.s.w.rng.Intn(10) == 0 { // now and then a message spanning several pages
		n = 4096 + c.s.w.rng.Intn(12<<10)
	}
	b := make([]byte, n)
	// The bytes only need to differ between messages (a mix-up or a torn
	// record must show): one draw seeds a cheap generator, instead of a
	// draw per byte, which was a fifth of the simulator's time.
	x := c.s.w.rng.Uint64() | 1
	for i := 0; i < n; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
	copy(b, key)
	return b
}

func (c *Client) nextKey() string {
	c.seq++
	return fmt.Sprintf("c%d-%d", c.id, c.seq)
}

func (c *Client) afterReply(p *pending) {
	switch p.code {
	case protocol.CodePullMessage:
		gq := groupQueue{p.conn.node.g.idx, p.queue}
		if p.lagging {
			c.s.w.at(c.s.w.Now().Add(laggingReplicaWait), c.own(), func() { c.pulling[gq] = false; c.kick() })
			return
		}
		c.pulling[gq] = false
		c.s.w.at(c.s.w.Now().Add(time.Duration(c.s.w.rng.Intn(500))*time.Microsecond), c.own(), c.kick)
	case protocol.CodeQueryConsumerOffset:
		// The resume failed: start over on a new connection.
		c.resuming[p.conn.node.g.idx] = false
		c.s.w.at(c.s.w.Now().Add(100*time.Millisecond), c.own(), c.kick)
	}
}

// onResponse handles an answer that reached the client.
func (c *Client) onResponse(conn *Conn, f *protocol.Frame) {
	p := c.pend[f.Opaque]
	if p == nil || conn != p.conn || (!conn.node.isNameServer() && conn != c.conns[conn.node.g.idx]) {
		return // timed out already, or from a previous connection
	}
	delete(c.pend, f.Opaque)
	p.cancel()
	switch p.code {
	case protocol.CodeGetRouteInfoByTopic:
		c.onRoute(conn, f)
		return
	case protocol.CodeSendMessage, protocol.CodeSendBatchMessage:
		c.observe(p)
		c.onSendResponse(f, p)
		c.decide(p.out, p.to, sendpath.Outcome{Failure: sendpath.Answered, Status: f.Status})
		return
	case protocol.CodePullMessage:
		c.onPull(f, p)
	case protocol.CodeUpdateConsumerOffset:
		if gq := (groupQueue{conn.node.g.idx, p.queue}); f.Status == protocol.StatusOK && p.offset > c.committed[gq] {
			c.committed[gq] = p.offset
			c.commitNode[gq] = conn.node
		}
		return
	case protocol.CodeQueryConsumerOffset:
		c.onResumeOffset(f, p)
		return
	}
	c.afterReply(p)
}

// onSendResponse handles a send's answer: the order of a producer's
// acknowledged sends per queue.
func (c *Client) onSendResponse(f *protocol.Frame, p *pending) {
	if f.Status != protocol.StatusOK {
		return
	}
	var qo int64
	if p.code == protocol.CodeSendBatchMessage {
		var r protocol.SendBatchResponse
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil {
			c.s.w.Violationf("client %d: bad batch response: %v", c.id, err)
			return
		}
		qo = r.QueueOffset + int64(len(r.MsgIDs)) - 1
	} else {
		var r protocol.SendResponse
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil {
			c.s.w.Violationf("client %d: bad send response: %v", c.id, err)
			return
		}
		qo = r.QueueOffset
	}
	// Order of acknowledged sends per queue: a producer's later send never
	// lands before its earlier one (one at a time, so strictly after).
	g := p.conn.node.g
	gq := groupQueue{g.idx, p.queue}
	if c.kind != AsyncProducer {
		if last, ok := c.lastQO[gq]; ok && qo <= last && !g.lostSince(p.queue, qo) {
			c.s.w.Violationf("client %d: send acknowledged at %s queue %d offset %d, not after its previous send at %d", c.id, g.spec.Name, p.queue, qo, last)
		}
	}
	c.lastQO[gq] = qo
}

func (c *Client) pull(g *brokerGroup, q int32) {
	gq := groupQueue{g.idx, q}
	c.pulling[gq] = true
	req := &protocol.PullRequest{ConsumerGroup: simGroup, Topic: simTopic, QueueID: q, QueueOffset: c.next[gq],
		MaxMsgNums: 16, SuspendTimeoutMillis: pullSuspend.Milliseconds()}
	c.request(g, req, &pending{queue: q, offset: c.next[gq]})
}

func (c *Client) onPull(f *protocol.Frame, p *pending) {
	g := p.conn.node.g
	gq := groupQueue{g.idx, p.queue}
	switch f.Status {
	case protocol.StatusOK:
	case protocol.StatusPullNotFound, protocol.StatusPullRetryImmediately:
		return
	case protocol.StatusPullOffsetMoved:
		var r protocol.PullResponse
		_ = protocol.DecodeResponse(f, protocol.DefaultLimits(), &r)
		if p.conn.node != g.master && r.MaxOffset < p.offset {
			// A replica that has not yet received what the consumer read
			// from the master: wait for it rather than going back.
			p.lagging = true
			return
		}
		if !g.lostSince(p.queue, p.offset) {
			c.s.w.Violationf("client %d: pull of %s queue %d at %d: offset moved (%s), nothing was lost", c.id, g.spec.Name, p.queue, p.offset, f.Remark)
		}
		// The consumer resets to where the queue ends now; its later
		// commits may be lower than what it committed before the loss.
		c.next[gq] = r.MaxOffset
		c.committed[gq] = min(c.committed[gq], r.MaxOffset)
		return
	default:
		return
	}
	var r protocol.PullResponse
	if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil {
		c.s.w.Violationf("client %d: bad pull response: %v", c.id, err)
		return
	}
	if p.offset != c.next[gq] {
		return // a stale pull from before a resume
	}
	c.checkPulled(g, p, r.Messages)
	c.next[gq] = r.NextBeginOffset
	c.sinceCommit[gq]++
	if c.sinceCommit[gq] >= 3 && p.conn.node == g.master { // commits go to the master
		c.sinceCommit[gq] = 0
		c.request(g, &protocol.UpdateConsumerOffsetRequest{ConsumerGroup: simGroup, Topic: simTopic, QueueID: p.queue,
			CommitOffset: r.NextBeginOffset}, &pending{queue: p.queue, offset: r.NextBeginOffset})
	}
}

// checkPulled: a pull's messages have contiguous offsets and are what was
// sent to that queue, intact.
func (c *Client) checkPulled(g *brokerGroup, p *pending, msgs []protocol.MessageExt) {
	expect := p.offset
	for i := range msgs {
		m := &msgs[i]
		if m.QueueOffset != expect {
			c.s.w.Violationf("client %d: %s queue %d: got offset %d, expected %d (offsets not contiguous)", c.id, g.spec.Name, p.queue, m.QueueOffset, expect)
		}
		expect = m.QueueOffset + 1
		key := m.Property(protocol.PropertyKeys)
		sm := c.s.sent[key]
		switch {
		case sm == nil:
			c.s.w.Violationf("client %d: %s queue %d offset %d: message %q was never sent", c.id, g.spec.Name, p.queue, m.QueueOffset, key)
		case !bytes.Equal(sm.body, m.Body) || m.QueueID != p.queue || !sm.storedIn(g, m.QueueID):
			c.s.w.Violationf("client %d: %s queue %d offset %d: message %q differs from what was sent", c.id, g.spec.Name, p.queue, m.QueueOffset, key)
		}
		c.s.consumed(g, p.queue, m.QueueOffset, key)
	}
}

// resume restarts consumption of group g on a new connection from the
// committed offsets, which must not be behind what the broker
// acknowledged.
func (c *Client) resume(g *brokerGroup) {
	c.resuming[g.idx] = true
	for q := int32(0); q < simQueues; q++ {
		c.pulling[groupQueue{g.idx, q}] = false
		c.request(g, &protocol.QueryConsumerOffsetRequest{ConsumerGroup: simGroup, Topic: simTopic, QueueID: q}, &pending{queue: q})
	}
}

func (c *Client) onResumeOffset(f *protocol.Frame, p *pending) {
	g := p.conn.node.g
	gq := groupQueue{g.idx, p.queue}
	var off int64
	if f.Status == protocol.StatusOK {
		var r protocol.OffsetResponse
		if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err == nil {
			off = r.Offset
		}
	}
	// In controller mode consumer offsets reach a new master by
	// replication, a little behind (at least once): only the broker that
	// acknowledged the commits must keep them.
	if acked := c.committed[gq]; off < acked && (c.s.cfg.Ctl == nil || c.commitNode[gq] == p.conn.node) {
		c.s.w.Violationf("client %d: committed offset of %s queue %d moved backwards: broker says %d, it acknowledged %d", c.id, g.spec.Name, p.queue, off, acked)
	}
	c.next[gq] = off
	for _, pp := range c.pend {
		if pp.code == protocol.CodeQueryConsumerOffset && pp.conn == p.conn {
			return // more offsets to come
		}
	}
	c.resuming[g.idx] = false
	c.kick()
}
