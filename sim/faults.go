package sim

import (
	"time"

	"github.com/wharfmq/wharf/storage/vfs"
)

// planFaults schedules one to three faults of the scenario's kinds (three
// to seven when a consumer group runs: the group changes often), each on a
// broker group the seed picks.
func (s *Sim) planFaults(stopAt time.Time) {
	w := s.w
	if s.cfg.Ctl != nil {
		s.planCtlFaults()
		return
	}
	n := 1 + w.rng.Intn(3)
	if s.sc.Members > 0 {
		n = 3 + w.rng.Intn(5)
	}
	for range n {
		f := s.sc.Faults[w.rng.Intn(len(s.sc.Faults))]
		g := s.groups[w.rng.Intn(len(s.groups))]
		at := s.loadFrom.Add(200*time.Millisecond + time.Duration(w.rng.Int63n(int64(s.sc.Duration-200*time.Millisecond))))
		w.at(at, owner{}, func() { s.inject(g, f) })
	}
}

func (s *Sim) inject(g *brokerGroup, f Fault) {
	if f == FaultCrash || f == FaultTornWrite {
		g = s.mostUnflushed(g)
	}
	if s.healed || (s.cfg.Ctl != nil && s.injectCtl(g, f)) {
		return
	}
	n, w := g.master, s.w
	if !n.up {
		return
	}
	switch f {
	case FaultCrash, FaultTornWrite:
		opts := vfs.CrashOptions{UnsyncedKeepRatio: w.rng.Float64()}
		if f == FaultTornWrite {
			opts.TornLastPage = true
		}
		s.crashAndRestart(g, opts, time.Duration(50+w.rng.Intn(500))*time.Millisecond)
	case FaultFsyncError:
		if !n.up {
			break // as in controller mode (injectCtl)
		}
		w.Tracef("fault: fsync errors on %s", n.name)
		n.failFsync = true
		// An operator notices and restarts the broker; the disk works again.
		s.crashAndRestartAfter(g, time.Duration(200+w.rng.Intn(800))*time.Millisecond, vfs.CrashOptions{UnsyncedKeepRatio: w.rng.Float64()})
	case FaultDiskStall:
		s.stallDisk(g)
	case FaultConnReset:
		c := s.clients[w.rng.Intn(len(s.clients))]
		if conn := c.conns[g.idx]; conn != nil && !conn.dead() {
			w.Tracef("fault: connection %d of client %d reset", conn.id, c.id)
			conn.closed = true
			c.reset(conn)
		}
	case FaultMasterKill:
		s.crashAndRestart(g, vfs.ProcessCrash, time.Duration(50+w.rng.Intn(500))*time.Millisecond)
	case FaultSlaveCrash:
		if len(g.slaves) > 0 {
			s.crashSlave(g, g.slaves[w.rng.Intn(len(g.slaves))])
		}
	case FaultHAPartition:
		d := time.Duration(100+w.rng.Intn(1500)) * time.Millisecond
		w.Tracef("fault: %s master/slave partition for %v", g.spec.Name, d)
		g.haPartitioned = true
		w.at(w.Now().Add(d), owner{}, func() { s.healHA(g) })
	case FaultMemberJoin:
		s.injectGroupFault("join")
	case FaultMemberLeave:
		s.injectGroupFault("leave")
	case FaultMemberCrash:
		s.injectGroupFault("crash")
	case FaultMemberPartition:
		s.injectGroupFault("partition")
	case FaultMasterDown:
		s.crashAndRestart(g, vfs.ProcessCrash, time.Duration(1000+w.rng.Intn(1000))*time.Millisecond)
	case FaultNSPartition:
		if len(s.names) > 0 {
			s.cutNS(n, w.rng.Intn(len(s.names)), 2*s.cfg.Lease+time.Duration(w.rng.Int63n(int64(3*s.cfg.Lease))))
		}
	case FaultSlowBroker:
		d := time.Duration(300+w.rng.Intn(1000)) * time.Millisecond
		n.slow = time.Duration(300+w.rng.Intn(700)) * time.Millisecond
		w.Tracef("fault: %s answers %v late for %v", n.name, n.slow, d)
		w.at(w.Now().Add(d), owner{}, func() { s.healSlow(n) })
	case FaultPartition:
		d := time.Duration(100+w.rng.Intn(1500)) * time.Millisecond
		w.Tracef("fault: partition of %s for %v", n.name, d)
		n.partitioned = true
		w.at(w.Now().Add(d), owner{}, func() { s.healPartition(n) })
	}
}

func (s *Sim) healHA(g *brokerGroup) {
	if g.haPartitioned {
		g.haPartitioned = false
		s.w.Tracef("%s master/slave partition healed", g.spec.Name)
	}
}

