package main

import (
	"context"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // the child broker's profiling endpoint (loopback only)
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/cmd/wharf/brokerconf"
	"github.com/wharfmq/wharf/protocol"
)

// newBenchServeCmd is `wharf bench serve`, hidden: exactly `wharf broker`
// (same flags, same runBroker) plus a loopback HTTP listener with
// net/http/pprof and expvar, so that the bench can read the broker's heap
// and profile it. The bench starts its brokers with it.
func newBenchServeCmd() *cobra.Command {
	defaults := brokerconf.Default()
	var pprofAddr, logLevel string
	cmd := &cobra.Command{
		Use:    "serve",
		Short:  "Run a broker for the bench (wharf broker plus a pprof listener)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel, "text")
			if err != nil {
				return err
			}
			cfg, warnings, err := brokerconf.Resolve(cmd.Flags(), "")
			if err != nil {
				return err
			}
			for _, w := range warnings {
				log.Warn("config: " + w)
			}
			if pprofAddr != "" {
				ln, err := net.Listen("tcp", pprofAddr)
				if err != nil {
					return fmt.Errorf("--pprof-addr: %w", err)
				}
				go func() { _ = http.Serve(ln, nil) }()
			}
			return runBroker(cmd.Context(), cfg, log)
		},
	}
	defaults.RegisterFlags(cmd.Flags())
	cmd.Flags().StringVar(&pprofAddr, "pprof-addr", "", "serve /debug/pprof and /debug/vars on this loopback address")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "log level")
	return cmd
}

// benchBroker is a broker the bench uses: a child process or an existing one.
type benchBroker struct {
	addr      string
	flushMode string
	cmd       *exec.Cmd // nil: an existing broker (--broker)
	dir       string
	pprofAddr string
	done      chan struct{}
	waitErr   error
	log       *benchTail
}

// benchTail keeps the last bytes a child wrote, for error messages.
type benchTail struct {
	mu sync.Mutex
	b  []byte
	w  io.Writer
}

func (t *benchTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.b = append(t.b, p...)
	if len(t.b) > 8192 {
		t.b = append([]byte(nil), t.b[len(t.b)-8192:]...)
	}
	t.mu.Unlock()
	if t.w != nil {
		_, _ = t.w.Write(p)
	}
	return len(p), nil
}

func (t *benchTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func benchFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startBenchBroker starts `<wharf-bin> bench serve` with a fresh store, or
// returns the existing broker of --broker. extra are broker flags.
func startBenchBroker(ctx context.Context, o *benchFlags, flushMode string, stderr io.Writer, extra ...string) (*benchBroker, error) {
	if o.broker != "" {
		return &benchBroker{addr: o.broker, flushMode: o.flushMode}, nil
	}
	// A --broker-arg may override the scenario's flush mode (the broker
	// takes the last flag): label the results with what the broker runs.
	for i, a := range o.brokerArgs {
		switch {
		case strings.HasPrefix(a, "--flushDiskType="):
			flushMode = strings.TrimPrefix(a, "--flushDiskType=")
		case a == "--flushDiskType" && i+1 < len(o.brokerArgs):
			flushMode = o.brokerArgs[i+1]
		}
	}
	dir, err := os.MkdirTemp(o.storeDir, "wharf-bench-")
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := benchFreePort()
		if err != nil {
			return nil, err
		}
		pport, err := benchFreePort()
		if err != nil {
			return nil, err
		}
		b := &benchBroker{
			addr:      net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			flushMode: flushMode,
			dir:       dir,
			pprofAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(pport)),
			done:      make(chan struct{}),
			log:       &benchTail{w: stderr},
		}
		args := []string{"bench", "serve",
			"--storePathRootDir", dir,
			"--listenPort", strconv.Itoa(port),
			"--flushDiskType", flushMode,
			"--pprof-addr", b.pprofAddr,
			"--log-level", o.brokerLogLvl,
		}
		args = append(args, o.brokerArgs...)
		args = append(args, extra...)
		b.cmd = exec.Command(o.wharfBin, args...)
		b.cmd.Stdout = b.log
		b.cmd.Stderr = b.log
		b.cmd.Env = append(os.Environ(), benchChildEnv+"=1")
		if err := b.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start broker %s: %w", o.wharfBin, err)
		}
		go func() {
			b.waitErr = b.cmd.Wait()
			close(b.done)
		}()
		if err := b.waitReady(ctx, 20*time.Second); err == nil {
			return b, nil
		} else {
			last = err
		}
		b.stop()
		if !strings.Contains(b.log.String(), "listen on") {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, last
}

