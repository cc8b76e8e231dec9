package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

type consumeFlags struct {
	cliCommon
	topic       string
	group       string
	from        string
	count       int64
	idleExit    time.Duration
	tagExpr     string
	print       bool
	pullBatch   int
	suspend     time.Duration
	brokerWait  time.Duration
	slaves      []string
	orderly     bool
	broadcast   bool
	clientID    string
	concurrency int
}

func newConsumeCmd() *cobra.Command {
	var o consumeFlags
	cmd := &cobra.Command{
		Use:   "consume --topic T --group G [--count N] [--idle-exit D]",
		Short: "Consume a topic as a consumer group and report what arrived",
		Long: `Consume --topic as a member of consumer group --group (a push consumer). The
broker spreads the topic's queues over the group's live members, so several
consume commands of one group share the topic; each consumes its queues and
the group's retry topic with one long-polling goroutine per queue, up to
--concurrency handler calls at once, and commits its offsets every few
seconds, when a queue moves to another member, and at exit. A queue the group
has no committed offset for starts at its first (--from first, the default)
or last (--from last) offset.

--orderly consumes each queue one message at a time, in order. --broadcast
makes every member of the group receive every message (offsets are kept per
member, under "<group>#<client id>": give --client-id to resume after a
restart). --client-id sets the member's id (default host@pid).

consume stops after --count messages, or when no message came for --idle-exit,
and exits 0; on Ctrl-C (SIGINT, SIGTERM) or when the broker stays unreachable
for --broker-wait it stops, prints its summary and exits non-zero.

--slave ADDR (repeatable) names slaves of --broker: while --broker cannot be
reached, consume reads from a slave and commits its offsets there (the brokers
merge them back into the master), and returns to --broker once it answers; a
queue the master says is far behind is read from a slave until it catches up.

--namesrv "a:9876;b:9876" consumes through the cluster's name servers instead
of one --broker: the consumer is a member of --group on every broker group
hosting --topic (each group's broker assigns its own queues), reads a group
whose master is gone from its slaves, and joins groups that appear later. It
does not stop for an unreachable broker (use --idle-exit or --count). --slave
needs --broker.

--print writes one line per message to stdout, tab-separated:
  queueId queueOffset key msgId bodyLength
(key is the KEYS property, "-" if none).

--json prints one JSON object as the last line of stdout:
  {received, duplicates, msgs_per_s, mb_per_s, elapsed_s, stopped}
where duplicates counts deliveries of a message (its UNIQ_KEY, else its queue
and offset) already received in this run, and msgs_per_s is over the time
until the last message.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runConsume(cmd, &o) },
	}
	o.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.topic, "topic", "", "topic to consume (required)")
	f.StringVar(&o.group, "group", "wharf-cli-consumer", "consumer group")
	f.StringVar(&o.from, "from", "first", "where a queue without a committed offset starts: first or last")
	f.Int64Var(&o.count, "count", 0, "stop after this many messages (0: no limit)")
	f.DurationVar(&o.idleExit, "idle-exit", 0, "stop when no message came for this long (0: never)")
	f.StringVar(&o.tagExpr, "tag-expr", "*", `tag expression: "*" or "a || b"`)
	f.BoolVar(&o.print, "print", false, "print one line per message")
	f.IntVar(&o.pullBatch, "pull-batch", 32, "messages per pull")
	f.DurationVar(&o.suspend, "suspend", 15*time.Second, "long-polling time of a pull")
	f.DurationVar(&o.brokerWait, "broker-wait", 2*time.Second, "with --broker: stop when the broker (and every --slave) stays unreachable this long")
	f.StringArrayVar(&o.slaves, "slave", nil, "address host:port of a slave of --broker to read from when the master is unreachable (repeatable)")
	f.BoolVar(&o.orderly, "orderly", false, "consume each queue one message at a time, in order")
	f.BoolVar(&o.broadcast, "broadcast", false, "broadcasting: every member of the group gets every message")
	f.StringVar(&o.clientID, "client-id", "", "this member's client id (default host@pid)")
	f.IntVar(&o.concurrency, "concurrency", 20, "handler calls at once")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// consumeReport is the --json output of consume.
type consumeReport struct {
	Received   int64   `json:"received"`
	Duplicates int64   `json:"duplicates"`
	MsgsPerS   float64 `json:"msgs_per_s"`
	MBPerS     float64 `json:"mb_per_s"`
	ElapsedS   float64 `json:"elapsed_s"`
	Stopped    string  `json:"stopped"` // "count", "idle", "interrupted", "broker_unavailable"
}

// consumeKey identifies a message: its UNIQ_KEY (kept by retries), else
// its broker, queue and offset (queue ids repeat across broker groups).
type consumeKey struct {
	uniq   string
	host   string
	queue  int32
	offset int64
}

// consumeStats is what the handler saw. Safe for concurrent use.
type consumeStats struct {
	count int64 // limit, 0 for none
	out   *bufio.Writer

	mu         sync.Mutex
	seen       map[consumeKey]struct{}
	received   int64
	duplicates int64
	bytes      int64
	last       time.Time
	reached    chan struct{} // closed when count is reached

	receivedA atomic.Int64 // for the progress line
	lastNanos atomic.Int64
}

func newConsumeStats(count int64, out *bufio.Writer) *consumeStats {
	return &consumeStats{count: count, out: out, seen: map[consumeKey]struct{}{}, reached: make(chan struct{})}
}

func (s *consumeStats) handle(ctx context.Context, msgs []*protocol.MessageExt) client.ConsumeResult {
	s.mu.Lock()
	if s.count > 0 && s.received+int64(len(msgs)) > s.count {
		// Over the limit: hold them until the consumer closes, which
		// leaves them unconsumed (and uncommitted) for the next member.
		s.mu.Unlock()
		<-ctx.Done()
		return client.ConsumeRetryLater
	}
	defer s.mu.Unlock()
	for _, m := range msgs {
		k := consumeKey{uniq: m.UniqKey()}
		if k.uniq == "" {
			k.host, k.queue, k.offset = m.StoreHost, m.QueueID, m.QueueOffset
		}
		if _, dup := s.seen[k]; dup {
			s.duplicates++
		} else {
			s.seen[k] = struct{}{}
		}
		s.received++
		s.bytes += int64(len(m.Body))
		if s.out != nil {
			key := strings.Join(m.Keys(), ",")
			if key == "" {
				key = "-"
			}
			fmt.Fprintf(s.out, "%d\t%d\t%s\t%s\t%d\n", m.QueueID, m.QueueOffset, key, m.MsgID, len(m.Body))
		}
	}
	s.last = time.Now()
	s.receivedA.Store(s.received)
	s.lastNanos.Store(s.last.UnixNano())
	if s.count > 0 && s.received >= s.count {
		select {
		case <-s.reached:
		default:
			close(s.reached)
		}
	}
	return client.ConsumeSuccess
}

func (o *consumeFlags) validate() (client.ConsumeFrom, error) {
	if err := o.checkTarget(); err != nil {
		return 0, err
	}
	if len(o.slaves) > 0 {
		// On --namesrv the routes name each group's slaves.
		if err := o.needBroker("--slave (a slave of one master)"); err != nil {
			return 0, err
		}
	}
	var from client.ConsumeFrom
	switch o.from {
	case "first":
		from = client.ConsumeFromFirst
	case "last":
		from = client.ConsumeFromLast
	default:
		return 0, fmt.Errorf("--from must be first or last, got %q", o.from)
	}
	switch {
	case o.topic == "":
		return 0, errors.New("--topic is required")
	case o.group == "":
		return 0, errors.New("--group must not be empty")
	case o.count < 0:
		return 0, fmt.Errorf("--count must not be negative")
	case o.idleExit < 0:
		return 0, fmt.Errorf("--idle-exit must not be negative")
	case o.pullBatch < 1 || o.pullBatch > protocol.DefaultMaxBatchMessages:
		return 0, fmt.Errorf("--pull-batch must be in 1..%d", protocol.DefaultMaxBatchMessages)
	case o.concurrency < 1:
		return 0, fmt.Errorf("--concurrency must be at least 1")
	}
	if err := protocol.ValidateTopic(o.topic); err != nil {
		return 0, fmt.Errorf("--topic: %w", err)
	}
	if _, err := protocol.ParseTagExpr(o.tagExpr); err != nil {
		return 0, fmt.Errorf("--tag-expr: %w", err)
	}
	return from, nil
}

func runConsume(cmd *cobra.Command, o *consumeFlags) error {
	from, err := o.validate()
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	sigCtx, stopSig := cliSignalContext(cmd.Context())
	defer stopSig()

	watch := newBrokerWatch(o)
	var out *bufio.Writer
	if o.print {
		out = bufio.NewWriterSize(stdout, 64<<10)
	}
	stats := newConsumeStats(o.count, out)
	c, err := startConsumer(sigCtx, o, from, stats, watch, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	progress := startCLIProgress(stderr, func() string {
		return fmt.Sprintf("consume %s as %s: received %d", o.topic, o.group, stats.receivedA.Load())
	})
	stopped, runErr := waitConsume(sigCtx, o, c, stats, watch.gone, start)
	elapsed := time.Since(start)
	closeErr := c.Close() // stops the handlers, commits offsets
	progress.Stop()

	rep, printErr := stats.report(start, elapsed, stopped)
	if o.json {
		if err := cliWriteJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		printConsumeReport(stdout, o, rep)
	}
	switch {
	case runErr != nil:
		if closeErr != nil {
			fmt.Fprintf(stderr, "wharf: warning: %v\n", closeErr)
		}
		return runErr
	case closeErr != nil:
		return closeErr
	case printErr != nil:
		return printErr
	}
	return nil
}

// brokerWatch counts the broker as gone when pulls keep failing to reach
// it for --broker-wait. Safe for concurrent use.
type brokerWatch struct {
	onCluster bool
	wait      time.Duration
	gone      chan error // gets the error once the broker counts as gone

	mu          sync.Mutex
	since, last time.Time // of the current run of unreachable pulls
}

func newBrokerWatch(o *consumeFlags) *brokerWatch {
	return &brokerWatch{onCluster: o.onCluster(), wait: o.brokerWait, gone: make(chan error, 1)}
}

// onPullErr is the consumer's pull error handler.
func (w *brokerWatch) onPullErr(_ string, _ int32, err error) { w.note(time.Now(), err) }

// note records a pull that failed at now. Failures further apart than
// 2*wait + 5 s start a new run: the broker answered in between.
func (w *brokerWatch) note(now time.Time, err error) {
	// On --namesrv a group's master may be gone while its slave serves its
	// queues: one unreachable broker does not stop it.
	if w.onCluster || !errors.Is(err, client.ErrBrokerUnavailable) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() || now.Sub(w.last) > 2*w.wait+5*time.Second {
		w.since = now
	}
	w.last = now
	if now.Sub(w.since) >= w.wait {
		select {
		case w.gone <- err:
		default:
		}
	}
}

// startConsumer creates the push consumer, subscribes stats' handler and
// starts it (joining the group).
func startConsumer(ctx context.Context, o *consumeFlags, from client.ConsumeFrom, stats *consumeStats, watch *brokerWatch, stderr io.Writer) (*client.PushConsumer, error) {
	addr, opts := o.target(stderr)
	opts = append(opts,
		client.WithConsumeFrom(from),
		client.WithPullBatchSize(o.pullBatch),
		client.WithPullSuspend(o.suspend),
		client.WithPullErrorHandler(watch.onPullErr),
		client.WithRetryLaterDelay(200*time.Millisecond),
	)
	if len(o.slaves) > 0 {
		opts = append(opts, client.WithSlaveAddrs(o.slaves...))
	}
	opts = append(opts, client.WithConsumeConcurrency(o.concurrency), client.WithConsumeOrderly(o.orderly),
		client.WithReleaseTimeout(time.Second))
	if o.broadcast {
		opts = append(opts, client.WithMessageModel(client.Broadcasting))
	}
	if o.clientID != "" {
		opts = append(opts, client.WithClientID(o.clientID))
	}
	c, err := client.NewPushConsumer(addr, o.group, opts...)
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(o.topic, o.tagExpr, stats.handle); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, cliErrInterrupted
		}
		return nil, err
	}
	return c, nil
}

// waitConsume flushes --print lines while the consumer runs and returns
// why it stopped ("count", "idle", "broker_unavailable", "interrupted")
// with the error a stop other than count or idle exits with.
func waitConsume(ctx context.Context, o *consumeFlags, c *client.PushConsumer, stats *consumeStats, gone <-chan error, start time.Time) (string, error) {
	var idleC <-chan time.Time
	if o.idleExit > 0 {
		t := time.NewTicker(min(o.idleExit/4+time.Millisecond, 100*time.Millisecond))
		defer t.Stop()
		idleC = t.C
	}
	flushT := time.NewTicker(200 * time.Millisecond) // --print lines show up promptly
	defer flushT.Stop()
	idle := consumeIdle{idleExit: o.idleExit, start: start}
	assigned := func() bool { return len(c.Assignment()) > 0 }
	for {
		select {
		case <-flushT.C:
			if stats.out != nil {
				stats.mu.Lock()
				stats.out.Flush()
				stats.mu.Unlock()
			}
		case <-stats.reached:
			return "count", nil
		case <-idleC:
			if idle.idle(time.Now(), assigned, stats.lastNanos.Load()) {
				return "idle", nil
			}
		case err := <-gone:
			return "broker_unavailable", fmt.Errorf("stopped: %w", err)
		case <-ctx.Done():
			return "interrupted", cliErrInterrupted
		}
	}
}

// consumeIdle decides --idle-exit. Idle time counts from the first
// assignment: the broker may take a few heartbeats to hand this member its
// queues (after its own start, or while another member releases them). A
// member that gets none within idleExit + 10 s stops anyway.
type consumeIdle struct {
	idleExit   time.Duration
	start      time.Time // of the consumer
	assignedAt time.Time // zero until the first assignment is seen
}

// idle reports whether no message came for idleExit by now; assigned says
// whether the member holds queues (asked until it first does); lastNanos
// is when the last message came (0: none yet).
func (d *consumeIdle) idle(now time.Time, assigned func() bool, lastNanos int64) bool {
	if d.assignedAt.IsZero() && assigned() {
		d.assignedAt = now
	}
	last := d.start
	if !d.assignedAt.IsZero() {
		last = d.assignedAt
	} else if now.Sub(d.start) < d.idleExit+10*time.Second {
		return false
	}
	if lastNanos != 0 {
		last = time.Unix(0, lastNanos)
	}
	return now.Sub(last) >= d.idleExit
}

// report is the run's summary; it flushes the --print lines, returning the
// flush's error. Throughput is over the time until the last message.
func (s *consumeStats) report(start time.Time, elapsed time.Duration, stopped string) (consumeReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := consumeReport{
		Received:   s.received,
		Duplicates: s.duplicates,
		ElapsedS:   cliRound(elapsed.Seconds()),
		Stopped:    stopped,
	}
	if s.received > 0 {
		active := s.last.Sub(start).Seconds()
		if active <= 0 {
			active = elapsed.Seconds()
		}
		rep.MsgsPerS = cliRound(float64(s.received) / active)
		rep.MBPerS = cliRound(float64(s.bytes) / 1e6 / active)
	}
	var printErr error
	if s.out != nil {
		printErr = s.out.Flush()
	}
	return rep, printErr
}

func printConsumeReport(w io.Writer, o *consumeFlags, r consumeReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "topic\t%s\n", o.topic)
	fmt.Fprintf(tw, "group\t%s\n", o.group)
	fmt.Fprintf(tw, "received\t%d\n", r.Received)
	fmt.Fprintf(tw, "duplicates\t%d\n", r.Duplicates)
	fmt.Fprintf(tw, "elapsed\t%.3f s\n", r.ElapsedS)
	fmt.Fprintf(tw, "throughput\t%.1f msg/s\t%.3f MB/s\n", r.MsgsPerS, r.MBPerS)
	fmt.Fprintf(tw, "stopped\t%s\n", r.Stopped)
	tw.Flush()
}
