package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/wharfmq/wharf/internal/invariant"
)

// Config configures a Node.
type Config struct {
	ID uint64
	// Peers are the voters (this node included) of a new group. Once the log
	// holds a snapshot, its configuration is used instead.
	Peers []uint64
	// TickInterval is how often the owner calls Tick; the leader sends a
	// heartbeat every tick.
	TickInterval time.Duration
	// ElectionTimeout is the base election timeout: a follower campaigns
	// after hearing nothing from a leader for a time drawn from
	// [ElectionTimeout, 2*ElectionTimeout), and a leader stops serving when a
	// quorum has been silent for ElectionTimeout.
	ElectionTimeout time.Duration
	// Seed seeds the node's election timer: the simulator passes its seed,
	// production a random one.
	Seed uint64
	// MaxSizePerMsg and MaxInflightMsgs are raft's flow control; zero means
	// 1 MiB and 256.
	MaxSizePerMsg   uint64
	MaxInflightMsgs int
	// Logger receives raft's logs; nil discards them (panics still panic).
	Logger raft.Logger
}

// Ready is a Node's output since the last call to Ready.
type Ready struct {
	// Persist must be durable (Log.Save) before Persisted is called; while
	// it is outstanding no later Ready carries another Persist, and the
	// messages and entries that depend on it wait.
	Persist Persist
	// Restore, when set, replaces the state machine's state with the
	// snapshot's data; it comes before Committed.
	Restore *pb.Snapshot
	// Messages to send to peers, after everything persisted so far.
	Messages []*pb.Message
	// Committed entries, to apply in order before the next Ready.
	Committed []Committed
	// Reads are ReadIndex answers: serve the read once the state machine has
	// applied Index.
	Reads []Read
	// Dropped proposals and reads, to answer NOT_LEADER.
	Dropped []Dropped
	// Status is set when the leader, the term or serving changed.
	Status *Status
	// Applied, when not 0, is how far the log is applied now, counting the
	// entries that reach no state machine (a new leader's empty entry):
	// reads at or below it may be served. A read's Index is the commit
	// index, often such an entry's, so the owner must not wait for a
	// Committed at that index, which may never come.
	Applied uint64
}

// Empty reports whether rd holds nothing.
func (rd Ready) Empty() bool {
	return rd.Persist.Empty() && rd.Restore == nil && len(rd.Messages) == 0 && len(rd.Committed) == 0 &&
		len(rd.Reads) == 0 && len(rd.Dropped) == 0 && rd.Status == nil && rd.Applied == 0
}

// Committed is one committed command.
type Committed struct {
	Index, Term uint64
	Data        []byte
	// ID is the proposal's id when this node proposed it in this life (its
	// request waits for the result); 0 otherwise.
	ID uint64
}

// Read answers ReadIndex(ID).
type Read struct{ ID, Index uint64 }

// DropReason says what a dropped request's outcome is.
type DropReason int

const (
	// NotLeader: refused, never entered the log.
	NotLeader DropReason = iota + 1
	// LeadershipLost: the node stopped serving while the proposal was in
	// flight; it may still commit under the next leader (its ID is then 0).
	LeadershipLost
)

func (r DropReason) String() string {
	switch r {
	case NotLeader:
		return "not-leader"
	case LeadershipLost:
		return "leadership-lost"
	}
	return fmt.Sprintf("DropReason(%d)", int(r))
}

// Dropped is a proposal or read the node will not answer.
type Dropped struct {
	ID     uint64
	Read   bool // a ReadIndex, else a proposal
	Reason DropReason
}

// Status is the node's view of the group.
type Status struct {
	Lead, Term uint64
	// Serving: this node is raft leader and heard from a quorum within the
	// election timeout, so it takes proposals and reads.
	Serving bool
}

// Node is a raft group member as a plain core: raft.RawNode over a
// raft.MemoryStorage, its own election timer, and the bookkeeping that turns
// raft's Ready into the owner's. Not safe for concurrent use.
type Node struct {
	cfg    Config
	rn     *raft.RawNode
	ms     *raft.MemoryStorage
	rng    *rand.Rand
	voters []uint64
	now    time.Time

	persisting bool         // a Persist was handed out and not yet Persisted
	inflight   *raft.Ready  // the raft Ready it belongs to, nil for a compaction
	compact    *pb.Snapshot // a compaction waiting for its turn to persist
	compacting *pb.Snapshot // the compaction being persisted
	applied    uint64
	appliedOut uint64 // applied as last reported in a Ready
	out        Ready

	props map[uint64]uint64 // pending proposal id -> term proposed in
	reads map[uint64]bool   // pending read ids

	deadline    time.Time // follower or candidate: campaign at this time
	leaderHeard time.Time // last message from the current leader
	peerHeard   map[uint64]time.Time
	leaseOK     bool
	reported    Status
}

