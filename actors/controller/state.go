package controller

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/wharfmq/wharf/internal/invariant"
	"github.com/wharfmq/wharf/protocol"
)

// State is the replicated state machine: every broker group's replicas,
// master, master epoch and SyncStateSet. Every controller node applies the
// same committed entries in the same order and so holds the same State and
// returns the same results. The zero value is an empty, usable State.
type State struct {
	groups  map[groupKey]*group
	applied uint64 // the index of the last entry applied
}

// groupKey names a broker group: brokerName is unique within a cluster.
type groupKey struct{ cluster, name string }

func (k groupKey) compare(o groupKey) int {
	return cmp.Or(cmp.Compare(k.cluster, o.cluster), cmp.Compare(k.name, o.name))
}

type group struct {
	key         groupKey
	replicas    map[int64]*replica
	byIdentity  map[string]int64
	nextID      int64 // the id the next new identity gets; ids start at 1
	masterID    int64 // protocol.NoBroker until the first election
	masterEpoch int32 // 0 until the first election
	set         []int64
	setEpoch    int32
	// recovery is the SyncStateSet before the last election, without the
	// master it elected: members that held every acknowledged message
	// then, kept until the set changes, in case the new master turns out
	// to have lost its unflushed tail before it began its epoch.
	recovery []int64
	// masterLacking: the master was elected knowing that its log may
	// lack acknowledged messages, as the best of a fully heard set.
	masterLacking bool
}

type replica struct {
	id       int64
	identity string
	addr     string
	haAddr   string
}

// Applied returns the index of the last entry applied (or restored).
func (s *State) Applied() uint64 { return s.applied }

// Apply applies the committed entry at index and returns its result. It is
// deterministic and never panics on bad bytes: an entry that does not
// decode, or whose preconditions do not hold against the state at this
// index, changes nothing and gets a refusal as its result. An empty entry
// (raft's entry of a new term) and an index at or below Applied (a replay
// after Restore) change nothing and return nil.
func (s *State) Apply(index uint64, cmd []byte) []byte {
	if index != 0 && index <= s.applied {
		return nil
	}
	if index != 0 {
		s.applied = index
	}
	if len(cmd) == 0 {
		return nil
	}
	c, err := decodeCommand(cmd)
	if err != nil {
		return encodeResult(&result{Status: protocol.StatusControllerInvalidRequest, Remark: err.Error()})
	}
	return encodeResult(s.apply(c))
}

func (s *State) apply(c *command) *result {
	switch c.Op {
	case opRegister:
		return s.register(c)
	case opAlter:
		return s.alter(c)
	case opElect:
		return s.elect(c)
	}
	return &result{Status: protocol.StatusControllerInvalidRequest, Remark: fmt.Sprintf("unknown op %q", c.Op)}
}

func refuse(st protocol.Status, format string, args ...any) *result {
	return &result{Status: st, Remark: fmt.Sprintf(format, args...)}
}

func (s *State) register(c *command) *result {
	if c.Cluster == "" || c.Group == "" || c.Identity == "" || c.Addr == "" {
		return refuse(protocol.StatusControllerInvalidRequest, "register: cluster, group, identity and address are required")
	}
	g := s.groups[c.key()]
	if g == nil {
		g = &group{key: c.key(), replicas: map[int64]*replica{}, byIdentity: map[string]int64{}, nextID: 1}
	}
	id, known := g.byIdentity[c.Identity]
	if !known && len(g.replicas) >= protocol.MaxSyncStateSet {
		return refuse(protocol.StatusControllerInvalidRequest, "register: group %s holds %d replicas already", c.Group, len(g.replicas))
	}
	if s.groups == nil {
		s.groups = map[groupKey]*group{}
	}
	s.groups[g.key] = g
	if !known {
		id = g.nextID
		g.nextID++
		g.byIdentity[c.Identity] = id
		g.replicas[id] = &replica{id: id, identity: c.Identity}
	}
	r := g.replicas[id]
	moved := r.addr != c.Addr || r.haAddr != c.HAAddr
	r.addr, r.haAddr = c.Addr, c.HAAddr
	res := &result{Status: protocol.StatusOK, Info: g.info(id)}
	// The master at a new address: brokers and name servers must hear.
	res.Changed = moved && known && id == g.masterID
	return res
}

func (s *State) alter(c *command) *result {
	g := s.groups[c.key()]
	switch {
	case g == nil:
		return refuse(protocol.StatusControllerBrokerMetadataNotExist, "no group %s/%s", c.Cluster, c.Group)
	case c.MasterEpoch != g.masterEpoch:
		return refuse(protocol.StatusControllerFencedMasterEpoch, "master epoch %d, current %d", c.MasterEpoch, g.masterEpoch)
	case c.MasterID != g.masterID || g.masterID == protocol.NoBroker:
		return refuse(protocol.StatusControllerInvalidMaster, "broker %d is not the master (%d)", c.MasterID, g.masterID)
	case c.SetEpoch != g.setEpoch:
		return refuse(protocol.StatusControllerFencedSyncStateSetEpoch, "syncStateSet epoch %d, current %d", c.SetEpoch, g.setEpoch)
	}
	if err := g.checkSet(c.Set); err != nil {
		return refuse(protocol.StatusControllerInvalidReplicas, "%v", err)
	}
	old := g.setEpoch
	g.set = sortedSet(c.Set)
	g.setEpoch++
	g.recovery = nil // the master began its epoch: its set is the truth
	invariant.Check2(g.setEpoch > old, "syncStateSet epoch %d after %d", g.setEpoch, old)
	return &result{Status: protocol.StatusOK, Changed: true, Info: g.info(c.MasterID)}
}

