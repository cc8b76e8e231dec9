package netio

import (
	"net"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
)

// answers collects what comes back on an outbound link.
type answers struct{ frames chan *protocol.Frame }

func (a *answers) Deliver(in *actors.Inbound) {
	for _, f := range in.Frames {
		a.frames <- f
	}
}
func (a *answers) Disconnected(actors.Conn) {}

// TestCallIsAnswered: a Call on an outbound link wants an answer and gets
// it back with its opaque, where Send is oneway and gets none.
func TestCallIsAnswered(t *testing.T) {
	s := startServer(t, newEchoHandler(), Options{})
	a := &answers{frames: make(chan *protocol.Frame, 4)}
	c, err := Dial(s.Addr(), a, DialOptions{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close("test done")
	id := protocol.BrokerIdentity{ClusterName: "c", BrokerName: "b", BrokerAddr: "h:1"}
	c.Send(&protocol.UnregisterBrokerRequest{BrokerIdentity: id})
	c.(interface {
		Call(uint32, protocol.Request)
	}).Call(42, &protocol.UnregisterBrokerRequest{BrokerIdentity: id})
	select {
	case f := <-a.frames:
		if !f.IsResponse() || f.Opaque != 42 || f.Code != protocol.CodeUnregisterBroker {
			t.Fatalf("answer %+v, want the response to opaque 42", f)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to the call")
	}
}

// closedAtDisconnect records whether the link said Closed when its
// Disconnected came.
type closedAtDisconnect struct{ closed chan bool }

func (h *closedAtDisconnect) Deliver(*actors.Inbound) {}
func (h *closedAtDisconnect) Disconnected(c actors.Conn) {
	h.closed <- c.(interface{ Closed() bool }).Closed()
}

// TestOutboundLinkClosedBeforeDisconnected: an outbound link whose peer
// closes it says Closed by the time Disconnected is called, so an owner
// that hears of the link only after its Disconnected (a dial's result
// travels apart from it) can tell it is dead.
func TestOutboundLinkClosedBeforeDisconnected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if nc, err := ln.Accept(); err == nil {
			nc.Close()
		}
	}()
	h := &closedAtDisconnect{closed: make(chan bool, 1)}
	c, err := Dial(ln.Addr().String(), h, DialOptions{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case closed := <-h.closed:
		if !closed {
			t.Fatal("Disconnected came while the link still said it was open")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Disconnected after the peer closed the link")
	}
	if !c.(interface{ Closed() bool }).Closed() {
		t.Fatal("the link does not say Closed after its Disconnected")
	}
}
