package client

import (
	"fmt"
	"os"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// MessageModel says how a consumer group shares messages.
type MessageModel int

const (
	// Clustering (the default): each message goes to one member of the
	// group; the broker assigns each queue to one member.
	Clustering MessageModel = iota
	// Broadcasting: every member gets every message; each member keeps its
	// own offsets (committed as group "<group>#<clientId>", so give each
	// member a stable id with WithClientID or WithInstanceName).
	Broadcasting
)

func (m MessageModel) String() string {
	if m == Broadcasting {
		return protocol.Broadcasting
	}
	return protocol.Clustering
}

// AllocateStrategy is how the broker spreads a group's queues over its
// members. The group's first member decides it.
type AllocateStrategy string

const (
	// AllocateAverage gives each member a contiguous, nearly equal share
	// (the default).
	AllocateAverage AllocateStrategy = protocol.AllocateAverage
	// AllocateConsistentHash places members on a hash ring, so that a
	// member joining or leaving moves few queues.
	AllocateConsistentHash AllocateStrategy = protocol.AllocateConsistentHash
)

// groupOptions are the PushConsumer's group-mode options; zero values mean
// the defaults (see normalize).
type groupOptions struct {
	static         bool
	concurrency    int
	orderly        bool
	maxReconsume   int
	ackTimeout     time.Duration
	model          MessageModel
	strategy       AllocateStrategy
	listener       func(assigned, revoked []protocol.QueueRef)
	releaseTimeout time.Duration
}

const (
	defaultConsumeConcurrency = 20
	defaultMaxReconsumeTimes  = 16
	defaultAckTimeout         = 15 * time.Minute
	defaultReleaseTimeout     = 3 * time.Second
	defaultHeartbeatInterval  = time.Second
)

func (g *groupOptions) normalize() error {
	switch {
	case g.concurrency < 0:
		return fmt.Errorf("wharf client: consume concurrency must not be negative, got %d", g.concurrency)
	case g.maxReconsume < 0:
		return fmt.Errorf("wharf client: max reconsume times must not be negative, got %d", g.maxReconsume)
	case g.ackTimeout < 0:
		return fmt.Errorf("wharf client: ack timeout must not be negative, got %v", g.ackTimeout)
	case g.releaseTimeout < 0:
		return fmt.Errorf("wharf client: release timeout must not be negative, got %v", g.releaseTimeout)
	case g.model != Clustering && g.model != Broadcasting:
		return fmt.Errorf("wharf client: unknown message model %d", g.model)
	}
	switch g.strategy {
	case "":
		g.strategy = AllocateAverage
	case AllocateAverage, AllocateConsistentHash:
	default:
		return fmt.Errorf("wharf client: unknown allocate strategy %q (want %s or %s)", g.strategy, AllocateAverage, AllocateConsistentHash)
	}
	if g.concurrency == 0 {
		g.concurrency = defaultConsumeConcurrency
	}
	if g.maxReconsume == 0 {
		g.maxReconsume = defaultMaxReconsumeTimes
	}
	if g.ackTimeout == 0 {
		g.ackTimeout = defaultAckTimeout
	}
	if g.releaseTimeout == 0 {
		g.releaseTimeout = defaultReleaseTimeout
	}
	return nil
}

// WithStaticAssignment makes a PushConsumer consume every queue of its
// topics by itself, without joining its group at the broker's
// RebalanceCoordinator: the behaviour before consumer groups, for one
// consumer per group (two such consumers would both get every message) or
// a broker without a coordinator. RetryLater then redelivers locally
// (WithRetryLaterDelay) and the group options below do not apply.
func WithStaticAssignment() Option { return func(o *options) { o.grp.static = true } }

// WithConsumeConcurrency bounds how many handler calls of a PushConsumer run
// at once, across its queues (default 20). In concurrent mode several
// batches of one queue may be in flight together; each message is tracked
// on its own, and the committed offset of a queue is the lowest offset not
// yet done.
func WithConsumeConcurrency(n int) Option { return func(o *options) { o.grp.concurrency = n } }

// WithConsumeOrderly(true) consumes each queue one message at a time, in
// queue order. A RetryLater blocks the queue: the same message is delivered
// again (locally, its ReconsumeTimes counting up) after WithRetryLaterDelay,
// up to WithMaxReconsumeTimes times; then it goes to the group's dead-letter
// topic and the queue moves on. The ack timeout does not apply.
func WithConsumeOrderly(on bool) Option { return func(o *options) { o.grp.orderly = on } }

// WithMaxReconsumeTimes sets how often a message is redelivered after
// RetryLater (or an ack timeout) before it goes to the dead-letter topic
// %DLQ%<group> (default 16).
func WithMaxReconsumeTimes(n int) Option { return func(o *options) { o.grp.maxReconsume = n } }

// WithAckTimeout sets how long a handler call may take in concurrent mode
// (default 15 min). When it expires, the call's context is cancelled and its
// messages are given back to the broker for a later delivery (as for
// RetryLater), so that one slow message does not hold back the queue's
// committed offset; the handler's eventual result is ignored.
func WithAckTimeout(d time.Duration) Option { return func(o *options) { o.grp.ackTimeout = d } }

// WithMessageModel sets Clustering (default) or Broadcasting.
func WithMessageModel(m MessageModel) Option { return func(o *options) { o.grp.model = m } }

// WithAllocateStrategy sets the strategy the consumer asks for (the
// group's first member decides; default AllocateAverage).
func WithAllocateStrategy(s AllocateStrategy) Option { return func(o *options) { o.grp.strategy = s } }

// WithRebalanceListener sets a function a PushConsumer calls after each
// change of its assignment: the queues it starts consuming and those it
// gives up (revoked: called when their release starts). It runs on the
// heartbeat goroutine and must return quickly.
func WithRebalanceListener(f func(assigned, revoked []protocol.QueueRef)) Option {
	return func(o *options) { o.grp.listener = f }
}

// WithReleaseTimeout bounds how long a PushConsumer waits for the handler
// calls in flight on a queue it gives up (a rebalance or Close) before it
// cancels their context and commits what is done (default 3 s).
func WithReleaseTimeout(d time.Duration) Option { return func(o *options) { o.grp.releaseTimeout = d } }

// WithInstanceName sets the client id to "<hostname>@<name>" (RocketMQ's
// instance name), a stable id across restarts, as a broadcasting consumer
// needs to find its offsets again.
func WithInstanceName(name string) Option {
	return func(o *options) {
		host, _ := os.Hostname()
		o.clientID = host + "@" + name
	}
}
