package ha

import (
	"strings"
	"testing"

	"github.com/wharfmq/wharf/internal/invariant"
)

// expectViolation fails the test unless fn panics with an
// *invariant.Violation whose message holds want.
func expectViolation(t *testing.T, want string, fn func()) {
	t.Helper()
	if v := invariant.Caught(fn); v == nil || !strings.Contains(v.Msg, want) {
		t.Fatalf("violation %v, want one about %q", v, want)
	}
}

// The invariants of this package guard bugs, not inputs: the public API
// refuses what would break them (a report acknowledging more than was
// sent refuses the slave; AppendRaw publishes all of a transfer or none
// of it). The replicator's is provoked here by breaking a slave's state
// directly; the follower's (its log ends where the master's bytes end
// after an append) would need a broken storage.CommitLog.AppendRaw and
// is not provoked.
func TestInvariantAckedWithinSent(t *testing.T) {
	m := master(t)
	r := NewReplicator(replConfig(), m.CommitLog(), quiet)
	connect(t, r, m, t0, 1)
	r.peers[1].acked = r.peers[1].sent + 1
	expectViolation(t, "ha: slave acked", r.Appended)
}

func TestInvariantSentWithinLog(t *testing.T) {
	m := master(t)
	r := NewReplicator(replConfig(), m.CommitLog(), quiet)
	connect(t, r, m, t0, 1)
	r.peers[1].sent++
	expectViolation(t, "ha: slave acked", r.Appended)
}
