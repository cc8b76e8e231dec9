package actors

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wharfmq/wharf/protocol"
)

// Replication. A master runs one replicator actor: it owns every slave
// connection (the HAConnection state of DESIGN.md: what each slave has
// acknowledged and what was sent to it), streams log records to slaves, and
// releases SYNC_MASTER sends once enough copies exist. A slave runs one
// haClient actor: it owns the link to its master, appends what it receives
// at the same offsets, and reports its log end.

// haIn is one read burst from a replication peer.
type haIn struct {
	conn Conn
	reqs []protocol.Request
}

// haGone reports a closed replication connection.
type haGone struct{ conn Conn }

// replWait asks the replicator to release replies once replicated.
type replWait struct{ replies []*pendingReply }

// haTick drives timeouts, heartbeats, housekeeping and metadata sync.
type haTick struct{}

// metaSnapshot carries the offsets table to the replicator or haClient.
type metaSnapshot struct {
	kind string
	data []byte
}

// exportOffsets asks the offset manager for its table (reply: metaSnapshot).
type exportOffsets struct{}

// importMeta merges metadata received from the other side.
type importMeta struct {
	kind string
	data []byte
}

// haHandler is the Handler of the replication port (master) or of the link
// to the master (slave): it decodes frames and hands them to the owner.
type haHandler struct {
	b     *Broker
	owner func() *actor.PID
}

func (h *haHandler) Deliver(in *Inbound) {
	reqs := make([]protocol.Request, 0, len(in.Frames))
	for _, f := range in.Frames {
		req, err := protocol.DecodeRequest(f, h.b.limits)
		if err != nil {
			in.Conn.Close("replication link: " + err.Error())
			return
		}
		reqs = append(reqs, req)
	}
	h.b.sys.Root.Send(h.owner(), &haIn{conn: in.Conn, reqs: reqs})
}

func (h *haHandler) Disconnected(c Conn) { h.b.sys.Root.Send(h.owner(), &haGone{conn: c}) }

// HAHandler is the Handler for the master's haListenPort.
func (b *Broker) HAHandler() Handler {
	return &haHandler{b: b, owner: func() *actor.PID { return b.p.replicator }}
}

func (b *Broker) isSlave() bool      { return b.cfg.BrokerRole == RoleSlave }
func (b *Broker) isSyncMaster() bool { return b.cfg.BrokerRole == RoleSyncMaster }

// Broker roles.
const (
	RoleAsyncMaster = "ASYNC_MASTER"
	RoleSyncMaster  = "SYNC_MASTER"
	RoleSlave       = "SLAVE"
)

// haPeer is one slave as the master sees it.
type haPeer struct {
	conn      Conn
	brokerID  int64
	acked     int64 // every byte below is on the slave
	sent      int64 // next offset to send
	started   bool
	lastHeard time.Time
}

// replicator is the master's replication actor.
type replicator struct {
	b        *Broker
	peers    map[uint64]*haPeer
	waiters  []*pendingReply
	flushed  int64
	armed    bool
	lastMeta time.Time
}

const (
	haWindow = 4 << 20 // unacknowledged bytes in flight per slave
	haTail   = 4096    // bytes of log end compared to detect divergence
)

func (r *replicator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.peers = map[uint64]*haPeer{}
		r.flushed = r.b.store.CommitLog().FlushedOffset()
		r.b.after(r.b.cfg.HASendHeartbeatInterval, ctx.Self(), &haTick{})
		r.publish()
	case *haIn:
		for _, req := range m.reqs {
			r.handle(ctx, m.conn, req)
		}
	case *haGone:
		if p := r.peers[m.conn.ID()]; p != nil {
			delete(r.peers, m.conn.ID())
			r.b.log.Warn("slave disconnected", "slave", m.conn.RemoteAddr(), "acked", p.acked)
			r.publish()
			r.release(ctx)
		}
	case *logAppended:
		r.pumpAll()
	case *logFlushed:
		r.flushed = max(r.flushed, m.offset)
		r.release(ctx)
	case *replWait:
		now := r.b.env.Clock.Now()
		for _, w := range m.replies {
			w.start = now
		}
		r.waiters = append(r.waiters, m.replies...)
		r.release(ctx)
		if len(r.waiters) > 0 && !r.armed {
			r.armed = true
			r.b.after(r.b.cfg.SlaveTimeout, ctx.Self(), &replTimeout{})
		}
	case *replTimeout:
		r.armed = false
		r.expire(ctx)
	case *haTick:
		r.housekeeping(ctx)
		r.b.after(r.b.cfg.HASendHeartbeatInterval, ctx.Self(), &haTick{})
	case *metaSnapshot:
		r.broadcast(&protocol.HAMetadataRequest{Kind: m.kind, Data: m.data})
	case *actor.Stopping:
		for _, w := range r.waiters {
			r.b.respond(w.request, protocol.StatusFlushSlaveTimeout, "broker shutting down before the slave acknowledged", nil)
		}
		r.waiters = nil
	}
}

