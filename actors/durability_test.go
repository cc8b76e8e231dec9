package actors

import (
	"runtime/debug"
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

// TestSyncFlushSeriesAcrossRestart: a series started before the durability
// actor restarted runs on and its fsyncs count (the gate's flushed offset),
// but its end is not the restarted actor's: its policy still waits for its
// own series, so a later send starts no second fsync beside it.
func TestSyncFlushSeriesAcrossRestart(t *testing.T) {
	var stalled bool
	var fsyncs []func() // held jobs of flushSeries, in the order handed in
	var h *harness
	runIO := func(fn func()) {
		if stalled && strings.Contains(string(debug.Stack()), "flushSeries") {
			fsyncs = append(fsyncs, fn)
			return
		}
		h.loop.RunIO(fn) // other disk work runs
	}
	h = startBrokerEnv(t, vfs.NewMem(), func(c *Config) { c.FlushDiskType = SyncFlush }, Env{RunIO: runIO})
	h.ok(h.send(sendReq("t", 0, "warm"))[0], nil)
	settle := func() { h.loop.Run(h.loop.Now(), nil) }
	settle()
	stalled = true
	run := func(i int) { // the i-th held fsync, out of the queue
		fn := fsyncs[i]
		fsyncs = append(fsyncs[:i:i], fsyncs[i+1:]...)
		fn()
		settle()
	}

	h.send(sendReq("t", 0, "a")) // its answer dies with the actor's gate
	settle()
	h.b.sys.Root.Send(h.b.p.durability, &panicForTest{})
	settle()
	b := h.send(sendReq("t", 0, "b"))[0]
	settle()
	if len(fsyncs) != 2 {
		t.Fatalf("%d fsyncs held, want the old series' and the restarted actor's", len(fsyncs))
	}
	run(0) // the old series' fsync of a: b was appended meanwhile, so it goes on
	if len(fsyncs) != 2 {
		t.Fatalf("%d fsyncs held after the old series' first, want 2", len(fsyncs))
	}
	run(1)       // the old series' fsync of b: nothing new, the series ends
	h.ok(b, nil) // b is durable: the old series' fsync counts
	c := h.send(sendReq("t", 0, "c"))[0]
	settle()
	if len(fsyncs) != 1 {
		t.Fatalf("%d fsyncs held after c, want only the restarted actor's series (a second one started beside it)", len(fsyncs))
	}
	for i := 0; len(fsyncs) > 0; i++ {
		if i > 4 {
			t.Fatal("the restarted actor's series does not end")
		}
		run(0)
	}
	h.ok(c, nil)
}
