package sim

import (
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
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
	FaultMasterDown      Fault = "master-down"      // the master's process dies and stays down for 1-2 s
	FaultNSPartition     Fault = "ns-partition"     // the master and one name server cannot reach each other, longer than the lease
	FaultSlowBroker      Fault = "slow-broker"      // the master's answers are delayed 0.3-1 s for a while

	// Controller mode (ctlfaults.go).
	FaultCtlMasterKill      Fault = "ctl-master-kill"       // the master's process dies, down longer than the heartbeat timeout
	FaultCtlMasterPartition Fault = "ctl-master-partition"  // the master cannot reach the controllers nor its slaves; clients and name servers still reach it
	FaultCtlMasterPause     Fault = "ctl-master-pause"      // the master's process stops for longer than its lease, then resumes
	FaultCtlLeaderAndMaster Fault = "ctl-leader-and-master" // the controller leader and the master die together
	FaultCtlCrash           Fault = "ctl-crash"             // a controller node's power is cut; it restarts on its raft log
	FaultCtlLoss            Fault = "ctl-loss"              // the controllers' links lose and reorder messages for a while
	FaultCtlDiskStall       Fault = "ctl-disk-stall"        // a controller's fsyncs take up to a heartbeat timeout
	FaultCtlSlaveCut        Fault = "ctl-slave-cut"         // a slave cannot reach its master (it can the controllers): it falls behind and out of the SyncStateSet
	FaultCtlLostTail        Fault = "ctl-lost-tail"         // every slave's power is cut (they lose copies they acknowledged from memory), then their master dies before they caught up
)

// Scenario is one shape of run; the seed fills in the details.
type Scenario struct {
	Name  string
	Flush actors.FlushDiskType
	// Role is the masters' brokerRole a replication scenario needs (every
	// group then has 1-2 slaves); "" lets the seed choose the slaves (0-2
	// per group) and, with slaves, the role.
	Role      string
	NoSlaves  bool // no group has slaves (the seed chooses the rest)
	MinGroups int  // at least this many broker groups (the seed draws 1-3)
	Members   int  // consumer group members (push consumers coordinated by the broker)
	Clients   []ClientKind
	Faults    []Fault
	Duration  time.Duration // virtual time of load
	NoFaults  bool
	NoThink   bool          // producers send again as soon as they are answered
	FlushWait time.Duration // syncFlushTimeout; 0: the seed chooses
	// Controller: controller mode (1 or 3 controller nodes; every group a
	// master and 1-2 slaves whose roles the controllers assign). The load
	// starts once every group has its first master.
	Controller bool
}

