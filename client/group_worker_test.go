package client

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/protocol"
)

// TestTracker: the consumed offset is the lowest offset not done (or the
// next to pull), whatever order the messages are done in.
func TestTracker(t *testing.T) {
	for _, tc := range []struct {
		name string
		offs []int64 // added in order (offsets may skip: filtered messages)
		done []int   // indexes into offs, in the order they are done
		next int64
		want int64
		left int // in flight afterwards
	}{
		{name: "none", next: 7, want: 7},
		{name: "none done", offs: []int64{3, 4, 5}, next: 6, want: 3, left: 3},
		{name: "in order", offs: []int64{3, 4, 5}, done: []int{0, 1, 2}, next: 6, want: 6},
		{name: "gap", offs: []int64{3, 4, 5}, done: []int{0, 2}, next: 6, want: 4, left: 2},
		{name: "reversed", offs: []int64{3, 4, 5}, done: []int{2, 1, 0}, next: 6, want: 6},
		{name: "skipping offsets", offs: []int64{3, 9, 20}, done: []int{0}, next: 21, want: 9, left: 2},
		{name: "done twice is ignored", offs: []int64{3, 4, 5}, done: []int{0, 0, 1}, next: 6, want: 5, left: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr tracker
			if _, ok := tr.consumed(); ok {
				t.Fatal("consumed before init")
			}
			tr.init(0)
			seqs := make([]uint64, len(tc.offs))
			for i, off := range tc.offs {
				seqs[i] = tr.add(off)
			}
			tr.setNext(tc.next)
			for _, i := range tc.done {
				tr.done(seqs[i])
			}
			if got, _ := tr.consumed(); got != tc.want {
				t.Errorf("consumed %d, want %d", got, tc.want)
			}
			if got := tr.inflight(); got != tc.left {
				t.Errorf("%d in flight, want %d", got, tc.left)
			}
		})
	}
}

// TestTrackerCompaction: pulls added with addAll and done in a random order
// within a window, across many compactions of the slice: after every done
// the consumed offset is the lowest offset not done.
func TestTrackerCompaction(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tr tracker
	tr.init(0)
	type msg struct {
		seq  uint64
		off  int64
		done bool
	}
	var all []*msg
	off := int64(0)
	for round := range 200 {
		pull := make([]*protocol.MessageExt, 1+rng.IntN(32))
		for i := range pull {
			off += 1 + int64(rng.IntN(2)) // some offsets filtered out
			pull[i] = &protocol.MessageExt{QueueOffset: off}
		}
		first := tr.addAll(pull)
		for i, m := range pull {
			all = append(all, &msg{seq: first + uint64(i), off: m.QueueOffset})
		}
		tr.setNext(off + 1)
		var open []*msg
		for _, m := range all {
			if !m.done {
				open = append(open, m)
			}
		}
		for range len(open) * 3 / 4 {
			m := open[rng.IntN(len(open))]
			tr.done(m.seq)
			m.done = true
			want := off + 1
			if i := slices.IndexFunc(all, func(m *msg) bool { return !m.done }); i >= 0 {
				want = all[i].off
			}
			if got, _ := tr.consumed(); got != want {
				t.Fatalf("round %d: consumed %d, want %d", round, got, want)
			}
		}
	}
	if len(tr.entries) > 4*maxQueueInflight {
		t.Errorf("the tracker's slice grew to %d entries", len(tr.entries))
	}
}

