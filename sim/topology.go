package sim

import (
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/storage"
)

// GroupSpec is one broker group of a seed's topology: a master and its
// slaves, all with the group's brokerName.
type GroupSpec struct {
	Name           string // brokerName: sim-a, sim-b, sim-c
	Slaves         int    // 0-2
	Role           string // the master's brokerRole
	InSyncReplicas int    // copies a SYNC_MASTER send needs, the master's included: 1..1+Slaves
	// Drift is each node's clock offset (master first): the node's Clock
	// seam reads virtual time plus it; its timers stay on the shared
	// timeline.
	Drift []time.Duration
	// Disk is each node's disk model (master first).
	Disk []DiskModel
}

// Config is a seed's swarm configuration: the topology and the broker
// settings, drawn from the legal space within what the scenario needs and
// the invariants allow. The same seed draws the same Config.
type Config struct {
	Flush             actors.FlushDiskType
	SegmentSize       int64         // mappedFileSizeCommitLog (master and slaves must agree)
	SyncFlushTimeout  time.Duration // syncFlushTimeout
	SlaveTimeout      time.Duration // a SYNC_MASTER send's wait for its slaves
	HAHeartbeat       time.Duration // haSendHeartbeatInterval
	HAHousekeeping    time.Duration // haHousekeepingInterval: a silent link is closed
	ConsumerHeartbeat time.Duration // group members heartbeat this often
	Groups            []GroupSpec
	// NameServers are the name servers (1-2); every broker registers with
	// each, and producers read their routes from them.
	NameServers     []NSSpec
	BrokerHeartbeat time.Duration // a broker heartbeats each name server this often
	Lease           time.Duration // the lease brokers ask for (heartbeatTimeoutMillis)
	RouteRefresh    time.Duration // producers fetch their routes again this often
	// Ctl is controller mode (the scenario's Controller): the controller
	// nodes and their timing; nil: brokers with static roles.
	Ctl *CtlConfig
}

// NSSpec is one name server of a seed's topology.
type NSSpec struct {
	Name  string        // ns-1, ns-2
	Drift time.Duration // its clock's offset from virtual time
}

// String is the one-line form the trace header and the failure report
// print, so that a failure can be read without a replay.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flush=%s segment=%dKiB syncFlushTimeout=%v slaveTimeout=%v haHeartbeat=%v haHousekeeping=%v consumerHeartbeat=%v",
		c.Flush, c.SegmentSize>>10, c.SyncFlushTimeout, c.SlaveTimeout, c.HAHeartbeat, c.HAHousekeeping, c.ConsumerHeartbeat)
	for _, g := range c.Groups {
		fmt.Fprintf(&b, " | %s %s", g.Name, g.Role)
		if g.Slaves > 0 {
			fmt.Fprintf(&b, "+%d slave", g.Slaves)
			if g.Slaves > 1 {
				b.WriteString("s")
			}
		}
		if g.Role == actors.RoleSyncMaster {
			fmt.Fprintf(&b, " isr=%d", g.InSyncReplicas)
		}
		b.WriteString(" drift=")
		for i, d := range g.Drift {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%+dms", d.Milliseconds())
		}
	}
	fmt.Fprintf(&b, " | namesrv brokerHeartbeat=%v lease=%v routeRefresh=%v", c.BrokerHeartbeat, c.Lease, c.RouteRefresh)
	for _, ns := range c.NameServers {
		fmt.Fprintf(&b, " %s drift=%+dms", ns.Name, ns.Drift.Milliseconds())
	}
	if c.Ctl != nil {
		b.WriteString(" | " + c.Ctl.String())
	}
	return b.String()
}

// chooseConfig draws a seed's Config. A scenario that names a role (the
// replication scenarios) gets at least one slave per group and that role;
// any other gets 0-2 slaves per group and, with slaves, either role.
func chooseConfig(rng *rand.Rand, sc Scenario) Config {
	pick := func(ds ...time.Duration) time.Duration { return ds[rng.Intn(len(ds))] }
	c := Config{
		Flush:             sc.Flush,
		SegmentSize:       int64(128<<10) << rng.Intn(3),
		SyncFlushTimeout:  sc.FlushWait,
		SlaveTimeout:      pick(200*time.Millisecond, 300*time.Millisecond, 500*time.Millisecond),
		HAHeartbeat:       pick(50*time.Millisecond, 100*time.Millisecond, 200*time.Millisecond),
		ConsumerHeartbeat: pick(100*time.Millisecond, 200*time.Millisecond, 300*time.Millisecond),
	}
	if c.SyncFlushTimeout == 0 {
		c.SyncFlushTimeout = pick(200*time.Millisecond, 500*time.Millisecond, 800*time.Millisecond)
	}
	c.HAHousekeeping = c.HAHeartbeat * time.Duration(3+rng.Intn(4))
	for i := range 1 + rng.Intn(3) {
		c.Groups = append(c.Groups, chooseGroup(rng, sc, i))
	}
	for i := len(c.Groups); i < sc.MinGroups; i++ {
		c.Groups = append(c.Groups, chooseGroup(rng, sc, i))
	}
	chooseNameServers(rng, &c)
	if sc.Controller {
		c.Ctl = chooseControllers(rng)
	}
	return c
}

