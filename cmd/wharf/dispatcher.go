package main

import "runtime"

// poolDispatcher is the production Dispatcher seam: mailbox runs go to a
// set of long-lived idle goroutines instead of a new goroutine each
// (protoactor's default), which saves the goroutine start and the stack
// growth every time an idle actor gets a message. A run is handed only to
// a worker that is waiting for work (the channel is unbuffered); when every
// worker is busy the run gets a goroutine of its own. It never waits in a
// queue: with a queue, actors blocked in the disk (the ConsumeQueue flushes
// of a checkpoint) held every worker while the CommitLogWriter's run sat
// behind them, and acks stalled for 10-20 ms once a second.
type poolDispatcher struct {
	work       chan func()
	throughput int
}

func newPoolDispatcher(workers, throughput int) *poolDispatcher {
	d := &poolDispatcher{work: make(chan func()), throughput: throughput}
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
	return newPoolDispatcher(max(8, 4*runtime.GOMAXPROCS(0)), 300)
}
