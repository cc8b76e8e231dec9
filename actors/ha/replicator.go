package ha

import (
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"

	"github.com/wharfmq/wharf/internal/invariant"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

const (
	// Window is the most unacknowledged bytes in flight per slave.
	Window = 4 << 20
	// TailLen is how many bytes at a slave's log end are compared with
	// the master's to detect divergence.
	TailLen = 4096
)

// ReplicatorConfig is the master's replication configuration.
type ReplicatorConfig struct {
	MaxGapNotInSync        int64         // haMaxGapNotInSync
	TransferBatchSize      int           // haTransferBatchSize
	CatchUpFromLastSegment bool          // an empty slave starts at the last segment
	HousekeepingInterval   time.Duration // haHousekeepingInterval: close a silent slave
	MetadataInterval       time.Duration // haMetadataInterval: topics and offsets to slaves
	// Epochs returns the master's epoch entries (storage.Store.Epochs);
	// nil, or none: classic mode, every byte of epoch 0.
	Epochs func() []storage.EpochEntry
}

// Send is a request for one peer.
type Send struct {
	Peer uint64
	Req  protocol.Request
}

// Close asks the shell to close a peer's connection.
type Close struct {
	Peer   uint64
	Reason string
}

// ReplicatorReady is what the Replicator asks the shell to do.
type ReplicatorReady struct {
	Sends  []Send
	Closes []Close
	// Progress: acknowledged offsets or the set of slaves changed; the
	// gate needs Acked.
	Progress bool
	// Metadata: time to send the topic table and consumer offsets.
	Metadata bool
}

type peer struct {
	addr      string
	brokerID  int64
	acked     int64 // every byte below is on the slave
	flushed   int64 // every byte below is fsynced on the slave
	sent      int64 // next offset to send
	lastHeard time.Time
	// streamed: a transfer went to the slave since the last tick.
	streamed bool
}

// Replicator is the master's replication core.
type Replicator struct {
	cfg   ReplicatorConfig
	cl    *storage.CommitLog
	log   *slog.Logger
	peers map[uint64]*peer
	// closing: connections this replicator refused or closed, until the
	// shell reports them gone. Reports still in flight on them are
	// ignored: a refused slave must not start over as a new one.
	closing  map[uint64]struct{}
	lastMeta time.Time
	confirm  int64 // the confirm offset transfers carry
	rd       ReplicatorReady
}

// NewReplicator returns the replicator of the master's log cl.
func NewReplicator(cfg ReplicatorConfig, cl *storage.CommitLog, log *slog.Logger) *Replicator {
	return &Replicator{cfg: cfg, cl: cl, log: log, peers: map[uint64]*peer{}, closing: map[uint64]struct{}{}}
}

// Ready returns what to do since the last call; valid until the next call
// of any method.
func (r *Replicator) Ready() ReplicatorReady {
	rd := r.rd
	r.rd = ReplicatorReady{Sends: r.rd.Sends[:0], Closes: r.rd.Closes[:0]}
	return rd
}

// Report handles a slave's report: the first one on a connection decides
// where streaming starts; later ones acknowledge bytes. Reports on a
// connection being closed are ignored.
func (r *Replicator) Report(now time.Time, id uint64, addr string, m *protocol.HAReportRequest) {
	if _, ok := r.closing[id]; ok {
		return
	}
	mine := r.epochs()
	if last := lastEpoch(mine); m.Epoch > last.Epoch {
		r.refuse(id, addr, fmt.Sprintf("the slave is at epoch %d, newer than this master's %d: this master is stale and must not replicate", m.Epoch, last.Epoch))
		return
	}
	p := r.peers[id]
	if p == nil && len(m.Epochs) > 0 {
		// The slave's handshake: it cuts its log to the point both share,
		// then reports again without its entries.
		r.rd.Sends = append(r.rd.Sends, Send{Peer: id, Req: &protocol.HAEpochsRequest{Epochs: toWire(mine), MaxOffset: r.cl.MaxOffset()}})
		return
	}
	if p == nil {
		start, reason := r.start(m)
		if reason != "" {
			r.refuse(id, addr, reason)
			return
		}
		// Below start an empty slave holds nothing and never will: as
		// for acked, nothing there is waited for.
		flushed := min(m.FlushedOffset, start)
		if m.MaxOffset == 0 && m.MinOffset == 0 {
			flushed = start
		}
		p = &peer{addr: addr, brokerID: m.BrokerID, acked: start, flushed: flushed, sent: start}
		r.peers[id] = p
		r.log.Info("slave connected", "slave", addr, "brokerId", m.BrokerID, "from", start, "master_end", r.cl.MaxOffset())
	} else {
		if m.MaxOffset > p.sent {
			r.refuse(id, addr, fmt.Sprintf("the slave acknowledged offset %d, but only %d was sent", m.MaxOffset, p.sent))
			return
		}
		if m.FlushedOffset > m.MaxOffset {
			r.refuse(id, addr, fmt.Sprintf("the slave reported offset %d flushed, past its log's end %d", m.FlushedOffset, m.MaxOffset))
			return
		}
		p.acked = max(p.acked, m.MaxOffset)
		p.flushed = max(p.flushed, m.FlushedOffset)
	}
	p.lastHeard = now
	r.pump(id, p)
	r.rd.Progress = true
}

// heartbeat sends a transfer of no bytes to a slave nothing was streamed
// to since the last tick: an idle master is otherwise silent but for the
// metadata, and its slave closes a link the master is silent on for
// haHousekeepingInterval, which may be shorter than the metadata's period.
// The slave does not report on it, so it is one frame per tick
// (haSendHeartbeatInterval), and none while bytes stream.
func (r *Replicator) heartbeat(id uint64, p *peer) {
	ep, _ := epochAt(r.epochs(), p.sent)
	r.rd.Sends = append(r.rd.Sends, Send{Peer: id, Req: &protocol.HATransferRequest{Offset: p.sent, MasterMaxOffset: r.cl.MaxOffset(),
		Epoch: ep.Epoch, EpochStartOffset: ep.StartOffset, ConfirmOffset: r.confirm}})
}

// start checks a new slave's log against the master's and returns where
// streaming starts, or why the slave is refused.
func (r *Replicator) start(m *protocol.HAReportRequest) (int64, string) {
	cl := r.cl
	switch {
	case m.BrokerID <= 0:
		return 0, fmt.Sprintf("brokerId %d is not a slave's (slaves have brokerId > 0)", m.BrokerID)
	case m.SegmentSize != cl.SegmentSize():
		return 0, fmt.Sprintf("slave mappedFileSizeCommitLog %d differs from the master's %d", m.SegmentSize, cl.SegmentSize())
	case m.MaxOffset == 0 && m.MinOffset == 0: // an empty slave
		if r.cfg.CatchUpFromLastSegment {
			return cl.MaxOffset() - cl.MaxOffset()%cl.SegmentSize(), ""
		}
		return cl.MinOffset(), ""
	case m.MaxOffset > cl.MaxOffset():
		return 0, fmt.Sprintf("the slave's log (end %d) is longer than the master's (end %d): the logs diverged; wipe the slave's store to resynchronise", m.MaxOffset, cl.MaxOffset())
	case m.MaxOffset < cl.MinOffset():
		return 0, fmt.Sprintf("the slave's log ends at %d, before the master's earliest retained offset %d; wipe the slave's store to catch up", m.MaxOffset, cl.MinOffset())
	}
	if m.TailLen > 0 && m.MaxOffset-int64(m.TailLen) >= cl.MinOffset() {
		crc, err := cl.RangeCRC(m.MaxOffset-int64(m.TailLen), m.MaxOffset)
		if err != nil || crc != m.TailCRC {
			return 0, fmt.Sprintf("the slave's bytes below %d differ from the master's: the logs diverged; wipe the slave's store to resynchronise", m.MaxOffset)
		}
	}
	return m.MaxOffset, ""
}

func (r *Replicator) refuse(id uint64, addr, reason string) {
	r.log.Error("refusing slave", "slave", addr, "reason", reason)
	r.rd.Sends = append(r.rd.Sends, Send{Peer: id, Req: &protocol.HARefuseRequest{Reason: reason}})
	r.close(id, reason)
	if _, ok := r.peers[id]; ok {
		delete(r.peers, id)
		r.rd.Progress = true
	}
}

// Gone reports a closed slave connection.
func (r *Replicator) Gone(id uint64) {
	delete(r.closing, id)
	if p := r.peers[id]; p != nil {
		delete(r.peers, id)
		r.log.Warn("slave disconnected", "slave", p.addr, "acked", p.acked)
		r.rd.Progress = true
	}
}

// Appended reports that the log grew: stream it to every slave.
func (r *Replicator) Appended() {
	for _, id := range r.ids() {
		r.pump(id, r.peers[id])
	}
}

// Tick closes slaves silent for HousekeepingInterval and says when the
// metadata is due.
func (r *Replicator) Tick(now time.Time) {
	for _, id := range r.ids() {
		p := r.peers[id]
		if now.Sub(p.lastHeard) > r.cfg.HousekeepingInterval {
			r.log.Warn("slave silent too long; closing", "slave", p.addr)
			r.close(id, "no report within haHousekeepingInterval")
			delete(r.peers, id)
			continue
		}
		if !p.streamed {
			r.heartbeat(id, p)
		}
		p.streamed = false
	}
	r.rd.Progress = true // in-sync counts move with the log's end
	if len(r.peers) > 0 && now.Sub(r.lastMeta) >= r.cfg.MetadataInterval {
		r.lastMeta = now
		r.rd.Metadata = true
	}
}

// Broadcast sends req to every slave.
func (r *Replicator) Broadcast(req protocol.Request) {
	for _, id := range r.ids() {
		r.rd.Sends = append(r.rd.Sends, Send{Peer: id, Req: req})
	}
}

// CloseAll closes every slave (this broker stops being a master).
func (r *Replicator) CloseAll(reason string) {
	for _, id := range r.ids() {
		r.close(id, reason)
		delete(r.peers, id)
	}
	r.rd.Progress = true
}

// close asks the shell to close connection id and ignores it until it
// is gone.
func (r *Replicator) close(id uint64, reason string) {
	r.rd.Closes = append(r.rd.Closes, Close{Peer: id, Reason: reason})
	r.closing[id] = struct{}{}
}

// Acked appends each slave's acknowledged offset to dst (in connection
// order) and returns it with the number of slaves in sync: within
// haMaxGapNotInSync of the log's end.
func (r *Replicator) Acked(dst []int64) ([]int64, int) {
	end := r.cl.MaxOffset()
	n := 0
	for _, id := range r.ids() {
		p := r.peers[id]
		dst = append(dst, p.acked)
		if end-p.acked <= r.cfg.MaxGapNotInSync {
			n++
		}
	}
	return dst, n
}

// Slaves describes every slave, for stats.
func (r *Replicator) Slaves() []protocol.SlaveInfo {
	end := r.cl.MaxOffset()
	infos := make([]protocol.SlaveInfo, 0, len(r.peers))
	for _, id := range r.ids() {
		p := r.peers[id]
		infos = append(infos, protocol.SlaveInfo{Address: p.addr, BrokerID: p.brokerID, AckedOffset: p.acked, FlushedOffset: p.flushed,
			LagBytes: end - p.acked, InSync: end-p.acked <= r.cfg.MaxGapNotInSync})
	}
	return infos
}

// SetConfirmOffset is how far the master's log is confirmed, for the
// transfers' header.
func (r *Replicator) SetConfirmOffset(off int64) { r.confirm = off }

func (r *Replicator) epochs() []storage.EpochEntry {
	if r.cfg.Epochs == nil {
		return nil
	}
	return r.cfg.Epochs()
}

// pump sends the slave what it lacks, keeping at most Window bytes
// unacknowledged (the slave acknowledges every transfer). A transfer holds
// the bytes of one epoch only.
func (r *Replicator) pump(id uint64, p *peer) {
	end := r.cl.MaxOffset()
	epochs := r.epochs()
	for p.sent < end && p.sent-p.acked < Window {
		chunk, err := r.cl.ReadRecords(p.sent, max(r.cfg.TransferBatchSize, 4<<10))
		if err != nil {
			r.refuse(id, p.addr, fmt.Sprintf("cannot read the log at %d for the slave: %v", p.sent, err))
			return
		}
		if len(chunk) == 0 {
			break
		}
		ep, bound := epochAt(epochs, p.sent)
		if n := bound - p.sent; n < int64(len(chunk)) {
			chunk = chunk[:n] // an epoch starts at a record boundary
		}
		r.rd.Sends = append(r.rd.Sends, Send{Peer: id, Req: &protocol.HATransferRequest{Offset: p.sent, MasterMaxOffset: end,
			Epoch: ep.Epoch, EpochStartOffset: ep.StartOffset, ConfirmOffset: r.confirm, Data: chunk}})
		p.sent += int64(len(chunk))
		p.streamed = true
	}
	// The gate counts a copy on the strength of acked: a slave cannot hold
	// bytes it was never sent, and nothing past the log's end can be sent
	// (the master's log never shrinks under its slaves). The end is read
	// again: the writer appends while this runs, and ReadRecords may have
	// read past the end read above.
	now := r.cl.MaxOffset()
	invariant.Check3(p.acked <= p.sent && p.sent <= now, "ha: slave acked %d, sent %d, log end %d", p.acked, p.sent, now)
}

// epochAt is the epoch that log offset off belongs to (the zero entry,
// epoch 0, before the first) and where the next one starts (MaxInt64 if
// none does).
func epochAt(entries []storage.EpochEntry, off int64) (storage.EpochEntry, int64) {
	var ep storage.EpochEntry
	for i, e := range entries {
		if e.StartOffset > off {
			return ep, e.StartOffset
		}
		ep = entries[i]
	}
	return ep, math.MaxInt64
}

func lastEpoch(entries []storage.EpochEntry) storage.EpochEntry {
	if len(entries) == 0 {
		return storage.EpochEntry{}
	}
	return entries[len(entries)-1]
}

// toWire is entries as HA frames carry them.
func toWire(entries []storage.EpochEntry) []protocol.HAEpoch {
	out := make([]protocol.HAEpoch, len(entries))
	for i, e := range entries {
		out[i] = protocol.HAEpoch{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

// fromWire is the entries an HA frame carries.
func fromWire(entries []protocol.HAEpoch) []storage.EpochEntry {
	out := make([]storage.EpochEntry, len(entries))
	for i, e := range entries {
		out[i] = storage.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

// ids returns the peers in connection order: the simulator needs the same
// sends in the same order for the same seed.
func (r *Replicator) ids() []uint64 {
	ids := make([]uint64, 0, len(r.peers))
	for id := range r.peers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