// TestWorkerAckTimer: a firing of a worker's ack timer before the call in
// flight's deadline (the timer was armed for an earlier call) neither
// cancels the call nor gives its messages back, but re-arms the timer; a
// firing with no call in flight disarms it.
func TestWorkerAckTimer(t *testing.T) {
	w := &consumeWorker{armed: true}
	fired := make(chan struct{}, 1)
	w.timer = time.AfterFunc(time.Hour, func() { fired <- struct{}{} })
	w.timer.Stop()
	defer w.timer.Stop()
	cancelled := false
	w.cur = consumeJob{q: &groupQueue{}, batch: []*protocol.MessageExt{{}}}
	w.running, w.deadline = true, time.Now().Add(20*time.Millisecond)
	w.curStop = func() { cancelled = true }
	w.onAckTimeout()
	if w.timedOut || cancelled || !w.armed {
		t.Fatalf("an early firing: timedOut %v, cancelled %v, armed %v", w.timedOut, cancelled, w.armed)
	}
	if !testwait.Chan(fired, 5*time.Second) {
		t.Fatal("the early firing did not re-arm the timer")
	}
	w.running = false
	w.onAckTimeout()
	if w.timedOut || cancelled || w.armed {
		t.Fatalf("a firing with no call in flight: timedOut %v, cancelled %v, armed %v", w.timedOut, cancelled, w.armed)
	}
}

// TestWorkerOrder: with one worker, the handler sees a queue's messages in
// queue order (batches of WithConsumeBatchSize across pulls), and the
// tracker ends past them all.
func TestWorkerOrder(t *testing.T) {
	var mu sync.Mutex
	var got []int64
	h := func(ctx context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		mu.Lock()
		for _, m := range msgs {
			got = append(got, m.QueueOffset)
		}
		mu.Unlock()
		return ConsumeSuccess
	}
	g, q := benchGroupQueue(t, h, WithConsumeConcurrency(1), WithConsumeBatchSize(3))
	var want []int64
	for p := range 5 {
		msgs := make([]*protocol.MessageExt, 10)
		for i := range msgs {
			off := int64(p*10 + i)
			msgs[i] = &protocol.MessageExt{Message: protocol.Message{Topic: "bench"}, QueueOffset: off}
			want = append(want, off)
		}
		if !g.dispatch(q, msgs) {
			t.Fatal("dispatch: released")
		}
	}
	q.tr.setNext(50)
	testwait.For(t, testwait.Wall, 5*time.Second, "every message done", func() bool {
		off, _ := q.tr.consumed()
		return off == 50
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("handled %v, want %v", got, want)
	}
}

// TestGroupAckTimeoutOneWorker: with one worker, a call that outlives the
// ack timeout is given back and redelivered, and the worker goes on with
// the later messages, in order, each call with a live context (the timed
// out call's context is not reused).
func TestGroupAckTimeoutOneWorker(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithHeartbeatInterval(100*time.Millisecond), shortDelays())
	b.CreateTopic("T", 1)
	var mu sync.Mutex
	var first []string // first deliveries, in order
	seen := map[string]int{}
	h := func(ctx context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		body := string(msgs[0].Body)
		if ctx.Err() != nil {
			t.Errorf("%s: the call's context is already cancelled", body)
		}
		mu.Lock()
		seen[body]++
		if msgs[0].ReconsumeTimes == 0 {
			first = append(first, body)
		}
		mu.Unlock()
		if body == "m2" && msgs[0].ReconsumeTimes == 0 {
			select { // slow: until the ack timeout cancels it
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Error("m2: the ack timeout did not cancel the call")
			}
		}
		return ConsumeSuccess
	}
	startGroupConsumer(t, b, "G", "T", h, groupOpts("c1", WithAckTimeout(300*time.Millisecond), WithConsumeConcurrency(1))...)
	p := newProducer(t, b)
	sendN(t, p, "T", "m", 0, 10)
	testwait.For(t, testwait.Wall, 5*time.Second, "m2 redelivered and the offset past every message", func() bool {
		mu.Lock()
		n := seen["m2"]
		mu.Unlock()
		off, ok := b.CommittedOffset("G", "T", 0)
		return n == 2 && ok && off == 10
	})
	mu.Lock()
	defer mu.Unlock()
	var want []string
	for i := range 10 {
		want = append(want, "m"+strconv.Itoa(i))
		if body := want[i]; seen[body] != 1+btoi(body == "m2") {
			t.Errorf("%s seen %d times, want %d", body, seen[body], 1+btoi(body == "m2"))
		}
	}
	if !slices.Equal(first, want) {
		t.Errorf("first deliveries %v, want %v", first, want)
	}
}

