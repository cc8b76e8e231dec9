package brokertest

import (
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// TestControllersElectAndFailOver: the in-process controllers are a real
// raft group: one leads, a replica joins through it, and when it stops
// another leads in a newer term and still knows the replica.
func TestControllersElectAndFailOver(t *testing.T) {
	ctl := StartControllers(t, 3)
	group := protocol.GroupRef{ClusterName: "c", BrokerName: "g"}
	ri, err := ctl.Join(group, "replica-1", "127.0.0.1:1")
	if err != nil || len(ri.Replicas) != 1 || ri.Replicas[0].BrokerID <= 0 {
		t.Fatalf("join: %+v, %v", ri, err)
	}
	old := ctl.Leader()
	term := ctl.Term(old)
	ctl.Stop(old)
	testwait.For(t, testwait.Wall, 20*time.Second, "a new leader", func() bool {
		li := ctl.Leader()
		return li >= 0 && li != old && ctl.Term(li) > term
	})
	ri, err = ctl.Join(group, "replica-2", "127.0.0.1:2")
	if err != nil || len(ri.Replicas) != 2 {
		t.Fatalf("join after the failover: %+v, %v", ri, err)
	}
}