// chooseNameServers draws the name servers and the registration and
// route timing. The client's and broker's defaults (2 s refresh, 1 s
// heartbeats, 5 s lease) outlast a seed's 1-2.5 s of load, so the seed
// scales them down, keeping their proportions: a lease of 3-5 heartbeats,
// a refresh of 2-10 heartbeats, so that a lease expires and a refresh
// drops it within a run.
func chooseNameServers(rng *rand.Rand, c *Config) {
	pick := func(ds ...time.Duration) time.Duration { return ds[rng.Intn(len(ds))] }
	c.BrokerHeartbeat = pick(50*time.Millisecond, 100*time.Millisecond)
	c.Lease = c.BrokerHeartbeat * time.Duration(3+rng.Intn(3))
	c.RouteRefresh = pick(200*time.Millisecond, 300*time.Millisecond, 500*time.Millisecond)
	for i := range 1 + rng.Intn(2) {
		c.NameServers = append(c.NameServers, NSSpec{Name: fmt.Sprintf("ns-%d", i+1),
			Drift: time.Duration(rng.Intn(201)-100) * time.Millisecond})
	}
}

func chooseGroup(rng *rand.Rand, sc Scenario, i int) GroupSpec {
	g := GroupSpec{Name: fmt.Sprintf("sim-%c", 'a'+i), Role: actors.RoleAsyncMaster, InSyncReplicas: 1}
	switch {
	case sc.Controller:
		// The controllers assign the roles: a master and 1-2 slaves that
		// may each become master.
		g.Slaves, g.Role = 1+rng.Intn(2), RoleController
	case sc.Role != "":
		g.Slaves, g.Role = 1+rng.Intn(2), sc.Role
	case !sc.NoSlaves:
		g.Slaves = rng.Intn(3)
		if g.Slaves > 0 && rng.Intn(2) == 0 {
			g.Role = actors.RoleSyncMaster
		}
	}
	if g.Role == actors.RoleSyncMaster {
		g.InSyncReplicas = 1 + rng.Intn(g.Slaves+1)
		if sc.Role != "" && g.InSyncReplicas == 1 {
			g.InSyncReplicas = 2 // a replication scenario waits for a slave's copy
		}
	}
	for range 1 + g.Slaves {
		g.Drift = append(g.Drift, time.Duration(rng.Intn(201)-100)*time.Millisecond)
		d := DefaultDisk()
		d.FsyncP50 = time.Duration(100+rng.Intn(101)) * time.Microsecond
		d.FsyncP99 = 2 * d.FsyncP50
		g.Disk = append(g.Disk, d)
	}
	return g
}

// nodeConfigs is the actors' and the store's configuration of node id (0
// the master, 1.. its slaves) of group gi.
func nodeConfigs(c Config, gi, id int) (actors.Config, storage.Config) {
	g := c.Groups[gi]
	a := actors.DefaultConfig()
	a.BrokerName = g.Name
	a.BrokerID = int64(id)
	a.StoreHost = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(gi), byte(1 + id)}), 10911)
	a.BrokerRole = g.Role
	if id > 0 {
		a.BrokerRole = actors.RoleSlave
	}
	a.InSyncReplicas = g.InSyncReplicas
	a.SlaveTimeout = c.SlaveTimeout
	a.HASendHeartbeatInterval = c.HAHeartbeat
	a.HAHousekeepingInterval = c.HAHousekeeping
	a.HAMetadataInterval = 500 * time.Millisecond
	a.HAMasterAddress = g.Name + "-master"
	a.ConsumerHeartbeatInterval = c.ConsumerHeartbeat
	a.DefaultTopicQueueNums = simQueues
	a.FlushDiskType = c.Flush
	a.SyncFlushTimeout = c.SyncFlushTimeout
	a.FlushCommitLogLeastPages = 0 // the window check assumes every interval flushes what is dirty
	a.FlushIntervalConsumeQueue = 200 * time.Millisecond
	a.FlushConsumerOffsetInterval = time.Second
	a.CleanResourceInterval = 0
	for i := range c.NameServers {
		a.NamesrvAddr = append(a.NamesrvAddr, nsAddr(i).String())
	}
	a.BrokerHeartbeatInterval = c.BrokerHeartbeat
	a.HeartbeatTimeout = c.Lease
	s := storage.DefaultConfig("/data")
	s.MappedFileSizeCommitLog = c.SegmentSize
	s.MappedFileSizeConsumeQueue = 512
	s.MaxMessageSize = 64 << 10
	s.MaxHashSlotNum = 512
	s.MaxIndexNum = 4096
	s.StoreHost = a.StoreHost
	s.WarmMappedFileEnable = false
	if c.Ctl != nil {
		ctlBrokerConfig(&a, c, gi, id)
		s.DispatchConfirmedOnly = true
	}
	return a, s
}

// nsAddr is the address of name server i.
func nsAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, 0, byte(1 + i)}), 9876)
}

// nodeName is how the trace names node id of group g.
func nodeName(g string, id int) string {
	if id == 0 {
		return g
	}
	return fmt.Sprintf("%s-s%d", g, id)
}
