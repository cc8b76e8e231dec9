package sim

import (
	"fmt"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/storage/vfs"
)

// ctlStartLimit bounds how long a controller-mode run waits for every
// group's first master before its load starts.
const ctlStartLimit = 10 * time.Second

// initCtl builds the controller nodes of a controller-mode run.
func (s *Sim) initCtl() {
	s.pcuts, s.haNode, s.nodeAt = map[pair]time.Time{}, map[string]*Node{}, map[string]*Node{}
	s.epochMaster, s.writes, s.electedAt = map[epochKey]string{}, map[epochKey]*epochWrites{}, map[epochKey]time.Time{}
	s.replacedSet = map[epochKey][]int64{}
	for i, spec := range s.cfg.Ctl.Nodes {
		n := newControllerNode(s.w, i, spec)
		n.faults = s.planted.Actors // the controller's planted bugs reach it through Env.Faults
		n.dial = func(addr string, h actors.Handler) (actors.Conn, error) {
			k := s.ctlIndex(addr)
			if k < 0 {
				return nil, fmt.Errorf("dial %s: not a controller: %w", addr, errRefused)
			}
			return s.dialCtl(n, k, h)
		}
		s.ctls = append(s.ctls, n)
	}
}

// addCtlBroker registers broker node n of group g in controller mode:
// any of the group's nodes may become its master.
func (s *Sim) addCtlBroker(g *brokerGroup, n *Node) {
	g.all = append(g.all, n)
	addr := n.acfg.StoreHost.String()
	s.haNode[n.acfg.HAServerAddr], s.nodeAt[addr], s.byAddr[addr] = n, n, g
	n.rnd = seededReader(s.w)
	n.restart = func(reason string) { s.restartSelf(n, reason) }
}

// awaitMasters starts the load once every group has its first master (a
// little later: it registers with the name servers as master and the
// producers read that).
func (s *Sim) awaitMasters() {
	for _, g := range s.groups {
		if g.ctlEpoch == 0 || !g.master.up {
			s.w.at(s.w.Now().Add(20*time.Millisecond), owner{}, s.awaitMasters)
			return
		}
	}
	s.createTopic()
	s.loadFrom = s.w.Now().Add(100 * time.Millisecond)
	s.w.Tracef("every group has a master: the load runs from %.6f", s.loadFrom.Sub(Epoch).Seconds())
	s.startLoad()
}

// runCtlLoad runs a controller-mode run until its load ends; false if no
// first master came.
func (s *Sim) runCtlLoad() bool {
	for s.loadFrom.IsZero() {
		if s.w.Now().Sub(Epoch) >= ctlStartLimit {
			s.w.Violationf("not every group had a master %v after the start: %s", ctlStartLimit, s.unelected())
			return false
		}
		s.w.RunUntil(s.w.Now().Add(100*time.Millisecond), s.checkStep)
	}
	s.w.RunUntil(s.loadFrom.Add(s.sc.Duration), s.checkStep)
	return true
}

// unelected says which group has no master, and whether a controller
// leads.
func (s *Sim) unelected() string {
	lead := "no controller leads"
	if l := s.leader(); l != nil {
		lead = l.name + " leads"
	}
	for _, g := range s.groups {
		if g.ctlEpoch == 0 {
			return fmt.Sprintf("%s has no master (%s)", g.spec.Name, lead)
		}
		if !g.master.up {
			return fmt.Sprintf("%s's master %s is down (%s)", g.spec.Name, g.master.name, lead)
		}
	}
	return lead
}

// planCtlFaults plans a controller-mode run's faults, all on one group:
// the scenario's own (its first fault kind) in the second half of the
// load, where what the others did before can matter (a slave cut off
// earlier is outside the SyncStateSet when its master dies), and zero to
// two of its other kinds in the first half.
func (s *Sim) planCtlFaults() {
	w, sc := s.w, s.sc
	g := s.groups[w.rng.Intn(len(s.groups))]
	half := sc.Duration / 2
	for range w.rng.Intn(3) {
		f := sc.Faults[1+w.rng.Intn(len(sc.Faults)-1)]
		w.at(s.loadFrom.Add(100*time.Millisecond+time.Duration(w.rng.Int63n(int64(half)))), owner{}, func() { s.inject(g, f) })
	}
	w.at(s.loadFrom.Add(half+time.Duration(w.rng.Int63n(int64(half)))), owner{}, func() { s.inject(g, sc.Faults[0]) })
}

