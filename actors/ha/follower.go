package ha

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/wharfmq/wharf/internal/invariant"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// FollowerConfig is a slave's replication configuration.
type FollowerConfig struct {
	BrokerName           string
	BrokerID             int64
	MasterAddr           string        // haMasterAddress: host:haListenPort
	HousekeepingInterval time.Duration // close a link the master is silent on
	MetadataInterval     time.Duration // offsets committed here, back to the master
	// ReconnectMax caps the redial backoff (haReconnectMaxInterval; 0:
	// DefaultReconnectMax). It bounds how long a slave stays away from a
	// master that restarted: once the master listens again, the slave is
	// back within ReconnectMax.
	ReconnectMax time.Duration
	// SkipTruncation plants a bug for the simulator: a log that goes on
	// past the point it shares with the master is not cut back there.
	SkipTruncation bool
}

// Redial backoff: the first retry comes after firstRetry, each failed
// dial doubles the wait up to FollowerConfig.ReconnectMax, and a link
// that opens starts it over. A restarting master is usually back within
// a second, so a short cap costs a few refused dials on loopback or LAN
// and saves seconds of unreplicated writes.
const (
	firstRetry = 250 * time.Millisecond
	// DefaultReconnectMax is the cap when the configuration gives none.
	DefaultReconnectMax = time.Second
)

// FollowerReady is what the Follower asks the shell to do.
type FollowerReady struct {
	// Dial: open a link to DialAddr now (the shell reports Dialed).
	Dial     bool
	DialAddr string
	// RetryIn: call Reconnect after this long (0: no retry wanted).
	RetryIn time.Duration
	// Sends go to the master over the current link.
	Sends []protocol.Request
	// Close the current link with this reason ("" : keep it).
	Close string
	// Appended: the log grew (flush it, dispatch it).
	Appended bool
	// Imports are metadata from the master (topics, consumer offsets).
	Imports []*protocol.HAMetadataRequest
	// ExportOffsets: time to send this broker's consumer offsets to the
	// master.
	ExportOffsets bool
	// Truncate: cut the log to TruncateTo (storage.Store.TruncateTo), the
	// point it shares with the master, then call Truncated. Nothing is
	// replicated until then.
	Truncate   bool
	TruncateTo int64
}

// Follower is the slave's replication core.
type Follower struct {
	cfg       FollowerConfig
	st        *storage.Store
	log       *slog.Logger
	link      uint64 // the current link's connection id, 0 if none
	dialing   bool
	backoff   time.Duration
	lastHeard time.Time
	lastMeta  time.Time
	refused   string
	status    string
	masterMax int64
	confirm   int64 // the master's confirm offset, as its last transfer said
	// reportedFlushed is the flushed offset the last report carried.
	reportedFlushed int64
	// handshake: the link's first report carried this log's epoch
	// entries; nothing is appended until the master's answer is settled
	// (truncating: the shell is cutting the log).
	handshake  bool
	truncating bool
	rd         FollowerReady
}

// NewFollower returns the follower of st's log.
func NewFollower(cfg FollowerConfig, st *storage.Store, log *slog.Logger) *Follower {
	if cfg.ReconnectMax <= 0 {
		cfg.ReconnectMax = DefaultReconnectMax
	}
	f := &Follower{cfg: cfg, st: st, log: log}
	f.resetBackoff()
	return f
}

func (f *Follower) resetBackoff() { f.backoff = min(firstRetry, f.cfg.ReconnectMax) }

// Ready returns what to do since the last call.
func (f *Follower) Ready() FollowerReady {
	rd := f.rd
	f.rd = FollowerReady{Sends: f.rd.Sends[:0], Imports: f.rd.Imports[:0]}
	return rd
}

// Status describes the link, for stats.
func (f *Follower) Status() string { return f.status }

// MasterMaxOffset is the master's log end as last heard.
func (f *Follower) MasterMaxOffset() int64 { return f.masterMax }

// ConfirmOffset is how far this log is confirmed: the master's confirm
// offset as last heard (0: not known), never past this log's end.
func (f *Follower) ConfirmOffset() int64 { return min(f.confirm, f.st.CommitLog().MaxOffset()) }

// HeardConfirm is the master's confirm offset as last heard on this
// follower's links (0: none yet), even past this log's end.
func (f *Follower) HeardConfirm() int64 { return f.confirm }

// Link is the current link's connection id (0: none).
func (f *Follower) Link() uint64 { return f.link }

// Start begins replicating: dial the master.
func (f *Follower) Start(now time.Time) { f.dial() }

// Reconnect is the retry timer.
func (f *Follower) Reconnect(now time.Time) { f.dial() }

func (f *Follower) dial() {
	if f.dialing || f.link != 0 || f.refused != "" {
		return
	}
	f.dialing = true
	f.rd.Dial, f.rd.DialAddr = true, f.cfg.MasterAddr
}

