package benchrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wharfmq/wharf/client"
)

// runScenario runs one scenario at one body size.
func runScenario(ctx context.Context, o *Options, sc string, size int, stderr io.Writer) ([]Result, error) {
	switch sc {
	case "disk-probe":
		return runDiskProbe(ctx, o)
	case "sync-master-64":
		return runSyncMaster(ctx, o, size, stderr)
	case "route-propagation", "groups-2-vs-1":
		return runCluster(ctx, o, sc, size, stderr)
	}
	flush := "ASYNC_FLUSH"
	if sc == "sync-flush-64" {
		flush = "SYNC_FLUSH"
		if o.Broker != "" && o.FlushMode != "SYNC_FLUSH" {
			return []Result{{Scenario: sc, Size: size, Skipped: true,
				Note: "needs a SYNC_FLUSH broker: pass --flush-mode SYNC_FLUSH with a broker started with --flushDiskType SYNC_FLUSH"}}, nil
		}
	}
	b, err := startBroker(ctx, o, flush, stderr)
	if err != nil {
		return nil, err
	}
	defer b.stop()
	r, err := runOn(ctx, o, b, sc, size, stderr)
	if r.Scenario == "" {
		return nil, err
	}
	if err != nil && r.Note == "" {
		r.Note = "failed: " + err.Error()
	}
	return []Result{r}, err
}

// loadFunc is a scenario's load: it runs until its context is cancelled and
// everything in flight has completed, recording into rec.
type loadFunc func(ctx context.Context, rec *recorder) error

// runOn runs a load scenario against broker b.
func runOn(ctx context.Context, o *Options, b *broker, sc string, size int, stderr io.Writer) (Result, error) {
	topic := "bench"
	if o.Broker != "" {
		// an existing broker: a topic of our own, so earlier runs do not count
		topic = fmt.Sprintf("bench-%s-%d-%d", sc, size, time.Now().UnixNano())
	}
	if err := b.createTopic(ctx, topic, o.Queues, o.Timeout); err != nil {
		return Result{}, fmt.Errorf("create topic: %w", err)
	}
	b.settle(ctx, o.Settle, stderr)
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	copts := []client.Option{client.WithTimeout(o.Timeout), client.WithRetries(0), client.WithSendCoalescing(o.SendCoalescing)}
	var load loadFunc
	switch sc {
	case "async-256", "async-4096":
		n, _ := strconv.Atoi(strings.TrimPrefix(sc, "async-"))
		load = func(ctx context.Context, rec *recorder) error {
			return loadAsync(ctx, b.addr, topic, body, n, copts, rec)
		}
	case "batch-32":
		load = func(ctx context.Context, rec *recorder) error {
			return loadBatch(ctx, b.addr, topic, body, 32, o.BatchInflight, copts, rec)
		}
	case "sync-1", "sync-16", "sync-flush-64":
		n, _ := strconv.Atoi(sc[strings.LastIndexByte(sc, '-')+1:])
		load = func(ctx context.Context, rec *recorder) error {
			return loadSync(ctx, b.addr, topic, body, n, copts, rec)
		}
	case "consume-backlog":
		return consumeBacklog(ctx, o, b, topic, body, copts, stderr)
	case "e2e-10k":
		return runE2E(ctx, o, b, topic, size, copts, stderr)
	default:
		return Result{}, fmt.Errorf("unknown scenario %q", sc)
	}
	rec, res, err := timed(ctx, o, b, sc, size, stderr, load)
	return res, checkCompleted(rec, err)
}

// checkCompleted turns a measured window in which nothing completed into
// an error, since its figures would mean nothing.
func checkCompleted(rec *recorder, err error) error {
	if err == nil && rec != nil && rec.msgs.Load() == 0 {
		return fmt.Errorf("no message completed in the measured window (first error: %v)", rec.err())
	}
	return err
}