// NewNode starts a node on what OpenLog recovered. A new node (empty rec)
// bootstraps from a snapshot at index 1 holding cfg.Peers, the same on every
// member, and asks for it to be persisted first.
func NewNode(cfg Config, rec Recovered, now time.Time) (*Node, error) {
	if cfg.ID == 0 || cfg.TickInterval <= 0 || cfg.ElectionTimeout < 2*cfg.TickInterval {
		return nil, fmt.Errorf("raft node: bad config (id %d, tick %v, election %v)",
			cfg.ID, cfg.TickInterval, cfg.ElectionTimeout)
	}
	n := &Node{cfg: cfg, ms: raft.NewMemoryStorage(), rng: rand.New(rand.NewPCG(cfg.Seed, cfg.ID)),
		props: map[uint64]uint64{}, reads: map[uint64]bool{}, peerHeard: map[uint64]time.Time{}, now: now}
	snap := rec.Snapshot
	if snap == nil {
		if len(cfg.Peers) == 0 {
			return nil, errors.New("raft node: a new group needs peers")
		}
		snap = &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(1)), Term: new(uint64(1)),
			ConfState: pb.EnsureConfState(&pb.ConfState{Voters: cfg.Peers})}}
		n.out.Persist = Persist{Snapshot: snap, Sync: true}
		n.persisting = true
	}
	if err := n.loadStorage(snap, rec); err != nil {
		return nil, err
	}
	rn, err := raft.NewRawNode(n.raftConfig())
	if err != nil {
		return nil, fmt.Errorf("raft node %d: %w", cfg.ID, err)
	}
	n.rn = rn
	n.resetElectionTimer()
	return n, nil
}

func (n *Node) loadStorage(snap *pb.Snapshot, rec Recovered) error {
	if err := n.ms.ApplySnapshot(snap); err != nil {
		return fmt.Errorf("raft node %d: load snapshot: %w", n.cfg.ID, err)
	}
	if len(rec.Entries) > 0 {
		if err := n.ms.Append(rec.Entries); err != nil {
			return fmt.Errorf("raft node %d: load entries: %w", n.cfg.ID, err)
		}
	}
	if rec.HardState != nil {
		if err := n.ms.SetHardState(rec.HardState); err != nil {
			return fmt.Errorf("raft node %d: load hard state: %w", n.cfg.ID, err)
		}
	}
	n.voters = snap.GetMetadata().GetConfState().GetVoters()
	n.applied = snap.GetMetadata().GetIndex()
	n.out.Restore = snap
	return nil
}

// raftConfig is the heart of the determinism argument (doc.go): raft's own
// election timer never fires because only a leader's raft is ticked, and
// CheckQuorum is off because its lease would need followers' raft ticked.
func (n *Node) raftConfig() *raft.Config {
	logger := n.cfg.Logger
	if logger == nil {
		logger = discardLogger{}
	}
	maxSize, inflight := n.cfg.MaxSizePerMsg, n.cfg.MaxInflightMsgs
	if maxSize == 0 {
		maxSize = 1 << 20
	}
	if inflight == 0 {
		inflight = 256
	}
	return &raft.Config{
		ID:                        n.cfg.ID,
		ElectionTick:              max(2, int(n.cfg.ElectionTimeout/n.cfg.TickInterval)),
		HeartbeatTick:             1,
		Storage:                   n.ms,
		Applied:                   n.applied,
		MaxSizePerMsg:             maxSize,
		MaxInflightMsgs:           inflight,
		CheckQuorum:               false,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		Logger:                    logger,
	}
}

// Tick advances time: the leader's raft heartbeats and checks its quorum;
// anyone else campaigns when its election timer expired.
func (n *Node) Tick(now time.Time) {
	n.now = now
	if n.rn.BasicStatus().RaftState == raft.StateLeader {
		if !n.quorumHeard() && !n.persisting {
			n.stepDown()
		} else {
			n.rn.Tick()
		}
	} else if !now.Before(n.deadline) {
		// Campaign only errors for a node outside the configuration.
		_ = n.rn.Campaign()
		n.resetElectionTimer()
	}
	n.observe()
}

