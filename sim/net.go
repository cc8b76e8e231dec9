package sim

import (
	"fmt"
	"github.com/wharfmq/wharf/netio"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

// NetModel is the simulated network between clients and brokers.
type NetModel struct {
	LatencyMin, LatencyMax time.Duration // one way, per message
}

// DefaultNet is a loopback-like network.
func DefaultNet() NetModel {
	return NetModel{LatencyMin: 20 * time.Microsecond, LatencyMax: 200 * time.Microsecond}
}

func (m NetModel) sample(w *World) time.Duration {
	return m.LatencyMin + time.Duration(w.rng.Int63n(int64(m.LatencyMax-m.LatencyMin)+1))
}

// peer is a simulated client: it receives the answers of its connections.
type peer interface {
	clientNum() int
	onResponse(c *Conn, f *protocol.Frame)
}

// Conn is a simulated TCP connection from a client to one incarnation of a
// node. It keeps each direction in order (as TCP does) while messages of
// different connections interleave as the seed decides. It is the node's
// side of the Transport seam (actors.Conn).
type Conn struct {
	s       *Sim
	id      uint64
	node    *Node
	epoch   int
	client  peer
	closed  bool
	toNode  time.Time // arrival time of the last message towards the node
	toPeer  time.Time
	arrived map[uint32]time.Time // request opaque -> when the broker got it
}

var _ actors.Conn = (*Conn)(nil)

// ID implements actors.Conn.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr implements actors.Conn.
func (c *Conn) RemoteAddr() string {
	return fmt.Sprintf("10.0.0.%d:%d", c.client.clientNum()%250+1, 40000+c.id%20000)
}

// Close implements actors.Conn.
func (c *Conn) Close(reason string) {
	if !c.closed {
		c.closed = true
		c.s.w.Tracef("conn %d closed by %s: %s", c.id, c.node.name, reason)
	}
}

// Closed lets the broker skip work for a dead connection.
func (c *Conn) Closed() bool { return c.dead() }

// dead reports whether the connection can carry nothing any more.
func (c *Conn) dead() bool { return c.closed || c.node.epoch != c.epoch || !c.node.up }

// Reply implements actors.Conn: the broker answers, encoded by the Wharf
// codec the real listener uses.
func (c *Conn) Reply(r actors.Response) { c.write(netio.WharfCodec{}.AppendResponse(nil, &r)) }

// Send implements actors.Conn: a request of the broker's own (NOTIFY).
func (c *Conn) Send(req protocol.Request) {
	frame, err := netio.WharfCodec{}.AppendRequest(nil, req)
	if err != nil {
		c.s.w.Violationf("%s could not encode %v: %v", c.node.name, req.RequestCode(), err)
		return
	}
	c.write(frame)
}

// write: the frame is checked here, at the instant of the
// acknowledgement, then travels to the client.
func (c *Conn) write(frame []byte) {
	if c.dead() {
		return
	}
	f, err := protocol.DecodeFrame(frame, protocol.DefaultLimits())
	if err != nil {
		c.s.w.Violationf("%s wrote an undecodable frame: %v", c.node.name, err)
		return
	}
	var lat time.Duration
	if t, ok := c.arrived[f.Opaque]; ok {
		lat = c.s.w.Now().Sub(t)
		delete(c.arrived, f.Opaque)
	}
	c.s.onAck(c, f, lat)
	if c.node.partitioned {
		return
	}
	at := maxTime(c.s.w.Now().Add(c.s.net.sample(c.s.w)+c.node.slow), c.toPeer)
	c.toPeer = at
	c.s.w.at(at, owner{}, func() { c.client.onResponse(c, f) })
}

// send carries request frames to the node, as one read burst.
func (c *Conn) send(frames ...[]byte) {
	if c.dead() || c.node.partitioned {
		return
	}
	at := maxTime(c.s.w.Now().Add(c.s.net.sample(c.s.w)), c.toNode)
	c.toNode = at
	node, epoch := c.node, c.epoch
	c.s.w.at(at, owner{node, epoch}, func() {
		if c.dead() || node.partitioned {
			return
		}
		in := &actors.Inbound{Conn: c}
		// One buffer for the burst, as netio reads it: the frames alias
		// it, and a burst of sends only gets a Release that poisons it,
		// as netio's reuse of the buffer would overwrite it. Whatever the
		// broker still read of a burst after releasing it (or a burst it
		// recycled) then shows as wrong data in the checks.
		total := 0
		for _, b := range frames {
			total += len(b)
		}
		buf := make([]byte, 0, total)
		sendsOnly := len(frames) > 0
		for _, b := range frames {
			start := len(buf)
			buf = append(buf, b...)
			f, err := protocol.DecodeFrame(buf[start:], protocol.DefaultLimits())
			if err != nil {
				c.s.w.Violationf("client sent an undecodable frame: %v", err)
				return
			}
			c.arrived[f.Opaque] = c.s.w.Now()
			in.Frames = append(in.Frames, f)
			sendsOnly = sendsOnly && (f.Code == protocol.CodeSendMessage || f.Code == protocol.CodeSendBatchMessage)
		}
		if sendsOnly {
			released := false
			in.Release = func() {
				if released {
					c.s.w.Violationf("a burst of sends released twice")
				}
				released = true
				for i := range buf {
					buf[i] = 0xee
				}
			}
		}
		node.serve.Deliver(in)
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
