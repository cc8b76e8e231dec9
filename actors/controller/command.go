package controller

import (
	"fmt"

	"github.com/wharfmq/wharf/protocol"
)

// Operations of a log entry.
const (
	opRegister = "register" // a broker joins a group and gets its id
	opAlter    = "alter"    // the master changes its SyncStateSet
	opElect    = "elect"    // the leader's election decision
)

// command is one raft log entry, msgpack-encoded (protocol.MarshalValue:
// canonical, so one command has one encoding). Origin and ID name the
// proposal, so that the Core that proposed it answers its request when it is
// applied; State ignores them. Fields not used by an Op are left out.
type command struct {
	Op      string `msgpack:"op"`
	Origin  uint64 `msgpack:"origin,omitempty"`
	ID      uint64 `msgpack:"id,omitempty"`
	Cluster string `msgpack:"cluster"`
	Group   string `msgpack:"group"`

	// opRegister.
	Identity string `msgpack:"identity,omitempty"`
	Addr     string `msgpack:"addr,omitempty"`
	HAAddr   string `msgpack:"haAddr,omitempty"`

	// opAlter: the request's view; opElect: the state the decision was
	// based on. Apply refuses the entry unless both epochs are current.
	MasterID    int64   `msgpack:"masterId,omitempty"`
	MasterEpoch int32   `msgpack:"masterEpoch,omitempty"`
	SetEpoch    int32   `msgpack:"setEpoch,omitempty"`
	Set         []int64 `msgpack:"set,omitempty"`

	// opElect: the broker to make master; Unclean allows one outside the
	// SyncStateSet (the leader's enableElectUncleanMaster, decided when it
	// proposed: Apply must not depend on a node's configuration).
	NewMaster int64 `msgpack:"newMaster,omitempty"`
	Unclean   bool  `msgpack:"unclean,omitempty"`
	// Lacking: the new master's log may lack acknowledged messages (its
	// heartbeat said so; it was chosen as the best of a fully heard set).
	// Recovery: it may come from the recovery set (the members before
	// the last election), because the master that election chose never
	// began its epoch.
	Lacking  bool `msgpack:"lacking,omitempty"`
	Recovery bool `msgpack:"recovery,omitempty"`
}

func (c *command) key() groupKey { return groupKey{cluster: c.Cluster, name: c.Group} }

// result is what Apply returns for an entry, msgpack-encoded: a status (and
// remark) as the request's answer, the group as it is after the entry, and
// whether the entry changed the group's master or SyncStateSet (brokers and
// name servers are then told).
type result struct {
	Status  protocol.Status       `msgpack:"status"`
	Remark  string                `msgpack:"remark,omitempty"`
	Changed bool                  `msgpack:"changed,omitempty"`
	Info    *protocol.ReplicaInfo `msgpack:"info,omitempty"`
}

// cmdLimits bound the decoding of entries and snapshots: a log entry is
// written by a leader of this code, but the bytes come from a disk and a
// network, so they are decoded as untrusted.
var cmdLimits = protocol.Limits{}

func encodeCommand(c *command) []byte {
	b, err := protocol.MarshalValue(c)
	if err != nil {
		// A command holds strings, integers and a slice: its encoding
		// cannot fail.
		panic(fmt.Errorf("controller: encode command: %w", err))
	}
	return b
}

func decodeCommand(b []byte) (*command, error) {
	var c command
	if err := protocol.UnmarshalValue(b, cmdLimits, &c); err != nil {
		return nil, fmt.Errorf("controller: decode command: %w", err)
	}
	return &c, nil
}

func encodeResult(r *result) []byte {
	b, err := protocol.MarshalValue(r)
	if err != nil {
		panic(fmt.Errorf("controller: encode result: %w", err))
	}
	return b
}

func decodeResult(b []byte) (*result, error) {
	var r result
	if err := protocol.UnmarshalValue(b, cmdLimits, &r); err != nil {
		return nil, fmt.Errorf("controller: decode result: %w", err)
	}
	return &r, nil
}
