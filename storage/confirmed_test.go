package storage

import (
	"fmt"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// TestDispatchConfirmedOnly: under DispatchConfirmedOnly (controller mode)
// a restart dispatches no more than the checkpoint says was dispatched,
// whether the stop was clean or a power cut (which may leave ConsumeQueue
// pages of later dispatches), while appends still continue every queue
// past the records held back. Without it, Open dispatches the whole log.
func TestDispatchConfirmedOnly(t *testing.T) {
	for _, tc := range []struct {
		confirmedOnly bool
		stop          string
	}{
		{true, "clean"}, {true, "power cut"}, {false, "clean"}, {false, "power cut"},
	} {
		t.Run(fmt.Sprintf("confirmedOnly=%v/%s", tc.confirmedOnly, tc.stop), func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := testConfig("/s")
			cfg.DispatchConfirmedOnly = tc.confirmedOnly
			s, _ := mustOpen(t, mem, cfg)
			res := fill(t, s, 1, 60)
			confirmed := res[30].PhyOffset // the records before it are confirmed
			if _, err := s.Dispatch(confirmed, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			end := s.CommitLog().MaxOffset()
			if _, err := s.CommitLog().Flush(end); err != nil {
				t.Fatal(err)
			}
			if tc.stop == "clean" {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				// A later dispatch that no checkpoint recorded, then the cut.
				if _, err := s.Dispatch(res[45].PhyOffset, nil); err != nil {
					t.Fatal(err)
				}
				mem = mem.Crash(7, vfs.CrashOptions{})
			}
			s, rep := mustOpen(t, mem, cfg)
			defer s.Close()
			wantTo := end
			if tc.confirmedOnly {
				wantTo = confirmed
			}
			if s.Dispatched() != wantTo || rep.Undispatched != end-wantTo || s.CommitLog().MaxOffset() != end {
				t.Fatalf("dispatched %d (undispatched %d bytes), log end %d; want dispatched %d of %d (%v)", s.Dispatched(), rep.Undispatched, s.CommitLog().MaxOffset(), wantTo, end, rep)
			}
			if err := Check(s); err != nil {
				t.Fatal(err)
			}
			// Each queue holds exactly the records below the dispatch
			// position; the next append continues after all of them.
			held, all := map[QueueKey]int64{}, map[QueueKey]int64{}
			for i, r := range res {
				k := QueueKey{[]string{"a", "b"}[i%2], int32(i % 3)}
				all[k]++
				if r.PhyOffset < wantTo {
					held[k]++
				}
			}
			for k := range all {
				if _, max := s.ConsumeQueueBounds(k); max != held[k] {
					t.Errorf("queue %v: max %d, want %d (the records below the dispatch position)", k, max, held[k])
				}
				if got := s.CommitLog().QueueOffset(k); got != all[k] {
					t.Errorf("queue %v: next queue offset %d, want %d (after every record in the log)", k, got, all[k])
				}
			}
			// A consumer that had read further than the store dispatched
			// waits (the offset may be among the records held back), and
			// is told its offset moved only once nothing is held back.
			k := QueueKey{"a", 0}
			beyond := held[k] + 2
			if res, _ := s.GetMessages(k, beyond, GetLimits{}, nil); tc.confirmedOnly && res.Status != GetOffsetNotDispatched {
				t.Errorf("a pull beyond the dispatched part of %v: %v, want %v", k, res.Status, GetOffsetNotDispatched)
			}
			// Dispatching the rest (the broker confirmed it) completes them.
			if _, err := s.Dispatch(end, nil); err != nil {
				t.Fatal(err)
			}
			for k := range all {
				if _, max := s.ConsumeQueueBounds(k); max != all[k] {
					t.Errorf("queue %v after dispatching the rest: max %d, want %d", k, max, all[k])
				}
			}
			if res, _ := s.GetMessages(k, all[k]+1, GetLimits{}, nil); res.Status != GetOffsetOverflowBadly {
				t.Errorf("a pull beyond the whole log with nothing held back: %v, want %v", res.Status, GetOffsetOverflowBadly)
			}
			if err := Check(s); err != nil {
				t.Fatal(err)
			}
		})
	}
}