// runE2E is e2e-10k: publish at o.Rate, push-consume, latency from publish
// to consume.
func runE2E(ctx context.Context, o *Options, b *broker, topic string, size int, copts []client.Option, stderr io.Writer) (Result, error) {
	// The consumer joins and gets its queues before the clock starts.
	e2e, err := newE2E(ctx, b.addr, topic, o.Queues, copts)
	if err != nil {
		return Result{}, err
	}
	defer e2e.close()
	rec, res, err := timed(ctx, o, b, "e2e-10k", size, stderr, func(ctx context.Context, rec *recorder) error {
		return e2e.publish(ctx, size, o.Rate, rec)
	})
	if err == nil && rec != nil {
		res.Note = fmt.Sprintf("publish->consume at %d msg/s: push consumer (a long poll of up to 32 per queue, one handler call at a time), latency from a timestamp in the body", o.Rate)
	}
	return res, checkCompleted(rec, err)
}

// timed runs load for o.Warmup + o.Duration, and measures the second part.
func timed(ctx context.Context, o *Options, b *broker, sc string, size int, stderr io.Writer, load loadFunc) (*recorder, Result, error) {
	rec := newRecorder()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	started := time.Now()
	stopProgress := o.progress(func() string {
		phase := "warm-up"
		if rec.start.Load() != 0 {
			phase = "measuring"
		}
		return fmt.Sprintf("bench %s size %d: %s %.1fs  %d msgs  %d errors  %.0f msg/s",
			sc, size, phase, time.Since(started).Seconds(), rec.total.Load(), rec.errs.Load(), rec.rate())
	})
	defer stopProgress()
	loadErr := make(chan error, 1)
	go func() { loadErr <- load(loadCtx, rec) }()

	select {
	case err := <-loadErr:
		return nil, Result{}, fmt.Errorf("load ended during warm-up: %v", err)
	case <-time.After(o.Warmup):
	case <-ctx.Done():
	}
	cpu0, client0 := b.cpu(), procCPU(os.Getpid())
	stopProfiles := startProfiles(o, b, sc, size, max(1, int(o.Duration.Seconds())), stderr)
	rec.open()
	var early error
	select {
	case early = <-loadErr:
	case <-time.After(o.Duration):
	case <-ctx.Done():
	}
	rec.close()
	cpu1, client1 := b.cpu(), procCPU(os.Getpid())
	stopProfiles()
	stopLoad()
	if early == nil {
		early = <-loadErr
	}
	res := rec.result(sc, size)
	res.FlushMode = b.flushMode
	res.SendCoalescing = &o.SendCoalescing
	res.setBrokerCPU(cpu0, cpu1)
	res.setClientCPU(client0, client1)
	if early != nil && ctx.Err() == nil {
		return rec, res, early
	}
	return rec, res, nil
}

// startProfiles, when o.ProfileDir is set, takes the broker's allocation
// profile and starts a CPU profile of the broker (cpuSecs long) and one of
// this process (the clients); the returned func stops them and takes the
// broker's allocation profile again.
func startProfiles(o *Options, b *broker, sc string, size, cpuSecs int, stderr io.Writer) (stop func()) {
	if o.ProfileDir == "" {
		return func() {}
	}
	// a cluster line's scenario is load/configuration: one file name
	base := strings.ReplaceAll(sc, "/", "-")
	name := func(kind string) string { return fmt.Sprintf("%s-%d-%s.pprof", base, size, kind) }
	_ = b.profile(o.ProfileDir, name("allocs-before"), "allocs", 0)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := b.profile(o.ProfileDir, name("cpu"), "profile", cpuSecs); err != nil {
			fmt.Fprintf(stderr, "bench: cpu profile: %v\n", err)
		}
	})
	stopClient := startClientProfile(filepath.Join(o.ProfileDir, name("client-cpu")))
	writeClientAllocs(filepath.Join(o.ProfileDir, name("client-allocs-before")))
	traceName := func(who string) string { return fmt.Sprintf("%s-%d-%s.trace", base, size, who) }
	if o.Trace > 0 {
		secs := int((o.Trace + time.Second - 1) / time.Second)
		wg.Go(func() {
			if err := b.profile(o.ProfileDir, traceName("broker"), "trace", secs); err != nil {
				fmt.Fprintf(stderr, "bench: broker trace: %v\n", err)
			}
		})
	}
	stopTrace := startClientTrace(filepath.Join(o.ProfileDir, traceName("client")), o.Trace)
	return func() {
		stopTrace()
		stopClient()
		writeClientAllocs(filepath.Join(o.ProfileDir, name("client-allocs-after")))
		wg.Wait()
		_ = b.profile(o.ProfileDir, name("allocs-after"), "allocs", 0)
	}
}

