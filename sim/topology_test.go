package sim

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
)

// TestChooseConfig: every seed's configuration is within the legal space
// and what its scenario needs, the same seed draws the same one, and over
// many seeds the whole space is drawn (every group count, slave count and
// role).
func TestChooseConfig(t *testing.T) {
	for _, sc := range Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			seen := map[string]bool{}
			for seed := int64(1); seed <= 300; seed++ {
				c := chooseConfig(rand.New(rand.NewSource(seed)), sc)
				if again := chooseConfig(rand.New(rand.NewSource(seed)), sc); again.String() != c.String() {
					t.Fatalf("seed %d drew %s, then %s", seed, c, again)
				}
				for _, why := range illegal(c, sc) {
					t.Errorf("seed %d: %s: %s", seed, c, why)
				}
				seen[fmt.Sprintf("%d groups", len(c.Groups))] = true
				seen[fmt.Sprintf("%d name servers", len(c.NameServers))] = true
				for _, g := range c.Groups {
					seen[fmt.Sprintf("%d slaves", g.Slaves)] = true
					seen[g.Role] = true
				}
			}
			want := []string{"1 groups", "2 groups", "3 groups", "1 slaves", "2 slaves"}
			if c := chooseConfig(rand.New(rand.NewSource(1)), sc); c.Ctl != nil {
				for seed := int64(1); seed <= 300; seed++ {
					seen[fmt.Sprintf("%d controllers", len(chooseConfig(rand.New(rand.NewSource(seed)), sc).Ctl.Nodes))] = true
				}
			}
			switch {
			case sc.Controller:
				want = append(want, RoleController, "1 controllers", "3 controllers")
			case sc.Role != "":
				want = append(want, sc.Role)
			case sc.NoSlaves:
				want = []string{"1 groups", "2 groups", "3 groups", "0 slaves"}
			default:
				want = append(want, "0 slaves", actors.RoleSyncMaster, actors.RoleAsyncMaster)
			}
			if sc.MinGroups > 1 {
				want = want[1:] // "1 groups"
			}
			want = append(want, "1 name servers", "2 name servers")
			for _, w := range want {
				if !seen[w] {
					t.Errorf("300 seeds never drew %s", w)
				}
			}
		})
	}
}

// illegal lists what is wrong with c for scenario sc.
func illegal(c Config, sc Scenario) []string {
	var bad []string
	if c.Flush != sc.Flush {
		bad = append(bad, "flush differs from the scenario's")
	}
	if len(c.Groups) < max(1, sc.MinGroups) || len(c.Groups) > 3 {
		bad = append(bad, "1-3 groups, at least the scenario's")
	}
	if len(c.NameServers) < 1 || len(c.NameServers) > 2 {
		bad = append(bad, "1-2 name servers")
	}
	for i, ns := range c.NameServers {
		if ns.Name != fmt.Sprintf("ns-%d", i+1) || ns.Drift < -100*time.Millisecond || ns.Drift > 100*time.Millisecond {
			bad = append(bad, "name server "+ns.Name)
		}
	}
	if c.BrokerHeartbeat <= 0 || c.Lease < 3*c.BrokerHeartbeat || c.RouteRefresh <= 0 {
		bad = append(bad, "a lease must outlast three broker heartbeats")
	}
	if c.SegmentSize < 128<<10 || c.HAHousekeeping < 3*c.HAHeartbeat || c.SyncFlushTimeout <= 0 || c.SlaveTimeout <= 0 {
		bad = append(bad, "segment or interval out of range")
	}
	bad = append(bad, illegalCtl(c, sc)...)
	for i, g := range c.Groups {
		switch {
		case sc.Controller && (g.Slaves == 0 || g.Role != RoleController):
			bad = append(bad, g.Name+": controller mode needs a slave that may become master")
		case sc.Controller:
			continue
		case g.Name != fmt.Sprintf("sim-%c", 'a'+i):
			bad = append(bad, "group name "+g.Name)
		case g.Slaves < 0 || g.Slaves > 2 || len(g.Drift) != 1+g.Slaves || len(g.Disk) != 1+g.Slaves:
			bad = append(bad, g.Name+": 0-2 slaves, a drift and a disk per node")
		case sc.Role != "" && (g.Slaves == 0 || g.Role != sc.Role):
			bad = append(bad, g.Name+": the scenario's role needs a slave")
		case sc.NoSlaves && g.Slaves > 0:
			bad = append(bad, g.Name+": the scenario wants no slaves")
		case g.Slaves == 0 && g.Role != actors.RoleAsyncMaster:
			bad = append(bad, g.Name+": SYNC_MASTER without a slave")
		case g.Role == actors.RoleSyncMaster && (g.InSyncReplicas < 1 || g.InSyncReplicas > 1+g.Slaves):
			bad = append(bad, g.Name+": inSyncReplicas out of 1..1+slaves")
		case sc.Role == actors.RoleSyncMaster && g.InSyncReplicas < 2:
			bad = append(bad, g.Name+": a replication scenario must wait for a slave")
		}
	}
	return bad
}

// illegalCtl lists what is wrong with c's controller mode for sc: the
// lease must stay below the controllers' heartbeat timeout (by far more
// than any clock-rate error: drift is an offset here) and outlast three
// heartbeats; 1 or 3 controllers.
func illegalCtl(c Config, sc Scenario) []string {
	cc := c.Ctl
	switch {
	case sc.Controller != (cc != nil):
		return []string{"controller mode is the scenario's"}
	case cc == nil:
		return nil
	case len(cc.Nodes) != 1 && len(cc.Nodes) != 3:
		return []string{"1 or 3 controllers"}
	case cc.Lease >= cc.HeartbeatTimeout*9/10 || cc.Lease < 3*cc.Heartbeat:
		return []string{"the lease must be below 90 % of the heartbeat timeout and outlast three heartbeats"}
	case cc.Election <= 0 || cc.Tick <= 0 || cc.Tick >= cc.Election || cc.RequestTimeout <= 0 || cc.NotCatchup <= 0:
		return []string{"controller timing out of range"}
	}
	return nil
}

// TestScenarioOf: any len(Scenarios) consecutive seeds, negative ones
// included, run every scenario once.
func TestScenarioOf(t *testing.T) {
	for _, first := range []int64{-17, 0, 1, 4, 1000} {
		seen := map[string]int{}
		for seed := first; seed < first+int64(len(Scenarios)); seed++ {
			seen[ScenarioOf(seed).Name]++
		}
		if len(seen) != len(Scenarios) {
			t.Errorf("seeds %d..%d run %v, not every scenario once", first, first+int64(len(Scenarios))-1, seen)
		}
	}
}
