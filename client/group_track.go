package client

import (
	"context"
	"sync"

	"github.com/wharfmq/wharf/protocol"
)

// tracker follows a queue's messages from pull to done. The queue's
// consumed offset (what a commit stores) is the lowest offset pulled but
// not done, or the next offset to pull if every pulled message is done.
//
// The entries are values in a slice used as a queue (done ones at the
// front are trimmed by moving head; the slice is compacted when more than
// half of it is trimmed), so a message costs no allocation once the slice
// has grown to the queue's in-flight bound. A message is named by its
// sequence number: the n-th message added since init is n.
type tracker struct {
	mu      sync.Mutex
	ok      bool // init was called
	next    int64
	entries []trackEntry  // ascending offsets, from head on
	head    int           // index of the first entry not trimmed
	base    uint64        // sequence number of entries[head]
	space   chan struct{} // signalled when entries are trimmed
}

type trackEntry struct {
	off  int64
	done bool
}

func (t *tracker) init(off int64) {
	t.mu.Lock()
	t.ok, t.next = true, off
	t.space = make(chan struct{}, 1)
	t.mu.Unlock()
}

// add tracks one message and returns its sequence number.
func (t *tracker) add(off int64) uint64 {
	t.mu.Lock()
	seq := t.push(off)
	t.mu.Unlock()
	return seq
}

// addAll tracks the messages of one pull, in order, under one lock, and
// returns the sequence number of the first; the i-th is first+i.
func (t *tracker) addAll(msgs []*protocol.MessageExt) (first uint64) {
	t.mu.Lock()
	for i, m := range msgs {
		seq := t.push(m.QueueOffset)
		if i == 0 {
			first = seq
		}
	}
	t.mu.Unlock()
	return first
}

// push appends an entry. Called with t.mu held.
func (t *tracker) push(off int64) uint64 {
	if t.head > 0 && t.head >= len(t.entries)/2 {
		n := copy(t.entries, t.entries[t.head:])
		t.entries, t.head = t.entries[:n], 0
	}
	seq := t.base + uint64(len(t.entries)-t.head)
	t.entries = append(t.entries, trackEntry{off: off})
	return seq
}

// done marks the message seq done. A sequence number already trimmed (done
// twice) is ignored.
func (t *tracker) done(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq < t.base || seq-t.base >= uint64(len(t.entries)-t.head) {
		return
	}
	t.entries[t.head+int(seq-t.base)].done = true
	h := t.head
	for h < len(t.entries) && t.entries[h].done {
		h++
	}
	if h == t.head {
		return
	}
	t.base += uint64(h - t.head)
	t.head = h
	if h == len(t.entries) {
		t.entries, t.head = t.entries[:0], 0
	}
	select {
	case t.space <- struct{}{}:
	default:
	}
}

func (t *tracker) setNext(off int64) {
	t.mu.Lock()
	if off > t.next {
		t.next = off
	}
	t.mu.Unlock()
}

// consumed returns the offset to commit, and false before init.
func (t *tracker) consumed() (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ok {
		return 0, false
	}
	if t.head < len(t.entries) {
		return t.entries[t.head].off, true
	}
	return t.next, true
}

// inflight returns how many tracked messages are not trimmed yet.
func (t *tracker) inflight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries) - t.head
}

// waitSpace waits until fewer than limit messages are in flight.
func (t *tracker) waitSpace(ctx context.Context, limit int) bool {
	for t.inflight() >= limit {
		select {
		case <-t.space:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
