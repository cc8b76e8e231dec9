package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

type produceFlags struct {
	cliCommon
	topic    string
	count    int
	size     int
	tag      string
	key      string
	queue    int
	inflight int
	batch    int
	keysOut  string
	retries  int
	group    string
	grace    time.Duration

	delayLevel int
	deliverAt  string
	deliverAtT time.Time // parsed from deliverAt by validate
}

func newProduceCmd() *cobra.Command {
	var o produceFlags
	cmd := &cobra.Command{
		Use:   "produce --topic T [--count N] [--size B]",
		Short: "Send messages to a topic and report throughput and latency",
		Long: `Send --count messages of --size bytes to --topic, with up to --inflight sends
(or batches, with --batch > 1) in flight at once.

With --key K every message gets the unique key K-<seq> (seq from 0), indexed
by the broker for 'wharf query --key'. --keys-out FILE writes one line per
acknowledged message: key, msgId, queueId, queueOffset (tab-separated; the key
is the UNIQ_KEY when --key is not given).

Only SUCCESS answers count as acked. Messages stored without a confirmed flush
or replication (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE)
count as failed and also as unconfirmed.

--delay-level N (1..18: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m
1h 2h) or --deliver-at TIME (RFC 3339, or +DURATION from now such as +90s)
makes consumers see the messages only from then on.

--namesrv "a:9876;b:9876" sends through the cluster's name servers instead of
to one --broker: round robin over the writable queues of every broker group,
around a group that fails (its failed sends count as failed; --queue needs
--broker).

On Ctrl-C (SIGINT, SIGTERM), or when the broker cannot be reached (with
--broker), produce stops sending, waits a little for the answers in flight,
prints its summary and exits non-zero; it also exits non-zero when any
message failed.

--json prints one JSON object as the last line of stdout:
  {sent, acked, failed, unconfirmed, msgs_per_s, mb_per_s, p50_ms, p99_ms,
   p999_ms, elapsed_s, errors, stopped}
where mb_per_s counts acked payload in MB (10^6 bytes) and the latency
percentiles are of acknowledged sends (one per batch with --batch).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runProduce(cmd, &o) },
	}
	o.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.topic, "topic", "", "topic to send to (required)")
	f.IntVar(&o.count, "count", 1, "number of messages")
	f.IntVar(&o.size, "size", 128, "body size in bytes")
	f.StringVar(&o.tag, "tag", "", "TAGS property of every message")
	f.StringVar(&o.key, "key", "", "key prefix: message seq gets KEYS K-<seq>")
	f.IntVar(&o.queue, "queue", -1, "send every message to this queue (-1: round robin)")
	f.IntVar(&o.inflight, "inflight", 64, "sends (or batches) in flight at once")
	f.IntVar(&o.batch, "batch", 1, "messages per request (SEND_BATCH when > 1)")
	f.StringVar(&o.keysOut, "keys-out", "", "write key, msgId, queueId, queueOffset of every acked message to this file")
	f.IntVar(&o.retries, "retries", 2, "retries of a send that failed with a retryable status or a connection error")
	f.StringVar(&o.group, "producer-group", "wharf-cli-producer", "producer group")
	f.DurationVar(&o.grace, "grace", 3*time.Second, "after a stop, how long to wait for the answers of sends in flight")
	f.IntVar(&o.delayLevel, "delay-level", 0, "delay level 1..18 of every message (0: none)")
	f.StringVar(&o.deliverAt, "deliver-at", "", "delivery time of every message: RFC 3339 or +duration from now")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// produceReport is the --json output of produce.
type produceReport struct {
	Sent        int64            `json:"sent"`
	Acked       int64            `json:"acked"`
	Failed      int64            `json:"failed"`
	Unconfirmed int64            `json:"unconfirmed"`
	MsgsPerS    float64          `json:"msgs_per_s"`
	MBPerS      float64          `json:"mb_per_s"`
	P50Ms       float64          `json:"p50_ms"`
	P99Ms       float64          `json:"p99_ms"`
	P999Ms      float64          `json:"p999_ms"`
	ElapsedS    float64          `json:"elapsed_s"`
	Errors      map[string]int64 `json:"errors,omitempty"`
	Stopped     string           `json:"stopped"` // "done", "interrupted" or "broker_unavailable"
}

// produceStats gathers the outcome of every send. Safe for concurrent use.
type produceStats struct {
	sent, acked, failed, unconfirmed atomic.Int64

	mu       sync.Mutex
	errs     map[string]int64
	hist     *hdrhistogram.Histogram // microseconds
	keys     *bufio.Writer           // nil without --keys-out
	keysErr  error
	firstErr error
}

func newProduceStats() *produceStats {
	return &produceStats{errs: map[string]int64{}, hist: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)}
}

// produceItem is one message of a request, for the keys file.
type produceItem struct {
	key         string
	msgID       string
	queueID     int32
	queueOffset int64
}

// record notes the outcome of one request of len(items) messages.
func (s *produceStats) record(items []produceItem, status protocol.Status, err error, latency time.Duration) {
	n := int64(len(items))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed.Add(n)
		if status.Unconfirmed() {
			s.unconfirmed.Add(n)
		}
		s.errs[cliErrorKind(err)] += n
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	s.acked.Add(n)
	_ = s.hist.RecordValue(max(1, latency.Microseconds()))
	if s.keys != nil && s.keysErr == nil {
		for _, it := range items {
			if _, err := fmt.Fprintf(s.keys, "%s\t%s\t%d\t%d\n", it.key, it.msgID, it.queueID, it.queueOffset); err != nil {
				s.keysErr = err
				break
			}
		}
	}
}

func (s *produceStats) report(elapsed time.Duration, size int, stopped string) produceReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	secs := elapsed.Seconds()
	r := produceReport{
		Sent:        s.sent.Load(),
		Acked:       s.acked.Load(),
		Failed:      s.failed.Load(),
		Unconfirmed: s.unconfirmed.Load(),
		ElapsedS:    cliRound(secs),
		Stopped:     stopped,
	}
	if secs > 0 {
		r.MsgsPerS = cliRound(float64(r.Acked) / secs)
		r.MBPerS = cliRound(float64(r.Acked) * float64(size) / 1e6 / secs)
	}
	if s.hist.TotalCount() > 0 {
		r.P50Ms = cliRound(float64(s.hist.ValueAtQuantile(50)) / 1000)
		r.P99Ms = cliRound(float64(s.hist.ValueAtQuantile(99)) / 1000)
		r.P999Ms = cliRound(float64(s.hist.ValueAtQuantile(99.9)) / 1000)
	}
	if len(s.errs) > 0 {
		r.Errors = make(map[string]int64, len(s.errs))
		for k, v := range s.errs {
			r.Errors[k] = v
		}
	}
	return r
}

func (o *produceFlags) validate() error {
	if err := o.checkTarget(); err != nil {
		return err
	}
	switch {
	case o.topic == "":
		return errors.New("--topic is required")
	case o.count < 1:
		return fmt.Errorf("--count must be at least 1, got %d", o.count)
	case o.size < 0 || o.size > protocol.DefaultMaxMessageSize:
		return fmt.Errorf("--size must be in 0..%d, got %d", protocol.DefaultMaxMessageSize, o.size)
	case o.inflight < 1:
		return fmt.Errorf("--inflight must be at least 1, got %d", o.inflight)
	case o.batch < 1 || o.batch > protocol.DefaultMaxBatchMessages:
		return fmt.Errorf("--batch must be in 1..%d, got %d", protocol.DefaultMaxBatchMessages, o.batch)
	case o.queue < -1:
		return fmt.Errorf("--queue must be -1 (round robin) or a queue id, got %d", o.queue)
	case o.queue >= 0 && o.onCluster():
		return o.needBroker("--queue (a queue of one broker)")
	case o.retries < 0:
		return fmt.Errorf("--retries must not be negative")
	case strings.ContainsAny(o.key, " \t\x01\x02"):
		return fmt.Errorf("--key must not contain spaces")
	case o.delayLevel < 0 || o.delayLevel > client.MaxDelayLevel:
		return fmt.Errorf("--delay-level must be in 0..%d, got %d", client.MaxDelayLevel, o.delayLevel)
	case o.delayLevel > 0 && o.deliverAt != "":
		return errors.New("give --delay-level or --deliver-at, not both")
	}
	if o.deliverAt != "" {
		t, err := parseDeliverAt(o.deliverAt, time.Now())
		if err != nil {
			return fmt.Errorf("--deliver-at: %w", err)
		}
		o.deliverAtT = t
	}
	if err := protocol.ValidateTopic(o.topic); err != nil {
		return fmt.Errorf("--topic: %w", err)
	}
	return nil
}

// produceBody returns a body of size bytes that starts with the message's
// sequence number, so that bodies differ and can be told apart.
func produceBody(seq, size int) []byte {
	b := make([]byte, size)
	head := strconv.AppendInt([]byte("wharf-"), int64(seq), 10)
	head = append(head, ' ')
	n := copy(b, head)
	for i := n; i < size; i++ {
		b[i] = 'a' + byte((seq+i)%26)
	}
	return b
}

func (o *produceFlags) message(seq int) *protocol.Message {
	m := &protocol.Message{Topic: o.topic, Body: produceBody(seq, o.size)}
	if o.tag != "" {
		m.SetTags(o.tag)
	}
	if o.key != "" {
		m.SetKeys(o.key + "-" + strconv.Itoa(seq))
	}
	if o.delayLevel > 0 {
		m.SetDelayLevel(o.delayLevel)
	}
	if !o.deliverAtT.IsZero() {
		client.SetDeliverAt(m, o.deliverAtT)
	}
	return m
}

func produceKey(m *protocol.Message) string {
	if k := m.Property(protocol.PropertyKeys); k != "" {
		return k
	}
	return m.UniqKey()
}

func runProduce(cmd *cobra.Command, o *produceFlags) error {
	if err := o.validate(); err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	sigCtx, stopSig := cliSignalContext(cmd.Context())
	defer stopSig()
	r, err := newProduceRun(o, stderr)
	if err != nil {
		return err
	}
	// issueCtx stops issuing sends (signal, broker gone); sendCtx is what
	// the sends in flight run under: cancelled only after a grace period,
	// so that the answers already on their way are still counted.
	r.issueCtx, r.stopIssue = context.WithCancel(sigCtx)
	defer r.stopIssue()
	r.sendCtx, r.cancelSends = context.WithCancel(context.Background())
	defer r.cancelSends()

	start := time.Now()
	progress := startCLIProgress(stderr, r.progressLine(start))
	r.issue()
	r.drain()
	elapsed := time.Since(start)
	r.p.Close()
	progress.Stop()
	keysErr := r.closeKeys()

	stopped, runErr := r.stopReason(sigCtx)
	rep := r.stats.report(elapsed, o.size, stopped)
	if o.json {
		if err := cliWriteJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		printProduceReport(stdout, o, rep)
	}
	return r.exitErr(rep, runErr, keysErr)
}

// produceRun is one run of `wharf produce`: the producer, the outcome of
// its sends, and what stops and drains them.
type produceRun struct {
	o        *produceFlags
	p        *client.Producer
	stats    *produceStats
	keysFile *os.File // nil without --keys-out

	issueCtx    context.Context
	stopIssue   context.CancelFunc
	sendCtx     context.Context
	cancelSends context.CancelFunc
	brokerGone  atomic.Pointer[error]

	sem chan struct{} // one token per send (or batch) in flight
	wg  sync.WaitGroup
}

// newProduceRun connects the producer and opens the keys file.
func newProduceRun(o *produceFlags, stderr io.Writer) (*produceRun, error) {
	addr, opts := o.target(stderr)
	opts = append(opts, client.WithRetries(o.retries), client.WithProducerGroup(o.group))
	if o.queue >= 0 {
		opts = append(opts, client.WithQueue(int32(o.queue)))
	}
	p, err := client.NewProducer(addr, opts...)
	if err != nil {
		return nil, err
	}
	r := &produceRun{o: o, p: p, stats: newProduceStats(), sem: make(chan struct{}, o.inflight)}
	if o.keysOut != "" {
		if r.keysFile, err = os.Create(o.keysOut); err != nil {
			p.Close()
			return nil, err
		}
		r.stats.keys = bufio.NewWriterSize(r.keysFile, 256<<10)
	}
	return r, nil
}

// progressLine is the progress shown on stderr while the run goes.
func (r *produceRun) progressLine(start time.Time) func() string {
	return func() string {
		secs := time.Since(start).Seconds()
		return fmt.Sprintf("produce %s: sent %d/%d  acked %d  failed %d  %.0f msg/s",
			r.o.topic, r.stats.sent.Load(), r.o.count, r.stats.acked.Load(), r.stats.failed.Load(), float64(r.stats.acked.Load())/max(secs, 1e-9))
	}
}

// noteErr stops issuing once the broker is gone. One broker gone stops a
// run on --broker; on --namesrv the producer sends to the other groups, and
// the failed sends are counted.
func (r *produceRun) noteErr(err error) {
	if !r.o.onCluster() && errors.Is(err, client.ErrBrokerUnavailable) && r.brokerGone.CompareAndSwap(nil, &err) {
		r.stopIssue()
	}
}

// issue sends the messages, --inflight sends (or batches) at a time, until
// all are sent or issueCtx is done.
func (r *produceRun) issue() {
	o := r.o
	for seq := 0; seq < o.count; {
		select {
		case r.sem <- struct{}{}:
		case <-r.issueCtx.Done():
			return
		}
		if r.issueCtx.Err() != nil {
			<-r.sem
			return
		}
		n := min(o.batch, o.count-seq)
		r.stats.sent.Add(int64(n))
		if o.batch == 1 {
			r.sendOne(seq)
		} else {
			r.sendBatch(seq, n)
		}
		seq += n
	}
}

// sendOne sends message seq asynchronously; its answer frees its token.
func (r *produceRun) sendOne(seq int) {
	t0 := time.Now()
	m := r.o.message(seq)
	r.p.SendAsync(r.sendCtx, m, func(res client.SendResult, err error) {
		r.stats.record([]produceItem{{produceKey(m), res.MsgID, res.QueueID, res.QueueOffset}}, res.Status, err, time.Since(t0))
		r.noteErr(err)
		<-r.sem
	})
}

// sendBatch sends messages seq..seq+n-1 as one SEND_BATCH on a goroutine of
// its own; its answer frees its token.
func (r *produceRun) sendBatch(seq, n int) {
	t0 := time.Now()
	msgs := make([]*protocol.Message, n)
	for i := range msgs {
		msgs[i] = r.o.message(seq + i)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		res, err := r.p.SendBatch(r.sendCtx, msgs)
		items := make([]produceItem, len(msgs))
		for i, m := range msgs {
			items[i] = produceItem{key: produceKey(m), queueID: res.QueueID, queueOffset: res.QueueOffset + int64(i)}
			if i < len(res.MsgIDs) {
				items[i].msgID = res.MsgIDs[i]
			}
		}
		r.stats.record(items, res.Status, err, time.Since(t0))
		r.noteErr(err)
		<-r.sem
	}()
}

// drain waits for the sends in flight; after a stop, it gives them
// --grace, then cancels them.
func (r *produceRun) drain() {
	drained := make(chan struct{})
	go func() {
		select {
		case <-r.issueCtx.Done():
		case <-drained:
			return
		}
		t := time.NewTimer(r.o.grace)
		defer t.Stop()
		select {
		case <-t.C:
			r.cancelSends()
		case <-drained:
		}
	}()
	for range r.o.inflight {
		r.sem <- struct{}{}
	}
	r.wg.Wait()
	close(drained)
}

// closeKeys flushes and closes the keys file, returning its first error.
func (r *produceRun) closeKeys() error {
	if r.keysFile == nil {
		return nil
	}
	r.stats.mu.Lock()
	keysErr := r.stats.keysErr
	r.stats.mu.Unlock()
	if err := r.stats.keys.Flush(); err != nil && keysErr == nil {
		keysErr = err
	}
	if err := r.keysFile.Close(); err != nil && keysErr == nil {
		keysErr = err
	}
	return keysErr
}

// stopReason says why the run stopped ("done", "broker_unavailable",
// "interrupted") and the error a stop other than done exits with.
func (r *produceRun) stopReason(sigCtx context.Context) (string, error) {
	switch {
	case r.brokerGone.Load() != nil:
		return "broker_unavailable", fmt.Errorf("stopped: %w", *r.brokerGone.Load())
	case sigCtx.Err() != nil:
		return "interrupted", cliErrInterrupted
	}
	return "done", nil
}

// exitErr is the run's exit error: the stop, then the keys file, then any
// message not acknowledged.
func (r *produceRun) exitErr(rep produceReport, runErr, keysErr error) error {
	switch {
	case runErr != nil:
		return runErr
	case keysErr != nil:
		return fmt.Errorf("--keys-out %s: %w", r.o.keysOut, keysErr)
	case rep.Failed > 0:
		r.stats.mu.Lock()
		first := r.stats.firstErr
		r.stats.mu.Unlock()
		return fmt.Errorf("%d of %d messages not acknowledged (first error: %v)", rep.Failed, rep.Sent, first)
	}
	return nil
}

func printProduceReport(w io.Writer, o *produceFlags, r produceReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "topic\t%s\n", o.topic)
	fmt.Fprintf(tw, "sent\t%d\n", r.Sent)
	fmt.Fprintf(tw, "acked\t%d\n", r.Acked)
	fmt.Fprintf(tw, "failed\t%d\n", r.Failed)
	if r.Unconfirmed > 0 {
		fmt.Fprintf(tw, "  unconfirmed\t%d\t(stored, flush/replication not confirmed)\n", r.Unconfirmed)
	}
	fmt.Fprintf(tw, "elapsed\t%.3f s\n", r.ElapsedS)
	fmt.Fprintf(tw, "throughput\t%.1f msg/s\t%.3f MB/s\n", r.MsgsPerS, r.MBPerS)
	fmt.Fprintf(tw, "latency\tp50 %.3f ms\tp99 %.3f ms\tp99.9 %.3f ms\n", r.P50Ms, r.P99Ms, r.P999Ms)
	if len(r.Errors) > 0 {
		kinds := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			fmt.Fprintf(tw, "error\t%s\t%d\n", k, r.Errors[k])
		}
	}
	if r.Stopped != "done" {
		fmt.Fprintf(tw, "stopped\t%s\n", r.Stopped)
	}
	tw.Flush()
}