// checkSet: a SyncStateSet holds the master and only registered replicas,
// each once.
func (g *group) checkSet(set []int64) error {
	if len(set) == 0 || len(set) > protocol.MaxSyncStateSet {
		return fmt.Errorf("a syncStateSet of %d brokers", len(set))
	}
	if !slices.Contains(set, g.masterID) {
		return fmt.Errorf("syncStateSet %v lacks the master %d", set, g.masterID)
	}
	for i, id := range set {
		if g.replicas[id] == nil {
			return fmt.Errorf("syncStateSet %v: broker %d is not registered", set, id)
		}
		if slices.Contains(set[:i], id) {
			return fmt.Errorf("syncStateSet %v: broker %d twice", set, id)
		}
	}
	return nil
}

func (s *State) elect(c *command) *result {
	g := s.groups[c.key()]
	switch {
	case g == nil:
		return refuse(protocol.StatusControllerBrokerMetadataNotExist, "no group %s/%s", c.Cluster, c.Group)
	case c.MasterEpoch != g.masterEpoch:
		return refuse(protocol.StatusControllerFencedMasterEpoch, "decided at master epoch %d, current %d", c.MasterEpoch, g.masterEpoch)
	case c.SetEpoch != g.setEpoch:
		return refuse(protocol.StatusControllerFencedSyncStateSetEpoch, "decided at syncStateSet epoch %d, current %d", c.SetEpoch, g.setEpoch)
	case g.replicas[c.NewMaster] == nil:
		return refuse(protocol.StatusControllerBrokerMetadataNotExist, "broker %d is not registered", c.NewMaster)
	case g.masterEpoch > 0 && !c.Unclean && !slices.Contains(g.set, c.NewMaster) &&
		!(c.Recovery && slices.Contains(g.recovery, c.NewMaster)):
		// A group that never had a master has no data to lose: its first
		// election may pick any replica.
		return refuse(protocol.StatusControllerInvalidReplicas, "broker %d is not in the syncStateSet %v", c.NewMaster, g.set)
	}
	oldEpoch, oldSet := g.masterEpoch, g.setEpoch
	pool := g.set
	if c.Recovery {
		pool = append(slices.Clone(g.set), g.recovery...)
	}
	g.recovery = sortedSet(slices.DeleteFunc(slices.Clone(pool), func(id int64) bool { return id == c.NewMaster }))
	if len(g.recovery) == 0 {
		g.recovery = nil
	}
	g.masterLacking = c.Lacking
	g.masterID = c.NewMaster
	g.masterEpoch++
	g.set = []int64{c.NewMaster}
	g.setEpoch++
	invariant.Check2(g.masterEpoch > oldEpoch, "master epoch %d after %d", g.masterEpoch, oldEpoch)
	invariant.Check2(g.setEpoch > oldSet, "syncStateSet epoch %d after %d", g.setEpoch, oldSet)
	return &result{Status: protocol.StatusOK, Changed: true, Info: g.info(c.NewMaster)}
}

func sortedSet(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// info is the group as the wire shows it, for broker id (the asker).
func (g *group) info(id int64) *protocol.ReplicaInfo {
	in := &protocol.ReplicaInfo{
		GroupRef:           protocol.GroupRef{ClusterName: g.key.cluster, BrokerName: g.key.name},
		BrokerID:           id,
		MasterID:           g.masterID,
		MasterEpoch:        g.masterEpoch,
		SyncStateSet:       slices.Clone(g.set),
		SyncStateSetEpoch:  g.setEpoch,
		MasterMayLackAcked: g.masterLacking,
		Replicas:           make([]protocol.Replica, 0, len(g.replicas)),
	}
	if m := g.replicas[g.masterID]; m != nil {
		in.MasterAddr, in.MasterHAAddr = m.addr, m.haAddr
	}
	for _, r := range g.sortedReplicas() {
		in.Replicas = append(in.Replicas, protocol.Replica{BrokerID: r.id, BrokerAddr: r.addr, HAServerAddr: r.haAddr})
	}
	return in
}

func (g *group) sortedReplicas() []*replica {
	out := make([]*replica, 0, len(g.replicas))
	for _, r := range g.replicas {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *replica) int { return cmp.Compare(a.id, b.id) })
	return out
}

// sortedGroups returns the groups by cluster and name: every walk over
// groups that produces output goes in this order, so that one input gives
// one output.
func (s *State) sortedGroups() []*group {
	out := make([]*group, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *group) int { return a.key.compare(b.key) })
	return out
}

// Group returns a group's replica info as applied here, and whether the
// group exists.
func (s *State) Group(cluster, name string) (protocol.ReplicaInfo, bool) {
	g := s.groups[groupKey{cluster: cluster, name: name}]
	if g == nil {
		return protocol.ReplicaInfo{}, false
	}
	return *g.info(protocol.NoBroker), true
}

// Groups returns every group's replica info, by cluster and name.
func (s *State) Groups() []protocol.ReplicaInfo {
	gs := s.sortedGroups()
	out := make([]protocol.ReplicaInfo, 0, len(gs))
	for _, g := range gs {
		out = append(out, *g.info(protocol.NoBroker))
	}
	return out
}
