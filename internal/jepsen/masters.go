package jepsen

import (
	"cmp"
	"fmt"
	"slices"
)

// CheckMasters' anomalies: "at most one master accepting acknowledged
// writes per epoch", in its two halves.
const (
	// MultipleMasters: two brokers acknowledged sends in one master epoch
	// (two masters at once, or a deposed master writing into its
	// successor's epoch).
	MultipleMasters = "multiple-masters"
	// StaleMaster: a send acknowledged in an epoch was invoked after a
	// send of a newer epoch had been acknowledged: the old master still
	// took writes once the new one had begun to.
	StaleMaster = "stale-master"
)

// Ack is one acknowledged send as CheckMasters sees it: who acknowledged
// it, in which master epoch, and when, as places in the History (Seq of
// the send's Invoke and Complete), which follow real time since every
// record is made as its event happens.
type Ack struct {
	Key       string
	Broker    string // the broker that acknowledged it (its address)
	Epoch     int32  // that broker's master epoch when it did
	Invoked   int    // Seq of the Invoke
	Completed int    // Seq of the Complete
}

// CheckMasters checks acknowledged sends against "one master per epoch":
// every epoch's acks come from one broker (else MultipleMasters, once per
// extra broker of the epoch), and no ack of an epoch belongs to a send
// invoked after the first completed ack of a newer epoch (else
// StaleMaster, once per such ack). Anomalies are sorted as Check's.
func CheckMasters(acks []Ack) []Anomaly {
	type epochAcks struct {
		owner      string // the broker of the epoch's first ack
		first      int    // the Completed of that ack
		others     map[string]bool
		newerFirst int // the earliest first ack of any newer epoch; -1: none
	}
	byEpoch := map[int32]*epochAcks{}
	ordered := slices.SortedFunc(slices.Values(acks), func(a, b Ack) int { return cmp.Compare(a.Completed, b.Completed) })
	var out []Anomaly
	for _, a := range ordered {
		e := byEpoch[a.Epoch]
		if e == nil {
			byEpoch[a.Epoch] = &epochAcks{owner: a.Broker, first: a.Completed, others: map[string]bool{}}
			continue
		}
		if a.Broker != e.owner && !e.others[a.Broker] {
			e.others[a.Broker] = true
			out = append(out, Anomaly{Name: MultipleMasters, Key: a.Key,
				Detail: fmt.Sprintf("epoch %d acknowledged by %s (first at #%d) and by %s (%s at #%d)", a.Epoch, e.owner, e.first, a.Broker, a.Key, a.Completed)})
		}
	}
	epochs := slices.Sorted(func(yield func(int32) bool) {
		for ep := range byEpoch {
			if !yield(ep) {
				return
			}
		}
	})
	newer := -1
	for i := len(epochs) - 1; i >= 0; i-- {
		e := byEpoch[epochs[i]]
		e.newerFirst = newer
		if newer < 0 || e.first < newer {
			newer = e.first
		}
	}
	for _, a := range ordered {
		if e := byEpoch[a.Epoch]; e.newerFirst >= 0 && e.newerFirst < a.Invoked {
			out = append(out, Anomaly{Name: StaleMaster, Key: a.Key,
				Detail: fmt.Sprintf("%s acknowledged by %s in epoch %d, invoked at #%d after a newer epoch's first ack at #%d", a.Key, a.Broker, a.Epoch, a.Invoked, e.newerFirst)})
		}
	}
	slices.SortStableFunc(out, func(a, b Anomaly) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Key, b.Key))
	})
	return out
}
