package actors

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// The queue kicks the writer once per run: the first push after a take.
func TestSendQueueKicks(t *testing.T) {
	var q sendQueue
	a, b, c := &writeBatch{}, &writeBatch{}, &writeBatch{}
	steps := []struct {
		push *writeBatch // nil: take
		kick bool
		took []*writeBatch
	}{
		{push: a, kick: true},
		{push: b, kick: false},
		{took: []*writeBatch{a, b}},
		{took: []*writeBatch{}},
		{push: c, kick: true},
		{took: []*writeBatch{c}},
	}
	for i, s := range steps {
		if s.push != nil {
			if got := q.push(s.push); got != s.kick {
				t.Fatalf("step %d: push kicked %v, want %v", i, got, s.kick)
			}
			continue
		}
		got := q.take(nil)
		if fmt.Sprint(got) != fmt.Sprint(s.took) || len(got) != len(s.took) {
			t.Fatalf("step %d: took %v, want %v", i, got, s.took)
		}
	}
}

func (c *fakeConn) answers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

// TestQueuedBurstsAppendedTogether: bursts of sends from several
// connections that arrive before the writer runs are appended with one
// write into the CommitLog, in the order they arrived, and each
// connection gets its own answers.
func TestQueuedBurstsAppendedTogether(t *testing.T) {
	for _, mode := range []FlushDiskType{AsyncFlush, SyncFlush} {
		t.Run(string(mode), func(t *testing.T) {
			writes := &vfs.Counter{Match: func(op vfs.Op) bool {
				return op.Kind == vfs.OpWriteAt && strings.Contains(op.Path, "commitlog")
			}}
			h := startBroker(t, vfs.NewFaulty(vfs.NewMem(), writes), func(c *Config) { c.FlushDiskType = mode })
			h.ok(h.send(sendReq("t", 0, "warm"))[0], nil)
			h.loop.Run(h.loop.Now(), nil)
			before := writes.Count()
			conns := []*fakeConn{h.conn, newConn(h.loop), newConn(h.loop)}
			ops := make([][]uint32, len(conns))
			had := make([]int, len(conns)) // the warm-up's answer
			for i, c := range conns {
				c.id = uint64(1 + i)
				had[i] = c.answers()
				h.conn = c
				ops[i] = h.send(sendReq("t", 0, fmt.Sprint("c", i, "-0")), sendReq("t", 0, fmt.Sprint("c", i, "-1")))
			}
			offset := int64(1)
			for i, c := range conns {
				h.conn = c
				for _, op := range ops[i] {
					var r protocol.SendResponse
					if h.ok(op, &r); r.QueueOffset != offset {
						t.Fatalf("connection %d, request %d: queue offset %d, want %d", i, op, r.QueueOffset, offset)
					}
					offset++
				}
				if n := c.answers() - had[i]; n != len(ops[i]) {
					t.Fatalf("connection %d got %d answers, want %d", i, n, len(ops[i]))
				}
			}
			if got := writes.Count() - before; got != 1 {
				t.Fatalf("three queued bursts took %d writes into the CommitLog, want 1", got)
			}
		})
	}
}

// Bursts waiting in the queue count in the writer's mailbox depth, as they
// did when each was a message of its own.
func TestQueuedBurstsCountAsWriterDepth(t *testing.T) {
	var q sendQueue
	d := newMailboxDepths(&q)
	q.push(&writeBatch{})
	q.push(&writeBatch{})
	if got := d.snapshot()["writer"]; got != 2 {
		t.Fatalf("writer depth %d with two bursts queued, want 2", got)
	}
	q.take(nil)
	if got := d.snapshot()["writer"]; got != 0 {
		t.Fatalf("writer depth %d after the take, want 0", got)
	}
}