// benchChildEnv is set in the environment of the brokers the bench starts
// (the bench's test uses it to run its own binary as the broker).
const benchChildEnv = "WHARF_BENCH_CHILD"

func (b *benchBroker) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-b.done:
			return fmt.Errorf("broker exited (%v): %s", b.waitErr, strings.TrimSpace(b.log.String()))
		default:
		}
		c, err := net.DialTimeout("tcp", b.addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("broker did not accept connections on %s within %v: %s", b.addr, d, b.log.String())
}

// stop ends the child (SIGTERM, then SIGKILL after 15 s) and removes its
// store. An existing broker is left alone.
func (b *benchBroker) stop() {
	if b == nil || b.cmd == nil {
		return
	}
	select {
	case <-b.done:
	default:
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(15 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// cpu returns the child's CPU seconds so far, or -1.
func (b *benchBroker) cpu() float64 {
	if b == nil || b.cmd == nil || b.cmd.Process == nil {
		return -1
	}
	return benchProcCPU(b.cmd.Process.Pid)
}

// heapMiB forces a GC in the child and returns its live Go heap, or -1.
func (b *benchBroker) heapMiB() float64 {
	if b == nil || b.pprofAddr == "" {
		return -1
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	// ?gc=1 runs a GC before the heap profile is taken.
	if resp, err := hc.Get("http://" + b.pprofAddr + "/debug/pprof/heap?gc=1"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	} else {
		return -1
	}
	resp, err := hc.Get("http://" + b.pprofAddr + "/debug/vars")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var v struct {
		Memstats struct {
			HeapAlloc uint64 `json:"HeapAlloc"`
		} `json:"memstats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return -1
	}
	return float64(v.Memstats.HeapAlloc) / (1 << 20)
}

var _ = expvar.Get // expvar registers /debug/vars on the default mux

// profile fetches a profile of the child into dir/name (CPU: seconds > 0).
func (b *benchBroker) profile(dir, name, kind string, seconds int) error {
	if b == nil || b.pprofAddr == "" || dir == "" {
		return nil
	}
	url := "http://" + b.pprofAddr + "/debug/pprof/" + kind
	if seconds > 0 {
		url += "?seconds=" + strconv.Itoa(seconds)
	}
	hc := &http.Client{Timeout: time.Duration(seconds+60) * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// settle waits (up to o.settle) until the broker uses less than 5% of a
// core and the system's dirty and write-back pages are below 64 MiB: a new
// broker pre-touches its first 1 GiB CommitLog segment in the background,
// and the previous scenario may have left pages to write back.
func (b *benchBroker) settle(ctx context.Context, max time.Duration, stderr io.Writer) {
	deadline := time.Now().Add(max)
	defer func() {
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "bench: broker not idle (or dirty pages >= 64 MiB) after %v; measuring anyway\n", max)
		}
	}()
	prev := b.cpu()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		benchSleep(ctx, 250*time.Millisecond)
		now := b.cpu()
		idle := prev < 0 || now-prev < 0.0125
		prev = now
		if idle && benchDirtyMiB() < 64 {
			return
		}
	}
}

// createTopic creates (or updates) the bench topic.
func (b *benchBroker) createTopic(ctx context.Context, topic string, queues int, timeout time.Duration) error {
	a, err := client.NewAdmin(b.addr, client.WithTimeout(timeout))
	if err != nil {
		return err
	}
	defer a.Close()
	err = a.UpdateTopic(ctx, protocol.TopicConfig{Topic: topic, ReadQueueNums: int32(queues), WriteQueueNums: int32(queues)})
	if err != nil && !errors.Is(err, client.ErrTopicExist) {
		return err
	}
	return nil
}