// Step feeds a message from a peer.
func (n *Node) Step(now time.Time, m *pb.Message) error {
	n.now = now
	if m.GetTo() != n.cfg.ID {
		return fmt.Errorf("raft node %d: message for %d", n.cfg.ID, m.GetTo())
	}
	st := n.rn.BasicStatus()
	if n.inLease(m, st) {
		return nil
	}
	switch m.GetType() {
	case pb.MsgApp, pb.MsgHeartbeat, pb.MsgSnap:
		if m.GetTerm() >= st.GetTerm() {
			n.leaderHeard = now
			n.resetElectionTimer()
		}
	}
	if st.RaftState == raft.StateLeader && m.GetTerm() == st.GetTerm() {
		n.peerHeard[m.GetFrom()] = now
	}
	err := n.rn.Step(m)
	n.observe()
	if err != nil {
		return fmt.Errorf("raft node %d: step %v from %d: %w", n.cfg.ID, m.GetType(), m.GetFrom(), err)
	}
	return nil
}

// stepDown makes a leader that lost its quorum a follower of no one in the
// same term, as CheckQuorum would: by starting a new RawNode on the
// persisted state, which is what a restart does. What is lost is what a
// crash would lose and no one was promised: unpersisted proposals (dropped
// as LeadershipLost by observe), pending reads, followers' progress.
// Without it, a leader that can send but not receive would keep every
// follower's timer quiet forever.
func (n *Node) stepDown() {
	rn, err := raft.NewRawNode(n.raftConfig())
	invariant.Check1(err == nil, "raft node: restart on persisted state failed: %v", err)
	n.rn = rn
	n.resetElectionTimer()
}

// inLease reports whether m is a (pre-)vote request to ignore because this
// node knows a live leader: CheckQuorum's vote lease, kept here on the
// node's own clock. It keeps a node that rejoins with an up-to-date log from
// deposing a working leader, which PreVote alone does not.
func (n *Node) inLease(m *pb.Message, st raft.BasicStatus) bool {
	if m.GetType() != pb.MsgVote && m.GetType() != pb.MsgPreVote || m.GetTerm() <= st.GetTerm() {
		return false
	}
	if string(m.GetContext()) == campaignTransfer {
		return false
	}
	if st.RaftState == raft.StateLeader {
		return n.leaseOK
	}
	return st.Lead != raft.None && n.now.Sub(n.leaderHeard) < n.cfg.ElectionTimeout
}

// Propose proposes data under id (unique among this node's pending
// proposals). The result is a Committed with that id, or a Dropped.
func (n *Node) Propose(id uint64, data []byte) {
	if !n.reported.Serving {
		n.drop(id, false, NotLeader)
		return
	}
	if err := n.rn.Propose(envelope(n.cfg.ID, id, data)); err != nil {
		n.drop(id, false, NotLeader)
		return
	}
	n.props[id] = n.reported.Term
}

// ReadIndex asks for a linearizable read point: a Read with the index to
// wait for, or a Dropped.
func (n *Node) ReadIndex(id uint64) {
	if !n.reported.Serving {
		n.drop(id, true, NotLeader)
		return
	}
	n.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, id))
	n.reads[id] = true
}

// Compact records a snapshot of the state machine at applied index, so that
// the log (on disk and in memory) can drop what it covers. A snapshot no
// newer than one already taken or under way is ignored.
func (n *Node) Compact(index uint64, data []byte) error {
	if index > n.applied {
		return fmt.Errorf("raft node %d: compact at %d past applied %d", n.cfg.ID, index, n.applied)
	}
	latest := max(n.snapshotIndex(), n.compact.GetMetadata().GetIndex(), n.compacting.GetMetadata().GetIndex())
	if index <= latest {
		return nil
	}
	term, err := n.ms.Term(index)
	if err != nil {
		return fmt.Errorf("raft node %d: compact at %d: %w", n.cfg.ID, index, err)
	}
	cs := pb.EnsureConfState(&pb.ConfState{Voters: n.voters})
	n.compact = &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{ConfState: cs, Index: new(index), Term: new(term)}}
	return nil
}

func (n *Node) snapshotIndex() uint64 {
	s, _ := n.ms.Snapshot() // MemoryStorage never fails here
	return s.GetMetadata().GetIndex()
}

