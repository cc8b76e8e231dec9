package sim

import (
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"time"

	"github.com/wharfmq/wharf/actors"
)

// RoleController is how the configuration line names a group in
// controller mode: its brokers have no brokerRole, the controllers assign
// one.
const RoleController = "CONTROLLER"

// CtlSpec is one controller node of a seed's topology.
type CtlSpec struct {
	Name  string // ctl-1, ctl-2, ctl-3
	Drift time.Duration
	Disk  DiskModel
}

// CtlConfig is controller mode's part of a seed's configuration: the
// controller nodes and the failover timing. The production defaults (3 s
// heartbeat timeout, 1.5 s lease, 1 s raft election timeout) outlast a
// seed's load, so the seed scales them down, keeping the rule that makes
// the lease safe: the lease stays below the heartbeat timeout by far more
// than any clock-rate error (drift here is an offset, never a rate).
type CtlConfig struct {
	Nodes            []CtlSpec     // 1 or 3
	Heartbeat        time.Duration // the brokers' controllerHeartbeatInterval
	HeartbeatTimeout time.Duration // the controllers': a master silent this long is replaced
	Lease            time.Duration // masterLeaseMillis
	RequestTimeout   time.Duration // a broker's controller request unanswered this long failed
	NotCatchup       time.Duration // haMaxTimeSlaveNotCatchup
	Election         time.Duration // raft's election timeout E (timers drawn from [E, 2E))
	Tick             time.Duration // raft's tick
}

func (c CtlConfig) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "controllers heartbeat=%v timeout=%v lease=%v request=%v notCatchup=%v election=%v",
		c.Heartbeat, c.HeartbeatTimeout, c.Lease, c.RequestTimeout, c.NotCatchup, c.Election)
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, " %s drift=%+dms", n.Name, n.Drift.Milliseconds())
	}
	return b.String()
}

// chooseControllers draws 1 or 3 controller nodes and the failover timing.
func chooseControllers(rng *rand.Rand) *CtlConfig {
	pick := func(ds ...time.Duration) time.Duration { return ds[rng.Intn(len(ds))] }
	c := &CtlConfig{
		Heartbeat:        pick(50*time.Millisecond, 100*time.Millisecond),
		HeartbeatTimeout: pick(600*time.Millisecond, 800*time.Millisecond, 1000*time.Millisecond),
		Election:         pick(200*time.Millisecond, 300*time.Millisecond),
		Tick:             50 * time.Millisecond,
	}
	// A lease of 40-60 % of the heartbeat timeout, and at least three
	// heartbeats (a lost answer must not fence a healthy master).
	c.Lease = max(c.HeartbeatTimeout*time.Duration(4+rng.Intn(3))/10, 3*c.Heartbeat)
	c.RequestTimeout = 2 * c.Heartbeat
	c.NotCatchup = pick(300*time.Millisecond, 500*time.Millisecond)
	n := 1
	if rng.Intn(3) > 0 {
		n = 3
	}
	for i := range n {
		d := DefaultDisk()
		d.FsyncP50 = time.Duration(100+rng.Intn(101)) * time.Microsecond
		d.FsyncP99 = 2 * d.FsyncP50
		c.Nodes = append(c.Nodes, CtlSpec{Name: fmt.Sprintf("ctl-%d", i+1),
			Drift: time.Duration(rng.Intn(201)-100) * time.Millisecond, Disk: d})
	}
	return c
}

// ctlAddr is the address of controller node i.
func ctlAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 3, 0, byte(1 + i)}), 9878)
}

// haAddr is the haListenPort address node id of group gi announces.
func haAddr(gi, id int) string {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(gi), byte(1 + id)}), 10912).String()
}

// ctlBrokerConfig turns a broker's configuration into controller mode:
// the controllers' addresses, no brokerRole, brokerId or haMasterAddress.
func ctlBrokerConfig(a *actors.Config, c Config, gi, id int) {
	a.EnableControllerMode = true
	a.ControllerAddr = nil
	for i := range c.Ctl.Nodes {
		a.ControllerAddr = append(a.ControllerAddr, ctlAddr(i).String())
	}
	a.BrokerRole, a.BrokerID, a.HAMasterAddress, a.InSyncReplicas = actors.RoleAsyncMaster, 0, "", 1
	a.HAServerAddr = haAddr(gi, id)
	a.ControllerHeartbeatInterval = c.Ctl.Heartbeat
	a.MasterLease = c.Ctl.Lease
	a.ControllerRequestTimeout = c.Ctl.RequestTimeout
	a.HAMaxTimeSlaveNotCatchup = c.Ctl.NotCatchup
}
