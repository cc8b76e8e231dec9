package namesrv

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// DefaultLease is how long a broker stays alive without a heartbeat unless
// it asks for another lease (brokers heartbeat every second by default).
const DefaultLease = 5 * time.Second

// MaxLease caps the lease a broker may ask for: a broker silent longer is
// dead whatever it asked (and a huge value cannot overflow a Duration).
const MaxLease = 10 * time.Minute

// ErrInvalid is wrapped by the errors of a registration that names no
// cluster, group or address, or a negative brokerId.
var ErrInvalid = errors.New("namesrv: invalid registration")

// Config is the route table's behaviour.
type Config struct {
	// Lease is the lease of a broker that asks for none; 0 means DefaultLease.
	Lease time.Duration
}

// Table is the route table. The zero value is not usable: call New.
type Table struct {
	lease   time.Duration
	version int64
	groups  map[string]*group // by brokerName
}

// group is one broker group: a master and its slaves.
type group struct {
	cluster string
	brokers map[int64]*broker
	topics  map[string]protocol.TopicConfig // from its master
}

// broker is one registered broker.
type broker struct {
	id        protocol.BrokerIdentity
	haAddr    string
	remoting  string // RocketMQ remoting address, if the broker serves one
	role      string
	version   protocol.DataVersion
	epoch     int32 // the master epoch of its role (controller mode)
	conn      uint64
	alive     bool
	liveSince time.Time
	lastBeat  time.Time
	lease     time.Duration
	topics    int // topic configs taken from it
}

// New returns an empty table.
func New(cfg Config) *Table {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	return &Table{lease: cfg.Lease, groups: map[string]*group{}}
}

// Version is the table's current version (see the package doc).
func (t *Table) Version() int64 { return t.version }

// bump records a change at now.
func (t *Table) bump(now time.Time) { t.version = max(t.version+1, now.UnixMicro()) }

// Registration is one REGISTER_BROKER as the table takes it.
type Registration struct {
	protocol.RegisterBrokerRequest
	Conn uint64 // the connection it came on: closing it expires the broker
}

// Register takes a registration (or, at an unchanged data version, a lease
// renewal) and answers it.
func (t *Table) Register(reg *Registration, now time.Time) (protocol.RegisterBrokerResponse, error) {
	id := reg.BrokerIdentity
	if err := validIdentity(id); err != nil {
		return protocol.RegisterBrokerResponse{}, err
	}
	if err := validTopics(reg.Topics); err != nil {
		return protocol.RegisterBrokerResponse{}, err
	}
	g := t.groups[id.BrokerName]
	if g == nil {
		g = &group{cluster: id.ClusterName, brokers: map[int64]*broker{}, topics: map[string]protocol.TopicConfig{}}
		t.groups[id.BrokerName] = g
	}
	b := g.brokers[id.BrokerID]
	// Against an alive entry, an older data version is a delayed
	// message (or an older process at another address): ignored. A dead
	// entry is replaced by whatever comes.
	cmp := 1
	switch {
	case b == nil || !b.alive:
	case reg.MasterEpoch != b.epoch:
		cmp = cmpEpoch(reg.MasterEpoch, b.epoch) // controller mode: the newer epoch's claim wins
	default:
		cmp = reg.DataVersion.Compare(b.version)
	}
	if cmp < 0 {
		return t.answer(g, b, protocol.RegisterBrokerResponse{Stale: true}), nil
	}
	changed := b == nil || !b.alive || b.id != id || b.role != reg.BrokerRole || b.haAddr != reg.HAServerAddr || b.remoting != reg.RemotingAddr ||
		g.cluster != id.ClusterName || b.epoch != reg.MasterEpoch
	if b == nil || b.id.BrokerAddr != id.BrokerAddr || !b.alive {
		// A new broker, one at a new address (it replaces the old
		// entry), or one coming back: a new life.
		b = &broker{liveSince: now}
		g.brokers[id.BrokerID] = b
	}
	takeTopics := cmp > 0 || changed
	b.id, b.haAddr, b.role, b.version, b.conn = id, reg.HAServerAddr, reg.BrokerRole, reg.DataVersion, reg.Conn
	b.epoch, b.remoting = reg.MasterEpoch, reg.RemotingAddr
	b.alive, b.lastBeat, b.lease = true, now, t.lease
	if ms := reg.HeartbeatTimeoutMillis; ms > 0 {
		b.lease = time.Duration(min(ms, MaxLease.Milliseconds())) * time.Millisecond
	}
	g.cluster = id.ClusterName
	if takeTopics && isMaster(b) && setTopics(g, b, reg.Topics) {
		changed = true
	}
	if changed {
		t.bump(now)
	}
	return t.answer(g, b, protocol.RegisterBrokerResponse{Changed: changed}), nil
}

