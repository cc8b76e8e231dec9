package main

import (
	"errors"
	"testing"
	"time"

	"github.com/wharfmq/wharf/client"
)

// TestConsumeIdle: --idle-exit counts from the first assignment, or from
// the last message; a member never assigned stops after idleExit + 10 s.
func TestConsumeIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const idleExit = time.Second
	type tick struct {
		at       time.Duration
		assigned bool
		last     time.Duration // when the last message came; 0: none
		want     bool
	}
	tests := []struct {
		name  string
		ticks []tick
	}{
		{"assigned at once, no message", []tick{{at: 0, assigned: true}, {at: 999 * time.Millisecond}, {at: time.Second, want: true}}},
		{"idle counts from the assignment", []tick{{at: 5 * time.Second, assigned: true}, {at: 5900 * time.Millisecond}, {at: 6 * time.Second, want: true}}},
		{"a message restarts the idle time", []tick{{at: 0, assigned: true}, {at: 2 * time.Second, last: 1500 * time.Millisecond}, {at: 2500 * time.Millisecond, last: 1500 * time.Millisecond, want: true}}},
		{"never assigned waits idleExit + 10 s", []tick{{at: 5 * time.Second}, {at: 10999 * time.Millisecond}, {at: 11 * time.Second, want: true}}},
		{"never assigned, but a message came", []tick{{at: 11 * time.Second, last: 10500 * time.Millisecond}, {at: 11500 * time.Millisecond, last: 10500 * time.Millisecond, want: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := consumeIdle{idleExit: idleExit, start: t0}
			asked := false
			for i, k := range tt.ticks {
				var last int64
				if k.last != 0 {
					last = at(k.last).UnixNano()
				}
				asked = false
				got := d.idle(at(k.at), func() bool { asked = true; return k.assigned }, last)
				if got != k.want {
					t.Fatalf("tick %d at %v: idle %v, want %v", i, k.at, got, k.want)
				}
			}
			if !d.assignedAt.IsZero() && asked {
				t.Errorf("assignment asked again after it was seen")
			}
		})
	}
}

// TestBrokerWatch: the broker counts as gone after --broker-wait of
// unreachable pulls, a gap of more than 2*wait + 5 s starts over, and other
// errors, or a run on --namesrv, never stop it.
func TestBrokerWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	unavailable := client.ErrBrokerUnavailable
	other := errors.New("pull: some other failure")
	tests := []struct {
		name      string
		onCluster bool
		errs      []error
		at        []time.Duration
		want      bool
	}{
		{"one failure", false, []error{unavailable}, []time.Duration{0}, false},
		{"failing for the wait", false, []error{unavailable, unavailable}, []time.Duration{0, 2 * time.Second}, true},
		{"just short of the wait", false, []error{unavailable, unavailable}, []time.Duration{0, 1999 * time.Millisecond}, false},
		{"a long gap starts over", false, []error{unavailable, unavailable, unavailable}, []time.Duration{0, 1 * time.Second, 11 * time.Second}, false},
		{"a short gap does not", false, []error{unavailable, unavailable, unavailable}, []time.Duration{0, 1 * time.Second, 9 * time.Second}, true},
		{"other errors", false, []error{other, other}, []time.Duration{0, 5 * time.Second}, false},
		{"on --namesrv", true, []error{unavailable, unavailable}, []time.Duration{0, 5 * time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newBrokerWatch(&consumeFlags{brokerWait: 2 * time.Second})
			w.onCluster = tt.onCluster
			for i, err := range tt.errs {
				w.note(t0.Add(tt.at[i]), err)
			}
			select {
			case err := <-w.gone:
				if !tt.want {
					t.Fatalf("gone: %v", err)
				}
				if !errors.Is(err, client.ErrBrokerUnavailable) {
					t.Fatalf("gone with %v", err)
				}
			default:
				if tt.want {
					t.Fatal("not gone")
				}
			}
		})
	}
}
