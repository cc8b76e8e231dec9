package raftnode

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/wharfmq/wharf/storage/vfs"
)

// The harness runs N Nodes on one goroutine: virtual time in fixed ticks, a
// seeded network that delays, drops, reorders and partitions, each node's Log
// on its own crashable Mem FS, and a key-value state machine per node.

const (
	tick     = 10 * time.Millisecond
	election = 100 * time.Millisecond
	logDir   = "/raft"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// kv is the test's state machine: commands are "key=value".
type kv struct {
	Data    map[string]string
	Applied uint64
}

func (s *kv) restore(data []byte, index uint64) error {
	s.Data, s.Applied = map[string]string{}, index
	if len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, &s.Data)
}

func (s *kv) apply(c Committed) {
	k, v, _ := strings.Cut(string(c.Data), "=")
	s.Data[k], s.Applied = v, c.Index
}

type member struct {
	id      uint64
	fs      *vfs.Mem
	log     *Log
	node    *Node
	sm      kv
	up      bool
	pending *Persist // handed out, written at the next step (a slow disk)
	life    int
}

type envelopeMsg struct {
	at  time.Time
	seq int
	m   *pb.Message
}

type cluster struct {
	t        testing.TB
	seed     uint64
	rng      *rand.Rand
	now      time.Time
	members  []*member
	net      []envelopeMsg
	seq      int
	cut      map[[2]uint64]bool
	dropRate float64
	trace    []string
	// Safety bookkeeping.
	committed map[uint64]string // index -> command, as first applied anywhere
	acked     map[uint64]uint64 // proposal id -> index it committed at
	dropped   map[uint64]DropReason
	reads     map[uint64]uint64 // read id -> read index
	compactAt uint64            // compact each node every this many applied entries (0: never)
}

func newCluster(t testing.TB, n int, seed uint64) *cluster {
	c := &cluster{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 7)), now: epoch,
		cut: map[[2]uint64]bool{}, committed: map[uint64]string{}, acked: map[uint64]uint64{},
		dropped: map[uint64]DropReason{}, reads: map[uint64]uint64{}}
	for i := 1; i <= n; i++ {
		c.members = append(c.members, &member{id: uint64(i), fs: vfs.NewMem()})
	}
	for _, m := range c.members {
		c.start(m)
	}
	return c
}

func (c *cluster) peers() []uint64 {
	var ids []uint64
	for _, m := range c.members {
		ids = append(ids, m.id)
	}
	return ids
}

func (c *cluster) start(m *member) {
	c.t.Helper()
	l, rec, err := OpenLog(m.fs, logDir, 4096)
	if err != nil {
		c.t.Fatalf("node %d: open log: %v", m.id, err)
	}
	cfg := Config{ID: m.id, Peers: c.peers(), TickInterval: tick, ElectionTimeout: election,
		Seed: c.seed*1000 + uint64(m.life)}
	node, err := NewNode(cfg, rec, c.now)
	if err != nil {
		c.t.Fatalf("node %d: %v", m.id, err)
	}
	m.log, m.node, m.up, m.pending, m.sm = l, node, true, nil, kv{}
	m.life++
	c.process(m)
}

// crash powers m off: what it had not persisted is gone, and its FS keeps
// what a power cut may leave.
func (c *cluster) crash(id uint64) {
	m := c.members[id-1]
	m.fs = m.fs.Crash(int64(c.rng.Uint64()), vfs.CrashOptions{UnsyncedKeepRatio: 0.5, TornLastPage: true})
	m.up, m.node, m.log, m.pending = false, nil, nil, nil
	c.tracef("crash %d", id)
}

func (c *cluster) restart(id uint64) {
	c.tracef("restart %d", id)
	c.start(c.members[id-1])
}

// isolate cuts every link between id and the others, both ways.
func (c *cluster) isolate(id uint64, on bool) {
	for _, o := range c.members {
		if o.id != id {
			c.cut[[2]uint64{id, o.id}], c.cut[[2]uint64{o.id, id}] = on, on
		}
	}
	c.tracef("isolate %d %v", id, on)
}

func (c *cluster) tracef(format string, a ...any) {
	c.trace = append(c.trace, fmt.Sprintf("%6dms ", c.now.Sub(epoch).Milliseconds())+fmt.Sprintf(format, a...))
}

// step advances one tick: finish slow writes, tick, deliver what is due.
func (c *cluster) step() {
	c.now = c.now.Add(tick)
	for _, m := range c.members {
		if m.up && m.pending != nil {
			c.persist(m)
		}
	}
	for _, m := range c.members {
		if m.up {
			m.node.Tick(c.now)
			c.process(m)
		}
	}
	sort.Slice(c.net, func(i, j int) bool {
		if !c.net[i].at.Equal(c.net[j].at) {
			return c.net[i].at.Before(c.net[j].at)
		}
		return c.net[i].seq < c.net[j].seq
	})
	for len(c.net) > 0 && !c.net[0].at.After(c.now) {
		e := c.net[0]
		c.net = c.net[1:]
		c.deliver(e.m)
	}
}

