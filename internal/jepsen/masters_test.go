package jepsen

import (
	"strings"
	"testing"
)

func TestCheckMasters(t *testing.T) {
	// a(key, broker, epoch, invoked, completed)
	a := func(key, broker string, epoch int32, inv, done int) Ack {
		return Ack{Key: key, Broker: broker, Epoch: epoch, Invoked: inv, Completed: done}
	}
	for _, tc := range []struct {
		name string
		acks []Ack
		want []string // "name key", in order
	}{
		{name: "none"},
		{name: "one master per epoch, epochs in real-time order",
			acks: []Ack{a("k1", "m", 1, 0, 1), a("k2", "m", 1, 2, 5), a("k3", "s", 2, 6, 7), a("k4", "m", 3, 8, 9)}},
		{name: "an old epoch's ack overlapping the new epoch's first one is concurrent, not stale",
			acks: []Ack{a("k1", "m", 1, 0, 1), a("k2", "s", 2, 2, 4), a("k3", "m", 1, 3, 6)}},
		{name: "two brokers in one epoch",
			acks: []Ack{a("k1", "m", 1, 0, 1), a("k2", "s", 1, 2, 3), a("k3", "s", 1, 4, 5), a("k4", "m", 1, 6, 7)},
			want: []string{"multiple-masters k2"}},
		{name: "an old master acks a send invoked after the new master's first ack",
			acks: []Ack{a("k1", "m", 1, 0, 1), a("k2", "s", 2, 2, 3), a("k3", "m", 1, 4, 5), a("k4", "m", 1, 6, 7)},
			want: []string{"stale-master k3", "stale-master k4"}},
		{name: "stale against any newer epoch, not only the next",
			acks: []Ack{a("k1", "m", 1, 0, 1), a("k2", "s", 3, 2, 3), a("k3", "t", 2, 4, 5), a("k4", "m", 1, 6, 7)},
			want: []string{"stale-master k3", "stale-master k4"}},
		{name: "given out of order",
			acks: []Ack{a("k3", "m", 1, 4, 5), a("k2", "s", 2, 2, 3), a("k1", "m", 1, 0, 1)},
			want: []string{"stale-master k3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, an := range CheckMasters(tc.acks) {
				got = append(got, an.Name+" "+an.Key)
				if an.Detail == "" {
					t.Errorf("%s: no detail", an.Name)
				}
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
