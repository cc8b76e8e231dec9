package flush

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// Group commit: one fsync at a time; appends during it are covered by the
// next one, which starts when it finishes.
func TestSyncGroupCommit(t *testing.T) {
	p := New(Config{Sync: true}, t0)
	steps := []struct {
		name          string
		do            func() (int64, bool)
		target        int64
		start         bool
		flushingAfter bool
	}{
		{"first append starts a flush", func() (int64, bool) { return p.Appended(100, 0) }, 100, true, true},
		{"append during it waits", func() (int64, bool) { return p.Appended(200, 0) }, 0, false, true},
		{"another waits", func() (int64, bool) { return p.Appended(300, 0) }, 0, false, true},
		{"done starts one for the rest", func() (int64, bool) { return p.Done(300, 100, nil) }, 300, true, true},
		{"done with nothing new stops", func() (int64, bool) { return p.Done(300, 300, nil) }, 0, false, false},
		{"append of nothing new", func() (int64, bool) { return p.Appended(300, 300) }, 0, false, false},
		{"next append", func() (int64, bool) { return p.Appended(400, 300) }, 400, true, true},
		{"a failed fsync does not retry", func() (int64, bool) { return p.Done(500, 300, errors.New("EIO")) }, 0, false, false},
	}
	for _, s := range steps {
		target, start := s.do()
		if target != s.target || start != s.start || p.Flushing() != s.flushingAfter {
			t.Fatalf("%s: target %d start %v flushing %v; want %d %v %v", s.name, target, start, p.Flushing(), s.target, s.start, s.flushingAfter)
		}
	}
	if p.TickEvery() != 0 {
		t.Fatal("SYNC_FLUSH asks for ticks")
	}
	if _, start := p.Tick(t0.Add(time.Hour), 1000, 0); start {
		t.Fatal("SYNC_FLUSH flushed on a tick")
	}
}

func TestAsyncInterval(t *testing.T) {
	cfg := Config{Interval: 500 * time.Millisecond, LeastPages: 4, ThoroughInterval: 10 * time.Second}
	cases := []struct {
		name         string
		at           time.Duration
		end, flushed int64
		running      bool
		start        bool
	}{
		{"nothing dirty", time.Second, 0, 0, false, false},
		{"under least pages", time.Second, 3 * PageSize, 0, false, false},
		{"least pages", time.Second, 4 * PageSize, 0, false, true},
		{"one byte after the thorough interval", 10 * time.Second, 1, 0, false, true},
		{"thorough but clean", 10 * time.Second, 5, 5, false, false},
		{"one runs already", time.Second, 100 * PageSize, 0, true, false},
	}
	for _, c := range cases {
		p := New(cfg, t0)
		if c.running {
			p.Tick(t0.Add(time.Second), 100*PageSize, 0)
		}
		target, start := p.Tick(t0.Add(c.at), c.end, c.flushed)
		if start != c.start || (start && target != c.end) {
			t.Errorf("%s: start %v target %d", c.name, start, target)
		}
	}
	p := New(cfg, t0)
	if p.TickEvery() != cfg.Interval {
		t.Fatalf("TickEvery %v", p.TickEvery())
	}
	if _, start := p.Appended(1<<20, 0); start {
		t.Fatal("ASYNC_FLUSH flushed on append")
	}
	// The thorough interval restarts at a thorough flush, not at every one.
	p.Tick(t0.Add(10*time.Second), 1, 0)
	p.Done(1, 1, nil)
	if _, start := p.Tick(t0.Add(15*time.Second), 2, 1); start {
		t.Fatal("a thorough flush 5 s after the last one")
	}
	if _, start := p.Tick(t0.Add(20*time.Second), 2, 1); !start {
		t.Fatal("no thorough flush 10 s after the last one")
	}
}

func TestNeverFlushFault(t *testing.T) {
	p := New(Config{Interval: time.Second, LeastPages: 1, ThoroughInterval: time.Second, NeverFlush: true}, t0)
	if _, start := p.Tick(t0.Add(time.Hour), 1<<30, 0); start {
		t.Fatal("NeverFlush flushed")
	}
}