// injectCtl injects a controller-mode fault on group g; false if f is not
// one.
func (s *Sim) injectCtl(g *brokerGroup, f Fault) bool {
	w, cc, n := s.w, s.cfg.Ctl, g.master
	T := cc.HeartbeatTimeout
	switch f {
	case FaultCtlMasterKill:
		if n.up {
			w.Tracef("fault: %s's master %s killed", g.spec.Name, n.name)
			s.crashAndRestart(g, vfs.ProcessCrash, T+time.Duration(200+w.rng.Intn(800))*time.Millisecond)
		}
	case FaultCtlMasterPartition:
		d := T + time.Duration(300+w.rng.Intn(1200))*time.Millisecond
		w.Tracef("fault: %s cut off from the controllers and its group for %v", n.name, d)
		for _, o := range append(append([]*Node{}, s.ctls...), g.all...) {
			if o != n {
				s.cut(n, o, d)
			}
		}
	case FaultCtlMasterPause:
		s.pause(n, cc.Lease+time.Duration(w.rng.Int63n(int64(3*T/2))))
	case FaultCtlLeaderAndMaster:
		if l := s.leader(); l != nil {
			w.Tracef("fault: the controller leader %s dies with %s's master %s", l.name, g.spec.Name, n.name)
			s.crashController(l, time.Duration(200+w.rng.Intn(800))*time.Millisecond)
		}
		if n.up {
			s.crashAndRestart(g, vfs.ProcessCrash, T+time.Duration(200+w.rng.Intn(800))*time.Millisecond)
		}
	case FaultCtlSlaveCut:
		if len(g.slaves) > 0 {
			sl := g.slaves[w.rng.Intn(len(g.slaves))]
			d := T + time.Duration(w.rng.Int63n(int64(T)))
			w.Tracef("fault: %s cut off from its master %s for %v", sl.name, n.name, d)
			s.cut(sl, n, d)
		}
	case FaultCtlLostTail:
		if len(g.slaves) == 0 || !n.up {
			break
		}
		// Every slave: a slave that kept its tail would be elected, rightly.
		w.Tracef("fault: %s's slaves lose their unflushed tails, then their master %s dies", g.spec.Name, n.name)
		for _, sl := range g.slaves {
			s.crashSlaveWith(g, sl, vfs.CrashOptions{UnsyncedKeepRatio: 0.3 * w.rng.Float64()})
		}
		// The master dies before its request to shrink the set reaches
		// the controllers (a shared power feed's cut and a process
		// crash, say), or, less often, just after.
		w.at(w.Now().Add(time.Duration(w.rng.Intn(3000))*time.Microsecond), owner{}, func() {
			if g.master == n && n.up {
				s.crashAndRestart(g, vfs.ProcessCrash, T+time.Duration(200+w.rng.Intn(800))*time.Millisecond)
			}
		})
	case FaultCtlCrash:
		s.crashController(s.ctls[w.rng.Intn(len(s.ctls))], time.Duration(100+w.rng.Intn(700))*time.Millisecond)
	case FaultCtlLoss:
		d := time.Duration(300+w.rng.Intn(1200)) * time.Millisecond
		w.Tracef("fault: the controllers' links lose and reorder messages for %v", d)
		s.ctlLossUntil = maxTime(s.ctlLossUntil, w.Now().Add(d))
	case FaultCtlDiskStall:
		c := s.ctls[w.rng.Intn(len(s.ctls))]
		d := time.Duration(w.rng.Int63n(int64(T)))
		w.Tracef("fault: disk stall on %s for %v", c.name, d)
		c.stallUntil = maxTime(c.stallUntil, w.Now().Add(d))
	case FaultFsyncError:
		if !n.up {
			// Down (killed, not yet back): its restart must not meet a
			// broken disk that no operator then restarts it from.
			break
		}
		w.Tracef("fault: fsync errors on %s", n.name)
		n.failFsync = true
		// An operator restarts the broker process; the page cache stays.
		s.crashAndRestartAfter(g, time.Duration(200+w.rng.Intn(800))*time.Millisecond, vfs.ProcessCrash)
	default:
		return false
	}
	return true
}

