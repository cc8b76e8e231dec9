package vtime

import "time"

// Dispatcher is a protoactor Dispatcher that puts mailbox runs on the
// Loop's run queue, tagged with Own.
type Dispatcher[O any] struct {
	L   *Loop[O]
	Own O
}

func (d *Dispatcher[O]) Schedule(fn func()) { d.L.Schedule(d.Own, fn) }

// Throughput is protoactor's messages per mailbox run.
func (d *Dispatcher[O]) Throughput() int { return 300 }

// Clock is a Clock seam (Now, AfterFunc) on the Loop's virtual time; its
// timers are tagged with Own.
type Clock[O any] struct {
	L   *Loop[O]
	Own O
}

func (c *Clock[O]) Now() time.Time { return c.L.now }

func (c *Clock[O]) AfterFunc(d time.Duration, f func()) func() bool {
	return c.L.At(c.L.now.Add(d), c.Own, f)
}
