package client

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// TestControllerMetadata asks a real raft group of three controllers,
// through a follower, a dead address and the leader.
func TestControllerMetadata(t *testing.T) {
	ctl := brokertest.StartControllers(t, 3)
	testwait.For(t, testwait.Wall, 20*time.Second, "a controller leader", func() bool { return ctl.Leader() >= 0 })
	group := protocol.GroupRef{ClusterName: "c", BrokerName: "g"}
	if _, err := ctl.Join(group, "replica-1", "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	li := ctl.Leader()
	addrs := ctl.Addrs()
	leader, follower := addrs[li], addrs[(li+1)%3]
	dead := func() string { // a port nobody listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}()
	opts := []Option{WithTimeout(time.Second), WithDialTimeout(time.Second)}

	var nodes []ControllerNode
	var err error
	// A follower names the leader once the leader's first append reached it.
	testwait.For(t, testwait.Wall, 10*time.Second, "the follower to name the leader", func() bool {
		nodes, err = ControllerNodes(testCtx(t), follower+";"+dead+";"+leader, opts...)
		return err == nil && len(nodes) == 3 && nodes[0].LeaderAddr == leader
	})
	if n := nodes[0]; n.Addr != follower || n.Err != nil || n.IsLeader || n.LeaderAddr != leader || n.Term == 0 {
		t.Errorf("follower %+v", n)
	}
	if n := nodes[1]; n.Addr != dead || n.Err == nil {
		t.Errorf("unreachable node %+v", n)
	}
	md, err := ControllerMetadata(testCtx(t), follower+";"+dead+";"+leader, opts...)
	if err != nil || md.Addr != leader || len(md.Groups) != 1 || md.Groups[0].BrokerName != "g" || len(md.Groups[0].Replicas) != 1 ||
		md.Groups[0].Replicas[0].BrokerAddr != "127.0.0.1:1" || !md.Groups[0].Replicas[0].Alive {
		t.Fatalf("leader's metadata %+v, err %v", md, err)
	}
	if _, err := ControllerMetadata(testCtx(t), follower+";"+dead, opts...); !errors.Is(err, ErrNoControllerLeader) {
		t.Fatalf("without a leader: %v", err)
	}
	if _, err := ControllerNodes(testCtx(t), " ; ", opts...); !errors.Is(err, ErrInvalidParameter) {
		t.Fatalf("empty list: %v", err)
	}
}