func (c *cluster) deliver(m *pb.Message) {
	to := c.members[m.GetTo()-1]
	if !to.up || c.cut[[2]uint64{m.GetFrom(), m.GetTo()}] {
		return
	}
	c.tracef("%d->%d %v t%d i%d c%d", m.GetFrom(), m.GetTo(), m.GetType(), m.GetTerm(), m.GetIndex(), m.GetCommit())
	_ = to.node.Step(c.now, m) // a stale or unknown peer's message; raft ignores it
	c.process(to)
}

func (c *cluster) persist(m *member) {
	c.t.Helper()
	if err := m.log.Save(*m.pending); err != nil {
		c.t.Fatalf("node %d: save: %v", m.id, err)
	}
	m.pending = nil
	m.node.Persisted(c.now)
	c.process(m)
}

// process drains m's Ready: sends, applies, records, and queues its Persist.
func (c *cluster) process(m *member) {
	c.t.Helper()
	for {
		rd := m.node.Ready()
		if rd.Empty() {
			return
		}
		if rd.Status != nil {
			c.tracef("node %d: lead %d term %d serving %v", m.id, rd.Status.Lead, rd.Status.Term, rd.Status.Serving)
		}
		if rd.Restore != nil {
			if err := m.sm.restore(rd.Restore.GetData(), rd.Restore.GetMetadata().GetIndex()); err != nil {
				c.t.Fatalf("node %d: restore: %v", m.id, err)
			}
		}
		for _, e := range rd.Committed {
			c.applied(m, e)
		}
		for _, r := range rd.Reads {
			c.reads[r.ID] = r.Index
			c.tracef("node %d: read %d at %d", m.id, r.ID, r.Index)
		}
		for _, d := range rd.Dropped {
			c.dropped[d.ID] = d.Reason
			c.tracef("node %d: dropped %d %v", m.id, d.ID, d.Reason)
		}
		for _, msg := range rd.Messages {
			c.send(msg)
		}
		c.maybeCompact(m)
		if !rd.Persist.Empty() {
			p := rd.Persist
			m.pending = &p
			return
		}
	}
}

func (c *cluster) applied(m *member, e Committed) {
	c.t.Helper()
	cmd := string(e.Data)
	if prev, ok := c.committed[e.Index]; ok && prev != cmd {
		c.t.Fatalf("node %d applied %q at %d where another node applied %q", m.id, cmd, e.Index, prev)
	}
	c.committed[e.Index] = cmd
	m.sm.apply(e)
	if e.ID != 0 {
		c.acked[e.ID] = e.Index
	}
}

func (c *cluster) maybeCompact(m *member) {
	if c.compactAt == 0 || m.sm.Applied < m.node.snapshotIndex()+c.compactAt {
		return
	}
	data, err := json.Marshal(m.sm.Data)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := m.node.Compact(m.sm.Applied, data); err != nil {
		c.t.Fatalf("node %d: %v", m.id, err)
	}
}

func (c *cluster) send(m *pb.Message) {
	if c.rng.Float64() < c.dropRate {
		return
	}
	delay := time.Millisecond * time.Duration(1+c.rng.IntN(15))
	c.seq++
	c.net = append(c.net, envelopeMsg{at: c.now.Add(delay), seq: c.seq, m: m})
}

// run steps until cond holds or d passes; it reports whether cond held.
func (c *cluster) run(d time.Duration, cond func() bool) bool {
	for end := c.now.Add(d); c.now.Before(end); {
		if cond() {
			return true
		}
		c.step()
	}
	return cond()
}

// leader is the one serving node, or nil.
func (c *cluster) leader() *member {
	var l *member
	for _, m := range c.members {
		if m.up && m.node.Status().Serving {
			if l != nil {
				return nil
			}
			l = m
		}
	}
	return l
}

func (c *cluster) mustLeader(within time.Duration) *member {
	c.t.Helper()
	if !c.run(within, func() bool { return c.leader() != nil }) {
		c.t.Fatalf("no leader within %v\n%s", within, c.tail(40))
	}
	return c.leader()
}

func (c *cluster) tail(n int) string {
	return strings.Join(c.trace[max(0, len(c.trace)-n):], "\n")
}

// propose submits "k=v" with id through m.
func (c *cluster) propose(m *member, id uint64) {
	m.node.Propose(id, fmt.Appendf(nil, "k%d=v%d", id, id))
	c.process(m)
}

// converged: every node is up and has applied the same last index and state.
func (c *cluster) converged() bool {
	first := c.members[0]
	for _, m := range c.members {
		if !m.up || m.pending != nil || m.sm.Applied != first.sm.Applied || len(m.sm.Data) != len(first.sm.Data) {
			return false
		}
	}
	return true
}

// checkAcked fails unless every acknowledged proposal is in every node's
// state with its value.
func (c *cluster) checkAcked() {
	c.t.Helper()
	ids := make([]uint64, 0, len(c.acked))
	for id := range c.acked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		for _, m := range c.members {
			if got := m.sm.Data[fmt.Sprintf("k%d", id)]; got != fmt.Sprintf("v%d", id) {
				c.t.Fatalf("acknowledged proposal %d (index %d) missing on node %d (applied %d)\n%s",
					id, c.acked[id], m.id, m.sm.Applied, c.tail(30))
			}
		}
	}
}