// Scenarios are the built-in scenarios.
var Scenarios = []Scenario{
	{Name: "sync-flush", Flush: actors.SyncFlush, Clients: []ClientKind{SyncProducer, SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults: []Fault{FaultCrash, FaultTornWrite, FaultPartition, FaultConnReset}},
	{Name: "async-flush", Flush: actors.AsyncFlush, Clients: []ClientKind{SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults: []Fault{FaultCrash, FaultTornWrite, FaultPartition, FaultConnReset}},
	// Repeated power cuts under ASYNC_FLUSH, with batches: the most
	// unflushed bytes at a crash, so torn and half-kept records are common
	// and recovery's checks are exercised hardest.
	{Name: "async-power-cuts", Flush: actors.AsyncFlush, Clients: []ClientKind{SyncProducer, AsyncProducer, BatchProducer, BatchProducer, Consumer},
		Faults: []Fault{FaultCrash, FaultTornWrite}},
	{Name: "sync-disk-faults", Flush: actors.SyncFlush, Clients: []ClientKind{SyncProducer, AsyncProducer, Consumer},
		Faults: []Fault{FaultDiskStall, FaultFsyncError, FaultCrash}},
	{Name: "async-disk-faults", Flush: actors.AsyncFlush, Clients: []ClientKind{SyncProducer, AsyncProducer, Consumer},
		Faults: []Fault{FaultDiskStall, FaultFsyncError, FaultTornWrite}},
	{Name: "sync-master", Flush: actors.AsyncFlush, Role: actors.RoleSyncMaster,
		Clients: []ClientKind{SyncProducer, SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults:  []Fault{FaultMasterKill, FaultSlaveCrash, FaultHAPartition, FaultPartition}},
	{Name: "sync-master-sync-flush", Flush: actors.SyncFlush, Role: actors.RoleSyncMaster,
		Clients: []ClientKind{SyncProducer, AsyncProducer, Consumer},
		Faults:  []Fault{FaultCrash, FaultTornWrite, FaultSlaveCrash, FaultHAPartition}},
	{Name: "rebalance", Flush: actors.AsyncFlush, Members: 3,
		Clients: []ClientKind{SyncProducer, AsyncProducer},
		Faults:  []Fault{FaultMemberJoin, FaultMemberLeave, FaultMemberCrash, FaultMemberPartition, FaultMemberJoin, FaultMasterKill}},
	{Name: "async-master", Flush: actors.AsyncFlush, Role: actors.RoleAsyncMaster,
		Clients: []ClientKind{SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults:  []Fault{FaultMasterKill, FaultSlaveCrash, FaultHAPartition}},
	{Name: "ns-master-crash", Flush: actors.AsyncFlush, MinGroups: 2,
		Clients: []ClientKind{SyncProducer, SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults:  []Fault{FaultMasterDown}},
	{Name: "ns-partition", Flush: actors.AsyncFlush, MinGroups: 2,
		Clients: []ClientKind{SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults:  []Fault{FaultNSPartition}},
	{Name: "slow-broker", Flush: actors.SyncFlush,
		Clients: []ClientKind{SyncProducer, SyncProducer, AsyncProducer, Consumer},
		Faults:  []Fault{FaultSlowBroker, FaultMasterKill}},
	{Name: "ctl-master-crash", Flush: actors.AsyncFlush, Controller: true,
		Clients: []ClientKind{SyncProducer, SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults:  []Fault{FaultCtlMasterKill, FaultCtlLoss, FaultSlaveCrash, FaultFsyncError, FaultCtlSlaveCut}},
	{Name: "ctl-master-partition", Flush: actors.SyncFlush, Controller: true,
		Clients: []ClientKind{SyncProducer, SyncProducer, AsyncProducer, Consumer},
		Faults:  []Fault{FaultCtlMasterPartition, FaultCtlLoss, FaultCtlDiskStall}},
	{Name: "ctl-master-pause", Flush: actors.AsyncFlush, Controller: true,
		Clients: []ClientKind{SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults:  []Fault{FaultCtlMasterPause, FaultCtlLoss, FaultDiskStall}},
	{Name: "ctl-leader-and-master", Flush: actors.SyncFlush, Controller: true,
		Clients: []ClientKind{SyncProducer, AsyncProducer, Consumer},
		Faults:  []Fault{FaultCtlLeaderAndMaster, FaultCtlCrash, FaultCtlLoss}},
	// A SyncStateSet member that lost acknowledged copies in a power cut
	// (ASYNC_FLUSH acknowledges them from memory) must not be elected
	// while the member that holds them may come back.
	{Name: "ctl-lost-tail", Flush: actors.AsyncFlush, Controller: true,
		Clients: []ClientKind{SyncProducer, SyncProducer, AsyncProducer, BatchProducer, Consumer},
		Faults:  []Fault{FaultCtlLostTail, FaultCtlLoss}},
	{Name: "ctl-rejoin", Flush: actors.AsyncFlush, Controller: true,
		Clients: []ClientKind{SyncProducer, AsyncProducer, AsyncProducer, Consumer},
		Faults:  []Fault{FaultCtlMasterPartition, FaultCtlMasterKill, FaultSlaveCrash}},
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
	Scenario string    // "" picks one by seed (ScenarioOf)
	Trace    io.Writer // nil: no printed trace (the hash is always computed)
	Override func(*Scenario)
	// Configure changes the seed's swarm configuration after it is drawn.
	Configure func(*Config)
	// Bug names a planted bug (see Bugs); "" plants none.
	Bug string
	// Metrics gives every node a recording Env.Metrics (the broker then
	// also runs its snapshot actor): Result.Metrics and MetricsHash.
	Metrics bool
}

// Result is what one run found.
type Result struct {
	Seed       int64
	Scenario   string
	Config     string // the topology and swarm configuration (Config.String)
	Violations []string
	TraceHash  string
	// Metrics and MetricsHash: what the brokers reported through the
	// metrics seam (Options.Metrics), the same for the same seed.
	Metrics     *MetricsTotals
	MetricsHash string
	SimSeconds  float64
	Steps       int64
	AcksOK      int64
	Fsyncs      int64
	Crashes     int
	Consumed    int64
	// AckLatency is the broker-side latency of OK send acknowledgements, in
	// virtual microseconds, and ByMode the same per flush mode and role
	// (the groups of a run may differ in role).
	AckLatency *hdrhistogram.Histogram
	ByMode     map[string]*hdrhistogram.Histogram
	// Rebalance is the virtual ms from a group member leaving or crashing
	// until every queue it held is consumed by another member.
	Rebalance *hdrhistogram.Histogram
	// Converged is the virtual time the liveness phase took.
	Converged time.Duration
}

// Failed reports whether an invariant broke.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

type sentMsg struct {
	key      string
	body     []byte
	g        *brokerGroup // where the acknowledged attempt went (nil until acked)
	queue    int32
	tried    []groupQueue // where every attempt went: each may have stored it
	producer int
	acked    bool
	phy      int64
	qo       int64
	end      int64
	ackAt    time.Time
	lost     bool
}

// brokerGroup is one broker group of the run: a master, its slaves, the
// network between them, and what the checks know of its queues.
// sentTo records an attempt to store the message in queue q of group g.
func (sm *sentMsg) sentTo(g *brokerGroup, q int32) {
	sm.tried = append(sm.tried, groupQueue{g.idx, q})
}

// storedIn reports whether an attempt to send the message went to queue q
// of group g: a retry after a lost answer may leave copies in several
// queues (at least once), each a legal place to find it.
func (sm *sentMsg) storedIn(g *brokerGroup, q int32) bool {
	return slices.Contains(sm.tried, groupQueue{g.idx, q})
}

type brokerGroup struct {
	idx           int
	spec          GroupSpec
	master        *Node
	slaves        []*Node
	links         []*linkEnd
	haPartitioned bool
	// Controller mode: every broker node (master and slaves move), the
	// newest master epoch some controller applied with its SyncStateSet,
	// and the brokers' ids as the controllers assigned them.
	all        []*Node
	ctlEpoch   int32
	set        []int64
	setEpoch   int32
	ids        map[int64]*Node
	okAt       time.Time // the last SEND_OK
	consumedAt map[int32]map[int64]string
	lostFrom   map[int32]int64
	windowFrom time.Time // window checks resume after a stall ends
}

func (g *brokerGroup) nodes() []*Node { return append([]*Node{g.master}, g.slaves...) }

// Sim is one run.
type Sim struct {
	w       *World
	sc      Scenario
	cfg     Config
	net     NetModel
	groups  []*brokerGroup
	clients []*Client
	conns   uint64
	sent    map[string]*sentMsg
	res     *Result
	healed  bool // the liveness phase began: no new faults

	planted        Planted // the bug of the run, in every node and member
	members        []*GroupMember
	memberSeq      int
	groupCommitted map[memberQueue]int64  // highest group commit the broker acknowledged
	groupConsumed  map[string]bool        // keys the group consumed
	ownerSeen      map[memberQueue]string // checkOwners' scratch map
	waits          []rebalanceWait

	names      []*Node                 // the name servers
	nsLinks    []*linkEnd              // brokers' links to name servers (the broker's ends)
	cuts       map[nsCut]bool          // partitions between a broker node and a name server
	cutAt      map[nsCut]time.Time     // when each began
	registered map[nsCut]time.Time     // last answer holding the broker, per name server
	byAddr     map[string]*brokerGroup // a master's address -> its group (controller mode: every broker's)

	// Controller mode.
	ctls         []*Node            // the controller nodes
	ctlLinks     []*linkEnd         // links to controllers (the dialing ends)
	pcuts        map[pair]time.Time // partitions between two nodes, until when
	haNode       map[string]*Node   // haListenPort address -> broker node
	nodeAt       map[string]*Node   // broker address -> broker node
	epochMaster  map[epochKey]string
	ctlLossUntil time.Time // controller links lose and reorder messages until then
	writes       map[epochKey]*epochWrites
	topEpoch     int32                  // the highest epoch in writes
	electedAt    map[epochKey]time.Time // when a controller first applied each election
	replacedSet  map[epochKey][]int64   // the SyncStateSet each epoch's election replaced
	loadFrom     time.Time              // the load starts (controller mode: once every group has a master)
	healedAt     time.Time
}

// memberQueue is a queue of a broker group, as group members own it.
type memberQueue struct {
	g   int
	ref protocol.QueueRef
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
	s, err := newSim(opt)
	if s == nil {
		return &Result{Seed: opt.Seed, Scenario: opt.Scenario, Violations: []string{err.Error()}}
	}
	scenario = s.sc.Name
	if err == nil {
		err = s.start()
	}
	if err != nil {
		s.res.Violations = append(s.res.Violations, err.Error())
		return s.res
	}
	s.w.RunUntil(Epoch.Add(s.sc.Duration), s.checkStep)
	if s.cfg.Ctl != nil && !s.runCtlLoad() {
		return s.finish()
	}
	s.liveness()
	s.finalCheck()
	return s.finish()
}

// newSim draws the seed's scenario details and configuration and builds
// its nodes (not started).
func newSim(opt Options) (*Sim, error) {
	w := NewWorld(opt.Seed, opt.Trace)
	if opt.Metrics {
		w.metrics = newMetricsLog(w)
	}
	sc := ScenarioOf(opt.Seed)
	if opt.Scenario != "" {
		var ok bool
		if sc, ok = ScenarioByName(opt.Scenario); !ok {
			return nil, fmt.Errorf("unknown scenario %q", opt.Scenario)
		}
	}
	if sc.Duration == 0 {
		sc.Duration = time.Duration(1000+w.rng.Intn(1500)) * time.Millisecond
	}
	if opt.Override != nil {
		opt.Override(&sc)
	}
	cfg := chooseConfig(w.rng, sc)
	if opt.Configure != nil {
		opt.Configure(&cfg)
	}
	s := &Sim{w: w, sc: sc, cfg: cfg, net: DefaultNet(), sent: map[string]*sentMsg{},
		groupCommitted: map[memberQueue]int64{}, groupConsumed: map[string]bool{},
		ownerSeen: map[memberQueue]string{}, cuts: map[nsCut]bool{}, cutAt: map[nsCut]time.Time{},
		registered: map[nsCut]time.Time{}, byAddr: map[string]*brokerGroup{}}
	s.res = &Result{Seed: opt.Seed, Scenario: sc.Name, Config: cfg.String(), AckLatency: hdrhistogram.New(1, 60_000_000, 3),
		ByMode: map[string]*hdrhistogram.Histogram{}, Rebalance: hdrhistogram.New(1, 600_000, 3)}
	if opt.Bug != "" {
		bug, err := BugByName(opt.Bug)
		if err != nil {
			return s, err
		}
		s.planted = bug.Faults()
	}
	for i, spec := range cfg.NameServers {
		s.names = append(s.names, newNameServer(w, i, spec))
	}
	if cfg.Ctl != nil {
		s.initCtl()
	}
	for gi, spec := range cfg.Groups {
		g := &brokerGroup{idx: gi, spec: spec, consumedAt: map[int32]map[int64]string{}, lostFrom: map[int32]int64{}}
		for id := range 1 + spec.Slaves {
			acfg, scfg := nodeConfigs(cfg, gi, id)
			scfg.Faults = s.planted.Storage
			n := newNode(w, nodeName(spec.Name, id), acfg, scfg, spec.Disk[id])
			n.g, n.drift, n.faults = g, spec.Drift[id], s.planted.Actors
			n.dial = func(addr string, h actors.Handler) (actors.Conn, error) { return s.dialBroker(n, addr, h) }
			if cfg.Ctl != nil {
				s.addCtlBroker(g, n)
			}
			if id == 0 {
				g.master = n
				s.byAddr[acfg.StoreHost.String()] = g
				continue
			}
			g.slaves = append(g.slaves, n)
		}
		s.groups = append(s.groups, g)
	}
	return s, nil
}

// start starts the nodes (slaves first: they dial until their master is
// up), then the clients, the group members and the faults.
func (s *Sim) start() error {
	w, sc := s.w, s.sc
	w.Tracef("scenario %s seed %d duration %v", sc.Name, s.res.Seed, sc.Duration)
	w.Tracef("config %s", s.cfg)
	for _, n := range s.names {
		if err := n.startNameServer(); err != nil {
			return err
		}
	}
	for _, n := range s.ctls {
		if err := s.startController(n); err != nil {
			return err
		}
	}
	for _, g := range s.groups {
		for _, n := range g.slaves {
			if err := n.start(); err != nil {
				return err
			}
		}
		if err := g.master.start(); err != nil {
			return err
		}
	}
	if s.cfg.Ctl != nil {
		s.awaitMasters() // the topic is created once the controllers elected the masters
		return nil
	}
	s.createTopic()
	s.loadFrom = Epoch
	s.startLoad()
	return nil
}

// startLoad starts the clients, the group members and the faults, from
// s.loadFrom for the scenario's duration.
func (s *Sim) startLoad() {
	w, sc := s.w, s.sc
	stopAt := s.loadFrom.Add(sc.Duration)
	for i, k := range sc.Clients {
		c := &Client{s: s, id: i + 1, kind: k, stopAt: stopAt, conns: make([]*Conn, len(s.groups))}
		if k == Consumer && s.cfg.Ctl != nil && w.rng.Intn(2) == 0 {
			c.replicas = true // reads from a slave whenever one is up
			w.Tracef("client %d reads from the slaves", c.id)
		}
		s.clients = append(s.clients, c)
		w.at(s.loadFrom.Add(time.Duration(w.rng.Intn(50))*time.Millisecond), owner{}, c.start)
	}
	for range sc.Members {
		w.at(s.loadFrom.Add(time.Duration(w.rng.Intn(100))*time.Millisecond), owner{}, func() { s.newMember() })
	}
	if !sc.NoFaults {
		s.planFaults(stopAt)
	}
}

// finish fills in the result.
func (s *Sim) finish() *Result {
	w := s.w
	for _, c := range s.clients {
		w.Tracef("client %d %v produced %d", c.id, c.kind, c.produced)
	}
	s.res.Violations = append(s.res.Violations, w.violation...)
	s.res.TraceHash = w.TraceHash()
	if w.metrics != nil {
		t := w.metrics.totals
		s.res.Metrics, s.res.MetricsHash = &t, w.metrics.Hash()
	}
	s.res.SimSeconds = w.Now().Sub(Epoch).Seconds()
	s.res.Steps = w.loop.Steps()
	for _, g := range s.groups {
		for _, n := range g.nodes() {
			s.res.Fsyncs += n.fsyncs
			s.res.Crashes += n.crashes
		}
	}
	return s.res
}

// mode is the flush mode and, with slaves, the master's role of group g:
// the key of the acknowledgement latency histograms.
func (s *Sim) mode(g *brokerGroup) string {
	if len(g.slaves) == 0 {
		return string(s.cfg.Flush)
	}
	return g.spec.Role + "+" + string(s.cfg.Flush)
}

// GroupCommit measures acknowledgements per fsync under SYNC_FLUSH with
// producers concurrent producers that send again as soon as they are
// answered, without faults, on one broker without slaves.
func GroupCommit(seed int64, producers int) *Result {
	return Run(Options{Seed: seed, Scenario: "sync-flush", Override: func(sc *Scenario) {
		sc.Clients = make([]ClientKind, producers)
		sc.NoFaults = true
		sc.NoThink = true
		sc.NoSlaves = true
		sc.Duration = time.Second
	}, Configure: func(c *Config) {
		c.Groups = c.Groups[:1]
		c.Groups[0].Disk[0], c.Groups[0].Drift[0] = DefaultDisk(), 0
	}})
}
