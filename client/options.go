package client

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// Option configures a Producer, PullConsumer, PushConsumer or Admin. An
// option that does not concern the type it is given to is ignored.
type Option func(*options)

// ConsumeFrom says where a PushConsumer starts a queue its group has no
// committed offset for.
type ConsumeFrom int

const (
	// ConsumeFromLast starts at the queue's max offset: only new messages
	// (RocketMQ's CONSUME_FROM_LAST_OFFSET, the default).
	ConsumeFromLast ConsumeFrom = iota
	// ConsumeFromFirst starts at the queue's min offset: everything stored.
	ConsumeFromFirst
)

func (c ConsumeFrom) String() string {
	if c == ConsumeFromFirst {
		return "FIRST_OFFSET"
	}
	return "LAST_OFFSET"
}

type options struct {
	timeout        time.Duration
	dialTimeout    time.Duration
	retries        int
	retryBackoff   time.Duration
	reconnectMin   time.Duration
	reconnectMax   time.Duration
	logger         *slog.Logger
	limits         protocol.Limits
	clientID       string
	producerGroup  string
	heartbeat      time.Duration
	consumeFrom    ConsumeFrom
	pullBatch      int32
	pullSuspend    time.Duration
	consumeBatch   int
	commitInterval time.Duration
	retryLater     time.Duration
	queue          int32
	routeTTL       time.Duration
	pullErr        func(topic string, queueID int32, err error)
	slaveAddrs     []string
	masterRetry    time.Duration
	grp            groupOptions // PushConsumer group mode (group_options.go)
	coalesce       bool         // SendAsync may coalesce (coalesce.go)
	dial           Dialer       // the transport seam (WithDialer)
	nameServers    string       // WithNameServer's list, as given
	routeRefresh   time.Duration
}

// Dialer opens a connection to a broker: network is "tcp", addr the
// broker's address as given to the client. It must honour ctx (its
// deadline is WithDialTimeout's). The default is a net.Dialer's
// DialContext.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

func defaultOptions() options {
	host, _ := os.Hostname()
	return options{
		timeout:        3 * time.Second,
		dialTimeout:    3 * time.Second,
		retries:        2,
		retryBackoff:   100 * time.Millisecond,
		reconnectMin:   100 * time.Millisecond,
		reconnectMax:   3 * time.Second,
		logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		limits:         protocol.DefaultLimits(),
		clientID:       host + "@" + strconv.Itoa(os.Getpid()),
		producerGroup:  "DEFAULT_PRODUCER",
		heartbeat:      30 * time.Second,
		consumeFrom:    ConsumeFromLast,
		pullBatch:      32,
		pullSuspend:    15 * time.Second,
		consumeBatch:   1,
		commitInterval: 5 * time.Second,
		retryLater:     time.Second,
		queue:          -1,
		routeTTL:       30 * time.Second,
		masterRetry:    3 * time.Second,
		coalesce:       true,
		routeRefresh:   2 * time.Second,
		dial:           (&net.Dialer{}).DialContext,
	}
}

func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.timeout <= 0:
		return o, fmt.Errorf("wharf client: timeout must be positive, got %v", o.timeout)
	case o.dialTimeout <= 0:
		return o, fmt.Errorf("wharf client: dial timeout must be positive, got %v", o.dialTimeout)
	case o.retries < 0:
		return o, fmt.Errorf("wharf client: retries must not be negative, got %d", o.retries)
	case o.pullBatch <= 0 || o.pullBatch > int32(protocol.DefaultMaxBatchMessages):
		return o, fmt.Errorf("wharf client: pull batch size must be in 1..%d, got %d", protocol.DefaultMaxBatchMessages, o.pullBatch)
	case o.consumeBatch <= 0:
		return o, fmt.Errorf("wharf client: consume batch size must be positive, got %d", o.consumeBatch)
	case o.pullSuspend < 0:
		return o, fmt.Errorf("wharf client: pull suspend must not be negative, got %v", o.pullSuspend)
	case o.commitInterval <= 0:
		return o, fmt.Errorf("wharf client: commit interval must be positive, got %v", o.commitInterval)
	case o.routeRefresh <= 0:
		return o, fmt.Errorf("wharf client: route refresh interval must be positive, got %v", o.routeRefresh)
	case o.masterRetry <= 0:
		return o, fmt.Errorf("wharf client: master retry interval must be positive, got %v", o.masterRetry)
	}
	for _, a := range o.slaveAddrs {
		if a == "" {
			return o, fmt.Errorf("wharf client: empty slave address")
		}
	}
	d := protocol.DefaultLimits()
	if o.limits.MaxBatchMessages <= 0 {
		o.limits.MaxBatchMessages = d.MaxBatchMessages
	}
	if o.limits.MaxMessageSize <= 0 {
		o.limits.MaxMessageSize = d.MaxMessageSize
	}
	if o.dial == nil {
		o.dial = (&net.Dialer{}).DialContext
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.reconnectMax < o.reconnectMin {
		o.reconnectMax = o.reconnectMin
	}
	return o, nil
}

