package brokertest

import (
	"sync"
	"time"
)

// Clock is the broker's clock (actors.Clock): the wall clock plus a skew
// that only grows. Advance adds to the skew and fires at once the timers
// that fall due, so a test that waits for a broker-side timeout (a held
// pull's suspend, a member's silence, a flush timeout) moves the broker's
// time instead of sleeping.
//
// Clients keep the wall clock: polling a client-side condition with
// testwait on this clock would let broker time pass without giving the
// client's goroutines any; poll those on testwait.Wall.
type Clock struct {
	mu     sync.Mutex
	skew   time.Duration
	timers map[*clockTimer]struct{}
}

// clockTimer is one AfterFunc, due at clock time at. Whoever takes it out
// of Clock.timers (its wall-clock timer, Advance or stop) decides its fate,
// so it runs at most once.
type clockTimer struct {
	at   time.Time
	f    func()
	wall *time.Timer
}

func newClock() *Clock { return &Clock{timers: map[*clockTimer]struct{}{}} }

// Now is the wall time plus the skew.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.skew)
}

// AfterFunc calls f once after d of clock time (on its own goroutine).
func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &clockTimer{at: time.Now().Add(c.skew + d), f: f}
	c.timers[t] = struct{}{}
	t.wall = time.AfterFunc(d, func() { c.fire(t) })
	return func() bool {
		c.mu.Lock()
		_, pending := c.timers[t]
		delete(c.timers, t)
		c.mu.Unlock()
		return pending && t.wall.Stop()
	}
}

// fire runs t's function unless it ran or was stopped.
func (c *Clock) fire(t *clockTimer) {
	c.mu.Lock()
	_, pending := c.timers[t]
	delete(c.timers, t)
	c.mu.Unlock()
	if pending {
		t.f()
	}
}

// Advance moves the clock d forward and fires every timer now due; the
// others are re-armed for what is left of their wait on the wall clock.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.skew += d
	now := time.Now().Add(c.skew)
	var due []*clockTimer
	for t := range c.timers {
		if !t.at.After(now) {
			due = append(due, t)
			delete(c.timers, t)
			t.wall.Stop()
			continue
		}
		t.wall.Reset(t.at.Sub(now))
	}
	c.mu.Unlock()
	for _, t := range due {
		go t.f()
	}
}
