package sim

import (
	"fmt"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

// Name servers in the simulation: each is an actors.NameServer (the real
// route table core and its actor) on a disk-less Node of its own, with
// its own clock drift. Brokers register with every name server over
// linkEnd pairs (Env.Dial by address, Call for the requests that want an
// answer); producers read their routes from them over Conns.

// nsCut is a partition between one broker node and one name server.
type nsCut struct {
	node *Node
	ns   int
}

// newNameServer builds name server i of the seed's topology (not started).
func newNameServer(w *World, i int, spec NSSpec) *Node {
	d := DefaultDisk() // RunIO needs a latency; a name server does no I/O
	return &Node{w: w, name: spec.Name, addr: nsAddr(i), disk: d, sigma: d.sigma(), drift: spec.Drift, nsIdx: i + 1}
}

// startNameServer starts name server n's actors on its Env.
func (n *Node) startNameServer() error {
	ns := actors.NewNameServer(actors.NameServerConfig{}, n.env(), protocol.DefaultLimits())
	if err := ns.Start(); err != nil {
		return fmt.Errorf("%s: start: %w", n.name, err)
	}
	n.serve, n.up = ns, true
	n.w.Tracef("%s start", n.name)
	return nil
}

// isNameServer reports whether n is a name server (else a broker).
func (n *Node) isNameServer() bool { return n.nsIdx > 0 }

// nsIndex is the name server at addr (-1: none).
func (s *Sim) nsIndex(addr string) int {
	for i, ns := range s.names {
		if ns.addr.String() == addr {
			return i
		}
	}
	return -1
}

// dialBroker is a broker node's Env.Dial: a name server by its address,
// else (a slave) its master's replication port.
func (s *Sim) dialBroker(from *Node, addr string, h actors.Handler) (actors.Conn, error) {
	if k := s.nsIndex(addr); k >= 0 {
		return s.dialNS(from, k, h)
	}
	if k := s.ctlIndex(addr); k >= 0 {
		return s.dialCtl(from, k, h)
	}
	if s.cfg.Ctl != nil {
		return s.dialHAAddr(from, addr, h)
	}
	return s.dial(from, h)
}

// dialNS links broker node from to name server k; a partition between
// them refuses it.
func (s *Sim) dialNS(from *Node, k int, h actors.Handler) (actors.Conn, error) {
	ns := s.names[k]
	if !ns.up || s.cuts[nsCut{from, k}] {
		return nil, fmt.Errorf("dial %s: %w", ns.name, errRefused)
	}
	s.conns++
	a := &linkEnd{s: s, id: s.conns, node: from, epoch: from.epoch, handler: h, ns: k + 1}
	b := &linkEnd{s: s, id: s.conns, node: ns, epoch: ns.epoch, handler: ns.serve, ns: k + 1}
	a.other, b.other = b, a
	s.nsLinks = append(s.nsLinks, a)
	s.w.Tracef("link %d: %s -> %s", a.id, from.name, ns.name)
	return a, nil
}

// onNSFrame follows registrations as the name server answers them: a
// broker is registered at a name server from an answer that holds it
// (not Unknown) until its lease would end.
func (s *Sim) onNSFrame(e *linkEnd, f *protocol.Frame) {
	if !e.node.isNameServer() || !f.IsResponse() || f.Status != protocol.StatusOK ||
		(f.Code != protocol.CodeRegisterBroker && f.Code != protocol.CodeBrokerHeartbeat) {
		return
	}
	var r protocol.RegisterBrokerResponse
	if err := protocol.DecodeResponse(f, protocol.DefaultLimits(), &r); err != nil || r.Unknown {
		return
	}
	s.registered[nsCut{e.other.node, e.ns - 1}] = s.w.Now()
}

// unregisteredSince is since when broker node n has been out of reach of
// every name server (down, or cut off from each), so that its lease
// cannot have been renewed anywhere; false if it is not.
func (s *Sim) unregisteredSince(n *Node) (time.Time, bool) {
	if !n.up {
		return n.downAt, true
	}
	var since time.Time
	for k := range s.names {
		at, ok := s.cutAt[nsCut{n, k}]
		if !ok || !s.cuts[nsCut{n, k}] {
			return time.Time{}, false
		}
		since = maxTime(since, at)
	}
	return since, len(s.names) > 0
}

// routeBound is how long after a broker is out of reach of every name
// server a producer may still send to it: the lease to run out, a refresh
// to read the route without it, and slack for the round trips.
func (s *Sim) routeBound() time.Duration {
	return s.cfg.Lease + s.cfg.RouteRefresh + 200*time.Millisecond
}

// checkRouteUse: a producer never sends to a broker whose lease expired
// at every name server longer than routeBound ago (it refreshes its
// routes and drops dead ones). Excused: the name server has no route for
// the topic at all (every group of it is gone), where the client keeps
// the route it had.
func (s *Sim) checkRouteUse(c *Client, n *Node) {
	since, ok := s.unregisteredSince(n)
	if ok && !c.topicGone && s.w.Now().Sub(since) > s.routeBound() {
		s.w.Violationf("client %d sends to %s, out of reach of every name server for %v (lease %v, route refresh %v)",
			c.id, n.name, s.w.Now().Sub(since), s.cfg.Lease, s.cfg.RouteRefresh)
	}
}

// cutNS partitions broker node n from name server k for d: their link
// breaks silently (neither end hears), registrations and heartbeats stop
// getting through, and the name server's lease of n runs out.
func (s *Sim) cutNS(n *Node, k int, d time.Duration) {
	key := nsCut{n, k}
	if s.cuts[key] {
		return
	}
	s.w.Tracef("fault: partition of %s from %s for %v", n.name, s.names[k].name, d)
	s.cuts[key], s.cutAt[key] = true, s.w.Now()
	s.w.at(s.w.Now().Add(d), owner{}, func() { s.healNS(key) })
}

func (s *Sim) healNS(key nsCut) {
	if s.cuts[key] {
		s.cuts[key] = false
		s.w.Tracef("partition of %s from %s healed", key.node.name, s.names[key.ns].name)
	}
}

// unregistered: every live broker node is registered at every name server
// (liveness).
func (s *Sim) unregistered() string {
	for _, g := range s.groups {
		for _, n := range g.nodes() {
			for k, ns := range s.names {
				at, ok := s.registered[nsCut{n, k}]
				if !ok || at.Before(n.startedAt) || s.w.Now().Sub(at) > s.cfg.Lease {
					return fmt.Sprintf("%s is not registered at %s", n.name, ns.name)
				}
			}
		}
	}
	return ""
}

// unrouted: every producer's route has the queues of every group, on its
// live master, and nothing else (liveness).
func (s *Sim) unrouted() string {
	for _, c := range s.clients {
		if c.table == nil {
			continue
		}
		r, _ := c.table.Route(simTopic)
		on := map[*brokerGroup]int{}
		for _, q := range r.Queues {
			g := s.byAddr[q.Broker]
			if g == nil || !g.master.up {
				return fmt.Sprintf("client %d's route has a queue on %s, not a live master", c.id, q.Broker)
			}
			if s.cfg.Ctl != nil {
				if why := s.ctlRouteMaster(c, g, q.Broker); why != "" {
					return why
				}
			}
			on[g]++
		}
		for _, g := range s.groups {
			if on[g] != simQueues {
				return fmt.Sprintf("client %d's route has %d queues of %s, not %d", c.id, on[g], g.spec.Name, simQueues)
			}
		}
	}
	return ""
}

// adminPeer is the operator's tool: it creates the topic on every master
// at the start, as `wharf topic create --cluster` does.
type adminPeer struct{}

func (adminPeer) clientNum() int                    { return 0 }
func (adminPeer) onResponse(*Conn, *protocol.Frame) {}

// createTopic creates the topic on every master.
func (s *Sim) createTopic() {
	for _, g := range s.groups {
		s.createTopicOn(g.master)
	}
}

// createTopicOn sends the topic's creation to node n.
func (s *Sim) createTopicOn(n *Node) {
	s.conns++
	conn := &Conn{s: s, id: s.conns, node: n, epoch: n.epoch, client: adminPeer{}, arrived: map[uint32]time.Time{}}
	req := &protocol.UpdateTopicRequest{TopicConfig: protocol.TopicConfig{Topic: simTopic, ReadQueueNums: simQueues,
		WriteQueueNums: simQueues, Perm: protocol.PermRead | protocol.PermWrite}}
	frame, err := protocol.AppendRequest(nil, 1, 0, req)
	if err != nil {
		s.w.Violationf("encode the topic's creation: %v", err)
		return
	}
	conn.send(frame)
}