// TestWorkerDropsWaitingAtRelease: batches waiting for a busy worker are
// not in flight: once the queue's release has started they are dropped, not
// run, and stay not done (delivered again from the committed offset); the
// call in flight finishes and is done.
func TestWorkerDropsWaitingAtRelease(t *testing.T) {
	started, unblock := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []int64
	h := func(ctx context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		mu.Lock()
		got = append(got, msgs[0].QueueOffset)
		mu.Unlock()
		if msgs[0].QueueOffset == 0 {
			close(started)
			<-unblock
		}
		return ConsumeSuccess
	}
	g, q := benchGroupQueue(t, h, WithConsumeConcurrency(1))
	msgs := make([]*protocol.MessageExt, 10)
	for i := range msgs {
		msgs[i] = &protocol.MessageExt{Message: protocol.Message{Topic: "bench"}, QueueOffset: int64(i)}
	}
	if !g.dispatch(q, msgs) { // 9 batches wait in the channel
		t.Fatal("dispatch: released")
	}
	q.tr.setNext(10)
	if !testwait.Chan(started, 5*time.Second) {
		t.Fatal("the first call did not start")
	}
	close(q.workerDone) // no pull loop here: the release's wait needs its end
	q.cancel()          // the release starts
	waited := make(chan struct{})
	go func() { g.waitHandlers(q); close(waited) }()
	close(unblock)
	if !testwait.Chan(waited, 5*time.Second) {
		t.Fatal("the release's wait did not end")
	}
	if off, _ := q.tr.consumed(); off != 1 {
		t.Errorf("consumed offset %d, want 1 (only the call in flight done)", off)
	}
	// The worker drops the waiting batches after the wait; none may run.
	testwait.For(t, testwait.Wall, 5*time.Second, "the waiting batches drained", func() bool { return len(g.jobs) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []int64{0}) {
		t.Errorf("handled %v, want [0]", got)
	}
}

// TestQueueStartHandler: a queue whose release started counts no new call.
func TestQueueStartHandler(t *testing.T) {
	q := &groupQueue{}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	if !q.startHandler() {
		t.Fatal("a consuming queue refused a call")
	}
	q.handlers.Done()
	q.cancel()
	if q.startHandler() {
		t.Fatal("a released queue started a call")
	}
	q.handlers.Wait() // would block forever had it been counted
}

// TestStopWorkersWaits: stopWorkers returns after a handler call in flight
// returned (within the release timeout) and its worker ended.
func TestStopWorkersWaits(t *testing.T) {
	release := make(chan struct{})
	h := func(ctx context.Context, msgs []*protocol.MessageExt) ConsumeResult {
		<-release
		return ConsumeSuccess
	}
	o, err := buildOptions([]Option{WithConsumeConcurrency(3), WithReleaseTimeout(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	pc := &PushConsumer{o: o, group: "g"}
	if err := pc.o.grp.normalize(); err != nil {
		t.Fatal(err)
	}
	pc.subs = []*subscription{{topic: "bench", expr: "*", handler: h}}
	g := newGroupConsumer(pc)
	g.runCtx, g.runCancel = context.WithCancel(context.Background())
	defer g.runCancel()
	g.startWorkers()
	q := g.newQueue(protocol.QueueRef{Topic: "bench", QueueID: 1})
	q.tr.init(0)
	if !g.dispatch(q, []*protocol.MessageExt{{Message: protocol.Message{Topic: "bench"}}}) {
		t.Fatal("dispatch: released")
	}
	q.tr.setNext(1)
	time.AfterFunc(50*time.Millisecond, func() { close(release) })
	g.stopWorkers()
	// Read at once: had stopWorkers not waited, the call would still be
	// blocked and its message not done.
	if off, _ := q.tr.consumed(); off != 1 {
		t.Errorf("consumed %d right after stopWorkers, want 1: it returned before the call in flight", off)
	}
}
