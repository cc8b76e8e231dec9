package client

import (
	"fmt"
	"strconv"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Delay levels (RocketMQ's messageDelayLevel): level n delays a message by
// DelayLevels[n-1].
var DelayLevels = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// MaxDelayLevel is the highest delay level.
const MaxDelayLevel = 18

// SetDelayLevel makes msg visible to consumers after delay level level
// (1..18: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h; 0
// removes the delay). The broker keeps it, across restarts, until then.
func SetDelayLevel(msg *protocol.Message, level int) error {
	if level < 0 || level > MaxDelayLevel {
		return fmt.Errorf("%w: delay level %d, want 0..%d", ErrInvalidParameter, level, MaxDelayLevel)
	}
	msg.SetDelayLevel(level)
	return nil
}

// SetDeliverAt makes msg visible to consumers at t (the TIMER_DELIVER_MS
// property, Unix milliseconds). A zero t removes it.
func SetDeliverAt(msg *protocol.Message, t time.Time) {
	if t.IsZero() {
		msg.SetProperty(protocol.PropertyTimerDeliverMs, "")
		return
	}
	msg.SetProperty(protocol.PropertyTimerDeliverMs, strconv.FormatInt(t.UnixMilli(), 10))
}

// WithDelayLevel is a SendOption that sets the message's delay level (see
// SetDelayLevel) before it is sent. A level outside 0..18 fails the send
// with ErrInvalidParameter.
func WithDelayLevel(level int) SendOption {
	return func(s *sendOptions) {
		s.edits = append(s.edits, func(m *protocol.Message) error { return SetDelayLevel(m, level) })
	}
}

// WithDeliverAt is a SendOption that sets the message's delivery time (see
// SetDeliverAt) before it is sent.
func WithDeliverAt(t time.Time) SendOption {
	return func(s *sendOptions) {
		s.edits = append(s.edits, func(m *protocol.Message) error { SetDeliverAt(m, t); return nil })
	}
}

// apply runs the message edits of the send options.
func (so *sendOptions) apply(m *protocol.Message) error {
	if m == nil {
		return nil
	}
	for _, e := range so.edits {
		if err := e(m); err != nil {
			return err
		}
	}
	return nil
}