// setTopics replaces g's topics with a master's, reporting a change.
func setTopics(g *group, b *broker, topics []protocol.TopicConfig) bool {
	next := make(map[string]protocol.TopicConfig, len(topics))
	for _, tc := range topics {
		next[tc.Topic] = tc
	}
	b.topics = len(next)
	if maps.Equal(next, g.topics) {
		return false
	}
	g.topics = next
	return true
}

// answer fills the lease and the group's master into resp.
func (t *Table) answer(g *group, b *broker, resp protocol.RegisterBrokerResponse) protocol.RegisterBrokerResponse {
	if b != nil {
		resp.LeaseMillis = b.lease.Milliseconds()
	}
	if m := g.master(); m != nil {
		resp.MasterAddr, resp.MasterHAAddr = m.id.BrokerAddr, m.haAddr
	}
	return resp
}

func validIdentity(id protocol.BrokerIdentity) error {
	var missing []string
	if id.ClusterName == "" {
		missing = append(missing, "clusterName")
	}
	if id.BrokerName == "" {
		missing = append(missing, "brokerName")
	}
	if id.BrokerAddr == "" {
		missing = append(missing, "brokerAddr")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s missing", ErrInvalid, strings.Join(missing, ", "))
	}
	if id.BrokerID < 0 {
		return fmt.Errorf("%w: brokerId %d is negative", ErrInvalid, id.BrokerID)
	}
	return nil
}

// MaxQueueNums is the most queues of a topic on one group (the broker's own limit).
const MaxQueueNums = 1024

// validTopics refuses topic configs no route could carry: a bad name,
// queue counts outside [0, MaxQueueNums], unknown permission bits.
func validTopics(topics []protocol.TopicConfig) error {
	for _, tc := range topics {
		if err := protocol.ValidateTopic(tc.Topic); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if tc.ReadQueueNums < 0 || tc.ReadQueueNums > MaxQueueNums || tc.WriteQueueNums < 0 || tc.WriteQueueNums > MaxQueueNums {
			return fmt.Errorf("%w: topic %q: %d read and %d write queues, want 0..%d", ErrInvalid, tc.Topic, tc.ReadQueueNums, tc.WriteQueueNums, MaxQueueNums)
		}
		if tc.Perm&^(protocol.PermRead|protocol.PermWrite|protocol.PermInherit) != 0 {
			return fmt.Errorf("%w: topic %q: perm %d", ErrInvalid, tc.Topic, tc.Perm)
		}
	}
	return nil
}

// isMaster: brokerId 0 and not running as a slave.
func isMaster(b *broker) bool { return b.id.BrokerID == protocol.MasterID && b.role != "SLAVE" }

// master is g's alive master, or nil.
func (g *group) master() *broker {
	if b := g.brokers[protocol.MasterID]; b != nil && b.alive && isMaster(b) {
		return b
	}
	return nil
}

func (g *group) anyAlive() bool {
	for _, b := range g.brokers {
		if b.alive {
			return true
		}
	}
	return false
}

// Heartbeat renews the lease of a broker held alive at the same address and
// data version; otherwise it answers Unknown and the broker must register.
func (t *Table) Heartbeat(hb *protocol.BrokerHeartbeatRequest, conn uint64, now time.Time) protocol.RegisterBrokerResponse {
	g := t.groups[hb.BrokerName]
	if g == nil {
		return protocol.RegisterBrokerResponse{Unknown: true}
	}
	b := g.brokers[hb.BrokerID]
	if b == nil || !b.alive || b.id != hb.BrokerIdentity || b.version != hb.DataVersion {
		return t.answer(g, nil, protocol.RegisterBrokerResponse{Unknown: true})
	}
	b.lastBeat, b.conn = now, conn
	return t.answer(g, b, protocol.RegisterBrokerResponse{})
}

// Unregister removes a broker (a clean stop). Only the registration at the
// same address is removed: a late UNREGISTER of a replaced broker is
// ignored. A group left with no broker goes, with its topics.
func (t *Table) Unregister(id protocol.BrokerIdentity, now time.Time) bool {
	g := t.groups[id.BrokerName]
	if g == nil {
		return false
	}
	b := g.brokers[id.BrokerID]
	if b == nil || b.id.BrokerAddr != id.BrokerAddr {
		return false
	}
	delete(g.brokers, id.BrokerID)
	if len(g.brokers) == 0 {
		delete(t.groups, id.BrokerName)
	}
	t.bump(now)
	return true
}

