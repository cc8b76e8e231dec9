// Package raftnode is the consensus under the controller: a member of a raft
// group on go.etcd.io/raft/v3 as a plain core, and its log on the FS seam.
// No goroutines, no clock reads, no protoactor: time, messages and the
// completion of I/O are inputs; messages, writes and results are outputs.
//
// # Node
//
// Inputs: Tick(now), called by the owner every Config.TickInterval; Step(now,
// msg) for a peer's message; Propose(id, data); ReadIndex(id); Compact(index,
// data) once the state machine has a snapshot at an applied index;
// Persisted(now) once the last Persist is durable. Output: Ready, drained
// after every input.
//
// The owner's loop, which honours raft's Ready contract:
//
//	rd := n.Ready()
//	restore the state machine from rd.Restore, if set
//	apply rd.Committed in order; answer the ones with an ID
//	serve rd.Reads once applied >= Index; answer rd.Dropped NOT_LEADER
//	send rd.Messages
//	if !rd.Persist.Empty(): Log.Save(rd.Persist) (through kit.io), then n.Persisted(now)
//
// Node holds back everything a raft Ready produced (its messages, its
// committed entries, its read states) until the owner reports that Ready's
// entries, hard state and snapshot persisted, then releases them and calls
// Advance: nothing is sent before the state it depends on is durable, and
// entries are applied in order, each once. While a Persist is outstanding no
// other is handed out, so writes are never reordered. A failed write is not
// an input: raft cannot continue after a storage error, so the owner drops
// the Node and recovers a new one from the Log.
//
// Proposals carry (proposer, id) in an envelope; a Committed has the
// proposal's ID when this node proposed it in this life and term, so a
// restarted node never answers an old entry for a new request. Dropped
// reasons: NotLeader (never entered the log) and LeadershipLost (the node
// stopped serving with the proposal in flight; it may still commit, so the
// request layer must treat the outcome as unknown).
//
// # Determinism
//
// raft draws each randomized election timeout from crypto/rand through a
// package global (raft.go, globalRand), with no setter outside its tests; the
// value is read in one place, tickElection, the tick of followers and
// candidates. Node never calls RawNode.Tick unless raft is leader (whose
// tick, tickHeartbeat, does not read it), so raft never campaigns by itself
// and the drawn value never matters. Node keeps its own election timer
// instead, drawn from [ElectionTimeout, 2*ElectionTimeout) by a math/rand/v2
// PCG seeded from Config.Seed and the node id (the simulator passes its seed,
// production a random one), reset by every message from a leader of the
// current term or later, by granting a vote and by campaigning; on expiry it
// calls Campaign. One seed, one trace (TestSameSeedSameTrace).
//
// CheckQuorum must then be off: its leader side counts ticks, but its
// follower side (the vote lease: ignore votes while a leader was heard within
// an election timeout) counts followers' ticks, which never happen, so
// followers would ignore every vote forever. PreVote is on. Node keeps both
// halves of CheckQuorum on its own clock:
//
//   - Vote lease (inLease): a (pre-)vote request for a higher term is dropped
//     by a follower that heard from its leader within ElectionTimeout, and by
//     a leader that is serving. PreVote alone grants a pre-vote to any peer
//     whose log is up to date, so without the lease a follower that was cut
//     off while nothing was written could depose a working leader when its
//     pre-vote races the leader's first heartbeat after the partition heals.
//     Leadership transfer votes pass, as in raft.
//   - Leader quorum: a leader serves (Status.Serving) only while a quorum,
//     itself included, was heard from within ElectionTimeout (a new leader
//     gets one timeout of grace); otherwise it refuses proposals and reads
//     (NotLeader), drops those in flight, and on its next Tick steps down: a
//     new RawNode on the persisted state, a follower of no one in the same
//     term, which is what CheckQuorum's step-down is and what a restart does
//     (lost: unpersisted proposals, already dropped, and pending reads).
//     Safety does not depend on this: a deposed leader cannot commit (a
//     quorum's acks in its term are needed) and cannot answer a ReadIndex
//     (ReadOnlySafe waits for a quorum's heartbeat acks after the read
//     arrived). Liveness does: a leader that can send but not receive would
//     otherwise heartbeat forever and keep every follower's timer quiet
//     (TestLeaderThatCannotHearStepsDown). Stepping down by injecting a
//     higher-term message was rejected: the term bump would make the node
//     depose a healthy leader when it rejoins.
//
// Serving is a hint, not a lease that excludes another leader: a leader
// stops serving at most ElectionTimeout plus one tick after the last answer
// it got from a quorum, while a member of that quorum may vote for another as
// soon as ElectionTimeout passed since it last heard the old leader, which can
// be earlier by the answer's delay; so two nodes may both report Serving for
// up to one message delay plus one tick. Nothing rests on that: commands and
// reads are linearizable through raft's quorums, and the controller's own
// leases (the brokers' master lease) are decided by committed entries.
//
// # Log
//
// Log keeps entries, hard state and snapshots in segment files of CRC-framed
// records on vfs.FS; see Log for the layout. A snapshot (installed from the
// leader, or a compaction) rewrites the log: a new base segment holding the
// hard state, the snapshot and the entries after it, written to a temp file,
// synced, renamed and its directory synced, after which older segments are
// removed. Only the newest segment can have a torn tail, which recovery
// truncates at its first bad record; damage anywhere else is an error, never
// a silent cut. The decoder reads untrusted bytes (FuzzLogSegment,
// FuzzRecordPayloads); TestLogCrashLoop crashes a workload at every
// file-system operation under three write-back models.
//
// Not done here: membership changes (the group's voters are fixed at
// bootstrap: a snapshot at index 1 with Config.Peers, the same on every
// member), leadership transfer, and followers answering ReadIndex (they
// refuse with NotLeader; the request layer goes to the leader).
//
// Imports: std, go.etcd.io/raft/v3, storage/vfs, internal/invariant.
package raftnode
