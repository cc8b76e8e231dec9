package sim

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// Fault is a kind of fault a scenario may inject.
type Fault string

const (
	FaultCrash           Fault = "crash"            // power cut: only synced bytes and some written-back pages survive
	FaultTornWrite       Fault = "torn-write"       // power cut with a torn last page
	FaultFsyncError      Fault = "fsync-error"      // fsync fails from now on (the operator restarts the broker)
	FaultDiskStall       Fault = "disk-stall"       // fsyncs take seconds
	FaultPartition       Fault = "partition"        // clients cannot reach the broker for a while
	FaultConnReset       Fault = "conn-reset"       // one client's connection is reset (lost in flight)
	FaultMasterKill      Fault = "master-kill"      // the master's process dies (its page cache survives)
	FaultSlaveCrash      Fault = "slave-crash"      // power cut of the slave
	FaultHAPartition     Fault = "ha-partition"     // master and slave cannot reach each other for a while
	FaultMemberJoin      Fault = "member-join"      // a consumer joins the group
	FaultMemberLeave     Fault = "member-leave"     // a consumer closes (releases and unregisters)
	FaultMemberCrash     Fault = "member-crash"     // a consumer dies silently
	FaultMemberPartition Fault = "member-partition" // a consumer cannot reach the broker for a while
)

// Scenario is one shape of run; the seed fills in the details.
type Scenario struct {
	Name      string
	Flush     actors.FlushDiskType
	Role      string // the master's brokerRole; "" is ASYNC_MASTER without a slave
	Slave     bool   // run a slave
	Members   int    // consumer group members (push consumers coordinated by the broker)
	Clients   []ClientKind
	Faults    []Fault
	Duration  time.Duration // virtual time of load
	NoFaults  bool
	NoThink   bool          // producers send again as soon as they are answered
	FlushWait time.Duration // syncFlushTimeout
}

