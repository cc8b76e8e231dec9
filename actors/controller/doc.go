// Package controller is the controller's logic as plain cores: the
// replicated state machine (State) and the leader-side request core (Core).
// No goroutines, no clock (time is an input), no raft and no actors: the
// raft plumbing is actors/raftnode's, and the actor that glues the two feeds
// committed entries to State and Core and runs their outputs.
//
// # State: the replicated state machine
//
//	func (s *State) Apply(index uint64, cmd []byte) (result []byte)
//	func (s *State) Snapshot() ([]byte, error)
//	func (s *State) Restore(snap []byte) error
//
// Every controller node applies the committed entries in log order, so
// every node holds the same State and Apply returns the same result bytes
// on each: Apply depends on nothing but the state and the entry (not on the
// clock, a node's configuration or map order), and Snapshot's encoding is
// canonical. Apply never panics on bad bytes: an entry that does not decode
// gets a CONTROLLER_INVALID_REQUEST result and changes nothing. An empty
// entry, and an index at or below Applied() (a replay after Restore),
// change nothing and return nil.
//
// Per broker group (cluster, brokerName) the State holds the replicas
// (brokerId -> identity, address, HA address), the master (brokerId, or
// protocol.NoBroker before the first election), the master epoch, the
// SyncStateSet and its epoch. Entries (msgpack, command.go) are:
//   - register: a broker joins with its identity, a value it generates once
//     and keeps in its store directory. The controller assigns brokerIds
//     from 1 per group, one per identity, for good: a broker keeps its id
//     across restarts and address changes, and a broker whose store was
//     wiped (its data gone) comes back as a new replica with a new id.
//   - alter: the master's new SyncStateSet. Refused unless the entry's
//     master epoch and set epoch are the current ones (the FENCED statuses)
//     and its master is the master; the set must hold the master and only
//     registered replicas. It takes effect with syncStateSetEpoch+1.
//   - elect: the leader's election decision, with the epochs it was based
//     on. Refused unless both epochs are still current, so that of two
//     racing decisions (two leaders, two scans) at most one applies; the new
//     master must be in the SyncStateSet unless the entry says unclean (the
//     leader's enableElectUncleanMaster) or the group never had a master.
//     It takes effect as masterEpoch+1, syncStateSetEpoch+1, set = {master}.
//
// # Core: the leader's request handling
//
// Inputs: Request(now, reqID, req), Applied(index, cmd, result) after
// State.Apply of every committed entry, ReadDone(readID) when a ReadIndex it
// asked for is confirmed and applied, Leader(now, isLeader, leaderAddr),
// Tick(now). Output: Ready() with Proposals to hand to raft, Reads (ask raft
// for a ReadIndex with each ID), Replies, Notify (NOTIFY_BROKER_ROLE_CHANGED
// to a group's brokers and to the name servers) and Timer (when to Tick).
//
// Rules:
//   - On a node that does not lead, every request but GET_METADATA_INFO is
//     answered CONTROLLER_NOT_LEADER with the leader's address as remark.
//   - Heartbeats are leader-local, never raft entries. A new leader starts
//     with none, so it elects nobody before a full heartbeat timeout
//     (DefaultHeartbeatTimeout, 3 s) has passed since it became leader; a
//     group that never had a master is exempt (it has no data to lose).
//   - On Tick, a group whose master's last heartbeat is older than the
//     timeout (or that has no master) gets an election, one decision in
//     flight per group: among the live members of the SyncStateSet, by epoch
//     desc, maxOffset desc, election priority asc, brokerId asc; any live
//     replica only with Config.ElectUnclean. The decision is a proposal and
//     takes effect only when applied.
//   - REGISTER, ALTER_SYNC_STATE_SET and ELECT_MASTER are answered when
//     their entry is applied, with the entry's result; one not applied
//     within the request timeout is answered SYSTEM_BUSY (outcome unknown:
//     the broker reads the replica info).
//   - GET_REPLICA_INFO and the heartbeat's answer go through ReadIndex: a
//     deposed leader never answers from a stale state, and never renews a
//     master's lease (the heartbeat itself is recorded at once: an
//     election counts the silence from the last heartbeat received).
//     While an election entry this leader proposed for the group may still
//     commit (proposed, neither applied nor dropped before entering the
//     log), the master's heartbeat is answered SYSTEM_BUSY: its ReadIndex
//     may be below the election's entry, and an OK would renew the lease
//     of a master already being replaced.
//   - Config.Faults.ElectOutsideSyncStateSet is the simulator's planted bug.
//
// Proposals carry Config.Origin and an ID so that the proposing Core knows
// its own entries when every node applies them.
//
// Imports: std, protocol and internal/invariant only.
package controller