// replTimeout expires SYNC_MASTER waiters.
type replTimeout struct{}

func (r *replicator) handle(ctx actor.Context, c Conn, req protocol.Request) {
	switch m := req.(type) {
	case *protocol.HAReportRequest:
		r.report(ctx, c, m)
	case *protocol.HAMetadataRequest:
		if m.Kind == "offsets" { // a slave's consumer offsets: merged, never lost
			ctx.Send(r.b.p.offsets, &importMeta{kind: m.Kind, data: m.Data})
		}
	default:
		c.Close(fmt.Sprintf("unexpected %v on the replication port", req.RequestCode()))
	}
}

func (r *replicator) refuse(c Conn, reason string) {
	r.b.log.Error("refusing slave", "slave", c.RemoteAddr(), "reason", reason)
	c.Send(&protocol.HARefuseRequest{Reason: reason})
	c.Close(reason)
	delete(r.peers, c.ID())
}

// report handles a slave's position: the first one decides where streaming
// starts (after checking the slave's log is a prefix of ours); later ones
// acknowledge bytes.
func (r *replicator) report(ctx actor.Context, c Conn, m *protocol.HAReportRequest) {
	cl := r.b.store.CommitLog()
	p := r.peers[c.ID()]
	now := r.b.env.Clock.Now()
	if p == nil {
		if m.BrokerID <= 0 {
			r.refuse(c, fmt.Sprintf("brokerId %d is not a slave's (slaves have brokerId > 0)", m.BrokerID))
			return
		}
		if m.SegmentSize != cl.SegmentSize() {
			r.refuse(c, fmt.Sprintf("slave mappedFileSizeCommitLog %d differs from the master's %d", m.SegmentSize, cl.SegmentSize()))
			return
		}
		var start int64
		switch {
		case m.MaxOffset == 0 && m.MinOffset == 0: // empty slave
			start = cl.MinOffset()
			if r.b.cfg.HACatchUpFromLastSegment {
				start = cl.MaxOffset() - cl.MaxOffset()%cl.SegmentSize()
			}
		case m.MaxOffset > cl.MaxOffset():
			r.refuse(c, fmt.Sprintf("the slave's log (end %d) is longer than the master's (end %d): the logs diverged; wipe the slave's store to resynchronise", m.MaxOffset, cl.MaxOffset()))
			return
		case m.MaxOffset < cl.MinOffset():
			r.refuse(c, fmt.Sprintf("the slave's log ends at %d, before the master's earliest retained offset %d; wipe the slave's store to catch up", m.MaxOffset, cl.MinOffset()))
			return
		default:
			if m.TailLen > 0 && m.MaxOffset-int64(m.TailLen) >= cl.MinOffset() {
				crc, err := cl.RangeCRC(m.MaxOffset-int64(m.TailLen), m.MaxOffset)
				if err != nil || crc != m.TailCRC {
					r.refuse(c, fmt.Sprintf("the slave's bytes below %d differ from the master's: the logs diverged; wipe the slave's store to resynchronise", m.MaxOffset))
					return
				}
			}
			start = m.MaxOffset
		}
		p = &haPeer{conn: c, brokerID: m.BrokerID, acked: start, sent: start, started: true}
		if m.MaxOffset == 0 && m.MinOffset == 0 {
			p.acked = start // nothing below start will ever be sent
		}
		r.peers[c.ID()] = p
		r.b.log.Info("slave connected", "slave", c.RemoteAddr(), "brokerId", m.BrokerID, "from", start, "master_end", cl.MaxOffset())
	} else {
		if m.MaxOffset > p.sent {
			r.refuse(c, fmt.Sprintf("the slave acknowledged offset %d, but only %d was sent", m.MaxOffset, p.sent))
			return
		}
		if m.MaxOffset > p.acked {
			p.acked = m.MaxOffset
		}
	}
	p.lastHeard = now
	r.pump(p)
	r.publish()
	r.release(ctx)
}

