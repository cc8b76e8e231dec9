package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
)

// The liveness phase ends every run: once the load stops, faults stop,
// partitions heal, disk stalls run out, crashed nodes restart (their restarts
// are already scheduled), and within livenessLimit of virtual time the
// cluster must converge: every acknowledged message is consumable from
// its queue, every slave holds its master's whole log, and every broker
// group's queues are owned by exactly one live group member each. Safety
// says nothing bad happened; this says the good thing does, eventually.
const (
	livenessLimit = 10 * time.Second
	livenessStep  = 100 * time.Millisecond
)

// liveness heals the cluster and runs it until it converges.
func (s *Sim) liveness() {
	s.heal()
	s.converge()
}

// converge runs the healed cluster until it converges; a run that does not
// within livenessLimit fails with what did not converge.
func (s *Sim) converge() {
	w := s.w
	from := w.Now()
	deadline := from.Add(livenessLimit)
	for {
		w.RunUntil(w.Now().Add(livenessStep), s.checkStep)
		why := s.unconverged()
		if why == "" {
			s.res.Converged = w.Now().Sub(from)
			w.Tracef("converged %v after healing", s.res.Converged)
			return
		}
		if !w.Now().Before(deadline) {
			w.Violationf("not converged %v after healing: %s", livenessLimit, why)
			return
		}
	}
}

// heal stops the faults: no new ones are injected, partitions end,
// partitioned members reconnect, and a group whose members all left
// or crashed gets a new one (an operator starts a consumer).
func (s *Sim) heal() {
	s.healed = true
	s.w.Tracef("heal: faults stop")
	if s.cfg.Ctl != nil {
		s.healCtl()
		defer s.startProbe()
	}
	for _, g := range s.groups {
		s.healHA(g)
		s.healPartition(g.master)
		s.healSlow(g.master)
		// A disk stall runs out by itself (at most three syncFlushTimeouts):
		// I/O issued during it completes when it ends, healed or not.
	}
	for _, g := range s.groups { // in order: the trace must not follow a map's
		for _, n := range g.nodes() {
			for k := range s.names {
				s.healNS(nsCut{n, k})
			}
		}
	}
	procs := map[string][]*GroupMember{}
	var names []string
	for _, m := range s.members {
		if procs[m.name] == nil {
			names = append(names, m.name)
		}
		procs[m.name] = append(procs[m.name], m)
	}
	for _, name := range names {
		s.reconnect(procs[name])
	}
	if s.sc.Members > 0 && !s.liveMember(s.groups[0]) {
		s.newMember()
	}
}

// unconverged says what has not converged yet ("" when everything has).
func (s *Sim) unconverged() string {
	if s.cfg.Ctl != nil {
		if why := s.ctlUnconverged(); why != "" {
			return why
		}
	}
	for _, g := range s.groups {
		for _, n := range g.nodes() {
			if !n.up {
				return n.name + " is down"
			}
		}
		m := g.master.store.CommitLog().MaxOffset()
		for _, sl := range g.slaves {
			if e := sl.store.CommitLog().MaxOffset(); !s.refusedExcused(sl) && e != m {
				return fmt.Sprintf("%s's log ends at %d, its master's at %d", sl.name, e, m)
			}
		}
	}
	if why := s.unconsumable(); why != "" {
		return why
	}
	if why := s.unregistered(); why != "" {
		return why
	}
	if why := s.unrouted(); why != "" {
		return why
	}
	if s.sc.Members == 0 {
		return ""
	}
	if why := s.unowned(); why != "" {
		return why
	}
	if n, first := s.unconsumed(); n > 0 {
		return fmt.Sprintf("the group has not consumed %d acknowledged messages, first %v", n, first)
	}
	return ""
}

// unconsumable: a final read of every queue finds every acknowledged
// message (not lost in a crash the mode allowed to lose it) at its queue
// offset.
func (s *Sim) unconsumable() string {
	var bad []string
	for k, sm := range s.sent {
		if !sm.acked || sm.lost {
			continue
		}
		e, err := sm.g.master.store.QueueEntry(storage.QueueKey{Topic: simTopic, QueueID: sm.queue}, sm.qo)
		if err != nil || e.Offset != sm.phy {
			bad = append(bad, fmt.Sprintf("%q (%s queue %d offset %d: %v)", k, sm.g.spec.Name, sm.queue, sm.qo, err))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	sort.Strings(bad)
	return fmt.Sprintf("%d acknowledged messages are not consumable, first %s", len(bad), strings.Join(bad[:min(3, len(bad))], ", "))
}

// unowned: in every broker group that holds the topic, each queue is
// consumed by exactly one live member.
func (s *Sim) unowned() string {
	holds := map[*brokerGroup]bool{}
	for _, sm := range s.sent {
		if sm.acked && !sm.lost {
			holds[sm.g] = true
		}
	}
	for _, g := range s.groups {
		if !holds[g] {
			continue
		}
		for q := int32(0); q < simQueues; q++ {
			ref := protocol.QueueRef{Topic: simTopic, QueueID: q}
			var owners []string
			for _, m := range s.members {
				if o := m.owned[ref]; m.g == g && m.alive && !m.stopped && o != nil && o.started && !o.releasing {
					owners = append(owners, m.name)
				}
			}
			if len(owners) != 1 {
				return fmt.Sprintf("%s queue %d is consumed by %d members %v, not one", g.spec.Name, q, len(owners), owners)
			}
		}
	}
	return ""
}
