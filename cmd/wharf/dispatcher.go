package main

import "runtime"

// poolDispatcher is the production Dispatcher seam: mailbox runs go to a
// fixed set of long-lived goroutines instead of a new goroutine each
// (protoactor's default), which saves the goroutine start and the stack
// growth every time an idle actor gets a message. If every worker is busy
// and the queue is full, a run gets a goroutine of its own, so a slow actor
// never blocks a sender.
//
// A queued run waits for a worker, so the actors must not block: their
// disk work (fsync, msync, checkpoints, segment creation) goes through the
// RunIO seam. When the ConsumeQueue flushes of a checkpoint still ran inside
// the actors they held every worker and the writer's runs queued behind
// them (acks stalled 10-20 ms once a second). Handing runs only to idle
// workers and spawning goroutines otherwise avoided that but cost more than
// it saved once the flushes moved off the actors (e2e-10k p99 3.6-6.8 ms
// against 1.8 ms with the queue; sync-16 a little slower).
type poolDispatcher struct {
	work       chan func()
	throughput int
}

func newPoolDispatcher(workers, queue, throughput int) *poolDispatcher {
	d := &poolDispatcher{work: make(chan func(), queue), throughput: throughput}
	for range workers {
		go func() {
			for fn := range d.work {
				fn()
			}
		}()
	}
	return d
}

// Schedule implements actor.Dispatcher.
func (d *poolDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		go fn()
	}
}

// Throughput implements actor.Dispatcher: messages a mailbox run handles
// before it yields.
func (d *poolDispatcher) Throughput() int { return d.throughput }

func defaultDispatcher() *poolDispatcher {
	return newPoolDispatcher(max(4, 2*runtime.GOMAXPROCS(0)), 4096, 300)
}