// restartSelf is a broker's Env.Restart: it stops (its process goes on,
// so its page cache with it) and starts again on its store at once; a
// slave asks for it to have the store make a recorded cut of its log as
// it opens. It runs outside the actor that asked.
func (s *Sim) restartSelf(n *Node, reason string) {
	w, epoch := s.w, n.epoch
	w.at(w.Now(), owner{}, func() {
		if n.epoch != epoch || !n.up {
			return
		}
		w.Tracef("%s restarts on its store: %s", n.name, reason)
		n.crash(vfs.ProcessCrash)
		s.resetLinks(n.g, n)
		s.restartNode(n, time.Millisecond)
	})
}

// restartNode starts broker n again after down, unless it started
// meanwhile.
func (s *Sim) restartNode(n *Node, down time.Duration) {
	epoch := n.epoch
	s.w.at(s.w.Now().Add(down), owner{}, func() {
		if n.epoch != epoch || n.up {
			return
		}
		if err := n.start(); err != nil {
			s.w.Violationf("%s: restart failed: %v", n.name, err)
			return
		}
		checkStructure(s.w, n.store)
	})
}

// crashController cuts controller n's power; it restarts on what its disk
// kept after down.
func (s *Sim) crashController(n *Node, down time.Duration) {
	if !n.up {
		return
	}
	n.crash(vfs.CrashOptions{UnsyncedKeepRatio: s.w.rng.Float64(), TornLastPage: s.w.rng.Intn(2) == 0})
	s.resetCtlLinks(n)
	epoch := n.epoch
	s.w.at(s.w.Now().Add(down), owner{}, func() {
		if n.epoch != epoch || n.up {
			return
		}
		if err := s.startController(n); err != nil {
			s.w.Violationf("%s restart failed: %v", n.name, err)
		}
	})
}

// healCtl ends the controller-mode faults: partitions, message loss,
// pauses (controllers down restart by themselves, as brokers do).
func (s *Sim) healCtl() {
	// Partitions run out by themselves (at most two heartbeat timeouts and
	// a half), as disk stalls do: the failover they cause happens.
	s.healedAt = s.w.Now()
	s.ctlLossUntil = time.Time{}
	for _, g := range s.groups {
		for _, n := range g.all {
			s.resume(n, n.epoch)
		}
	}
}

// ctlUnconverged: every controller is up and one leads; every group has a
// master that is up, took a write after healing, and its slaves hold its
// whole log (checked with the other nodes in unconverged).
func (s *Sim) ctlUnconverged() string {
	for _, n := range s.ctls {
		if !n.up {
			return n.name + " is down"
		}
	}
	if s.leader() == nil {
		return "no controller leads"
	}
	for _, g := range s.groups {
		if !g.master.up {
			return fmt.Sprintf("%s's master %s (epoch %d) is down", g.spec.Name, g.master.name, g.ctlEpoch)
		}
		if !g.okAt.After(s.healedAt) {
			return fmt.Sprintf("%s has taken no write since healing (master %s, epoch %d)", g.spec.Name, g.master.name, g.ctlEpoch)
		}
	}
	return ""
}

// probed reports whether every group took a write since healing: the
// probe producer of the liveness phase stops then.
func (s *Sim) probed() bool {
	for _, g := range s.groups {
		if !g.okAt.After(s.healedAt) {
			return false
		}
	}
	return true
}

// startProbe starts the liveness phase's producer: it sends until every
// group acknowledged one of its writes.
func (s *Sim) startProbe() {
	c := &Client{s: s, id: len(s.clients) + 1, kind: SyncProducer, probe: true,
		stopAt: s.w.Now().Add(livenessLimit), conns: make([]*Conn, len(s.groups))}
	s.clients = append(s.clients, c)
	c.start()
}