func (s *Sim) healSlow(n *Node) {
	if n.slow > 0 {
		n.slow = 0
		s.w.Tracef("%s answers on time again", n.name)
	}
}

func (s *Sim) healPartition(n *Node) {
	if n.partitioned {
		n.partitioned = false
		s.w.Tracef("partition of %s healed", n.name)
	}
}

// stallDisk makes the master's fsyncs take longer than syncFlushTimeout
// for a while.
func (s *Sim) stallDisk(g *brokerGroup) {
	n, w, wait := g.master, s.w, s.cfg.SyncFlushTimeout
	d := wait + time.Duration(w.rng.Int63n(int64(2*wait)))
	w.Tracef("fault: disk stall on %s for %v", n.name, d)
	// A stall during a longer one does not end it early (nor the grace the
	// window check gives the flush after it): I/O issued before still
	// waits for the first.
	if until := w.Now().Add(d); until.After(n.stallUntil) {
		n.stallUntil = until
	}
	if from := n.stallUntil.Add(n.windowBound()); from.After(g.windowFrom) {
		g.windowFrom = from
	}
}

// crashSlave cuts a slave's power; it restarts a little later.
func (s *Sim) crashSlave(g *brokerGroup, sl *Node) {
	s.crashSlaveWith(g, sl, vfs.CrashOptions{UnsyncedKeepRatio: s.w.rng.Float64(), TornLastPage: s.w.rng.Intn(2) == 0})
}

// crashSlaveWith cuts sl's power as opts say and restarts it 50-850 ms
// later.
func (s *Sim) crashSlaveWith(g *brokerGroup, sl *Node, opts vfs.CrashOptions) {
	w := s.w
	if !sl.up {
		return
	}
	sl.crashAt = w.Now()
	sl.crash(opts)
	s.resetLinks(g, sl)
	epoch := sl.epoch
	w.at(w.Now().Add(time.Duration(50+w.rng.Intn(800))*time.Millisecond), owner{}, func() {
		if sl.epoch != epoch || sl.up {
			return
		}
		if err := sl.start(); err != nil {
			w.Violationf("slave %s restart failed: %v", sl.name, err)
			return
		}
		checkStructure(w, sl.store)
	})
}

func (s *Sim) crashAndRestartAfter(g *brokerGroup, d time.Duration, opts vfs.CrashOptions) {
	n := g.master
	epoch := n.epoch
	s.w.at(s.w.Now().Add(d), owner{}, func() {
		if n.epoch == epoch && n.up {
			s.crashAndRestart(g, opts, 100*time.Millisecond)
		}
	})
}

// crashAndRestart cuts the master's power, then restarts it on what the
// disk kept and checks that recovery lost nothing the mode promised.
func (s *Sim) crashAndRestart(g *brokerGroup, opts vfs.CrashOptions, down time.Duration) {
	n := g.master
	flushed := n.store.CommitLog().FlushedOffset()
	failed := n.store.CommitLog().Err() != nil
	s.checkSlavesHaveAcked(g, nil)
	n.crash(opts)
	s.resetLinks(g, n)
	// The clients' connections are reset (the peer's kernel answers RST).
	for _, c := range s.clients {
		if conn := c.conns[g.idx]; conn != nil && conn.node == n {
			s.w.at(s.w.Now().Add(s.net.sample(s.w)), owner{}, func() { c.reset(conn) })
		}
	}
	for _, m := range s.members {
		if conn := m.conn; conn != nil && conn.node == n {
			s.w.at(s.w.Now().Add(s.net.sample(s.w)), owner{}, func() { m.reset(conn) })
		}
	}
	epoch := n.epoch
	s.w.at(s.w.Now().Add(down), owner{}, func() {
		if n.epoch != epoch || n.up {
			return
		}
		if err := n.start(); err != nil {
			s.w.Violationf("%s: restart after crash failed: %v", n.name, err)
			return
		}
		if s.cfg.Ctl != nil {
			// A replica's loss is not the group's: what the node's disk
			// lost is checked against the group's master at the end.
			checkStructure(s.w, n.store)
			return
		}
		s.checkRecovered(g, flushed, failed)
		g.windowFrom = s.w.Now().Add(n.windowBound())
	})
}

// mostUnflushed is the group whose master has the most bytes not yet on
// disk (g if none has any): a power cut hurts most there, so that is where
// it is aimed.
func (s *Sim) mostUnflushed(g *brokerGroup) *brokerGroup {
	most := int64(0)
	for _, h := range s.groups {
		if n := h.master; n.up {
			if d := n.store.CommitLog().MaxOffset() - n.store.CommitLog().FlushedOffset(); d > most {
				g, most = h, d
			}
		}
	}
	return g
}
