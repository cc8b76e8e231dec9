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
	id      int64
	unclean bool
	ok      bool
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
// or no set member is alive and unclean election is enabled.
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
	inSet := slices.DeleteFunc(slices.Clone(alive), func(x candidate) bool { return !slices.Contains(g.set, x.id) })
	if ch := best(inSet, false); ch.ok {
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
	return choice{id: slices.MinFunc(cs, compareCandidates).id, unclean: unclean, ok: true}
}

// masterAlive reports whether g has a master with a fresh heartbeat.
func (c *Core) masterAlive(g *group, now time.Time) bool {
	if g.masterID == protocol.NoBroker {
		return false
	}
	b, ok := c.beats[g.key][g.masterID]
	return ok && b.addr == g.replicas[g.masterID].addr && c.fresh(b, now)
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
		MasterEpoch: g.masterEpoch, SetEpoch: g.setEpoch, NewMaster: ch.id, Unclean: ch.unclean}
}
