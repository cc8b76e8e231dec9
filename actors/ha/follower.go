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
	rd        FollowerReady
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
		case *protocol.HAMetadataRequest:
			f.rd.Imports = append(f.rd.Imports, m)
		case *protocol.HARefuseRequest:
			f.refused = m.Reason
			f.status = "master refused replication: " + m.Reason
			f.log.Error("the master refused this slave; replication stopped until an operator acts", "reason", m.Reason)
		}
	}
}

// transfer appends the master's bytes at the same offset; false stops the
// burst (the link is being closed).
func (f *Follower) transfer(m *protocol.HATransferRequest) bool {
	cl := f.st.CommitLog()
	f.masterMax = m.MasterMaxOffset
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
	f.report()
	if now.Sub(f.lastMeta) >= f.cfg.MetadataInterval {
		f.lastMeta = now
		f.rd.ExportOffsets = true
	}
}

// report tells the master where this log ends (and acknowledges it).
func (f *Follower) report() {
	cl := f.st.CommitLog()
	crc, n := cl.TailCRC(TailLen)
	minOff := cl.MinOffset()
	if cl.Empty() {
		minOff = 0
	}
	f.rd.Sends = append(f.rd.Sends, &protocol.HAReportRequest{BrokerName: f.cfg.BrokerName, BrokerID: f.cfg.BrokerID,
		MaxOffset: cl.MaxOffset(), MinOffset: minOff, TailCRC: crc, TailLen: int32(n), SegmentSize: cl.SegmentSize()})
}
