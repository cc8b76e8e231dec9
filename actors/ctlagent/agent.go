package ctlagent

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Config's durations.
const (
	DefaultHeartbeatInterval = 500 * time.Millisecond
	DefaultLease             = 1500 * time.Millisecond
	DefaultRequestTimeout    = time.Second
	DefaultSlaveNotCatchup   = 3 * time.Second
	DefaultRetryDelay        = 100 * time.Millisecond
)

// Config is what an Agent needs.
type Config struct {
	// Controllers are the controller addresses (controllerAddr); requests
	// go to one at a time.
	Controllers       []string
	HeartbeatInterval time.Duration // 0: DefaultHeartbeatInterval
	// Lease is the master lease (0: DefaultLease). It must be below the
	// controller's heartbeat timeout by more than the clock-rate error.
	Lease           time.Duration
	RequestTimeout  time.Duration // 0: DefaultRequestTimeout
	SlaveNotCatchup time.Duration // haMaxTimeSlaveNotCatchup; 0: DefaultSlaveNotCatchup
	// CatchupGap is how far behind the master's end a slave may be for the
	// master to start waiting for it (see Agent.Slaves); 0 disables the
	// wait (a slave joins the set only when it is fully caught up).
	CatchupGap int64
	// NoLease plants a bug for the simulator: the master keeps accepting
	// writes after its lease ran out.
	NoLease bool
}

// ErrInvalid reports a Config an Agent cannot work with.
var ErrInvalid = errors.New("ctlagent: invalid config")

func (c *Config) norm() error {
	if len(c.Controllers) == 0 {
		return fmt.Errorf("%w: no controller address", ErrInvalid)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&c.Lease, DefaultLease)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.SlaveNotCatchup, DefaultSlaveNotCatchup)
	return nil
}

// Kind is what a request asks.
type Kind uint8

// The requests an Agent sends.
const (
	Register  Kind = iota // learn this broker's id
	Heartbeat             // renew liveness (and, for a master, its lease)
	GetInfo               // the group's replica info, read linearizably
	AlterSet              // change the SyncStateSet (master only)
	kinds
)

func (k Kind) String() string {
	return [...]string{"REGISTER", "HEARTBEAT", "GET_REPLICA_INFO", "ALTER_SYNC_STATE_SET"}[k]
}

// Request is one request to send to To; its outcome comes back as Answer
// or Failed with the same ID.
type Request struct {
	ID   uint64
	To   string
	Kind Kind
	// Heartbeat: the broker's position. AlterSet: the fence and the set.
	BrokerID      int64
	Epoch         int32
	MaxOffset     int64
	ConfirmOffset int64
	MayLackAcked  bool // Heartbeat: StoreState.MayLackAcked
	MasterEpoch   int32
	SetEpoch      int32
	NewSet        []int64
}

// Info is a broker group's replica info as the controller holds it.
type Info struct {
	MasterID    int64  // 0: no master
	MasterAddr  string // the master's HA address
	MasterEpoch int32
	Set         []int64 // the SyncStateSet, sorted
	SetEpoch    int32
	// MasterMayLackAcked: the master was elected knowing its log may
	// lack acknowledged messages (protocol.ReplicaInfo's).
	MasterMayLackAcked bool
}

// Status is how the controller answered.
type Status uint8

// Answer statuses.
const (
	OK           Status = iota
	NotLeader           // Leader names the leader, if known
	Fenced              // an AlterSet whose epochs are not the current ones
	Refused             // any other refusal (bad request): retried later
	Unregistered        // the controller does not know this broker: register again
)

// Answer is a controller's answer to request ID.
type Answer struct {
	ID       uint64
	Status   Status
	Leader   string // with NotLeader
	BrokerID int64  // Register
	Info     *Info  // GetInfo and AlterSet; optional with Heartbeat
	// MasterEpoch (Heartbeat) is the group's master epoch as the leader
	// holds it, 0 if not given.
	MasterEpoch int32
}