// Status is the node's current view of the group.
func (n *Node) Status() Status { return n.reported }

func (n *Node) drop(id uint64, read bool, why DropReason) {
	n.out.Dropped = append(n.out.Dropped, Dropped{ID: id, Read: read, Reason: why})
}

func (n *Node) resetElectionTimer() {
	e := n.cfg.ElectionTimeout
	n.deadline = n.now.Add(e + time.Duration(n.rng.Int64N(int64(e))))
}

// observe reports leadership changes and keeps the leader's quorum lease:
// the leader serves only while a quorum (itself included) was heard from
// within the election timeout. Losing it drops the pending requests.
func (n *Node) observe() {
	st := n.rn.BasicStatus()
	leader := st.RaftState == raft.StateLeader
	if leader && (!n.reported.Serving && n.reported.Lead != n.cfg.ID || n.reported.Term != st.GetTerm()) {
		for _, p := range n.voters {
			n.peerHeard[p] = n.now // a new leader gets one timeout of grace
		}
	}
	n.leaseOK = leader && n.quorumHeard()
	now := Status{Lead: st.Lead, Term: st.GetTerm(), Serving: n.leaseOK}
	if now == n.reported {
		return
	}
	if n.reported.Lead == n.cfg.ID && !leader {
		n.resetElectionTimer() // a deposed leader starts its follower timer
	}
	if n.reported.Serving && !now.Serving {
		for id := range n.props {
			n.drop(id, false, LeadershipLost)
		}
		for id := range n.reads {
			n.drop(id, true, NotLeader)
		}
		clear(n.props)
		clear(n.reads)
		sortDropped(n.out.Dropped)
	}
	n.reported = now
	n.out.Status = &now
}

func (n *Node) quorumHeard() bool {
	heard := 0
	for _, p := range n.voters {
		if p == n.cfg.ID || n.now.Sub(n.peerHeard[p]) < n.cfg.ElectionTimeout {
			heard++
		}
	}
	return heard >= len(n.voters)/2+1
}

// sortDropped orders drops by id, since they were collected from maps and
// one seed must give one trace.
func sortDropped(ds []Dropped) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && (ds[j].ID < ds[j-1].ID || ds[j].ID == ds[j-1].ID && !ds[j].Read && ds[j-1].Read); j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}

// Ready returns the outputs collected since the last call.
func (n *Node) Ready() Ready {
	for !n.persisting {
		if n.compact != nil {
			n.startCompaction()
			break
		}
		if !n.rn.HasReady() {
			break
		}
		rd := n.rn.Ready()
		p := Persist{HardState: nonEmpty(rd.HardState), Snapshot: nonEmptySnap(rd.Snapshot),
			Entries: rd.Entries, Sync: rd.MustSync}
		n.inflight = &rd
		if !p.Empty() {
			n.out.Persist, n.persisting = p, true
			break
		}
		n.release()
	}
	n.observe()
	if n.applied != n.appliedOut {
		n.out.Applied, n.appliedOut = n.applied, n.applied
	}
	out := n.out
	n.out = Ready{}
	return out
}

// startCompaction asks for the log to restart from the compaction snapshot,
// followed by the persisted entries after it.
func (n *Node) startCompaction() {
	index := n.compact.GetMetadata().GetIndex()
	last, _ := n.ms.LastIndex()
	ents, err := n.ms.Entries(index+1, last+1, ^uint64(0))
	invariant.Check1(err == nil, "raft node: persisted entries after the compaction point unreadable: %v", err)
	hs, _, _ := n.ms.InitialState()
	n.out.Persist = Persist{HardState: hs, Snapshot: n.compact, Entries: ents, Sync: true}
	n.persisting, n.compacting, n.compact = true, n.compact, nil
}

// Persisted tells the node that the last Ready's Persist is durable. A
// failed write is not reported: the owner must drop the node and recover a
// new one from the Log, as raft cannot go on after a storage error.
func (n *Node) Persisted(now time.Time) {
	invariant.Check(n.persisting, "raft node: Persisted without an outstanding Persist")
	n.now = now
	n.persisting = false
	switch {
	case n.compacting != nil:
		snap := n.compacting
		n.compacting = nil
		_, err := n.ms.CreateSnapshot(snap.GetMetadata().GetIndex(), snap.GetMetadata().GetConfState(), snap.GetData())
		invariant.Check1(err == nil, "raft node: compaction snapshot refused: %v", err)
		err = n.ms.Compact(snap.GetMetadata().GetIndex())
		invariant.Check1(err == nil, "raft node: compaction refused: %v", err)
	case n.inflight != nil:
		n.release()
	}
	n.observe()
}