// Dialed reports the outcome of a dial: the new link's id, or err.
func (f *Follower) Dialed(now time.Time, id uint64, err error) {
	f.dialing = false
	if err != nil {
		f.status = fmt.Sprintf("connecting to master %s: %v", f.cfg.MasterAddr, err)
		f.retry()
		return
	}
	f.link = id
	f.resetBackoff()
	f.lastHeard = now
	f.status = "connected to master " + f.cfg.MasterAddr
	f.log.Info("connected to master", "master", f.cfg.MasterAddr, "from", f.st.CommitLog().MaxOffset())
	// A log with epochs first learns where it parts from the master's
	// (classic mode has none: the master's prefix checks decide alone).
	f.handshake = len(f.st.Epochs()) > 0
	f.report()
}

func (f *Follower) retry() {
	f.rd.RetryIn = f.backoff
	f.backoff = min(2*f.backoff, f.cfg.ReconnectMax)
}

// Gone reports that connection id closed.
func (f *Follower) Gone(id uint64) {
	if id != f.link || id == 0 {
		return
	}
	f.link = 0
	if f.refused == "" {
		f.status = "disconnected from master " + f.cfg.MasterAddr
		f.retry()
	}
}

// Stop closes the link for good (this broker stops being a slave).
func (f *Follower) Stop(reason string) {
	if f.link != 0 {
		f.rd.Close = reason
	}
	f.refused = reason
}

// Receive handles requests from the master on connection id.
func (f *Follower) Receive(now time.Time, id uint64, reqs []protocol.Request) {
	if id != f.link {
		return
	}
	f.lastHeard = now
	for _, req := range reqs {
		switch m := req.(type) {
		case *protocol.HATransferRequest:
			if !f.transfer(m) {
				return
			}
		case *protocol.HAEpochsRequest:
			if !f.epochs(m) {
				return
			}
		case *protocol.HAMetadataRequest:
			f.rd.Imports = append(f.rd.Imports, m)
		case *protocol.HARefuseRequest:
			if m.NotMaster {
				// Not a master yet (or no longer): the link closes and
				// Gone dials again after the backoff.
				f.status = "master " + f.cfg.MasterAddr + " is not a master (yet): " + m.Reason
				f.log.Warn("the broker dialled as master is not one (yet); dialling again", "master", f.cfg.MasterAddr, "reason", m.Reason)
				continue
			}
			f.refused = m.Reason
			f.status = "master refused replication: " + m.Reason
			f.log.Error("the master refused this slave; replication stopped until an operator acts", "reason", m.Reason)
		}
	}
}

// epochs handles the master's answer to the handshake: the point both
// logs share, from their epoch entries. A log that goes on past it is cut
// there first (by the shell: Truncate); no common point stops
// replication, since copying would overwrite what this log holds.
func (f *Follower) epochs(m *protocol.HAEpochsRequest) bool {
	if !f.handshake || f.truncating {
		return true // the answer to a heartbeat's report of the same handshake
	}
	end := f.st.CommitLog().MaxOffset()
	point, err := storage.CommonPoint(f.st.Epochs(), fromWire(m.Epochs), end, m.MaxOffset)
	if err != nil {
		f.fail(fmt.Sprintf("this log shares no epoch with the master's; replicating would overwrite it (wipe this slave's store to resynchronise): %v", err))
		return false
	}
	if point < end && !f.cfg.SkipTruncation {
		f.truncating = true
		f.rd.Truncate, f.rd.TruncateTo = true, point
		f.status = fmt.Sprintf("cutting the log from %d back to %d, the point it shares with master %s", end, point, f.cfg.MasterAddr)
		f.log.Warn("the log diverged from the master's; cutting it to the last common point", "end", end, "common_point", point, "master", f.cfg.MasterAddr)
		return false
	}
	f.handshake = false
	f.report()
	return true
}

// Truncated reports the outcome of a Truncate: on success replication
// starts from the cut log's end.
func (f *Follower) Truncated(now time.Time, err error) {
	if !f.truncating {
		return
	}
	f.truncating = false
	if err != nil {
		f.fail(fmt.Sprintf("cutting the log to the point it shares with the master: %v", err))
		return
	}
	f.handshake = false
	f.log.Info("log cut to the point it shares with the master", "end", f.st.CommitLog().MaxOffset())
	if f.link != 0 {
		f.lastHeard = now
		f.report()
	}
}

// fenced checks a transfer's epoch against this log's and records a new
// epoch before its first byte is appended; false stops the burst.
func (f *Follower) fenced(m *protocol.HATransferRequest) bool {
	last, _ := f.st.LastEpoch()
	switch {
	case m.Epoch < last.Epoch:
		f.rd.Close = fmt.Sprintf("a transfer of epoch %d, older than this log's %d: the master is stale", m.Epoch, last.Epoch)
		f.status = "refused a stale master: " + f.rd.Close
		f.log.Error("refusing a transfer from a stale master", "epoch", m.Epoch, "known_epoch", last.Epoch, "master", f.cfg.MasterAddr)
		return false
	case m.Epoch == last.Epoch && m.Epoch > 0 && m.EpochStartOffset != last.StartOffset:
		f.fail(fmt.Sprintf("the master says epoch %d started at %d, this log says at %d", m.Epoch, m.EpochStartOffset, last.StartOffset))
		return false
	case m.Epoch > last.Epoch:
		if err := f.st.StartEpoch(m.Epoch, m.EpochStartOffset); err != nil {
			f.fail(fmt.Sprintf("recording the master's epoch %d (from %d) at %d: %v", m.Epoch, m.EpochStartOffset, m.Offset, err))
			return false
		}
	}
	return true
}

