package sim

import (
	"bytes"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// onAck checks an answer at the instant the broker gives it.
func (s *Sim) onAck(c *Conn, f *protocol.Frame, lat time.Duration) {
	cl, ok := c.client.(*Client)
	if !ok {
		return // a group member: no send acknowledgements
	}
	p := cl.pend[f.Opaque]
	if p == nil || p.conn != c || (p.code != protocol.CodeSendMessage && p.code != protocol.CodeSendBatchMessage) {
		return
	}
	s.w.Tracef("ack %s conn %d op %d %v %v", c.node.name, c.id, f.Opaque, f.Status, lat)
	if s.cfg.Ctl != nil {
		s.onCtlAnswer(c, f, lat)
	}
	switch f.Status {
	case protocol.StatusOK:
		s.onSendOK(c, f, p, lat)
	case protocol.StatusFlushSlaveTimeout:
		if s.cfg.Ctl != nil {
			return // the SyncStateSet's wait; its bound is checked with OK's
		}
		if c.node.acfg.BrokerRole != actors.RoleSyncMaster {
			s.w.Violationf("FLUSH_SLAVE_TIMEOUT from a %q master", c.node.acfg.BrokerRole)
		}
		st := c.node.acfg.SlaveTimeout
		if lat < st || lat > st+50*time.Millisecond {
			s.w.Violationf("FLUSH_SLAVE_TIMEOUT after %v, slaveTimeout is %v", lat, st)
		}
	case protocol.StatusFlushDiskTimeout:
		timeout := waitBound(c.node)
		if s.cfg.Flush != actors.SyncFlush {
			s.w.Violationf("FLUSH_DISK_TIMEOUT under ASYNC_FLUSH")
		}
		if strings.HasPrefix(f.Remark, "stored, but not flushed") && s.cfg.Ctl == nil {
			if lat < timeout {
				s.w.Violationf("FLUSH_DISK_TIMEOUT after %v, before its wait bound %v", lat, timeout)
			}
			if lat > timeout+50*time.Millisecond {
				s.w.Violationf("FLUSH_DISK_TIMEOUT after %v, much later than its wait bound %v", lat, timeout)
			}
		}
	}
}

// onSendOK checks an OK acknowledgement: what SYNC_FLUSH and SYNC_MASTER
// promise holds at this instant, and its latency is possible.
func (s *Sim) onSendOK(c *Conn, f *protocol.Frame, p *pending, lat time.Duration) {
	s.res.AcksOK++
	s.res.AckLatency.RecordValue(max(1, lat.Microseconds()))
	g := c.node.g
	g.okAt = s.w.Now()
	mode := s.mode(g)
	if s.res.ByMode[mode] == nil {
		s.res.ByMode[mode] = hdrhistogram.New(1, 60_000_000, 3)
	}
	s.res.ByMode[mode].RecordValue(max(1, lat.Microseconds()))
	var ids []string
	var first int64
	if p.code == protocol.CodeSendBatchMessage {
		var r protocol.SendBatchResponse
		if protocol.DecodeResponse(f, protocol.DefaultLimits(), &r) != nil {
			return
		}
		ids, first = r.MsgIDs, r.QueueOffset
	} else {
		var r protocol.SendResponse
		if protocol.DecodeResponse(f, protocol.DefaultLimits(), &r) != nil {
			return
		}
		ids, first = []string{r.MsgID}, r.QueueOffset
	}
	sync := s.cfg.Flush == actors.SyncFlush
	replicas := g.spec.Role == actors.RoleSyncMaster && g.spec.InSyncReplicas > 1
	for i, id := range ids {
		_, phy, err := protocol.ParseOffsetMsgID(id)
		if err != nil || i >= len(p.keys) {
			s.w.Violationf("ack with a bad message id %q", id)
			continue
		}
		sm := s.sent[p.keys[i]]
		// The latest acknowledgement is the one checked: an earlier one
		// whose answer a crash or a reset lost made the client retry.
		sm.acked, sm.lost, sm.g, sm.queue, sm.phy, sm.qo, sm.ackAt = true, false, g, p.queue, phy, first+int64(i), s.w.Now()
		if hdr, err := c.node.store.CommitLog().Read(phy, 8); err == nil {
			size, _, _ := storage.PeekHeader(hdr)
			sm.end = phy + int64(size)
		}
		if replicas {
			s.checkReplicated(g, sm, lat)
		}
		if s.cfg.Ctl != nil {
			s.checkSetHas(c.node, sm, lat)
		}
		if sync {
			if ok, why := c.node.durable(phy); !ok {
				s.w.Violationf("SYNC_FLUSH ack of %q (offset %d) before it was durable: %s", sm.key, phy, why)
			}
		}
	}
	if sync {
		if lat < c.node.disk.FsyncMin {
			s.w.Violationf("SYNC_FLUSH ack after %v, faster than any fsync (%v)", lat, c.node.disk.FsyncMin)
		}
		if wait := waitBound(c.node); lat > wait+50*time.Millisecond {
			s.w.Violationf("SYNC_FLUSH OK after %v, past its wait bound %v", lat, wait)
		}
	}
}

// waitBound is how long a send waits for durability on n: syncFlushTimeout,
// or slaveTimeout on a SYNC_MASTER (which waits for the flush and the
// slaves together, within slaveTimeout).
func waitBound(n *Node) time.Duration {
	if n.acfg.EnableControllerMode {
		return max(n.acfg.SlaveTimeout, n.acfg.SyncFlushTimeout) // flush and SyncStateSet, each within its own
	}
	if n.acfg.BrokerRole == actors.RoleSyncMaster {
		return n.acfg.SlaveTimeout
	}
	return n.acfg.SyncFlushTimeout
}

// checkReplicated: a SYNC_MASTER OK comes no sooner than a round trip to
// a slave, and only once inSyncReplicas-1 slaves reported holding it.
func (s *Sim) checkReplicated(g *brokerGroup, sm *sentMsg, lat time.Duration) {
	if lat < 2*s.net.LatencyMin {
		s.w.Violationf("SYNC_MASTER ack after %v, less than a round trip to a slave (%v)", lat, 2*s.net.LatencyMin)
	}
	copies := 1
	for _, sl := range g.slaves {
		if sl.reported >= sm.end {
			copies++
		}
	}
	if copies < g.spec.InSyncReplicas {
		s.w.Violationf("SYNC_MASTER ack of %q (log end %d) with %d copies reported, inSyncReplicas is %d", sm.key, sm.end, copies, g.spec.InSyncReplicas)
	}
}

// checkStep runs after every step: the cheap invariants.
func (s *Sim) checkStep() {
	s.checkOwners()
	if s.cfg.Flush != actors.AsyncFlush {
		return
	}
	for _, g := range s.groups {
		n := g.master
		if !n.up {
			continue
		}
		win := n.trackWindow()
		if bound := n.windowBound(); win > bound && s.w.Now().After(g.windowFrom) && n.store.CommitLog().Err() == nil {
			s.w.Violationf("%s: ASYNC_FLUSH left bytes unflushed for %v, more than flushIntervalCommitLog + one fsync (%v)", n.name, win, bound)
			g.windowFrom = s.w.Now().Add(time.Hour) // report once
		}
	}
}

// lostSince reports whether a crash lost messages of queue q at or below
// offset off (so offsets there may be reused).
func (g *brokerGroup) lostSince(q int32, off int64) bool {
	from, ok := g.lostFrom[q]
	return ok && from <= off
}

// consumed records a message a consumer received; under SYNC_FLUSH a
// consumed offset must never hold another message later.
func (s *Sim) consumed(g *brokerGroup, q int32, qo int64, key string) {
	s.res.Consumed++
	m := g.consumedAt[q]
	if m == nil {
		m = map[int64]string{}
		g.consumedAt[q] = m
	}
	if prev, ok := m[qo]; ok && prev != key && !(s.cfg.Flush == actors.AsyncFlush && g.lostSince(q, qo)) {
		s.w.Violationf("%s queue %d offset %d was consumed as %q and later as %q (the first acknowledged there: %v)", g.spec.Name, q, qo, prev, key, s.ackedAt(prev, g, q, qo))
	}
	m[qo] = key
}

// checkRecovered runs right after a master's restart, before any new
// request: every acknowledged message the mode promised is present and
// intact.
func (s *Sim) checkRecovered(g *brokerGroup, flushedAtCrash int64, flushFailed bool) {
	st := g.master.store
	cl := st.CommitLog()
	for _, k := range sortedSent(s.sent) {
		sm := s.sent[k]
		if !sm.acked || sm.lost || sm.g != g {
			continue
		}
		r, err := cl.ReadRecord(sm.phy, 0, true)
		intact := err == nil && bytes.Equal(r.Body, sm.body) && r.QueueID == sm.queue && r.QueueOffset == sm.qo
		if intact {
			continue
		}
		promised := s.cfg.Flush == actors.SyncFlush || (!flushFailed && sm.phy < flushedAtCrash)
		if promised {
			s.w.Violationf("acknowledged message %q (%s offset %d, queue %d/%d) lost or damaged by the crash (flushed %d): %v",
				sm.key, g.spec.Name, sm.phy, sm.queue, sm.qo, flushedAtCrash, err)
		}
		sm.lost = true
		if from, ok := g.lostFrom[sm.queue]; !ok || sm.qo < from {
			g.lostFrom[sm.queue] = sm.qo
		}
	}
	// Queues may also have lost unacknowledged tails: offsets above their new
	// max will be reused.
	for q := int32(0); q < simQueues; q++ {
		_, max := st.ConsumeQueueBounds(storage.QueueKey{Topic: simTopic, QueueID: q})
		if from, ok := g.lostFrom[q]; !ok || max < from {
			g.lostFrom[q] = max
		}
	}
	checkStructure(s.w, st)
}

// checkSlavesHaveAcked runs when a master is lost: every send acknowledged
// under SYNC_MASTER is on inSyncReplicas-1 slaves, byte for byte. A slave
// that is down, or crashed after it reported holding the bytes, is excused:
// two failures (a slave reports what it holds, not what it synced, and its
// report may reach the master after its power cut).
func (s *Sim) checkSlavesHaveAcked(g *brokerGroup, keys []string) {
	need := g.spec.InSyncReplicas - 1
	if g.spec.Role != actors.RoleSyncMaster || need < 1 || !g.master.up {
		return
	}
	if keys == nil {
		keys = sortedSent(s.sent)
	}
	for _, k := range keys {
		sm := s.sent[k]
		if sm.g != g || !sm.acked || sm.lost || !sm.ackAt.After(time.Time{}) {
			continue
		}
		want, err := g.master.store.CommitLog().Read(sm.phy, int(sm.end-sm.phy))
		if err != nil {
			continue
		}
		held := 0
		for _, sl := range g.slaves {
			if at := sl.reportedAt(sm.end); !sl.up || (!at.IsZero() && !sl.crashAt.Before(at)) {
				held++ // excused
				continue
			}
			if got, err := sl.store.CommitLog().Read(sm.phy, len(want)); err == nil && string(got) == string(want) {
				held++
			}
		}
		if held < need {
			s.w.Violationf("%s lost: SYNC_MASTER-acknowledged %q (offset %d) is on %d slaves, inSyncReplicas needs %d",
				g.master.name, sm.key, sm.phy, held, need)
		}
	}
}

// checkSlavePrefix: a slave's log is a byte-identical prefix of its
// master's, unless the master refused it (diverged logs).
func (s *Sim) checkSlavePrefix(g *brokerGroup, sl *Node) {
	m := g.master
	if !sl.up || !m.up || s.refusedExcused(sl) {
		return
	}
	scl, mcl := sl.store.CommitLog(), m.store.CommitLog()
	if scl.MaxOffset() > mcl.MaxOffset() {
		s.w.Violationf("%s's log (end %d) is longer than its master's (end %d) and was not refused", sl.name, scl.MaxOffset(), mcl.MaxOffset())
		return
	}
	seg := scl.SegmentSize()
	for off := scl.MinOffset(); off < scl.MaxOffset(); off += seg - off%seg {
		n := int(min(seg-off%seg, scl.MaxOffset()-off))
		a, err1 := scl.Read(off, n)
		b, err2 := mcl.Read(off, n)
		if err1 != nil || err2 != nil || string(a) != string(b) {
			s.w.Violationf("%s's log differs from its master's in [%d, %d): %v %v", sl.name, off, off+int64(n), err1, err2)
			return
		}
	}
}

// finalCheck checks each master's store on a copy of its disk as it is,
// and each slave against its master.
func (s *Sim) finalCheck() {
	keys := sortedSent(s.sent)
	for _, g := range s.groups {
		for _, sl := range g.slaves {
			s.checkSlavePrefix(g, sl)
		}
		s.checkSlavesHaveAcked(g, keys)
		s.checkFinalStore(g, keys)
		s.checkConsumedReads(g)
	}
}

// checkConsumedReads: every message a consumer read is, at the end, the
// message at its queue offset in the group's master's log, unless a crash
// the mode allowed to lose it took it. A consumer must never read what
// the log later replaces (Jepsen's "inconsistent offsets", an aborted
// read): it would skip the message that takes the offset. It reads the
// running master's store, whose queues hold everything confirmed once the
// liveness phase is over.
func (s *Sim) checkConsumedReads(g *brokerGroup) {
	n := g.master
	if !n.up || n.store == nil {
		return
	}
	for q := int32(0); q < simQueues; q++ {
		m := g.consumedAt[q]
		qos := make([]int64, 0, len(m))
		for qo := range m {
			qos = append(qos, qo)
		}
		slices.Sort(qos)
		for _, qo := range qos {
			if s.cfg.Flush == actors.AsyncFlush && g.lostSince(q, qo) {
				continue
			}
			got := "nothing"
			if e, err := n.store.QueueEntry(storage.QueueKey{Topic: simTopic, QueueID: q}, qo); err == nil {
				if r, err := n.store.CommitLog().ReadRecord(e.Offset, e.Size, false); err == nil {
					got, _ = storage.Property(r.Properties, protocol.PropertyKeys)
				}
			}
			if got != m[qo] {
				s.w.Violationf("%s queue %d offset %d was consumed as %q; the final log of %s holds %q there", g.spec.Name, q, qo, m[qo], n.name, got)
				break // one per queue
			}
		}
	}
}

func (s *Sim) checkFinalStore(g *brokerGroup, keys []string) {
	n := g.master
	if !n.up {
		return
	}
	img := n.mem.Crash(0, vfs.ProcessCrash)
	st, _, err := storage.Open(img, n.scfg)
	if err != nil {
		s.w.Violationf("%s: final store does not open: %v", n.name, err)
		return
	}
	checkStructure(s.w, st)
	cl := st.CommitLog()
	for _, k := range keys {
		sm := s.sent[k]
		if sm.g != g || !sm.acked || sm.lost {
			continue
		}
		r, err := cl.ReadRecord(sm.phy, 0, true)
		if err != nil || !bytes.Equal(r.Body, sm.body) {
			s.w.Violationf("acknowledged message %q missing from %s at the end: %v", sm.key, n.name, err)
		}
	}
}

func sortedSent(m map[string]*sentMsg) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkStructure checks a store at rest (just opened, recovery done) with
// the storage package's checker: every record intact, queue offsets
// contiguous, ConsumeQueues, index and checkpoint consistent with the log.
func checkStructure(w *World, st *storage.Store) {
	if err := storage.Check(st); err != nil {
		w.Violationf("store structure: %v", err)
	}
}

// ackedAt reports whether the message of key was acknowledged (SEND_OK)
// at offset qo of queue q of group g (a retry may have stored it elsewhere
// too, unacknowledged).
func (s *Sim) ackedAt(key string, g *brokerGroup, q int32, qo int64) bool {
	sm := s.sent[key]
	return sm != nil && sm.acked && sm.g == g && sm.queue == q && sm.qo == qo
}
