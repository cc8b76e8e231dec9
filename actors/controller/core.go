package controller

import (
	"fmt"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Defaults.
const (
	// DefaultHeartbeatTimeout is controllerHeartBeatTimeoutMills: three of
	// the brokers' 1 s heartbeats (RocketMQ's 10 s makes every failover
	// cost ten seconds).
	DefaultHeartbeatTimeout = 3 * time.Second
	// DefaultRequestTimeout bounds how long a proposal or a read may stay
	// unanswered (lost with a leader change) before its request is answered
	// SYSTEM_BUSY.
	DefaultRequestTimeout = 3 * time.Second
	// DefaultScanInterval is how often the leader looks again at groups
	// without a live master while it has no candidate for them.
	DefaultScanInterval = 500 * time.Millisecond
)

// Faults are planted bugs for the simulator, off in production.
type Faults struct {
	// ElectOutsideSyncStateSet elects a live replica outside the
	// SyncStateSet whenever there is one, as if unclean election were on.
	ElectOutsideSyncStateSet bool
	// ElectLackingReplica elects a SyncStateSet member whose log may lack
	// acknowledged messages while another member is not heard from.
	ElectLackingReplica bool
}

// Config is the Core's behaviour.
type Config struct {
	HeartbeatTimeout time.Duration // 0: DefaultHeartbeatTimeout
	RequestTimeout   time.Duration // 0: DefaultRequestTimeout
	ScanInterval     time.Duration // 0: DefaultScanInterval
	// ElectUnclean is enableElectUncleanMaster: with no live SyncStateSet
	// member, elect any live replica (and possibly lose acknowledged
	// messages).
	ElectUnclean bool
	// Origin tags this Core's proposals so that it recognises them when
	// they are applied. It must differ between every two Cores that may
	// propose to the same log, restarts of one node included (e.g. the raft
	// node id in the high bits and a per-start counter kept on disk, or a
	// value from the seeded source).
	Origin uint64
	Faults Faults
}

func (c Config) norm() Config {
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ScanInterval <= 0 {
		c.ScanInterval = DefaultScanInterval
	}
	return c
}

// Proposal is a command to propose to raft. ID is the Core's own; the shell
// needs it only for logs.
type Proposal struct {
	ID  uint64
	Cmd []byte
}

// Reply answers the request the shell handed in as ReqID.
type Reply struct {
	ReqID  uint64
	Status protocol.Status
	Remark string
	Fields protocol.Fields // nil: no fields
}

// Notification is a group's new replica info, for NOTIFY_BROKER_ROLE_CHANGED
// to every broker listed and to every name server.
type Notification struct {
	Info    protocol.ReplicaInfo
	Brokers []string // the group's replicas' addresses, by brokerId
}

// Ready is the Core's output since the last call to Ready.
type Ready struct {
	Proposals []Proposal
	Reads     []uint64 // ask raft for a ReadIndex with each ID; ReadDone(ID) when applied
	Replies   []Reply
	Notify    []Notification
	// Timer is when Tick must next run (zero: no need).
	Timer time.Time
}

// Core handles broker requests on the raft leader (and tells them who the
// leader is elsewhere). It reads the State the shell applies entries to; it
// never changes it.
type Core struct {
	cfg         Config
	state       *State
	isLeader    bool
	leaderAddr  string
	leaderSince time.Time
	now         time.Time // the latest input's time
	beats       map[groupKey]map[int64]beat
	nextID      uint64
	pending     map[uint64]waiter // proposals, by ID
	reads       map[uint64]waiter // ReadIndex requests, by ID
	electing    map[groupKey]inflight
	// elects: every election entry (the scan's or an admin's) this leader
	// proposed that may still commit, by group. While one may, no answer
	// renews the group's master's lease: a heartbeat's ReadIndex can be
	// below the election's entry, and the answer would then let the old
	// master write on after the new one was elected (the deadline in
	// electing is for proposing again, not a sign that the entry is gone).
	elects map[groupKey]map[uint64]bool
	out    Ready
}

// waiter is a request waiting for its entry to apply or its read to be
// confirmed.
type waiter struct {
	reqID    uint64
	req      protocol.Request
	deadline time.Time
}

// inflight is the leader's own election proposal for a group.
type inflight struct {
	id       uint64
	deadline time.Time
}

// NewCore returns a Core over state (which the shell applies entries to).
// It is a follower until Leader says otherwise.
func NewCore(cfg Config, state *State) *Core {
	return &Core{cfg: cfg.norm(), state: state, beats: map[groupKey]map[int64]beat{},
		pending: map[uint64]waiter{}, reads: map[uint64]waiter{}, electing: map[groupKey]inflight{},
		elects: map[groupKey]map[uint64]bool{}}
}

// Ready returns the output since the last call and clears it.
func (c *Core) Ready() Ready {
	rd := c.out
	rd.Timer = c.timer()
	c.out = Ready{}
	return rd
}

func (c *Core) reply(reqID uint64, st protocol.Status, remark string, f protocol.Fields) {
	c.out.Replies = append(c.out.Replies, Reply{ReqID: reqID, Status: st, Remark: remark, Fields: f})
}

func (c *Core) propose(now time.Time, cmd *command) uint64 {
	c.nextID++
	cmd.Origin, cmd.ID = c.cfg.Origin, c.nextID
	c.out.Proposals = append(c.out.Proposals, Proposal{ID: c.nextID, Cmd: encodeCommand(cmd)})
	if cmd.Op == opElect {
		if c.elects[cmd.key()] == nil {
			c.elects[cmd.key()] = map[uint64]bool{}
		}
		c.elects[cmd.key()][c.nextID] = true
	}
	return c.nextID
}

// electResolved: the election entry id of this leader's applied, or will
// never commit.
func (c *Core) electResolved(k groupKey, id uint64) {
	if delete(c.elects[k], id); len(c.elects[k]) == 0 {
		delete(c.elects, k)
	}
}

// Leader tells the Core whether this node leads, and the leader's address
// ("" if unknown). The shell calls it at every change of raft's leader (its
// SoftState.Lead), so that leading again in a later term, after another
// node led, is seen as a new leadership. Becoming leader starts with no
// heartbeats: no election (but a group's first) before a full heartbeat
// timeout has passed.
func (c *Core) Leader(now time.Time, isLeader bool, leaderAddr string) {
	c.now = now
	c.leaderAddr = leaderAddr
	if isLeader == c.isLeader {
		return
	}
	c.isLeader = isLeader
	c.beats = map[groupKey]map[int64]beat{}
	c.electing = map[groupKey]inflight{}
	// A leader serves no read before an entry of its own term committed,
	// and with it every entry before it: an election of an earlier term
	// that may still commit is applied before any answer of this one.
	c.elects = map[groupKey]map[uint64]bool{}
	if isLeader {
		c.leaderSince = now
		return
	}
	// raft drops the ReadIndex requests of a deposed leader. Proposals stay:
	// they may still commit, and every node applies them.
	for _, id := range sortedKeys(c.reads) {
		c.reply(c.reads[id].reqID, protocol.StatusControllerNotLeader, leaderAddr, nil)
		delete(c.reads, id)
	}
}

// Tick expires what waited too long and, on the leader, elects a master for
// every group whose master's heartbeat is older than the timeout.
func (c *Core) Tick(now time.Time) {
	c.now = now
	for _, id := range sortedKeys(c.pending) {
		if w := c.pending[id]; !now.Before(w.deadline) {
			c.reply(w.reqID, protocol.StatusSystemBusy, "controller: not applied in time; the outcome is unknown, read the replica info", nil)
			delete(c.pending, id)
		}
	}
	for _, id := range sortedKeys(c.reads) {
		if w := c.reads[id]; !now.Before(w.deadline) {
			c.reply(w.reqID, protocol.StatusSystemBusy, "controller: read not confirmed in time", nil)
			delete(c.reads, id)
		}
	}
	for k, e := range c.electing {
		if !now.Before(e.deadline) {
			delete(c.electing, k)
		}
	}
	if c.isLeader {
		c.scan(now)
	}
}

// timer is the earliest time Tick has something to do.
func (c *Core) timer() time.Time {
	var t time.Time
	earlier := func(x time.Time) {
		if t.IsZero() || x.Before(t) {
			t = x
		}
	}
	for _, w := range c.pending {
		earlier(w.deadline)
	}
	for _, w := range c.reads {
		earlier(w.deadline)
	}
	for _, e := range c.electing {
		earlier(e.deadline)
	}
	if !c.isLeader {
		return t
	}
	for _, g := range c.state.groups {
		switch {
		case !c.mayElect(g, c.now):
			earlier(c.leaderSince.Add(c.cfg.HeartbeatTimeout))
		case c.masterAlive(g, c.now):
			earlier(c.beats[g.key][g.masterID].at.Add(c.cfg.HeartbeatTimeout))
		default: // waiting for a candidate to heartbeat
			earlier(c.now.Add(c.cfg.ScanInterval))
		}
	}
	return t
}

// Request handles a broker's or an admin's request, handed in as reqID.
func (c *Core) Request(now time.Time, reqID uint64, req protocol.Request) {
	c.now = now
	if r, ok := req.(*protocol.GetControllerMetadataRequest); ok {
		c.metadata(reqID, r)
		return
	}
	if !c.isLeader {
		c.reply(reqID, protocol.StatusControllerNotLeader, c.leaderAddr, nil)
		return
	}
	if ch, ok := req.(interface{ Check() error }); ok {
		if err := ch.Check(); err != nil {
			c.reply(reqID, protocol.StatusInvalidParameter, err.Error(), nil)
			return
		}
	}
	switch r := req.(type) {
	case *protocol.ControllerHeartbeatRequest:
		c.heartbeat(now, reqID, r)
	case *protocol.ControllerRegisterBrokerRequest:
		c.await(now, reqID, r, &command{Op: opRegister, Cluster: r.ClusterName, Group: r.BrokerName,
			Identity: r.Identity, Addr: r.BrokerAddr, HAAddr: r.HAServerAddr})
	case *protocol.AlterSyncStateSetRequest:
		c.await(now, reqID, r, &command{Op: opAlter, Cluster: r.ClusterName, Group: r.BrokerName,
			MasterID: r.MasterID, MasterEpoch: r.MasterEpoch, SetEpoch: r.SyncStateSetEpoch, Set: r.SyncStateSet})
	case *protocol.ElectMasterRequest:
		c.electRequest(now, reqID, r)
	case *protocol.GetReplicaInfoRequest:
		c.nextID++
		c.reads[c.nextID] = waiter{reqID: reqID, req: r, deadline: now.Add(c.cfg.RequestTimeout)}
		c.out.Reads = append(c.out.Reads, c.nextID)
	default:
		c.reply(reqID, protocol.StatusRequestCodeNotSupported, fmt.Sprintf("controller: %v not supported", req.RequestCode()), nil)
	}
}

// await proposes cmd and answers the request when the entry is applied.
func (c *Core) await(now time.Time, reqID uint64, req protocol.Request, cmd *command) {
	id := c.propose(now, cmd)
	c.pending[id] = waiter{reqID: reqID, req: req, deadline: now.Add(c.cfg.RequestTimeout)}
}

func (c *Core) metadata(reqID uint64, _ *protocol.GetControllerMetadataRequest) {
	groups := c.state.sortedGroups()
	md := &protocol.ControllerMetadata{IsLeader: c.isLeader, LeaderAddr: c.leaderAddr, Groups: make([]protocol.ReplicaInfo, 0, len(groups))}
	for _, g := range groups {
		md.Groups = append(md.Groups, *c.liveInfo(g, protocol.NoBroker))
	}
	c.reply(reqID, protocol.StatusOK, "", md)
}

// liveInfo is g's info with the replicas' liveness as this leader sees it.
func (c *Core) liveInfo(g *group, id int64) *protocol.ReplicaInfo {
	in := g.info(id)
	if !c.isLeader {
		return in
	}
	for i := range in.Replicas {
		b, ok := c.beats[g.key][in.Replicas[i].BrokerID]
		in.Replicas[i].Alive = ok && b.addr == in.Replicas[i].BrokerAddr && c.fresh(b, c.now)
	}
	return in
}

func (c *Core) heartbeat(now time.Time, reqID uint64, r *protocol.ControllerHeartbeatRequest) {
	g := c.state.groups[groupKey{cluster: r.ClusterName, name: r.BrokerName}]
	if g == nil || g.replicas[r.BrokerID] == nil || g.replicas[r.BrokerID].addr != r.BrokerAddr {
		c.reply(reqID, protocol.StatusControllerBrokerNeedToBeRegistered,
			fmt.Sprintf("controller: broker %d at %s is not registered in %s/%s", r.BrokerID, r.BrokerAddr, r.ClusterName, r.BrokerName), nil)
		return
	}
	if c.beats[g.key] == nil {
		c.beats[g.key] = map[int64]beat{}
	}
	c.beats[g.key][r.BrokerID] = beat{at: now, addr: r.BrokerAddr, epoch: r.Epoch, maxOffset: r.MaxOffset,
		confirmOffset: r.ConfirmOffset, priority: r.ElectionPriority, mayLackAcked: r.MayLackAcked}
	// The answer renews the master's lease (ctlagent counts it from the
	// heartbeat's send time), so it waits for a ReadIndex: a deposed leader,
	// cut off from the quorum, never renews a lease while the new leader
	// counts the master's silence towards electing another.
	c.nextID++
	c.reads[c.nextID] = waiter{reqID: reqID, req: r, deadline: now.Add(c.cfg.RequestTimeout)}
	c.out.Reads = append(c.out.Reads, c.nextID)
}
