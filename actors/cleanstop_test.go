package actors

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/wharfmq/wharf/internal/vtime"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// TestCleanStopRightAfterSendsKeepsEveryEntry stops the broker as soon as a
// burst of sends is acknowledged, with the mailboxes run in a random order
// per seed: entries the reput handed to a ConsumeQueue's owner may still
// wait in its mailbox when it stops. The clean checkpoint must not claim
// them (a reopened store trusts it): every acknowledged message must be in
// its queue after the restart.
func TestCleanStopRightAfterSendsKeepsEveryEntry(t *testing.T) {
	const n = 40
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		loop := vtime.New(testEpoch, vtime.Options[vtime.None]{Pick: func(k int) int { return rng.IntN(k) }})
		fsys := vfs.NewMem()
		cfg := DefaultConfig()
		h := startAt(t, fsys, cfg, loop, Env{})
		var reqs []protocol.Request
		for i := range n {
			reqs = append(reqs, sendReq("T", int32(i%4), "m", fmt.Sprintf("k%d", i)))
		}
		for _, op := range h.send(reqs...) {
			h.ok(op, nil)
		}
		if err := h.stop(); err != nil {
			t.Fatalf("seed %d: stop: %v", seed, err)
		}
		st, rep, err := storage.Open(fsys, testStoreConfig())
		if err != nil {
			t.Fatalf("seed %d: reopen: %v", seed, err)
		}
		total := int64(0)
		for q := range int32(4) {
			_, max := st.ConsumeQueueBounds(storage.QueueKey{Topic: "T", QueueID: q})
			total += max
		}
		// Dispatching again at the stop must not index a key twice.
		for _, k := range []string{"k0", fmt.Sprintf("k%d", n-1)} {
			recs, err := st.QueryByKey("T", k, 0, math.MaxInt64, 10)
			if err != nil || len(recs) != 1 {
				t.Fatalf("seed %d: key %s found %d times (%v), want once", seed, k, len(recs), err)
			}
		}
		_ = st.Close()
		if total != n {
			t.Fatalf("seed %d: %d of %d acknowledged messages in their queues after a clean stop (recovery: %v)", seed, total, n, rep)
		}
	}
}