// WithSendCoalescing turns the coalescing of async sends on or off (on by
// default). When on, the SendAsync calls for one topic that arrive while
// the connection is busy writing share one SEND_BATCH request, and so one
// queue, picked round robin per batch; nothing waits for a batch to fill.
// Messages with a delay, sends with ToQueue, and Send, SendOneway and
// SendBatch are never coalesced. Off, every SendAsync is its own SEND to
// the next queue in round robin.
func WithSendCoalescing(on bool) Option { return func(o *options) { o.coalesce = on } }

// WithTimeout sets the timeout of each request (default 3 s). A pull's
// timeout is its suspend time plus this. The context passed to a call can
// only shorten it. For Producer.Send it applies to each attempt.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithDialTimeout sets the TCP connect timeout (default 3 s).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithDialer sets how the client connects to a broker (and to the slaves of
// WithSlaveAddrs): every connection is opened by dial instead of a
// net.Dialer, with a context bounded by WithDialTimeout, and a failed dial
// is ErrBrokerUnavailable as for TCP. This is the client's transport seam:
// in-memory connections for tests (net.Pipe), a proxy that injects faults
// or latency, a simulated network. The connection must deliver bytes in
// order, as TCP does. Only the transport is replaced: the client's
// goroutines, timeouts and retry pauses still run on the wall clock. nil
// restores the default.
func WithDialer(dial Dialer) Option { return func(o *options) { o.dial = dial } }

// WithRetries sets how often a Producer repeats a send that failed with a
// retryable status or a connection error (default 2, so at most 3 attempts).
// Stored-but-unconfirmed statuses (FLUSH_DISK_TIMEOUT, ...) and timeouts are
// never retried: the message may be stored, and a resend would duplicate it.
func WithRetries(n int) Option { return func(o *options) { o.retries = n } }

// WithRetryBackoff sets the pause before the first retry of a send (default
// 100 ms); it doubles for each further retry, up to 10 s (or the first
// pause, if longer). No retry starts after the context's deadline.
func WithRetryBackoff(d time.Duration) Option { return func(o *options) { o.retryBackoff = d } }