// ConnClosed expires at once every alive broker whose last registration or
// heartbeat came on conn (a closed connection is a dead broker, not one
// to wait a lease for), and returns them.
func (t *Table) ConnClosed(conn uint64, now time.Time) []protocol.BrokerIdentity {
	return t.expireWhere(now, func(b *broker) bool { return b.conn == conn })
}

// Expire marks dead every broker whose lease ended at or before now, and
// returns them.
func (t *Table) Expire(now time.Time) []protocol.BrokerIdentity {
	return t.expireWhere(now, func(b *broker) bool { return !now.Before(b.lastBeat.Add(b.lease)) })
}

func (t *Table) expireWhere(now time.Time, dead func(*broker) bool) []protocol.BrokerIdentity {
	var out []protocol.BrokerIdentity
	for _, name := range t.sortedGroups() {
		g := t.groups[name]
		for _, id := range slices.Sorted(maps.Keys(g.brokers)) {
			if b := g.brokers[id]; b.alive && dead(b) {
				b.alive = false
				out = append(out, b.id)
			}
		}
	}
	if len(out) > 0 {
		t.bump(now)
	}
	return out
}

// Deadline is when the next lease ends (Expire must run then), and false
// if no broker is alive.
func (t *Table) Deadline() (time.Time, bool) {
	var first time.Time
	ok := false
	for _, g := range t.groups {
		for _, b := range g.brokers {
			if !b.alive {
				continue
			}
			if d := b.lastBeat.Add(b.lease); !ok || d.Before(first) {
				first, ok = d, true
			}
		}
	}
	return first, ok
}

// DeleteTopic drops topic from the groups of cluster (every group if
// cluster is empty), reporting whether any group held it.
func (t *Table) DeleteTopic(topic, cluster string, now time.Time) bool {
	found := false
	for _, g := range t.groups {
		if _, ok := g.topics[topic]; ok && (cluster == "" || g.cluster == cluster) {
			delete(g.topics, topic)
			found = true
		}
	}
	if found {
		t.bump(now)
	}
	return found
}

// sortedGroups are the group names in order.
func (t *Table) sortedGroups() []string { return slices.Sorted(maps.Keys(t.groups)) }

// Route is topic's route, and false if no group with an alive broker
// hosts it.
func (t *Table) Route(topic string) (*protocol.RouteData, bool) {
	rd := &protocol.RouteData{Topic: topic, Version: t.version}
	for _, name := range t.sortedGroups() {
		g := t.groups[name]
		tc, ok := g.topics[topic]
		if !ok || !g.anyAlive() {
			continue
		}
		qd := protocol.QueueData{BrokerName: name, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums, Perm: tc.Perm}
		if g.master() == nil {
			qd.WriteQueueNums, qd.Perm = 0, qd.Perm&^protocol.PermWrite
		}
		rd.QueueDatas = append(rd.QueueDatas, qd)
		for _, id := range slices.Sorted(maps.Keys(g.brokers)) {
			rd.Brokers = append(rd.Brokers, g.brokers[id].ref(name, g.cluster))
		}
	}
	return rd, len(rd.QueueDatas) > 0
}

func (b *broker) ref(group, cluster string) protocol.BrokerRef {
	return protocol.BrokerRef{ClusterName: cluster, BrokerName: group, BrokerID: b.id.BrokerID, BrokerAddr: b.id.BrokerAddr,
		HAServerAddr: b.haAddr, BrokerRole: b.role, Alive: b.alive, RemotingAddr: b.remoting}
}

// Cluster is every broker held, sorted by cluster, group and brokerId.
func (t *Table) Cluster() *protocol.ClusterInfo {
	ci := &protocol.ClusterInfo{Version: t.version}
	for _, name := range t.sortedGroups() {
		g := t.groups[name]
		for _, id := range slices.Sorted(maps.Keys(g.brokers)) {
			b := g.brokers[id]
			ci.Brokers = append(ci.Brokers, protocol.BrokerInfo{BrokerRef: b.ref(name, g.cluster), DataVersion: b.version,
				LiveSinceMs: b.liveSince.UnixMilli(), LastHeartbeatMs: b.lastBeat.UnixMilli(),
				LeaseMillis: b.lease.Milliseconds(), Topics: int32(b.topics)})
		}
	}
	slices.SortStableFunc(ci.Brokers, func(a, b protocol.BrokerInfo) int { return strings.Compare(a.ClusterName, b.ClusterName) })
	return ci
}

// Topics is every topic with a route, sorted.
func (t *Table) Topics() []string {
	set := map[string]bool{}
	for _, g := range t.groups {
		if !g.anyAlive() {
			continue
		}
		for name := range g.topics {
			set[name] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func cmpEpoch(a, b int32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