// startClientProfile starts a CPU profile of this process (the bench's
// clients) into path and returns what stops it. The clients share the
// machine's cores with the broker, so their CPU caps the throughput as much
// as the broker's.
func startClientProfile(path string) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// writeClientAllocs writes this process's allocation profile to path: the
// window's allocations of the clients are the difference of the one
// taken after it and the one before (go tool pprof -base).
func writeClientAllocs(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("allocs").WriteTo(f, 0)
}

// startClientTrace, for d > 0, writes a runtime/trace of this process to
// path for d (or until the returned func is called, if sooner): where
// the clients' goroutines waited, for the scheduling tails.
func startClientTrace(path string, d time.Duration) (stop func()) {
	if d <= 0 {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return func() {}
	}
	var once sync.Once
	end := func() { once.Do(func() { trace.Stop(); f.Close() }) }
	t := time.AfterFunc(d, end)
	return func() { t.Stop(); end() }
}

// runSyncMaster compares SYNC_MASTER with ASYNC_MASTER (each with one
// slave), 64 sync publishers. It is skipped when this build refuses
// SYNC_MASTER.
func runSyncMaster(ctx context.Context, o *Options, size int, stderr io.Writer) ([]Result, error) {
	if o.Broker != "" {
		return skipSyncMaster(size, "needs brokers of its own (a master and a slave); not run with --broker")
	}
	var rs []Result
	for _, role := range []string{"SYNC_MASTER", "ASYNC_MASTER"} {
		r, skip, err := runMasterSlave(ctx, o, role, size, stderr)
		if skip != "" {
			return skipSyncMaster(size, skip)
		}
		if err != nil {
			return rs, err
		}
		rs = append(rs, r)
	}
	if len(rs) == 2 && rs[1].MsgsPerS > 0 {
		rs[0].Note += fmt.Sprintf("; SYNC/ASYNC = %.2fx", rs[0].MsgsPerS/rs[1].MsgsPerS)
	}
	return rs, nil
}

func skipSyncMaster(size int, note string) ([]Result, error) {
	return []Result{{Scenario: "sync-master-64", Size: size, Skipped: true, Note: note}}, nil
}

// runMasterSlave runs sync-flush-64 against a master of role with one
// slave. When the first role cannot start, it returns why in skip: this
// build has no replication.
func runMasterSlave(ctx context.Context, o *Options, role string, size int, stderr io.Writer) (r Result, skip string, err error) {
	haPort, err := freePort()
	if err != nil {
		return Result{}, "", err
	}
	m, err := startBroker(ctx, o, "ASYNC_FLUSH", stderr, "--brokerRole", role, "--haListenPort", strconv.Itoa(haPort))
	if err != nil {
		if role == "SYNC_MASTER" {
			return Result{}, "replication not available: this build refuses SYNC_MASTER (" + refusal(err) + ")", nil
		}
		return Result{}, "", err
	}
	defer m.stop()
	s, err := startBroker(ctx, o, "ASYNC_FLUSH", stderr, "--brokerRole", "SLAVE", "--brokerId", "1",
		"--haMasterAddress", loopback(haPort))
	if err != nil {
		if role == "SYNC_MASTER" {
			return Result{}, "replication not available: a SLAVE could not be started (" + firstLine(err.Error()) + ")", nil
		}
		return Result{}, "", err
	}
	r, err = runOn(ctx, o, m, "sync-flush-64", size, stderr)
	s.stop()
	if err != nil {
		return Result{}, "", err
	}
	r.Scenario = strings.ToLower(strings.ReplaceAll(role, "_", "-")) + "-64"
	r.Note = "64 sync publishers, master " + role + " with one slave"
	return r, "", nil
}

// refusal is the line of a broker's start error that names brokerRole, or
// the whole error.
func refusal(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "brokerRole"); i >= 0 {
		msg = firstLine(msg[i:])
	}
	return strings.TrimSpace(msg)
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
