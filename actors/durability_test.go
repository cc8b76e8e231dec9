package actors

import (
	"strings"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// TestSyncFlushSeries: under SYNC_FLUSH the fsync of what was appended
// during the last one is handed to RunIO by the last one's job, before the
// durability actor writes the answers that fsync released (the disk does
// not wait for the answers' socket writes); and no send is answered before
// an fsync that covers it ran.
func TestSyncFlushSeries(t *testing.T) {
	var logSyncs int // fsyncs of the CommitLog
	inj := vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSyncRange && strings.Contains(op.Path, "commitlog") {
			logSyncs++
		}
		return nil
	})
	type job struct {
		fn       func()
		answered int // answers written when the job was handed in
	}
	var stalled bool
	var held []job
	var h *harness
	runIO := func(fn func()) {
		if stalled {
			held = append(held, job{fn, h.answered()})
			return
		}
		h.loop.RunIO(fn)
	}
	h = startBrokerEnv(t, vfs.NewFaulty(vfs.NewMem(), inj), func(c *Config) { c.FlushDiskType = SyncFlush }, Env{RunIO: runIO})
	h.ok(h.send(sendReq("t", 0, "warm"))[0], nil)
	settle := func() { h.loop.Run(h.loop.Now(), nil) } // the ready work, no time passing
	settle()
	stalled = true

	a := h.send(sendReq("t", 0, "a"))[0]
	settle()
	b := h.send(sendReq("t", 0, "b"))[0]
	c := h.send(sendReq("t", 0, "c"))[0]
	settle()
	// release runs the held jobs handed in so far and returns how many
	// CommitLog fsyncs they ran.
	release := func() int {
		jobs, n0 := held, logSyncs
		held = nil
		for _, j := range jobs {
			j.fn()
		}
		settle()
		return logSyncs - n0
	}
	steps := []struct {
		name                 string
		fsyncs               int // CommitLog fsyncs the released jobs ran
		answered, unanswered []uint32
		next                 bool // an fsync handed in, before the answers above were written
	}{
		{"a's fsync: a answered, b and c appended meanwhile follow at once", 1, []uint32{a}, []uint32{b, c}, true},
		{"b and c's fsync: the series ends", 1, []uint32{a, b, c}, nil, false},
	}
	for _, s := range steps {
		before := h.answered()
		if n := release(); n != s.fsyncs {
			t.Fatalf("%s: %d CommitLog fsyncs, want %d", s.name, n, s.fsyncs)
		}
		for _, op := range s.answered {
			h.ok(op, nil)
		}
		for _, op := range s.unanswered {
			if h.conn.has(op) {
				t.Fatalf("%s: send %d answered before an fsync covered it", s.name, op)
			}
		}
		if got := len(held) > 0; got != s.next {
			t.Fatalf("%s: next fsync handed in = %v, want %v", s.name, got, s.next)
		}
		if s.next && held[0].answered != before {
			t.Fatalf("%s: the next fsync was handed in with %d answers written; want %d (before the released ones)", s.name, held[0].answered, before)
		}
	}
}

// answered is the number of answers the harness's connection got.
func (h *harness) answered() int {
	h.conn.mu.Lock()
	defer h.conn.mu.Unlock()
	return len(h.conn.order)
}
