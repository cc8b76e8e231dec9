package sim

import (
	"fmt"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// The controller-mode invariants checked as brokers answer (the others are
// on the controllers' applied state, controller.go, and at the end, where
// the group's master is whichever the controllers elected last):
//   - one broker per (group, master epoch) stores clients' writes, and no
//     broker stores one at epoch e after a master of a newer epoch took its
//     first write: the lease stopped the old master before the new one
//     existed;
//   - a SEND_OK from the master of the newest epoch comes only once every
//     other member of the SyncStateSet the controllers applied holds the
//     message's bytes.

// epochWrites is who stored writes in one master epoch of a group, and
// when the first arrived.
type epochWrites struct {
	node  *Node
	first time.Time
}

// onCtlAnswer follows every answer to a send that says the message was
// stored (OK or stored but unconfirmed): the write arrived at the broker
// lat ago, in the broker's current master epoch.
func (s *Sim) onCtlAnswer(c *Conn, f *protocol.Frame, lat time.Duration) {
	if !f.Status.Stored() {
		return
	}
	n, g := c.node, c.node.g
	e, ok := n.store.LastEpoch()
	if !ok {
		s.w.Violationf("%s stored a write (%v) without a master epoch", n.name, f.Status)
		return
	}
	at := s.w.Now().Add(-lat)
	key := epochKey{g.idx, e.Epoch}
	ew := s.writes[key]
	switch {
	case ew == nil:
		s.writes[key] = &epochWrites{node: n, first: at}
		s.topEpoch = max(s.topEpoch, e.Epoch)
		s.w.Tracef("%s: first write of epoch %d on %s", g.spec.Name, e.Epoch, n.name)
	case ew.node != n:
		s.w.Violationf("%s and %s both stored writes in %s's master epoch %d", ew.node.name, n.name, g.spec.Name, e.Epoch)
	}
	if next, ok := s.electedAt[epochKey{g.idx, e.Epoch + 1}]; ok && at.After(next) {
		s.w.Violationf("%s stored a write of epoch %d that arrived at %.6f, after the controllers elected the master of epoch %d at %.6f: its lease did not stop it",
			n.name, e.Epoch, at.Sub(Epoch).Seconds(), e.Epoch+1, next.Sub(Epoch).Seconds())
	}
	for ep := e.Epoch + 1; ep <= s.topEpoch; ep++ {
		if later := s.writes[epochKey{g.idx, ep}]; later != nil && later.first.Before(at) {
			s.w.Violationf("%s stored a write of epoch %d that arrived at %.6f, after %s took the first write of epoch %d at %.6f: its lease did not stop it",
				n.name, e.Epoch, at.Sub(Epoch).Seconds(), later.node.name, ep, later.first.Sub(Epoch).Seconds())
			break
		}
	}
}

// checkSetHas: a SEND_OK of sm by the master of the group's newest epoch
// comes only once every other member of the SyncStateSet the controllers
// applied holds its bytes (a member down or restarted since the write is
// excused: it held them when it acknowledged).
//
// A SEND_OK by a deposed master (the controllers applied a newer epoch)
// needs the newest master to hold the message already: anything it lacks,
// the deposed master cuts back when it rejoins.
func (s *Sim) checkSetHas(n *Node, sm *sentMsg, lat time.Duration) {
	g := n.g
	e, ok := n.store.LastEpoch()
	if !ok {
		return
	}
	want, err := n.store.CommitLog().Read(sm.phy, int(sm.end-sm.phy))
	if err != nil {
		return
	}
	at := s.w.Now().Add(-lat)
	if m := g.master; e.Epoch < g.ctlEpoch && m != n && m.up && !m.startedAt.After(at) {
		if got, err := m.store.CommitLog().Read(sm.phy, len(want)); err != nil || string(got) != string(want) {
			s.w.Violationf("%s, deposed (epoch %d; %s is master of epoch %d), acknowledged %q (offset %d), which %s does not hold",
				n.name, e.Epoch, m.name, g.ctlEpoch, sm.key, sm.phy, m.name)
		}
		return
	}
	if e.Epoch != g.ctlEpoch || g.master != n {
		return
	}
	for _, id := range g.set {
		m := g.ids[id]
		if m == nil || m == n || !m.up || m.startedAt.After(at) {
			continue
		}
		if got, err := m.store.CommitLog().Read(sm.phy, len(want)); err != nil || string(got) != string(want) {
			s.w.Violationf("%s acknowledged %q (offset %d, epoch %d) before SyncStateSet member %s (broker %d, set %v epoch %d) held it",
				n.name, sm.key, sm.phy, g.ctlEpoch, m.name, id, g.set, g.setEpoch)
		}
	}
}

// refusedExcused reports whether slave sl's log may differ from its
// master's because the master refused it (diverged logs after a master's
// power cut, by design). Not in controller mode: a replica that rejoins
// must cut its log back to the point it shares with the master and then
// hold the master's log, whatever refused it on the way.
func (s *Sim) refusedExcused(sl *Node) bool { return sl.refused && s.cfg.Ctl == nil }

// ctlRouteMaster: in controller mode a route's broker must be the group's
// master (liveness); "" if q names it.
func (s *Sim) ctlRouteMaster(c *Client, g *brokerGroup, addr string) string {
	if s.nodeAt[addr] != g.master {
		return fmt.Sprintf("client %d's route has a queue of %s on %s, not its master %s", c.id, g.spec.Name, addr, g.master.name)
	}
	return ""
}