// release hands out what the persisted raft Ready held, in raft's order:
// storage first, then messages, committed entries and read states, then
// Advance.
func (n *Node) release() {
	rd := *n.inflight
	n.inflight = nil
	if s := nonEmptySnap(rd.Snapshot); s != nil {
		err := n.ms.ApplySnapshot(s)
		invariant.Check1(err == nil, "raft node: snapshot from raft refused: %v", err)
		n.voters = s.GetMetadata().GetConfState().GetVoters()
		n.applied = s.GetMetadata().GetIndex()
		n.out.Restore = s
		n.compact = nil // older than what raft installed
	}
	if len(rd.Entries) > 0 {
		err := n.ms.Append(rd.Entries)
		invariant.Check1(err == nil, "raft node: entries from raft refused: %v", err)
	}
	if hs := nonEmpty(rd.HardState); hs != nil {
		err := n.ms.SetHardState(hs)
		invariant.Check1(err == nil, "raft node: hard state refused: %v", err)
	}
	for _, m := range rd.Messages {
		if m.GetType() == pb.MsgVoteResp && !m.GetReject() {
			n.resetElectionTimer() // as raft does when it grants a vote
		}
	}
	n.out.Messages = append(n.out.Messages, rd.Messages...)
	for _, e := range rd.CommittedEntries {
		n.apply(e)
	}
	for _, rs := range rd.ReadStates {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(rs.RequestCtx)
		if n.reads[id] {
			delete(n.reads, id)
			n.out.Reads = append(n.out.Reads, Read{ID: id, Index: rs.Index})
		}
	}
	n.rn.Advance(rd)
}

func (n *Node) apply(e *pb.Entry) {
	invariant.Check2(e.GetIndex() == n.applied+1, "raft node: committed entry %d after applied %d", e.GetIndex(), n.applied)
	n.applied = e.GetIndex()
	if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
		return // a new leader's empty entry; no configuration changes are proposed
	}
	origin, id, data, err := openEnvelope(e.GetData())
	invariant.Check1(err == nil, "raft node: committed entry not in an envelope: %v", err)
	c := Committed{Index: e.GetIndex(), Term: e.GetTerm(), Data: data}
	if term, ok := n.props[id]; ok && origin == n.cfg.ID && term == e.GetTerm() {
		c.ID = id
		delete(n.props, id)
	}
	n.out.Committed = append(n.out.Committed, c)
}

// envelope prefixes a command with its proposer and proposal id, so that a
// committed entry finds its request. (Proposer, term, id) is unique across
// restarts: a restarted node leads again only in a higher term.
func envelope(origin, id uint64, data []byte) []byte {
	b := binary.AppendUvarint(nil, origin)
	b = binary.AppendUvarint(b, id)
	return append(b, data...)
}

func openEnvelope(b []byte) (origin, id uint64, data []byte, err error) {
	d := decoder{b: b}
	origin, id = d.uvarint(), d.uvarint()
	return origin, id, d.b, d.err
}

func nonEmpty(hs *pb.HardState) *pb.HardState {
	if raft.IsEmptyHardState(hs) {
		return nil
	}
	return hs
}

func nonEmptySnap(s *pb.Snapshot) *pb.Snapshot {
	if s == nil || raft.IsEmptySnap(s) {
		return nil
	}
	return s
}

// campaignTransfer is raft's context of a leadership transfer's vote,
// which a lease must not block.
const campaignTransfer = "CampaignTransfer"

// discardLogger drops raft's logs but keeps its fatal paths fatal.
type discardLogger struct{}

func (discardLogger) Debug(...any)            {}
func (discardLogger) Debugf(string, ...any)   {}
func (discardLogger) Error(...any)            {}
func (discardLogger) Errorf(string, ...any)   {}
func (discardLogger) Info(...any)             {}
func (discardLogger) Infof(string, ...any)    {}
func (discardLogger) Warning(...any)          {}
func (discardLogger) Warningf(string, ...any) {}
func (discardLogger) Fatal(v ...any)          { panic(fmt.Sprint(v...)) }
func (discardLogger) Fatalf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
func (discardLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (discardLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
