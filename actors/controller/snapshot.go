package controller

import (
	"errors"
	"fmt"
	"slices"

	"github.com/wharfmq/wharf/protocol"
)

// snapshotVersion is the format of Snapshot's bytes; Restore refuses others.
const snapshotVersion = 1

// ErrSnapshot is wrapped by Restore's errors: the bytes are not a snapshot
// of this format, or describe a state that cannot be (a master that is not
// registered, a set with an unknown broker, duplicate ids).
var ErrSnapshot = errors.New("controller: bad snapshot")

type snapshot struct {
	Version int         `msgpack:"version"`
	Applied uint64      `msgpack:"applied"`
	Groups  []snapGroup `msgpack:"groups"` // by cluster and name
}

type snapGroup struct {
	Cluster     string        `msgpack:"cluster"`
	Name        string        `msgpack:"name"`
	NextID      int64         `msgpack:"nextId"`
	MasterID    int64         `msgpack:"masterId"`
	MasterEpoch int32         `msgpack:"masterEpoch"`
	Set         []int64       `msgpack:"set"`
	SetEpoch    int32         `msgpack:"setEpoch"`
	Replicas    []snapReplica `msgpack:"replicas"` // by id
	// Recovery and MasterLacking came after version 1's first form:
	// omitted when empty, so older snapshots read the same.
	Recovery      []int64 `msgpack:"recovery,omitempty"`
	MasterLacking bool    `msgpack:"masterLacking,omitempty"`
}

type snapReplica struct {
	ID       int64  `msgpack:"id"`
	Identity string `msgpack:"identity"`
	Addr     string `msgpack:"addr"`
	HAAddr   string `msgpack:"haAddr,omitempty"`
}

// Snapshot encodes the whole state, including Applied. The encoding is
// canonical: equal states give equal bytes.
func (s *State) Snapshot() ([]byte, error) {
	snap := snapshot{Version: snapshotVersion, Applied: s.applied, Groups: []snapGroup{}}
	for _, g := range s.sortedGroups() {
		sg := snapGroup{Cluster: g.key.cluster, Name: g.key.name, NextID: g.nextID, MasterID: g.masterID,
			MasterEpoch: g.masterEpoch, Set: slices.Clone(g.set), SetEpoch: g.setEpoch, Replicas: []snapReplica{},
			Recovery: slices.Clone(g.recovery), MasterLacking: g.masterLacking}
		for _, r := range g.sortedReplicas() {
			sg.Replicas = append(sg.Replicas, snapReplica{ID: r.id, Identity: r.identity, Addr: r.addr, HAAddr: r.haAddr})
		}
		snap.Groups = append(snap.Groups, sg)
	}
	b, err := protocol.MarshalValue(&snap)
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot: %w", err)
	}
	return b, nil
}

// Restore replaces the state with a snapshot's. On error the state is
// unchanged.
func (s *State) Restore(b []byte) error {
	var snap snapshot
	if err := protocol.UnmarshalValue(b, cmdLimits, &snap); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if snap.Version != snapshotVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrSnapshot, snap.Version, snapshotVersion)
	}
	groups := make(map[groupKey]*group, len(snap.Groups))
	for i := range snap.Groups {
		g, err := restoreGroup(&snap.Groups[i])
		if err != nil {
			return err
		}
		if groups[g.key] != nil {
			return fmt.Errorf("%w: group %s/%s twice", ErrSnapshot, g.key.cluster, g.key.name)
		}
		groups[g.key] = g
	}
	s.groups, s.applied = groups, snap.Applied
	return nil
}

func restoreGroup(sg *snapGroup) (*group, error) {
	g := &group{key: groupKey{cluster: sg.Cluster, name: sg.Name}, replicas: map[int64]*replica{},
		byIdentity: map[string]int64{}, nextID: sg.NextID, masterID: sg.MasterID,
		masterEpoch: sg.MasterEpoch, set: sg.Set, setEpoch: sg.SetEpoch, recovery: sg.Recovery, masterLacking: sg.MasterLacking}
	bad := func(format string, args ...any) (*group, error) {
		return nil, fmt.Errorf("%w: group %s/%s: %s", ErrSnapshot, sg.Cluster, sg.Name, fmt.Sprintf(format, args...))
	}
	if sg.Cluster == "" || sg.Name == "" || sg.NextID < 1 || sg.MasterEpoch < 0 || sg.SetEpoch < 0 {
		return bad("bad name, next id %d or epochs %d/%d", sg.NextID, sg.MasterEpoch, sg.SetEpoch)
	}
	for _, r := range sg.Replicas {
		if r.ID < 1 || r.ID >= sg.NextID || r.Identity == "" || g.replicas[r.ID] != nil {
			return bad("replica %d (next id %d)", r.ID, sg.NextID)
		}
		if _, dup := g.byIdentity[r.Identity]; dup {
			return bad("identity %q twice", r.Identity)
		}
		g.replicas[r.ID] = &replica{id: r.ID, identity: r.Identity, addr: r.Addr, haAddr: r.HAAddr}
		g.byIdentity[r.Identity] = r.ID
	}
	if g.masterID == protocol.NoBroker {
		if len(g.set) != 0 || g.masterEpoch != 0 {
			return bad("no master but epoch %d and set %v", g.masterEpoch, g.set)
		}
		return g, nil
	}
	if g.masterEpoch == 0 {
		return bad("master %d at epoch 0", g.masterID)
	}
	if g.replicas[g.masterID] == nil {
		return bad("master %d not registered", g.masterID)
	}
	if err := g.checkSet(g.set); err != nil {
		return bad("%v", err)
	}
	g.set = sortedSet(g.set)
	for _, id := range g.recovery {
		if g.replicas[id] == nil || id == g.masterID {
			return bad("recovery set %v: broker %d", g.recovery, id)
		}
	}
	if len(g.recovery) == 0 {
		g.recovery = nil
	}
	g.recovery = sortedSet(g.recovery)
	return g, nil
}