// Scenarios are the built-in scenarios.
var Scenarios = []Scenario{
	{Name: "sync-flush", Flush: actors.SyncFlush, Clients: []ClientKind{SyncProducer, SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults: []Fault{FaultCrash, FaultTornWrite, FaultPartition, FaultConnReset}},
	{Name: "async-flush", Flush: actors.AsyncFlush, Clients: []ClientKind{SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults: []Fault{FaultCrash, FaultTornWrite, FaultPartition, FaultConnReset}},
	{Name: "sync-disk-faults", Flush: actors.SyncFlush, Clients: []ClientKind{SyncProducer, AsyncProducer, Consumer},
		Faults: []Fault{FaultDiskStall, FaultFsyncError, FaultCrash}},
	{Name: "async-disk-faults", Flush: actors.AsyncFlush, Clients: []ClientKind{SyncProducer, AsyncProducer, Consumer},
		Faults: []Fault{FaultDiskStall, FaultFsyncError, FaultTornWrite}},
	{Name: "sync-master", Flush: actors.AsyncFlush, Role: actors.RoleSyncMaster, Slave: true,
		Clients: []ClientKind{SyncProducer, SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults:  []Fault{FaultMasterKill, FaultSlaveCrash, FaultHAPartition, FaultPartition}},
	{Name: "sync-master-sync-flush", Flush: actors.SyncFlush, Role: actors.RoleSyncMaster, Slave: true,
		Clients: []ClientKind{SyncProducer, AsyncProducer, Consumer},
		Faults:  []Fault{FaultCrash, FaultTornWrite, FaultSlaveCrash, FaultHAPartition}},
	{Name: "rebalance", Flush: actors.AsyncFlush, Members: 3,
		Clients: []ClientKind{SyncProducer, AsyncProducer},
		Faults:  []Fault{FaultMemberJoin, FaultMemberLeave, FaultMemberCrash, FaultMemberPartition, FaultMemberJoin, FaultMasterKill}},
	{Name: "async-master", Flush: actors.AsyncFlush, Role: actors.RoleAsyncMaster, Slave: true,
		Clients: []ClientKind{SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults:  []Fault{FaultMasterKill, FaultSlaveCrash, FaultHAPartition}},
}

// ScenarioByName finds a scenario.
func ScenarioByName(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// ScenarioOf is the scenario a seed runs when none is named: seed mod the
// number of scenarios, so that any len(Scenarios) consecutive seeds run
// every scenario once.
func ScenarioOf(seed int64) Scenario {
	n := int64(len(Scenarios))
	return Scenarios[((seed%n)+n)%n]
}

// Options configure one run.
type Options struct {
	Seed     int64
	Scenario string    // "" picks one by seed
	Trace    io.Writer // nil: no printed trace (the hash is always computed)
	Override func(*Scenario)
	// Bug names a planted bug (see Bugs); "" plants none.
	Bug string
}

// Result is what one run found.
type Result struct {
	Seed       int64
	Scenario   string
	Violations []string
	TraceHash  string
	SimSeconds float64
	Steps      int64
	AcksOK     int64
	Fsyncs     int64
	Crashes    int
	Consumed   int64
	// AckLatency is the broker-side latency of OK send acknowledgements, in
	// virtual microseconds.
	AckLatency *hdrhistogram.Histogram
	Mode       string // flush mode, and the master's role when a slave runs
	// Rebalance is the virtual ms from a group member leaving or crashing
	// until every queue it held is consumed by another member.
	Rebalance *hdrhistogram.Histogram
}

// Failed reports whether an invariant broke.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

type sentMsg struct {
	key      string
	body     []byte
	queue    int32
	producer int
	acked    bool
	phy      int64
	qo       int64
	end      int64
	ackAt    time.Time
	lost     bool
}

// Sim is one run.
type Sim struct {
	w           *World
	sc          Scenario
	net         NetModel
	node        *Node
	clients     []*Client
	conns       uint64
	sent        map[string]*sentMsg
	consumedAt  map[int32]map[int64]string
	lostFrom    map[int32]int64
	res         *Result
	windowBound time.Duration

	slave         *Node
	links         []*linkEnd
	haPartitioned bool
	slaveAcked    int64     // the highest log end any slave incarnation reported
	slaveCrashAt  time.Time // the slave's last crash
	slaveRefused  bool      // the master refused the slave (diverged logs)

	planted        Planted // the bug of the run, in every node and member
	members        []*GroupMember
	memberSeq      int
	groupCommitted map[protocol.QueueRef]int64 // highest group commit the broker acknowledged
	groupConsumed  map[string]bool             // keys the group consumed
	waits          []rebalanceWait
	windowFrom     time.Time // window checks resume after a stall ends
}

func nodeConfigs(sc Scenario, slave bool) (actors.Config, storage.Config) {
	a := actors.DefaultConfig()
	a.BrokerName = "sim-a"
	a.StoreHost = netip.MustParseAddrPort("10.1.0.1:10911")
	a.BrokerRole = actors.RoleAsyncMaster
	if sc.Role != "" {
		a.BrokerRole = sc.Role
	}
	a.SlaveTimeout = 300 * time.Millisecond
	a.HASendHeartbeatInterval = 100 * time.Millisecond
	a.HAHousekeepingInterval = 400 * time.Millisecond
	a.HAMetadataInterval = 500 * time.Millisecond
	a.HAMasterAddress = "broker-a-master"
	a.ConsumerHeartbeatInterval = 200 * time.Millisecond
	if slave {
		a.BrokerRole = actors.RoleSlave
		a.BrokerID = 1
		a.StoreHost = netip.MustParseAddrPort("10.1.0.2:10911")
	}
	a.FlushDiskType = sc.Flush
	a.SyncFlushTimeout = sc.FlushWait
	a.FlushCommitLogLeastPages = 0 // the window check assumes every interval flushes what is dirty
	a.FlushIntervalConsumeQueue = 200 * time.Millisecond
	a.FlushConsumerOffsetInterval = time.Second
	a.CleanResourceInterval = 0
	s := storage.DefaultConfig("/data")
	s.MappedFileSizeCommitLog = 256 << 10
	s.MappedFileSizeConsumeQueue = 512
	s.MaxMessageSize = 64 << 10
	s.MaxHashSlotNum = 512
	s.MaxIndexNum = 4096
	s.StoreHost = a.StoreHost
	s.WarmMappedFileEnable = false
	return a, s
}

// Run runs one seed.
func Run(opt Options) (res *Result) {
	// A panic of the code under test (outside the actors, whose supervisors
	// restart them) is this seed's failure, not the end of the campaign.
	scenario := opt.Scenario
	defer func() {
		if p := recover(); p != nil {
			if res == nil {
				res = &Result{Seed: opt.Seed, Scenario: scenario}
			}
			res.Violations = append(res.Violations, fmt.Sprintf("panic: %v\n%s", p, debug.Stack()))
		}
	}()
	w := NewWorld(opt.Seed, opt.Trace)
	var sc Scenario
	if opt.Scenario != "" {
		var ok bool
		if sc, ok = ScenarioByName(opt.Scenario); !ok {
			return &Result{Seed: opt.Seed, Violations: []string{fmt.Sprintf("unknown scenario %q", opt.Scenario)}}
		}
	} else {
		sc = ScenarioOf(opt.Seed)
	}
	scenario = sc.Name
	if sc.Duration == 0 {
		sc.Duration = time.Duration(2+w.rng.Intn(4)) * time.Second
	}
	if sc.FlushWait == 0 {
		sc.FlushWait = 500 * time.Millisecond
	}
	if opt.Override != nil {
		opt.Override(&sc)
	}
	s := &Sim{w: w, sc: sc, net: DefaultNet(), sent: map[string]*sentMsg{}, consumedAt: map[int32]map[int64]string{},
		lostFrom: map[int32]int64{}}
	mode := string(sc.Flush)
	if sc.Slave {
		mode = sc.Role + "+" + mode
	}
	s.res = &Result{Seed: opt.Seed, Scenario: sc.Name, Mode: mode, AckLatency: hdrhistogram.New(1, 60_000_000, 3),
		Rebalance: hdrhistogram.New(1, 600_000, 3)}
	var planted Planted
	if opt.Bug != "" {
		bug, err := BugByName(opt.Bug)
		if err != nil {
			s.res.Violations = append(s.res.Violations, err.Error())
			return s.res
		}
		planted = bug.Faults()
	}
	s.planted = planted
	acfg, scfg := nodeConfigs(sc, false)
	scfg.Faults = planted.Storage
	s.node = newNode(w, "broker-a", acfg, scfg, DefaultDisk())
	s.node.faults = planted.Actors
	if sc.Slave {
		sa, ss := nodeConfigs(sc, true)
		ss.Faults = planted.Storage
		s.slave = newNode(w, "broker-a-slave", sa, ss, DefaultDisk())
		s.slave.faults = planted.Actors
		s.slave.dial = func(h actors.Handler) (actors.Conn, error) { return s.dial(s.slave, h) }
		if err := s.slave.start(); err != nil {
			s.res.Violations = append(s.res.Violations, err.Error())
			return s.res
		}
	}
	s.windowBound = acfg.FlushIntervalCommitLog + s.node.disk.maxNormal() + 20*time.Millisecond
	w.Tracef("scenario %s seed %d flush %s duration %v", sc.Name, opt.Seed, sc.Flush, sc.Duration)
	if err := s.node.start(); err != nil {
		s.res.Violations = append(s.res.Violations, err.Error())
		return s.res
	}
	stopAt := Epoch.Add(sc.Duration)
	for i, k := range sc.Clients {
		c := &Client{s: s, id: i + 1, kind: k, stopAt: stopAt}
		s.clients = append(s.clients, c)
		w.at(Epoch.Add(time.Duration(w.rng.Intn(50))*time.Millisecond), owner{}, c.start)
	}
	s.groupCommitted = map[protocol.QueueRef]int64{}
	s.groupConsumed = map[string]bool{}
	for range sc.Members {
		w.at(Epoch.Add(time.Duration(w.rng.Intn(100))*time.Millisecond), owner{}, func() { s.newMember() })
	}
	if !sc.NoFaults {
		s.planFaults(stopAt)
	}
	w.RunUntil(stopAt.Add(3*time.Second), s.checkStep)
	s.finalCheck()
	for _, c := range s.clients {
		w.Tracef("client %d %v produced %d", c.id, c.kind, c.produced)
	}
	s.res.Violations = append(s.res.Violations, w.violation...)
	s.res.TraceHash = w.TraceHash()
	s.res.SimSeconds = w.Now().Sub(Epoch).Seconds()
	s.res.Steps = w.loop.Steps()
	s.res.Fsyncs = s.node.fsyncs
	s.res.Crashes = s.node.crashes
	if s.slave != nil {
		s.res.Crashes += s.slave.crashes
	}
	return s.res
}

// planFaults schedules one to three faults of the scenario's kinds.
func (s *Sim) planFaults(stopAt time.Time) {
	w := s.w
	n := 1 + w.rng.Intn(3)
	if s.sc.Members > 0 {
		n = 3 + w.rng.Intn(5) // the group changes often
	}
	for range n {
		f := s.sc.Faults[w.rng.Intn(len(s.sc.Faults))]
		at := Epoch.Add(200*time.Millisecond + time.Duration(w.rng.Int63n(int64(s.sc.Duration-200*time.Millisecond))))
		w.at(at, owner{}, func() { s.inject(f) })
	}
}

func (s *Sim) inject(f Fault) {
	n, w := s.node, s.w
	if !n.up {
		return
	}
	switch f {
	case FaultCrash, FaultTornWrite:
		opts := vfs.CrashOptions{UnsyncedKeepRatio: w.rng.Float64()}
		if f == FaultTornWrite {
			opts.TornLastPage = true
		}
		s.crashAndRestart(opts, time.Duration(50+w.rng.Intn(500))*time.Millisecond)
	case FaultFsyncError:
		w.Tracef("fault: fsync errors on %s", n.name)
		n.failFsync = true
		// An operator notices and restarts the broker; the disk works again.
		s.crashAndRestartAfter(time.Duration(200+w.rng.Intn(800))*time.Millisecond, vfs.CrashOptions{UnsyncedKeepRatio: w.rng.Float64()})
	case FaultDiskStall:
		d := s.sc.FlushWait + time.Duration(w.rng.Int63n(int64(2*s.sc.FlushWait)))
		w.Tracef("fault: disk stall on %s for %v", n.name, d)
		// A stall during a longer one does not end it early (nor the
		// grace the window check gives the flush after it): I/O issued
		// before still waits for the first.
		if until := w.Now().Add(d); until.After(n.stallUntil) {
			n.stallUntil = until
		}
		if from := n.stallUntil.Add(s.windowBound); from.After(s.windowFrom) {
			s.windowFrom = from
		}
	case FaultConnReset:
		c := s.clients[w.rng.Intn(len(s.clients))]
		if conn := c.conn; conn != nil && !conn.dead() {
			w.Tracef("fault: connection %d of client %d reset", conn.id, c.id)
			conn.closed = true
			c.reset(conn)
		}
	case FaultMasterKill:
		s.crashAndRestart(vfs.CrashOptions{UnsyncedKeepRatio: 1}, time.Duration(50+w.rng.Intn(500))*time.Millisecond)
	case FaultSlaveCrash:
		sl := s.slave
		if sl == nil || !sl.up {
			return
		}
		s.slaveCrashAt = w.Now()
		sl.crash(vfs.CrashOptions{UnsyncedKeepRatio: w.rng.Float64(), TornLastPage: w.rng.Intn(2) == 0})
		s.resetLinks(sl)
		w.at(w.Now().Add(time.Duration(50+w.rng.Intn(800))*time.Millisecond), owner{}, func() {
			if err := sl.start(); err != nil {
				w.Violationf("slave restart failed: %v", err)
				return
			}
			checkStructure(w, sl.store)
		})
	case FaultHAPartition:
		d := time.Duration(100+w.rng.Intn(1500)) * time.Millisecond
		w.Tracef("fault: master/slave partition for %v", d)
		s.haPartitioned = true
		w.at(w.Now().Add(d), owner{}, func() {
			s.haPartitioned = false
			w.Tracef("master/slave partition healed")
		})
	case FaultMemberJoin:
		s.injectGroupFault("join")
	case FaultMemberLeave:
		s.injectGroupFault("leave")
	case FaultMemberCrash:
		s.injectGroupFault("crash")
	case FaultMemberPartition:
		s.injectGroupFault("partition")
	case FaultPartition:
		d := time.Duration(100+w.rng.Intn(1500)) * time.Millisecond
		w.Tracef("fault: partition of %s for %v", n.name, d)
		n.partitioned = true
		w.at(w.Now().Add(d), owner{}, func() {
			n.partitioned = false
			w.Tracef("partition of %s healed", n.name)
		})
	}
}

func (s *Sim) crashAndRestartAfter(d time.Duration, opts vfs.CrashOptions) {
	epoch := s.node.epoch
	s.w.at(s.w.Now().Add(d), owner{}, func() {
		if s.node.epoch == epoch && s.node.up {
			s.crashAndRestart(opts, 100*time.Millisecond)
		}
	})
}

// crashAndRestart cuts the power, then restarts the broker on what the disk
// kept and checks that recovery lost nothing the mode promised.
func (s *Sim) crashAndRestart(opts vfs.CrashOptions, down time.Duration) {
	n := s.node
	flushed := n.store.CommitLog().FlushedOffset()
	failed := n.store.CommitLog().Err() != nil
	s.checkSlaveHasAcked()
	n.crash(opts)
	s.resetLinks(n)
	// The clients' connections are reset (the peer's kernel answers RST).
	for _, c := range s.clients {
		if conn := c.conn; conn != nil && conn.node == n {
			s.w.at(s.w.Now().Add(s.net.sample(s.w)), owner{}, func() { c.reset(conn) })
		}
	}
	for _, m := range s.members {
		if conn := m.conn; conn != nil && conn.node == n {
			s.w.at(s.w.Now().Add(s.net.sample(s.w)), owner{}, func() { m.reset(conn) })
		}
	}
	s.w.at(s.w.Now().Add(down), owner{}, func() {
		if err := n.start(); err != nil {
			s.w.Violationf("restart after crash failed: %v", err)
			return
		}
		s.checkRecovered(flushed, failed)
		s.windowFrom = s.w.Now().Add(s.windowBound)
	})
}

// onAck checks an answer at the instant the broker gives it.
func (s *Sim) onAck(c *Conn, f *protocol.Frame, lat time.Duration) {
	cl, ok := c.client.(*Client)
	if !ok {
		return // a group member: no send acknowledgements
	}
	p := cl.pend[f.Opaque]
	if p == nil || (p.code != protocol.CodeSendMessage && p.code != protocol.CodeSendBatchMessage) {
		return
	}
	s.w.Tracef("ack %s conn %d op %d %v %v", c.node.name, c.id, f.Opaque, f.Status, lat)
	timeout := s.sc.FlushWait
	sync := s.sc.Flush == actors.SyncFlush
	switch f.Status {
	case protocol.StatusOK:
		s.res.AcksOK++
		s.res.AckLatency.RecordValue(max(1, lat.Microseconds()))
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
		for i, id := range ids {
			_, phy, err := protocol.ParseOffsetMsgID(id)
			if err != nil || i >= len(p.keys) {
				s.w.Violationf("ack with a bad message id %q", id)
				continue
			}
			sm := s.sent[p.keys[i]]
			sm.acked, sm.phy, sm.qo, sm.ackAt = true, phy, first+int64(i), s.w.Now()
			if hdr, err := c.node.store.CommitLog().Read(phy, 8); err == nil {
				size, _, _ := storage.PeekHeader(hdr)
				sm.end = phy + int64(size)
			}
			if s.sc.Role == actors.RoleSyncMaster && lat < 2*s.net.LatencyMin {
				s.w.Violationf("SYNC_MASTER ack after %v, less than a round trip to the slave (%v)", lat, 2*s.net.LatencyMin)
			}
			if s.sc.Role == actors.RoleSyncMaster && sm.end > s.slaveAcked {
				s.w.Violationf("SYNC_MASTER ack of %q (log end %d) before a slave acknowledged it (slaves reported %d)", sm.key, sm.end, s.slaveAcked)
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
			if lat > timeout+50*time.Millisecond {
				s.w.Violationf("SYNC_FLUSH OK after %v, past syncFlushTimeout %v", lat, timeout)
			}
		}
	case protocol.StatusFlushSlaveTimeout:
		if s.sc.Role != actors.RoleSyncMaster {
			s.w.Violationf("FLUSH_SLAVE_TIMEOUT from a %q master", s.sc.Role)
		}
		st := c.node.acfg.SlaveTimeout
		if lat < st || lat > st+50*time.Millisecond {
			s.w.Violationf("FLUSH_SLAVE_TIMEOUT after %v, slaveTimeout is %v", lat, st)
		}
	case protocol.StatusFlushDiskTimeout:
		if !sync {
			s.w.Violationf("FLUSH_DISK_TIMEOUT under ASYNC_FLUSH")
		}
		if strings.HasPrefix(f.Remark, "stored, but not flushed") {
			if lat < timeout {
				s.w.Violationf("FLUSH_DISK_TIMEOUT after %v, before syncFlushTimeout %v", lat, timeout)
			}
			if lat > timeout+50*time.Millisecond {
				s.w.Violationf("FLUSH_DISK_TIMEOUT after %v, much later than syncFlushTimeout %v", lat, timeout)
			}
		}
	}
}

// checkStep runs after every step: the cheap invariants.
func (s *Sim) checkStep() {
	s.checkOwners()
	n := s.node
	if s.sc.Flush == actors.AsyncFlush && n.up {
		win := n.trackWindow()
		if win > s.windowBound && s.w.Now().After(s.windowFrom) && n.store.CommitLog().Err() == nil {
			s.w.Violationf("ASYNC_FLUSH left bytes unflushed for %v, more than flushIntervalCommitLog + one fsync (%v)", win, s.windowBound)
			s.windowFrom = s.w.Now().Add(time.Hour) // report once
		}
	}
}

// lostSince reports whether a crash lost messages of queue q at or below
// offset off (so offsets there may be reused).
func (s *Sim) lostSince(q int32, off int64) bool {
	from, ok := s.lostFrom[q]
	return ok && from <= off
}

// consumed records a message a consumer received; under SYNC_FLUSH a
// consumed offset must never hold another message later.
func (s *Sim) consumed(q int32, qo int64, key string) {
	s.res.Consumed++
	m := s.consumedAt[q]
	if m == nil {
		m = map[int64]string{}
		s.consumedAt[q] = m
	}
	if prev, ok := m[qo]; ok && prev != key && !(s.sc.Flush == actors.AsyncFlush && s.lostSince(q, qo)) {
		s.w.Violationf("queue %d offset %d was consumed as %q and later as %q", q, qo, prev, key)
	}
	m[qo] = key
}

// checkRecovered runs right after a restart, before any new request: every
// acknowledged message the mode promised is present and intact.
func (s *Sim) checkRecovered(flushedAtCrash int64, flushFailed bool) {
	st := s.node.store
	cl := st.CommitLog()
	keys := make([]string, 0, len(s.sent))
	for k := range s.sent {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sm := s.sent[k]
		if !sm.acked || sm.lost {
			continue
		}
		r, err := cl.ReadRecord(sm.phy, 0, true)
		intact := err == nil && bytes.Equal(r.Body, sm.body) && r.QueueID == sm.queue && r.QueueOffset == sm.qo
		if intact {
			continue
		}
		promised := s.sc.Flush == actors.SyncFlush || (!flushFailed && sm.phy < flushedAtCrash)
		if promised {
			s.w.Violationf("acknowledged message %q (offset %d, queue %d/%d) lost or damaged by the crash (flushed %d): %v",
				sm.key, sm.phy, sm.queue, sm.qo, flushedAtCrash, err)
		}
		sm.lost = true
		if from, ok := s.lostFrom[sm.queue]; !ok || sm.qo < from {
			s.lostFrom[sm.queue] = sm.qo
		}
	}
	// Queues may also have lost unacknowledged tails: offsets above their new
	// max will be reused.
	for q := int32(0); q < simQueues; q++ {
		_, max := st.ConsumeQueueBounds(storage.QueueKey{Topic: simTopic, QueueID: q})
		if from, ok := s.lostFrom[q]; !ok || max < from {
			s.lostFrom[q] = max
		}
	}
	checkStructure(s.w, st)
}

// checkSlaveHasAcked runs when the master is lost: every send acknowledged
// under SYNC_MASTER is on the slave, byte for byte (unless the slave itself
// crashed after the acknowledgement: two failures).
func (s *Sim) checkSlaveHasAcked() {
	sl := s.slave
	if s.sc.Role != actors.RoleSyncMaster || sl == nil || !sl.up || !s.node.up {
		return
	}
	for _, k := range sortedSent(s.sent) {
		sm := s.sent[k]
		if !sm.acked || sm.lost || sm.ackAt.Before(s.slaveCrashAt) || !sm.ackAt.After(time.Time{}) {
			continue
		}
		want, err := s.node.store.CommitLog().Read(sm.phy, int(sm.end-sm.phy))
		if err != nil {
			continue
		}
		got, err := sl.store.CommitLog().Read(sm.phy, int(sm.end-sm.phy))
		if err != nil || string(got) != string(want) {
			s.w.Violationf("master lost: SYNC_MASTER-acknowledged %q (offset %d) is not on the slave: %v", sm.key, sm.phy, err)
		}
	}
}

// checkSlavePrefix: a slave's log is a byte-identical prefix of its master's.
func (s *Sim) checkSlavePrefix() {
	sl, m := s.slave, s.node
	if sl == nil || !sl.up || !m.up || s.slaveRefused {
		return
	}
	scl, mcl := sl.store.CommitLog(), m.store.CommitLog()
	if scl.MaxOffset() > mcl.MaxOffset() {
		s.w.Violationf("the slave's log (end %d) is longer than the master's (end %d) and was not refused", scl.MaxOffset(), mcl.MaxOffset())
		return
	}
	seg := scl.SegmentSize()
	for off := scl.MinOffset(); off < scl.MaxOffset(); off += seg - off%seg {
		n := int(min(seg-off%seg, scl.MaxOffset()-off))
		a, err1 := scl.Read(off, n)
		b, err2 := mcl.Read(off, n)
		if err1 != nil || err2 != nil || string(a) != string(b) {
			s.w.Violationf("the slave's log differs from the master's in [%d, %d): %v %v", off, off+int64(n), err1, err2)
			return
		}
	}
}

// finalCheck checks the store's structure on a copy of the disk as it is.
func (s *Sim) finalCheck() {
	if len(s.members) > 0 {
		s.checkGroupConsumedAll()
	}
	s.checkSlavePrefix()
	s.checkSlaveHasAcked()
	n := s.node
	if !n.up {
		return
	}
	img := n.mem.Crash(0, vfs.CrashOptions{UnsyncedKeepRatio: 1})
	st, _, err := storage.Open(img, n.scfg)
	if err != nil {
		s.w.Violationf("final store does not open: %v", err)
		return
	}
	checkStructure(s.w, st)
	cl := st.CommitLog()
	for _, k := range sortedSent(s.sent) {
		sm := s.sent[k]
		if !sm.acked || sm.lost {
			continue
		}
		r, err := cl.ReadRecord(sm.phy, 0, true)
		if err != nil || !bytes.Equal(r.Body, sm.body) {
			s.w.Violationf("acknowledged message %q missing at the end: %v", sm.key, err)
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

// GroupCommit measures acknowledgements per fsync under SYNC_FLUSH with
// producers concurrent producers that send again as soon as they are
// answered, without faults.
func GroupCommit(seed int64, producers int) *Result {
	return Run(Options{Seed: seed, Scenario: "sync-flush", Override: func(sc *Scenario) {
		sc.Clients = make([]ClientKind, producers)
		sc.NoFaults = true
		sc.NoThink = true
		sc.Duration = time.Second
	}})
}