func (r *replicator) pumpAll() {
	for _, id := range r.peerIDs() {
		r.pump(r.peers[id])
	}
}

func (r *replicator) peerIDs() []uint64 {
	ids := make([]uint64, 0, len(r.peers))
	for id := range r.peers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// pump sends the slave what it lacks, keeping at most haWindow bytes
// unacknowledged (the slave acknowledges every transfer).
func (r *replicator) pump(p *haPeer) {
	cl := r.b.store.CommitLog()
	for p.sent < cl.MaxOffset() && p.sent-p.acked < haWindow {
		chunk, err := cl.ReadRecords(p.sent, max(r.b.cfg.HATransferBatchSize, 4<<10))
		if err != nil {
			r.refuse(p.conn, fmt.Sprintf("cannot read the log at %d for the slave: %v", p.sent, err))
			return
		}
		if len(chunk) == 0 {
			return
		}
		p.conn.Send(&protocol.HATransferRequest{Offset: p.sent, MasterMaxOffset: cl.MaxOffset(), Data: chunk})
		p.sent += int64(len(chunk))
	}
}

// inSync counts slaves within haMaxGapNotInSync of the log end.
func (r *replicator) inSync() int {
	end := r.b.store.CommitLog().MaxOffset()
	n := 0
	for _, p := range r.peers {
		if end-p.acked <= r.b.cfg.HAMaxGapNotInSync {
			n++
		}
	}
	return n
}

// publish makes the replication state visible to the writer and to stats.
func (r *replicator) publish() {
	end := r.b.store.CommitLog().MaxOffset()
	infos := make([]protocol.SlaveInfo, 0, len(r.peers))
	for _, id := range r.peerIDs() {
		p := r.peers[id]
		infos = append(infos, protocol.SlaveInfo{Address: p.conn.RemoteAddr(), BrokerID: p.brokerID, AckedOffset: p.acked,
			LagBytes: end - p.acked, InSync: end-p.acked <= r.b.cfg.HAMaxGapNotInSync})
	}
	r.b.haInSync.Store(int32(r.inSync()))
	r.b.haSlaves.Store(&infos)
}

// copies counts the copies of everything below end: the master's plus each
// slave that acknowledged it.
func (r *replicator) copies(end int64) int {
	n := 1
	for _, p := range r.peers {
		if p.acked >= end {
			n++
		}
	}
	return n
}

// release answers the waiters whose data has enough copies (and, under
// SYNC_FLUSH, is flushed).
func (r *replicator) release(actor.Context) {
	if len(r.waiters) == 0 {
		return
	}
	needFlush := r.b.cfg.FlushDiskType == SyncFlush
	need := r.b.cfg.InSyncReplicas
	keep := r.waiters[:0]
	for _, w := range r.waiters {
		if r.b.k.faults.AckBeforeReplica || (r.copies(w.end) >= need && (!needFlush || r.flushed >= w.end)) {
			r.b.respond(w.request, protocol.StatusOK, "", w.ok)
			continue
		}
		keep = append(keep, w)
	}
	clear(r.waiters[len(keep):])
	r.waiters = keep
}

// expire answers waiters older than slaveTimeout: FLUSH_DISK_TIMEOUT if the
// flush is what is missing, FLUSH_SLAVE_TIMEOUT otherwise.
func (r *replicator) expire(ctx actor.Context) {
	timeout := r.b.cfg.SlaveTimeout
	var next time.Duration
	r.waiters, next = expireWaiters(r.waiters, r.b.env.Clock.Now(), timeout, func(w *pendingReply) {
		if r.b.cfg.FlushDiskType == SyncFlush && r.flushed < w.end {
			r.b.respond(w.request, protocol.StatusFlushDiskTimeout, fmt.Sprintf("stored, but not flushed within %v", timeout), nil)
			return
		}
		r.b.respond(w.request, protocol.StatusFlushSlaveTimeout,
			fmt.Sprintf("stored on the master, but no slave acknowledged it within slaveTimeout %v", timeout), nil)
	})
	if next >= 0 {
		r.armed = true
		r.b.after(next, ctx.Self(), &replTimeout{})
	}
}

func (r *replicator) housekeeping(ctx actor.Context) {
	now := r.b.env.Clock.Now()
	for _, id := range r.peerIDs() {
		p := r.peers[id]
		if now.Sub(p.lastHeard) > r.b.cfg.HAHousekeepingInterval {
			r.b.log.Warn("slave silent too long; closing", "slave", p.conn.RemoteAddr())
			p.conn.Close("no report within haHousekeepingInterval")
			delete(r.peers, id)
		}
	}
	r.publish()
	r.release(ctx)
	if len(r.peers) > 0 && now.Sub(r.lastMeta) >= r.b.cfg.HAMetadataInterval {
		r.lastMeta = now
		r.sendTopics()
		ctx.Request(r.b.p.offsets, &exportOffsets{})
	}
}

func (r *replicator) sendTopics() {
	data, err := json.Marshal(r.b.v.topicsSnapshot())
	if err != nil {
		return
	}
	r.broadcast(&protocol.HAMetadataRequest{Kind: "topics", Data: data})
}

func (r *replicator) broadcast(req *protocol.HAMetadataRequest) {
	for _, id := range r.peerIDs() {
		r.peers[id].conn.Send(req)
	}
}

// haDialed reports the outcome of connecting to the master.
type haDialed struct {
	conn Conn
	err  error
}

// haReconnect retries the link.
type haReconnect struct{}

// haClient is the slave's replication actor.
type haClient struct {
	b         *Broker
	conn      Conn
	dialing   bool
	backoff   time.Duration
	lastHeard time.Time
	refused   string
	masterMax int64
	lastMeta  time.Time
	reported  int64
}

func (h *haClient) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.backoff = time.Second
		h.dial(ctx)
		h.b.after(h.b.cfg.HASendHeartbeatInterval, ctx.Self(), &haTick{})
		if h.b.cfg.CleanResourceInterval > 0 {
			h.b.after(h.b.cfg.CleanResourceInterval, ctx.Self(), &cleanTick{})
		}
	case *cleanTick:
		h.b.cleanLog() // the slave's log has one appender: this actor
		h.b.after(h.b.cfg.CleanResourceInterval, ctx.Self(), &cleanTick{})
	case *haDialed:
		h.dialing = false
		if m.err != nil {
			h.status(fmt.Sprintf("connecting to master %s: %v", h.b.cfg.HAMasterAddress, m.err))
			h.retry(ctx)
			return
		}
		h.conn = m.conn
		h.backoff = time.Second
		h.lastHeard = h.b.env.Clock.Now()
		h.status("connected to master " + h.b.cfg.HAMasterAddress)
		h.b.log.Info("connected to master", "master", h.b.cfg.HAMasterAddress, "from", h.b.store.CommitLog().MaxOffset())
		h.report()
	case *haIn:
		if m.conn != h.conn {
			return
		}
		h.lastHeard = h.b.env.Clock.Now()
		for _, req := range m.reqs {
			h.handle(ctx, req)
		}
	case *haGone:
		if m.conn == h.conn {
			h.conn = nil
			if h.refused == "" {
				h.status("disconnected from master " + h.b.cfg.HAMasterAddress)
				h.retry(ctx)
			}
		}
	case *haReconnect:
		h.dial(ctx)
	case *haTick:
		h.tick(ctx)
		h.b.after(h.b.cfg.HASendHeartbeatInterval, ctx.Self(), &haTick{})
	case *metaSnapshot:
		if h.conn != nil {
			h.send(&protocol.HAMetadataRequest{Kind: m.kind, Data: m.data})
		}
	case *actor.Stopping:
		if h.conn != nil {
			h.conn.Close("slave stopping")
		}
	}
}

