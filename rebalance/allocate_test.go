package rebalance

import (
	"testing"

	"github.com/wharfmq/wharf/protocol"
)

func qs(topic string, n int) []protocol.QueueRef {
	out := make([]protocol.QueueRef, n)
	for i := range out {
		out[i] = protocol.QueueRef{Topic: topic, QueueID: int32(i)}
	}
	return out
}

func count(a map[protocol.QueueRef]string) map[string]int {
	c := map[string]int{}
	for _, m := range a {
		c[m]++
	}
	return c
}

// TestRebalanceAllocateAverageIsStickyAndBalanced: shares differ by at most one, and
// a member joining or leaving moves only the queues that must move.
func TestRebalanceAllocateAverageIsStickyAndBalanced(t *testing.T) {
	queues := qs("t", 8)
	a := allocate(protocol.AllocateAverage, queues, []string{"a", "b", "c"}, nil)
	if c := count(a); c["a"] != 3 || c["b"] != 3 || c["c"] != 2 {
		t.Fatalf("shares %v", c)
	}
	b := allocate(protocol.AllocateAverage, queues, []string{"a", "b"}, a) // c left
	moved := 0
	for q, m := range b {
		if a[q] != m {
			moved++
		}
	}
	if c := count(b); c["a"] != 4 || c["b"] != 4 || moved != 2 {
		t.Fatalf("after c left: shares %v, %d queues moved (want only c's 2)", c, moved)
	}
	d := allocate(protocol.AllocateAverage, queues, []string{"a", "b", "d"}, b) // d joined
	moved = 0
	for q, m := range d {
		if b[q] != m {
			moved++
			if m != "d" {
				t.Fatalf("queue %v moved to %s, not to the new member", q, m)
			}
		}
	}
	if c := count(d); moved != 2 || c["d"] != 2 {
		t.Fatalf("after d joined: shares %v, %d moved", c, moved)
	}
}

// TestRebalanceAllocateConsistentHash: every queue gets a member, the same one for
// the same membership, and a member leaving moves only its own queues.
func TestRebalanceAllocateConsistentHash(t *testing.T) {
	queues := qs("t", 32)
	a := allocate(protocol.AllocateConsistentHash, queues, []string{"a", "b", "c"}, nil)
	if len(a) != 32 {
		t.Fatalf("consistent hash assigned %d of 32", len(a))
	}
	again := allocate(protocol.AllocateConsistentHash, queues, []string{"a", "b", "c"}, a)
	for q, m := range a {
		if again[q] != m {
			t.Fatalf("queue %v: %s, then %s for the same members", q, m, again[q])
		}
	}
	c := count(a)
	if c["a"] == 0 || c["b"] == 0 || c["c"] == 0 {
		t.Fatalf("a member got nothing: %v", c)
	}
	b := allocate(protocol.AllocateConsistentHash, queues, []string{"a", "b"}, a) // c left
	for q, m := range a {
		if m != "c" && b[q] != m {
			t.Fatalf("queue %v moved from %s to %s though only c left", q, m, b[q])
		}
	}
}

func TestRebalanceAllocateEdges(t *testing.T) {
	for _, s := range []string{protocol.AllocateAverage, protocol.AllocateConsistentHash} {
		if a := allocate(s, qs("t", 4), nil, nil); len(a) != 0 {
			t.Errorf("%s: %d queues allocated to no members", s, len(a))
		}
		if a := allocate(s, nil, []string{"a"}, nil); len(a) != 0 {
			t.Errorf("%s: %d queues allocated from none", s, len(a))
		}
	}
	// More members than queues: one queue each for the first members.
	a := allocate(protocol.AllocateAverage, qs("t", 2), []string{"a", "b", "c"}, nil)
	if c := count(a); c["a"] != 1 || c["b"] != 1 || c["c"] != 0 {
		t.Errorf("2 queues over 3 members: %v", c)
	}
}