// transfer appends the master's bytes at the same offset; false stops the
// burst (the link is being closed).
func (f *Follower) transfer(m *protocol.HATransferRequest) bool {
	cl := f.st.CommitLog()
	if len(m.Data) == 0 {
		// The master's heartbeat: Receive noted that it was heard. It is
		// not reported on (that would answer a heartbeat with one), and
		// it moves nothing else: its fields are the master's view of
		// this link, not bytes to fence or confirm.
		return true
	}
	if f.handshake || f.truncating {
		f.rd.Close = "a transfer before the epoch handshake ended"
		return false
	}
	f.masterMax = m.MasterMaxOffset
	f.confirm = max(f.confirm, m.ConfirmOffset)
	if cl.Empty() && m.Offset > 0 {
		if err := f.st.StartAt(m.Offset); err != nil {
			f.fail(fmt.Sprintf("start the empty log at the master's offset %d: %v", m.Offset, err))
			return false
		}
		f.log.Info("empty slave starts at the master's earliest offset", "offset", m.Offset)
	}
	if m.Offset != cl.MaxOffset() {
		// Out of step (a reconnect raced a transfer): start over from here.
		f.rd.Close = fmt.Sprintf("transfer at %d, log ends at %d", m.Offset, cl.MaxOffset())
		return false
	}
	if !f.fenced(m) {
		return false
	}
	if err := cl.AppendRaw(m.Offset, m.Data); err != nil {
		f.fail(fmt.Sprintf("appending the master's bytes at %d: %v", m.Offset, err))
		return false
	}
	// The report that follows acknowledges the log's end to the master: it
	// must be exactly where the master's bytes end, or the slave would
	// acknowledge bytes it does not hold (or hold bytes at other offsets).
	invariant.Check2(cl.MaxOffset() == m.Offset+int64(len(m.Data)), "ha: the slave's log ends at %d after the master's bytes up to %d",
		cl.MaxOffset(), m.Offset+int64(len(m.Data)))
	f.rd.Appended = true
	if lag := m.MasterMaxOffset - cl.MaxOffset(); lag > 64<<20 && cl.MaxOffset()/(256<<20) != m.Offset/(256<<20) {
		f.log.Info("slave catching up", "offset", cl.MaxOffset(), "master_end", m.MasterMaxOffset, "lag_bytes", lag)
	}
	f.report()
	return true
}

// fail stops replication: the slave will not corrupt itself.
func (f *Follower) fail(reason string) {
	f.refused = reason
	f.status = "replication stopped: " + reason
	f.log.Error("replication stopped; the slave's log is left as it was", "reason", reason)
	if f.link != 0 {
		f.rd.Close = reason
	}
}

// Tick is the heartbeat: report (which also acknowledges), close a link
// the master is silent on, and say when offsets are due for the master.
func (f *Follower) Tick(now time.Time) {
	if f.link == 0 {
		return
	}
	if now.Sub(f.lastHeard) > f.cfg.HousekeepingInterval {
		f.rd.Close = "nothing from the master within haHousekeepingInterval"
		return
	}
	if f.truncating {
		return // Truncated reports
	}
	f.report()
	if now.Sub(f.lastMeta) >= f.cfg.MetadataInterval {
		f.lastMeta = now
		f.rd.ExportOffsets = true
	}
}

// Flushed reports that this log's flush moved (the flush owner calls it
// after each fsync): the master learns at once, since a SYNC_FLUSH master
// under controller mode counts this copy only as far as it is fsynced.
// Nothing is reported without a link or while the epoch handshake runs
// (its own reports follow).
func (f *Follower) Flushed() {
	if f.link == 0 || f.handshake || f.truncating || f.refused != "" {
		return
	}
	if f.st.CommitLog().FlushedOffset() > f.reportedFlushed {
		f.report()
	}
}

// report tells the master where this log ends (and acknowledges it) and
// how far it is fsynced.
func (f *Follower) report() {
	cl := f.st.CommitLog()
	crc, n := cl.TailCRC(TailLen)
	minOff := cl.MinOffset()
	if cl.Empty() {
		minOff = 0
	}
	last, _ := f.st.LastEpoch()
	r := &protocol.HAReportRequest{BrokerName: f.cfg.BrokerName, BrokerID: f.cfg.BrokerID,
		MaxOffset: cl.MaxOffset(), MinOffset: minOff, TailCRC: crc, TailLen: int32(n), SegmentSize: cl.SegmentSize(), Epoch: last.Epoch}
	if f.handshake {
		r.Epochs = toWire(f.st.Epochs())
	}
	// Read after the end: the flush never passes the end, so the report
	// never claims durable bytes it does not hold.
	r.FlushedOffset = min(cl.FlushedOffset(), r.MaxOffset)
	f.reportedFlushed = r.FlushedOffset
	f.rd.Sends = append(f.rd.Sends, r)
}