func (h *haClient) status(s string) {
	h.b.haStatus.Store(&s)
}

func (h *haClient) dial(ctx actor.Context) {
	if h.dialing || h.conn != nil || h.refused != "" || h.b.env.Dial == nil {
		return
	}
	h.dialing = true
	self, root, addr := ctx.Self(), h.b.sys.Root, h.b.cfg.HAMasterAddress
	handler := &haHandler{b: h.b, owner: func() *actor.PID { return self }}
	dial := h.b.env.Dial
	h.b.env.RunIO(func() {
		c, err := dial(addr, handler)
		root.Send(self, &haDialed{conn: c, err: err})
	})
}

func (h *haClient) retry(ctx actor.Context) {
	h.b.after(h.backoff, ctx.Self(), &haReconnect{})
	h.backoff = min(2*h.backoff, 10*time.Second)
}

func (h *haClient) send(req protocol.Request) {
	if h.conn != nil {
		h.conn.Send(req)
	}
}

// report tells the master where this log ends (and acknowledges it).
func (h *haClient) report() {
	cl := h.b.store.CommitLog()
	crc, n := cl.TailCRC(haTail)
	minOff := cl.MinOffset()
	if cl.Empty() {
		minOff = 0
	}
	h.reported = cl.MaxOffset()
	h.send(&protocol.HAReportRequest{BrokerName: h.b.cfg.BrokerName, BrokerID: h.b.cfg.BrokerID, MaxOffset: cl.MaxOffset(),
		MinOffset: minOff, TailCRC: crc, TailLen: int32(n), SegmentSize: cl.SegmentSize()})
}

