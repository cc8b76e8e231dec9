package sim

import (
	"errors"
	"fmt"
	"github.com/wharfmq/wharf/netio"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

// linkEnd is one end of a simulated broker-to-broker connection (a slave's
// replication link to its master). Each end is the actors.Conn its node's
// actors write to; frames arrive at the other end's handler in order.
type linkEnd struct {
	s       *Sim
	id      uint64
	node    *Node // the node this end belongs to
	epoch   int
	other   *linkEnd
	handler actors.Handler
	closed  bool
	next    time.Time // arrival time of the last frame sent from this end
	gone    bool      // Disconnected delivered
	ns      int       // a link to name server ns-1 (0: a replication link)
	severed bool      // broken by a partition: a close is not heard across it
	kind    linkKind
}

// linkKind is what a link carries.
type linkKind int

const (
	kindHA  linkKind = iota // a slave's replication link (or a name server's: ns > 0)
	kindCtl                 // to a controller: a broker's, or a controller peer's
)

var _ actors.Conn = (*linkEnd)(nil)

func (e *linkEnd) ID() uint64         { return e.id }
func (e *linkEnd) RemoteAddr() string { return e.other.node.name }

func (e *linkEnd) dead() bool { return e.closed || e.node.epoch != e.epoch || !e.node.up }

// Reply implements actors.Conn (nothing answers on a replication link but
// a refusal, which is a oneway request).
func (e *linkEnd) Reply(r actors.Response) { e.write(netio.WharfCodec{}.AppendResponse(nil, &r)) }

// Send implements actors.Conn: encoded with the broker's own codec.
func (e *linkEnd) Send(req protocol.Request) {
	frame, err := netio.WharfCodec{}.AppendRequest(nil, req)
	if err != nil {
		e.s.w.Violationf("%s could not encode %v: %v", e.node.name, req.RequestCode(), err)
		return
	}
	e.write(frame)
}

// write carries a frame to the other end, unless the link is broken.
func (e *linkEnd) write(frame []byte) {
	if e.dead() || e.other.dead() {
		return
	}
	if e.partitioned() {
		// A partition stalls the stream; the ends find out by their
		// heartbeat timeouts (a name server by the lease). Nothing more
		// gets through this connection.
		e.s.w.Tracef("link %d broken by the partition", e.id)
		e.closed, e.other.closed = true, true
		e.severed, e.other.severed = true, true
		return
	}
	f, err := protocol.DecodeFrame(frame, protocol.DefaultLimits())
	if err != nil {
		e.s.w.Violationf("%s wrote an undecodable frame on link %d: %v", e.node.name, e.id, err)
		return
	}
	switch {
	case e.ns > 0:
		e.s.onNSFrame(e, f)
	case e.kind == kindHA:
		e.s.onHAFrame(e, f)
	}
	at := maxTime(e.s.w.Now().Add(e.s.net.sample(e.s.w)), e.next)
	if e.kind == kindCtl {
		at = maxTime(at, e.s.cutUntil(e.node, e.other.node)) // a partition stalls the stream
	}
	if e.kind == kindCtl && e.s.w.Now().Before(e.s.ctlLossUntil) {
		// Loss and reordering on the controllers' links: raft
		// retransmits, a broker's request times out and is asked again.
		if e.s.w.rng.Intn(10) == 0 {
			return
		}
		at = e.s.w.Now().Add(time.Duration(1+e.s.w.rng.Intn(20)) * e.s.net.sample(e.s.w))
	}
	e.next = at
	dst := e.other
	e.s.w.at(at, owner{dst.node, dst.epoch}, func() {
		if dst.dead() {
			return
		}
		dst.handler.Deliver(&actors.Inbound{Conn: dst, Frames: []*protocol.Frame{f}})
	})
}

// partitioned reports whether a partition cuts the link: between a
// master and its slaves, or between a broker and a name server.
func (e *linkEnd) partitioned() bool {
	if e.kind == kindCtl {
		return false // it stalls instead (write)
	}
	if e.ns == 0 && e.s.cfg.Ctl != nil {
		return e.s.cutBetween(e.node, e.other.node)
	}
	if e.ns > 0 {
		b := e.node
		if b.isNameServer() {
			b = e.other.node
		}
		return e.s.cuts[nsCut{b, e.ns - 1}]
	}
	return e.node.g.haPartitioned
}

// Call implements the registrar's caller: a request that wants an answer,
// which comes back to the other end's handler with the same opaque.
func (e *linkEnd) Call(opaque uint32, req protocol.Request) {
	frame, err := protocol.AppendRequest(nil, opaque, 0, req)
	if err != nil {
		e.s.w.Violationf("%s could not encode %v: %v", e.node.name, req.RequestCode(), err)
		return
	}
	e.write(frame)
}

// Close closes both ends; each side's handler hears of it, unless a
// partition broke the link: then the other side never does.
func (e *linkEnd) Close(reason string) {
	if e.gone {
		return
	}
	e.s.w.Tracef("link %d closed by %s: %s", e.id, e.node.name, reason)
	e.closed, e.other.closed = true, true
	e.s.disconnect(e)
	if !e.severed {
		e.s.disconnect(e.other)
	}
}

// disconnect tells an end's handler, once, after a network delay.
func (s *Sim) disconnect(e *linkEnd) {
	if e.gone {
		return
	}
	e.gone = true
	s.w.at(s.w.Now().Add(s.net.sample(s.w)), owner{e.node, e.epoch}, func() { e.handler.Disconnected(e) })
}

var errRefused = errors.New("connection refused")

// dial is a slave's Env.Dial: a link to its master's replication port.
func (s *Sim) dial(from *Node, h actors.Handler) (actors.Conn, error) {
	g := from.g
	m := g.master
	if !m.up || g.haPartitioned {
		return nil, fmt.Errorf("dial %s: %w", m.name, errRefused)
	}
	s.conns++
	a := &linkEnd{s: s, id: s.conns, node: from, epoch: from.epoch, handler: h}
	b := &linkEnd{s: s, id: s.conns, node: m, epoch: m.epoch, handler: m.haServe}
	a.other, b.other = b, a
	g.links = append(g.links, a)
	s.w.Tracef("link %d: %s -> %s", a.id, from.name, m.name)
	return a, nil
}

// resetLinks closes every link of group g with an end on n (n crashed: the
// peer's kernel answers with a reset).
func (s *Sim) resetLinks(g *brokerGroup, n *Node) {
	keep := g.links[:0]
	for _, a := range g.links {
		if a.node == n || a.other.node == n {
			a.closed, a.other.closed = true, true
			if a.node != n {
				s.disconnect(a)
			} else {
				s.disconnect(a.other)
			}
			continue
		}
		if !a.closed {
			keep = append(keep, a)
		}
	}
	g.links = keep
	nsKeep := s.nsLinks[:0]
	for _, a := range s.nsLinks {
		if a.node == n {
			a.closed, a.other.closed = true, true
			if !a.severed {
				s.disconnect(a.other)
			}
			continue
		}
		if !a.closed {
			nsKeep = append(nsKeep, a)
		}
	}
	s.nsLinks = nsKeep
	s.resetCtlLinks(n)
}

// onHAFrame checks replication traffic as it is sent: what a master
// streams is exactly its own log.
func (s *Sim) onHAFrame(e *linkEnd, f *protocol.Frame) {
	switch {
	case f.Code == protocol.CodeHAReport && e.s.cfg.Ctl != nil:
		return
	case f.Code == protocol.CodeHAReport && e.node != e.node.g.master:
		if req, err := protocol.DecodeRequest(f, protocol.DefaultLimits()); err == nil {
			e.node.report(req.(*protocol.HAReportRequest).MaxOffset)
		}
		return
	case f.Code == protocol.CodeHARefuse:
		if req, err := protocol.DecodeRequest(f, protocol.DefaultLimits()); err == nil {
			s.w.Tracef("%s refuses %s: %s", e.node.name, e.other.node.name, req.(*protocol.HARefuseRequest).Reason)
		}
		e.other.node.refused = true
		return
	case f.Code != protocol.CodeHATransfer || (e.node != e.node.g.master && e.s.cfg.Ctl == nil):
		return
	}
	req, err := protocol.DecodeRequest(f, protocol.DefaultLimits())
	if err != nil {
		s.w.Violationf("bad HA transfer: %v", err)
		return
	}
	t := req.(*protocol.HATransferRequest)
	if len(t.Data) == 0 {
		return // a heartbeat: no bytes to check
	}
	own, err := e.node.store.CommitLog().Read(t.Offset, len(t.Data))
	if err != nil || string(own) != string(t.Data) {
		s.w.Violationf("the master streamed bytes at %d that are not its log's: %v", t.Offset, err)
	}
}
