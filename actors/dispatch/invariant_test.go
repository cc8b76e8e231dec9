package dispatch

import (
	"strings"
	"testing"

	"github.com/wharfmq/wharf/internal/invariant"
	"github.com/wharfmq/wharf/storage"
)

// expectViolation fails the test unless fn panics with an
// *invariant.Violation whose message holds want.
func expectViolation(t *testing.T, want string, fn func()) {
	t.Helper()
	if v := invariant.Caught(fn); v == nil || !strings.Contains(v.Msg, want) {
		t.Fatalf("violation %v, want one about %q", v, want)
	}
}

// wrongLog claims to have read up to next, whatever it was asked.
type wrongLog struct{ next int64 }

func (wrongLog) Deleted() storage.Deleted { return nil }

func (l wrongLog) ForEachDispatch(from, to int64, fn func(int64, *storage.DispatchRecord) error) (int64, error) {
	return l.next, nil
}

// TestInvariantReputPosition: a log that reads backwards, or past what is
// visible, is a broken invariant, not a position to keep.
func TestInvariantReputPosition(t *testing.T) {
	tests := []struct {
		name string
		next int64
		ok   bool
	}{
		{"backwards", 90, false},
		{"past the visible end", 201, false},
		{"to the visible end", 200, true},
		{"nowhere", 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReput(true, 100, 300, 200)
			dispatch := func() { r.Dispatch(wrongLog{tt.next}) }
			if !tt.ok {
				expectViolation(t, "dispatch: reput position moved", dispatch)
				return
			}
			dispatch()
			if pos, _ := r.Position(); pos != tt.next {
				t.Fatalf("position %d, want %d", pos, tt.next)
			}
		})
	}
}

// TestInvariantBarrierAnswers: a barrier answered more times than it has
// owners (here a second answer of the only queue owner after the
// checkpoint completed) breaks an invariant.
func TestInvariantBarrierAnswers(t *testing.T) {
	r := NewReput(false, 0, 0, 0)
	id, _ := r.StartCheckpoint(1)
	r.Ack(Ack{ID: id, Mark: storage.QueueMark{Key: storage.QueueKey{Topic: "a"}}})
	if _, write := r.Ack(Ack{ID: id, IsIndex: true}); !write {
		t.Fatal("the barrier did not complete")
	}
	expectViolation(t, "answered more times than it has owners", func() { r.Ack(Ack{ID: id, IsIndex: true}) })
}

// The Queue's invariants (a held pull has a tick armed by its deadline;
// each held pull leaves once or stays) guard its own bookkeeping: no
// sequence of Pull, Entries, Tick and Stop breaks them, so they are not
// provoked here.
