package controller

import (
	"cmp"
	"slices"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// beat is a broker's last heartbeat, as the leader received it.
type beat struct {
	at            time.Time
	addr          string
	epoch         int32
	maxOffset     int64
	confirmOffset int64
	priority      int32
	// mayLackAcked: the broker's log may lack messages it acknowledged
	// (protocol.ControllerHeartbeatRequest.MayLackAcked).
	mayLackAcked bool
}

// candidate is a replica that may become master, with its last heartbeat.
type candidate struct {
	id int64
	beat
}

// compareCandidates orders the best candidate first: the newest epoch, then
// the largest max offset, then the lowest election priority, then the lowest
// brokerId. Every key compares as its own type: a difference of two int64
// offsets cast to int is how RocketMQ #10578 picked the wrong master.
func compareCandidates(a, b candidate) int {
	return cmp.Or(
		cmp.Compare(b.epoch, a.epoch),
		cmp.Compare(b.maxOffset, a.maxOffset),
		cmp.Compare(a.priority, b.priority),
		cmp.Compare(a.id, b.id),
	)
}

// choice is an election decision: the new master and whether it is taken
// from outside the SyncStateSet.
type choice struct {
	id       int64
	unclean  bool
	lacking  bool // the chosen one's log may lack acknowledged messages
	recovery bool // chosen from the set before the last election too
	ok       bool
}

// alive returns the group's registered replicas with a fresh heartbeat from
// their registered address, by brokerId.
func (c *Core) alive(g *group, now time.Time) []candidate {
	beats := c.beats[g.key]
	var out []candidate
	for _, r := range g.sortedReplicas() {
		b, ok := beats[r.id]
		if ok && b.addr == r.addr && c.fresh(b, now) {
			out = append(out, candidate{id: r.id, beat: b})
		}
	}
	return out
}

func (c *Core) fresh(b beat, now time.Time) bool { return now.Sub(b.at) < c.cfg.HeartbeatTimeout }

// choose picks a new master for g among the alive replicas: from the
// SyncStateSet only, unless the group never had a master (no data to lose)
// or no set member is alive and unclean election is enabled. A member whose
// log may lack what it acknowledged (it lost its unflushed tail in a
// crash) is chosen only while every member is heard from: then the best of
// them holds whatever any of them acknowledged; otherwise the missing one
// may hold it, and the group waits for it (or for an operator) rather than
// cut acknowledged messages from every log.
func (c *Core) choose(g *group, now time.Time) choice {
	alive := c.alive(g, now)
	if g.masterEpoch == 0 {
		return best(alive, false)
	}
	if c.cfg.Faults.ElectOutsideSyncStateSet {
		// The planted bug: prefer a replica outside the set, marked
		// unclean so that Apply takes it.
		outside := slices.DeleteFunc(slices.Clone(alive), func(x candidate) bool { return slices.Contains(g.set, x.id) })
		if ch := best(outside, true); ch.ok {
			return ch
		}
	}
	pool, recovery := g.set, c.masterNeverBegan(g, now)
	if recovery {
		pool = append(slices.Clone(g.set), g.recovery...)
	}
	inSet := slices.DeleteFunc(slices.Clone(alive), func(x candidate) bool { return !slices.Contains(pool, x.id) })
	if len(inSet) < len(pool) && !c.cfg.Faults.ElectLackingReplica {
		// A member is not heard from: it may hold what a member that
		// lost its unflushed tail lacks, so only whole members qualify.
		inSet = slices.DeleteFunc(inSet, func(x candidate) bool { return x.mayLackAcked })
	}
	if ch := best(inSet, false); ch.ok {
		ch.recovery = recovery
		return ch
	}
	if c.cfg.ElectUnclean {
		return best(alive, true)
	}
	return choice{}
}

func best(cs []candidate, unclean bool) choice {
	if len(cs) == 0 {
		return choice{}
	}
	b := slices.MinFunc(cs, compareCandidates)
	return choice{id: b.id, unclean: unclean, lacking: b.mayLackAcked, ok: true}
}

// masterNeverBegan reports whether g's master is heard from, refusing its
// role because its log may lack acknowledged messages, and has not begun
// its epoch (its log's last epoch is older): it wrote nothing as master,
// so the members of the set before its election still hold everything
// acknowledged, and may be elected in its place.
func (c *Core) masterNeverBegan(g *group, now time.Time) bool {
	b, ok := c.masterBeat(g, now)
	return ok && b.mayLackAcked && b.epoch < g.masterEpoch && len(g.recovery) > 0
}

// masterAlive reports whether g has a master with a fresh heartbeat. A
// master whose heartbeat says its log may lack acknowledged messages does
// not count unless it was elected knowing that and has yet to begin its
// epoch: it does not take its role (ctlagent), and the group elects the
// best of its SyncStateSet again, perhaps the same broker in a new epoch.
func (c *Core) masterAlive(g *group, now time.Time) bool {
	if g.masterID == protocol.NoBroker {
		return false
	}
	b, ok := c.masterBeat(g, now)
	return ok && (!b.mayLackAcked || g.masterLacking && b.epoch < g.masterEpoch)
}

// masterBeat is the fresh heartbeat of g's master from its registered
// address, if there is one.
func (c *Core) masterBeat(g *group, now time.Time) (beat, bool) {
	if g.masterID == protocol.NoBroker {
		return beat{}, false
	}
	b, ok := c.beats[g.key][g.masterID]
	return b, ok && b.addr == g.replicas[g.masterID].addr && c.fresh(b, now)
}

// mayElect reports whether the leader knows enough heartbeats to judge g:
// a leader learns heartbeats only once it leads, so for a full heartbeat
// timeout it would take every broker for dead. A group that never had a
// master is exempt (its first election loses nothing).
func (c *Core) mayElect(g *group, now time.Time) bool {
	return g.masterEpoch == 0 || now.Sub(c.leaderSince) >= c.cfg.HeartbeatTimeout
}

// scan proposes an election for every group whose master is dead (or that
// has none yet) and that has an eligible candidate, one decision in flight
// per group.
func (c *Core) scan(now time.Time) {
	for _, g := range c.state.sortedGroups() {
		if _, busy := c.electing[g.key]; busy || c.masterAlive(g, now) || !c.mayElect(g, now) {
			continue
		}
		ch := c.choose(g, now)
		if !ch.ok {
			continue
		}
		id := c.propose(now, electCommand(g, ch))
		c.electing[g.key] = inflight{id: id, deadline: now.Add(c.cfg.RequestTimeout)}
	}
}

func electCommand(g *group, ch choice) *command {
	return &command{Op: opElect, Cluster: g.key.cluster, Group: g.key.name,
		MasterEpoch: g.masterEpoch, SetEpoch: g.setEpoch, NewMaster: ch.id, Unclean: ch.unclean,
		Lacking: ch.lacking, Recovery: ch.recovery}
}