// WithReconnectBackoff bounds the pause after a failed connect during which
// calls fail at once with ErrBrokerUnavailable instead of dialing again
// (default 100 ms, doubling up to 3 s).
func WithReconnectBackoff(min, max time.Duration) Option {
	return func(o *options) { o.reconnectMin, o.reconnectMax = min, max }
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithLimits sets the frame limits applied to what is sent and received
// (default protocol.DefaultLimits()).
func WithLimits(l protocol.Limits) Option { return func(o *options) { o.limits = l } }

// WithClientID sets the id sent in heartbeats (default host@pid).
func WithClientID(id string) Option { return func(o *options) { o.clientID = id } }

// WithProducerGroup sets a Producer's group (default DEFAULT_PRODUCER).
func WithProducerGroup(g string) Option { return func(o *options) { o.producerGroup = g } }

// WithHeartbeat sets the heartbeat interval (default 30 s; 0 disables the
// periodic heartbeat, one is still sent on connect). A PullConsumer's
// connections heartbeat as members of its group, at the broker's interval
// (consumerHeartbeatInterval) when that is shorter: the broker drops a
// member silent for three of them.
func WithHeartbeat(d time.Duration) Option { return func(o *options) { o.heartbeat = d } }

// WithQueue makes a Producer send to this queue rather than round robin over
// the topic's write queues (default -1: round robin).
func WithQueue(q int32) Option { return func(o *options) { o.queue = q } }

// WithRouteTTL sets how long a Producer trusts the write-queue count it read
// for a topic (default 30 s). The sends that find the route unknown or past
// its TTL together share one fetch of it (a retry after a failure fetches
// its own).
func WithRouteTTL(d time.Duration) Option { return func(o *options) { o.routeTTL = d } }

// WithConsumeFrom sets where a PushConsumer starts a queue its group has no
// committed offset for (default ConsumeFromLast).
func WithConsumeFrom(c ConsumeFrom) Option { return func(o *options) { o.consumeFrom = c } }

// WithPullBatchSize sets how many messages a PushConsumer asks for per pull
// (default 32, at most 1024).
func WithPullBatchSize(n int) Option { return func(o *options) { o.pullBatch = int32(n) } }

// WithPullSuspend sets how long a PushConsumer's pull waits at the broker
// for a new message (long polling; default 15 s).
func WithPullSuspend(d time.Duration) Option { return func(o *options) { o.pullSuspend = d } }

// WithConsumeBatchSize sets how many messages a PushConsumer hands to its
// handler at once (default 1).
func WithConsumeBatchSize(n int) Option { return func(o *options) { o.consumeBatch = n } }

// WithCommitInterval sets how often a PushConsumer commits its offsets
// (default 5 s; they are also committed on Close).
func WithCommitInterval(d time.Duration) Option { return func(o *options) { o.commitInterval = d } }

// WithRetryLaterDelay sets the pause before a PushConsumer redelivers a batch
// its handler answered ConsumeRetryLater (default 1 s).
func WithRetryLaterDelay(d time.Duration) Option { return func(o *options) { o.retryLater = d } }

// WithPullErrorHandler sets a function a PushConsumer calls (from its queue
// goroutines; it must return quickly) whenever a pull fails; the consumer
// itself logs the error and retries with a backoff. Use it to notice a
// broker that has gone away (errors.Is(err, ErrBrokerUnavailable)). In
// group mode a failed heartbeat is reported too, with topic "" and queue -1.
func WithPullErrorHandler(f func(topic string, queueID int32, err error)) Option {
	return func(o *options) { o.pullErr = f }
}

// WithSlaveAddrs gives a PullConsumer or PushConsumer the addresses of the
// master's slaves (same brokerName, brokerId > 0), tried in this order.
// Pulls go to the master, except:
//
//   - while the master is unreachable (the connect fails or the connection
//     breaks: ErrBrokerUnavailable), pulls, offset queries and offset commits
//     go to a slave; the master is tried again every WithMasterRetryInterval
//     and used again as soon as it answers;
//   - after a master's pull response suggests reading from a slave
//     (SuggestWhichBrokerID > 0: the consumer is far behind the head, so the
//     master would read from disk), that queue's pulls go to a slave until
//     the consumer has caught up with the slave's end of the queue, or the
//     slave fails.
//
// Offsets committed on a slave reach the master through replication (the
// brokers merge them, keeping the larger), so none is lost when the master
// returns. A consumer ahead of a slave that lags does not go back: a pull
// beyond the slave's end of the queue answers PullNoNewMsg at the same offset.
// Producers and Admin ignore this option: they never write to a slave.
func WithSlaveAddrs(addrs ...string) Option {
	return func(o *options) { o.slaveAddrs = append([]string(nil), addrs...) }
}

// WithReadReplicas is WithSlaveAddrs.
func WithReadReplicas(addrs ...string) Option { return WithSlaveAddrs(addrs...) }

// WithMasterRetryInterval sets how long a consumer with WithSlaveAddrs
// keeps reading from a slave after the master was found unreachable before
// it tries the master again (default 3 s). While on a slave for that
// reason, a long-polling pull waits at most this long.
func WithMasterRetryInterval(d time.Duration) Option { return func(o *options) { o.masterRetry = d } }

// WithNameServer makes the client find its brokers through name servers
// ("host:port", several separated by ';'), the normal way to use a
// cluster: give the constructor the empty broker address. Any live name
// server will do; the client sticks to one while it answers and moves to
// the next when it cannot be reached.
//
// A Producer asks for each topic's route (GET_ROUTEINFO_BY_TOPIC), sends
// round robin over the writable queues of every broker group whose master
// is alive, keeps one connection per broker it uses, and refreshes its
// routes every WithRouteRefresh, at once when a connection to a broker
// breaks, and when a broker says TOPIC_NOT_EXIST. It never goes back to a
// route older than one it took from the same name server (see client's
// package doc). A PushConsumer is a member on every broker group hosting
// its topics; a PullConsumer names queues by group (MessageQueue, Queues).
// An Admin gets ClusterInfo, TopicRoute and
// CreateTopicInCluster; its single-broker calls need a broker address.
func WithNameServer(list string) Option { return func(o *options) { o.nameServers = list } }

// WithRouteRefresh sets how often a client built WithNameServer fetches
// the routes of the topics it uses again (default 2 s; RocketMQ's clients
// wait 30 s). A broken connection to a broker refreshes at once whatever
// this says.
func WithRouteRefresh(d time.Duration) Option { return func(o *options) { o.routeRefresh = d } }