// Role is a role to take. A master starts Epoch in its store (fsynced)
// before its first write; a slave replicates from MasterAddr.
type Role struct {
	Master     bool
	MasterAddr string
	BrokerID   int64
	Epoch      int32
}

// StoreState is the broker's store as the agent needs it.
type StoreState struct {
	Epoch         int32 // the last epoch started in the store
	MaxOffset     int64
	ConfirmOffset int64
	// MayLackAcked: the log may lack messages the broker acknowledged
	// (storage.MayLackAckedFile); the controllers then elect this
	// replica only as the best of a fully heard SyncStateSet.
	MayLackAcked bool
}

// SlaveProgress is one slave as the master's replication sees it.
type SlaveProgress struct {
	BrokerID  int64
	Acked     int64 // acknowledged (durable as the mode requires) below this offset
	Connected bool
}

// Ready is what the last inputs ask of the broker.
type Ready struct {
	Requests []Request
	// Role, if set, is a role to take; report RoleApplied when done.
	Role *Role
	// Writable, if set, is whether writes are now allowed.
	Writable *bool
	// LeaseEnd, if set, is when the writes allowed now must stop at the
	// latest (zero: no deadline, NoLease), so that the writer can check it
	// at every batch instead of waiting for this Ready's Deadline tick.
	LeaseEnd *time.Time
	// AckSet, if set, is the new set of slave ids a SYNC send waits for
	// (the master's own durability aside); empty: the master alone.
	AckSet *[]int64
	// Deadline is when to call Tick next.
	Deadline time.Time
}

type flight struct {
	id       uint64
	sentAt   time.Time
	deadline time.Time
	newSet   []int64 // AlterSet
}

type slave struct {
	acked       int64
	connected   bool
	behindSince time.Time // zero: caught up
}

// Agent is one broker's controller-mode state.
type Agent struct {
	cfg      Config
	cur      int // index of the controller believed to lead
	nextID   uint64
	started  bool
	brokerID int64 // 0 until registered
	inflight [kinds]*flight
	due      [kinds]time.Time // zero: not due
	info     Info
	haveInfo bool
	applied  *Role // last role carried out
	asked    *Role // role asked, not yet applied
	lastOK   time.Time
	store    StoreState
	slaves   map[int64]*slave
	// candidate is a slave the master waits for (in AckSet) before it
	// proposes it into the set, until it has everything below target.
	candidate      int64
	candidateSince time.Time
	candidateUntil int64
	gaveUp         map[int64]time.Time // when a wait for a slave ended unfinished
	// proposed is every broker id of the SyncStateSet changes sent at set
	// epoch proposedBase whose fate is unknown: one that timed out may
	// still apply, so acks wait for its members until the info shows a
	// newer set epoch.
	proposed     []int64
	proposedBase int32
	writable     bool
	leaseEnd     time.Time // last reported with LeaseEnd
	ackSet       []int64
	now          time.Time // of the input being handled
	rd           Ready
}

// New returns an Agent; Start begins its work.
func New(cfg Config) (*Agent, error) {
	if err := cfg.norm(); err != nil {
		return nil, err
	}
	return &Agent{cfg: cfg, slaves: map[int64]*slave{}, gaveUp: map[int64]time.Time{}}, nil
}

// BrokerID is the id the controller assigned (0 before registration).
func (a *Agent) BrokerID() int64 { return a.brokerID }

// Info is the newest replica info known.
func (a *Agent) Info() (Info, bool) { return a.info, a.haveInfo }

// Start registers with the controllers.
func (a *Agent) Start(now time.Time, st StoreState) {
	a.started = true
	a.store = st
	a.due[Register] = now
	a.Tick(now, st)
}

// Ready returns and clears what the inputs since the last call asked for.
func (a *Agent) Ready() Ready {
	r := a.rd
	a.rd = Ready{}
	return r
}