// An interval flush with a Chunk covers the log's end at the Tick in
// flushes of at most Chunk bytes, each started by the previous one's Done;
// appends after the Tick wait for the next one, a short or failed chunk ends
// the series.
func TestAsyncChunks(t *testing.T) {
	cfg := Config{Interval: 500 * time.Millisecond, ThoroughInterval: time.Hour, Chunk: 100}
	type step struct {
		name          string
		do            func(p *Policy) (int64, bool)
		target        int64
		start         bool
		flushingAfter bool
	}
	tick := func(end, flushed int64) func(p *Policy) (int64, bool) {
		return func(p *Policy) (int64, bool) { return p.Tick(t0.Add(time.Second), end, flushed) }
	}
	done := func(end, flushed int64, err error) func(p *Policy) (int64, bool) {
		return func(p *Policy) (int64, bool) { return p.Done(end, flushed, err) }
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"three chunks to the tick's end", []step{
			{"tick", tick(8*PageSize+50, 8*PageSize-200), 8*PageSize - 100, true, true},
			{"first chunk", done(9*PageSize, 8*PageSize-100, nil), 8 * PageSize, true, true},
			{"second chunk", done(9*PageSize, 8*PageSize, nil), 8*PageSize + 50, true, true},
			{"the tick's end reached; later appends wait", done(9*PageSize, 8*PageSize+50, nil), 0, false, false},
		}},
		{"a short chunk stops", []step{
			{"tick", tick(1000, 0), 100, true, true},
			{"short", done(1000, 60, nil), 0, false, false},
			{"the next tick goes on", tick(1000, 60), 160, true, true},
		}},
		{"a failed chunk stops", []step{
			{"tick", tick(1000, 0), 100, true, true},
			{"failed", done(1000, 100, errors.New("EIO")), 0, false, false},
		}},
	} {
		p := New(cfg, t0)
		for _, s := range tc.steps {
			target, start := s.do(p)
			if target != s.target || start != s.start || p.Flushing() != s.flushingAfter {
				t.Fatalf("%s, %s: target %d start %v flushing %v; want %d %v %v", tc.name, s.name, target, start, p.Flushing(), s.target, s.start, s.flushingAfter)
			}
		}
	}
	// With MaxChunks, an interval's bytes that would make more chunks than
	// that go in larger ones, fixed at the Tick; fewer keep Chunk.
	for _, c := range []struct {
		name           string
		dirty          int64
		targets        []int64
		appendedDuring int64
	}{
		{"under MaxChunks chunks: Chunk each", 250, []int64{100, 200, 250}, 0},
		{"over: a MaxChunks-th each", 1000, []int64{250, 500, 750, 1000}, 0},
		{"rounded up: never more than MaxChunks", 1001, []int64{251, 502, 753, 1001}, 0},
		{"appends after the Tick change nothing", 1000, []int64{250, 500, 750, 1000}, 5000},
	} {
		p := New(Config{Interval: time.Second, ThoroughInterval: time.Hour, Chunk: 100, MaxChunks: 4}, t0)
		target, start := p.Tick(t0.Add(time.Second), c.dirty, 0)
		var got []int64
		for start {
			got = append(got, target)
			target, start = p.Done(c.dirty+c.appendedDuring, target, nil)
		}
		if !slices.Equal(got, c.targets) {
			t.Errorf("%s: targets %v, want %v", c.name, got, c.targets)
		}
	}
	// Without a Chunk one flush covers the tick's end.
	p := New(Config{Interval: time.Second, LeastPages: 1, ThoroughInterval: time.Hour}, t0)
	if target, _ := p.Tick(t0.Add(time.Second), 1<<20, 0); target != 1<<20 {
		t.Fatalf("no chunk: target %d", target)
	}
	if _, start := p.Done(2<<20, 1<<20, nil); start {
		t.Fatal("no chunk: Done started another flush")
	}
}

// A SYNC_FLUSH flush is a series: after each fsync the job asks Next, off
// the actor, whether to go straight on to the log's end; Done comes once,
// at the series' end, and starts another only if the log grew since Next
// last looked.
func TestSyncSeries(t *testing.T) {
	eio := errors.New("EIO")
	for _, c := range []struct {
		name                 string
		target, end, flushed int64
		err                  error
		next                 int64
		more                 bool
	}{
		{"the log grew during the fsync: on to its end", 100, 250, 100, nil, 250, true},
		{"nothing new: the series ends", 100, 100, 100, nil, 0, false},
		{"the fsync failed: it ends (the failure is sticky)", 100, 250, 40, eio, 0, false},
		{"a short fsync ends it (Done decides)", 100, 250, 60, nil, 0, false},
		{"flushed past the target, nothing beyond", 100, 120, 120, nil, 0, false},
	} {
		next, more := Next(c.target, c.end, c.flushed, c.err)
		if next != c.next || more != c.more {
			t.Errorf("%s: Next = %d, %v; want %d, %v", c.name, next, more, c.next, c.more)
		}
	}
	sync, async := New(Config{Sync: true}, t0), New(Config{Interval: time.Second}, t0)
	if !sync.Follows() || async.Follows() {
		t.Fatalf("Follows: SYNC_FLUSH %v, ASYNC_FLUSH %v; want true, false", sync.Follows(), async.Follows())
	}
	// The series' end, raced by an append Next did not see: Done starts
	// one more; one that saw everything: idle.
	if target, start := sync.Appended(100, 0); !start || target != 100 {
		t.Fatalf("first append: %d %v", target, start)
	}
	if _, start := sync.Appended(200, 0); start || !sync.Flushing() {
		t.Fatal("an append during a series started a second fsync")
	}
	if target, start := sync.Done(300, 200, nil); !start || target != 300 {
		t.Fatalf("series ended at 200 with the log at 300: %d %v", target, start)
	}
	if _, start := sync.Done(300, 300, nil); start || sync.Flushing() {
		t.Fatal("a series that covered the log started another")
	}
}