func (h *haClient) handle(ctx actor.Context, req protocol.Request) {
	switch m := req.(type) {
	case *protocol.HATransferRequest:
		h.transfer(ctx, m)
	case *protocol.HAMetadataRequest:
		switch m.Kind {
		case "topics":
			ctx.Send(h.b.p.topics, &importMeta{kind: m.Kind, data: m.Data})
		case "offsets":
			ctx.Send(h.b.p.offsets, &importMeta{kind: m.Kind, data: m.Data})
		}
	case *protocol.HARefuseRequest:
		h.refused = m.Reason
		h.status("master refused replication: " + m.Reason)
		h.b.log.Error("the master refused this slave; replication stopped until an operator acts", "reason", m.Reason)
	}
}

func (h *haClient) transfer(ctx actor.Context, m *protocol.HATransferRequest) {
	st := h.b.store
	cl := st.CommitLog()
	h.masterMax = m.MasterMaxOffset
	h.b.haMasterMax.Store(m.MasterMaxOffset)
	if cl.Empty() && m.Offset > 0 {
		if err := st.StartAt(m.Offset); err != nil {
			h.fail(fmt.Sprintf("start the empty log at the master's offset %d: %v", m.Offset, err))
			return
		}
		h.b.log.Info("empty slave starts at the master's earliest offset", "offset", m.Offset)
	}
	if m.Offset != cl.MaxOffset() {
		// Out of step (a reconnect raced a transfer): start over from here.
		h.conn.Close(fmt.Sprintf("transfer at %d, log ends at %d", m.Offset, cl.MaxOffset()))
		return
	}
	if err := cl.AppendRaw(m.Offset, m.Data); err != nil {
		h.fail(fmt.Sprintf("appending the master's bytes at %d: %v", m.Offset, err))
		return
	}
	if h.b.cfg.FlushDiskType == SyncFlush {
		ctx.Send(h.b.p.flusher, &flushWait{})
	} else {
		ctx.Send(h.b.p.reput, &logAppended{})
	}
	if lag := m.MasterMaxOffset - cl.MaxOffset(); lag > 64<<20 && cl.MaxOffset()/(256<<20) != m.Offset/(256<<20) {
		h.b.log.Info("slave catching up", "offset", cl.MaxOffset(), "master_end", m.MasterMaxOffset, "lag_bytes", lag)
	}
	h.report()
}

// fail stops replication: the slave will not corrupt itself.
func (h *haClient) fail(reason string) {
	h.refused = reason
	h.status("replication stopped: " + reason)
	h.b.log.Error("replication stopped; the slave's log is left as it was", "reason", reason)
	if h.conn != nil {
		h.conn.Close(reason)
	}
}

func (h *haClient) tick(ctx actor.Context) {
	if h.conn == nil {
		return
	}
	now := h.b.env.Clock.Now()
	if now.Sub(h.lastHeard) > h.b.cfg.HAHousekeepingInterval {
		h.conn.Close("nothing from the master within haHousekeepingInterval")
		return
	}
	h.report() // heartbeat
	if now.Sub(h.lastMeta) >= h.b.cfg.HAMetadataInterval {
		h.lastMeta = now
		ctx.Request(h.b.p.offsets, &exportOffsets{}) // the reverse path: offsets committed here
	}
}
