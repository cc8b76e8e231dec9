package client

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// fakeController answers every GET_METADATA_INFO on a loopback port with md.
func fakeController(t *testing.T, md *protocol.ControllerMetadata) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serveMetadata(c, md)
		}
	}()
	return l.Addr().String()
}

func serveMetadata(c net.Conn, md *protocol.ControllerMetadata) {
	defer c.Close()
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := protocol.Split(buf, protocol.Limits{})
		if err != nil {
			return
		}
		if n == 0 {
			m, err := c.Read(chunk)
			if err != nil {
				return
			}
			buf = append(buf, chunk[:m]...)
			continue
		}
		f, err := protocol.DecodeFrame(buf[:n], protocol.Limits{})
		buf = append([]byte(nil), buf[n:]...)
		if err != nil {
			return
		}
		out, err := protocol.AppendResponse(nil, f.Code, f.Opaque, protocol.StatusOK, "", md)
		if err != nil || f.Code != protocol.CodeControllerGetMetadataInfo {
			out, _ = protocol.AppendResponse(nil, f.Code, f.Opaque, protocol.StatusRequestCodeNotSupported, "no", nil)
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func TestControllerMetadata(t *testing.T) {
	group := protocol.ReplicaInfo{GroupRef: protocol.GroupRef{ClusterName: "c", BrokerName: "g"}, MasterID: 2, MasterEpoch: 4,
		SyncStateSet: []int64{2, 3}, SyncStateSetEpoch: 7, Replicas: []protocol.Replica{{BrokerID: 2, BrokerAddr: "b:1", Alive: true}}}
	leader := fakeController(t, &protocol.ControllerMetadata{IsLeader: true, Groups: []protocol.ReplicaInfo{group}})
	follower := fakeController(t, &protocol.ControllerMetadata{LeaderAddr: leader, Term: 5})
	dead := func() string { // a port nobody listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}()
	opts := []Option{WithTimeout(time.Second), WithDialTimeout(time.Second)}

	nodes, err := ControllerNodes(testCtx(t), follower+";"+dead+";"+leader, opts...)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("nodes %+v, err %v", nodes, err)
	}
	if n := nodes[0]; n.Addr != follower || n.Err != nil || n.IsLeader || n.LeaderAddr != leader || n.Term != 5 {
		t.Errorf("follower %+v", n)
	}
	if n := nodes[1]; n.Addr != dead || n.Err == nil {
		t.Errorf("unreachable node %+v", n)
	}
	md, err := ControllerMetadata(testCtx(t), follower+";"+dead+";"+leader, opts...)
	if err != nil || md.Addr != leader || len(md.Groups) != 1 || md.Groups[0].MasterEpoch != 4 || !md.Groups[0].Replicas[0].Alive {
		t.Fatalf("leader's metadata %+v, err %v", md, err)
	}
	if _, err := ControllerMetadata(testCtx(t), follower+";"+dead, opts...); !errors.Is(err, ErrNoControllerLeader) {
		t.Fatalf("without a leader: %v", err)
	}
	if _, err := ControllerNodes(testCtx(t), " ; ", opts...); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("empty list: %v", err)
	}
}
