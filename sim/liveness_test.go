package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client/sendpath"

	"github.com/wharfmq/wharf/storage/vfs"
)

// runBroken runs a seed's load, heals the cluster, lets breakIt undo part
// of the healing, and runs the convergence phase: its violations.
func runBroken(t *testing.T, opt Options, breakIt func(*Sim)) []string {
	t.Helper()
	s, err := newSim(opt)
	if err == nil {
		err = s.start()
	}
	if err != nil {
		t.Fatal(err)
	}
	s.w.RunUntil(Epoch.Add(s.sc.Duration), s.checkStep)
	s.heal()
	breakIt(s)
	s.converge()
	return s.w.violation
}

// TestLivenessCatchesNoConvergence: a cluster that cannot converge after
// healing fails the run, with what did not converge; the same seed left
// alone converges (so the check does not fail everything).
func TestLivenessCatchesNoConvergence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		scenario string
		breakIt  func(*Sim)
		want     string // in the violation; "" for none
	}{
		{"healed slave", "async-master", func(*Sim) {}, ""},
		{"slave stays down", "async-master", func(s *Sim) {
			sl := s.groups[0].slaves[0]
			if sl.up {
				sl.crash(vfs.ProcessCrash)
			}
			sl.epoch++ // its scheduled restart, if any, is dropped
		}, "sim-a-s1 is down"},
		{"healed group", "rebalance", func(*Sim) {}, ""},
		{"every member crashes", "rebalance", func(s *Sim) {
			for _, m := range s.members {
				if m.alive {
					m.crash()
				}
			}
		}, "consumed by 0 members"},
		{"an acknowledged message is not in its queue", "sync-flush", func(s *Sim) {
			// A broker heal restarted checks its recovered log against what
			// was acknowledged: let that happen first, so that the break is
			// left to the liveness phase to find.
			s.w.RunUntil(s.w.Now().Add(time.Second), s.checkStep)
			for _, k := range sortedSent(s.sent) {
				if sm := s.sent[k]; sm.acked && !sm.lost {
					sm.qo += 1 << 20
					return
				}
			}
		}, "acknowledged messages are not consumable"},
		{"healed name servers", "ns-partition", func(*Sim) {}, ""},
		{"a master stays cut off from a name server", "ns-partition", func(s *Sim) {
			key := nsCut{s.groups[0].master, 0}
			s.cuts[key], s.cutAt[key] = true, s.w.Now()
		}, "sim-a is not registered at ns-1"},
		{"a producer keeps a route without a group", "ns-master-crash", func(s *Sim) {
			// A route newer than any the name servers give: the producers
			// never replace it, and it lacks sim-b.
			for _, c := range s.clients {
				if c.table != nil {
					c.table.Update(sendpath.Route{Topic: simTopic, Version: math.MaxInt64, Fetched: s.w.Now(),
						Queues: sendpath.Queues(s.groups[0].master.addr.String(), simQueues)})
				}
			}
		}, "queues of sim-b, not 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := runBroken(t, Options{Seed: 5, Scenario: tc.scenario}, tc.breakIt)
			got := strings.Join(vs, "\n")
			switch {
			case tc.want == "" && len(vs) > 0:
				t.Fatalf("left alone, the run did not converge:\n%s", got)
			case tc.want != "" && (!strings.Contains(got, "not converged") || !strings.Contains(got, tc.want)):
				t.Fatalf("want a convergence violation with %q, got:\n%s", tc.want, got)
			}
		})
	}
}
