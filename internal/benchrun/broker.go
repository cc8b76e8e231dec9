package benchrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// broker is a broker the bench uses: a child process or an existing one.
type broker struct {
	addr      string
	flushMode string
	cmd       *exec.Cmd // nil: an existing broker (--broker)
	dir       string
	pprofAddr string
	done      chan struct{}
	waitErr   error
	log       *tail
	members   []*broker // set: several children measured as one (cpu sums theirs)
}

// tail keeps the last bytes a child wrote, for error messages.
type tail struct {
	mu sync.Mutex
	b  []byte
	w  io.Writer
}

func (t *tail) Write(p []byte) (int, error) {
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

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startBroker starts `<BrokerBin> bench serve` with a fresh store, or
// returns the existing broker of o.Broker. extra are broker flags.
func startBroker(ctx context.Context, o *Options, flushMode string, stderr io.Writer, extra ...string) (*broker, error) {
	if o.Broker != "" {
		return &broker{addr: o.Broker, flushMode: o.FlushMode}, nil
	}
	flushMode = lastFlushMode(o.BrokerArgs, flushMode)
	dir, err := os.MkdirTemp(o.StoreDir, "wharf-bench-")
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		b, err := spawnBroker(o, dir, flushMode, stderr, extra)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if last = b.waitReady(ctx, 20*time.Second); last == nil {
			return b, nil
		}
		b.stop()
		// Try again only if it got as far as listening: then another
		// process took a free port before the child bound it.
		if !strings.Contains(b.log.String(), "listen on") {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, last
}

// lastFlushMode is the flushDiskType a broker started with args runs: a
// --broker-arg may override the scenario's mode (the broker takes the last
// flag), and the results are labelled with what the broker runs.
func lastFlushMode(args []string, mode string) string {
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--flushDiskType="):
			mode = strings.TrimPrefix(a, "--flushDiskType=")
		case a == "--flushDiskType" && i+1 < len(args):
			mode = args[i+1]
		}
	}
	return mode
}

// spawnBroker starts one child broker on free loopback ports with its store
// in dir; it does not wait for it to listen.
func spawnBroker(o *Options, dir, flushMode string, stderr io.Writer, extra []string) (*broker, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &broker{
		addr:      net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		flushMode: flushMode,
		dir:       dir,
		pprofAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(pport)),
		done:      make(chan struct{}),
		log:       &tail{w: stderr},
	}
	args := []string{"bench", "serve",
		"--storePathRootDir", dir,
		"--listenPort", strconv.Itoa(port),
		"--flushDiskType", flushMode,
		"--pprof-addr", b.pprofAddr,
		"--log-level", o.BrokerLogLevel,
	}
	args = append(args, o.BrokerArgs...)
	args = append(args, extra...)
	b.cmd = exec.Command(o.BrokerBin, args...)
	b.cmd.Stdout = b.log
	b.cmd.Stderr = b.log
	b.cmd.Env = append(os.Environ(), ChildEnv+"=1")
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start broker %s: %w", o.BrokerBin, err)
	}
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.done)
	}()
	return b, nil
}

// ChildEnv is set to "1" in the environment of the brokers Run starts, so
// that a test binary passed as Options.BrokerBin can tell it is to run the
// wharf command line instead of its tests.
const ChildEnv = "WHARF_BENCH_CHILD"

func (b *broker) waitReady(ctx context.Context, d time.Duration) error {
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
func (b *broker) stop() {
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
func (b *broker) cpu() float64 {
	if b != nil && len(b.members) > 0 {
		sum := 0.0
		for _, m := range b.members {
			c := m.cpu()
			if c < 0 {
				return -1
			}
			sum += c
		}
		return sum
	}
	if b == nil || b.cmd == nil || b.cmd.Process == nil {
		return -1
	}
	return procCPU(b.cmd.Process.Pid)
}

// heapMiB forces a GC in the child and returns its live Go heap, or -1.
func (b *broker) heapMiB() float64 {
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

// profile fetches a profile of the child into dir/name (CPU: seconds > 0).
func (b *broker) profile(dir, name, kind string, seconds int) error {
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

// settle waits (up to max) until the broker uses less than 5% of a
// core and the system's dirty and write-back pages are below 64 MiB: a new
// broker pre-touches its first 1 GiB CommitLog segment in the background,
// and the previous scenario may have left pages to write back.
func (b *broker) settle(ctx context.Context, max time.Duration, stderr io.Writer) {
	deadline := time.Now().Add(max)
	defer func() {
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "bench: broker not idle (or dirty pages >= 64 MiB) after %v; measuring anyway\n", max)
		}
	}()
	prev := b.cpu()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		sleepCtx(ctx, 250*time.Millisecond)
		now := b.cpu()
		idle := prev < 0 || now-prev < 0.0125
		prev = now
		if idle && dirtyMiB() < 64 {
			return
		}
	}
}

// createTopic creates (or updates) the bench topic.
func (b *broker) createTopic(ctx context.Context, topic string, queues int, timeout time.Duration) error {
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
