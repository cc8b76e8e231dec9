package netio

import (
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
