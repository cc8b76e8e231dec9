// Command bench runs the Wharf benchmark scenarios against Wharf (through
// `wharf bench`) and against NATS JetStream (nats-server embedded in a child
// process of this program, file-backed stream), alternately, and writes the
// side-by-side table into docs/BENCHMARKS.md.
//
//	cd bench && go run . --quick          # under 5 minutes
//	cd bench && go run .                  # the full run (1 M backlog)
//
// It is a module of its own so that the broker's module does not depend on
// nats-server.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/wharfmq/wharf/internal/benchreport"
)

// result has the fields of `wharf bench --json`.
type result struct {
	Scenario          string   `json:"scenario"`
	Size              int      `json:"size"`
	Msgs              int64    `json:"msgs"`
	MsgsPerS          float64  `json:"msgs_per_s"`
	MBPerS            float64  `json:"mb_per_s"`
	P50Ms             float64  `json:"p50_ms"`
	P99Ms             float64  `json:"p99_ms"`
	P999Ms            float64  `json:"p999_ms"`
	Errors            int64    `json:"errors"`
	BrokerCPUS        *float64 `json:"broker_cpu_s"`
	ElapsedS          float64  `json:"elapsed_s"`
	FlushMode         string   `json:"flush_mode,omitempty"`
	BrokerCPUSPerMMsg *float64 `json:"broker_cpu_s_per_m_msgs,omitempty"`
	BrokerHeapMiB     *float64 `json:"broker_heap_mib,omitempty"`
	// ClientCPUSPerMMsg is the load's clients' CPU per million messages:
	// Wharf's from its bench process, JetStream's from this one (its
	// nats.go clients run here).
	ClientCPUSPerMMsg *float64 `json:"client_cpu_s_per_m_msgs,omitempty"`
	Skipped           bool     `json:"skipped,omitempty"`
	Note              string   `json:"note,omitempty"`
	// The report's data, as `wharf bench --json` gives it.
	MaxMs          *float64            `json:"max_ms,omitempty"`
	LatencyCurve   []benchreport.Point `json:"latency_curve,omitempty"`
	ThroughputPerS []float64           `json:"throughput_per_s,omitempty"`
}

type opts struct {
	quick       bool
	wharfBin    string
	doc         string
	write       bool
	scenarios   []string
	sizes       []int
	duration    time.Duration
	warmup      time.Duration
	settle      time.Duration
	backlog     int
	rate        int
	batchFlight int
	natsPull    int
	storeDir    string
	rounds      int
	report      string
	args        []string
}

var allScenarios = []string{"async-256", "async-256-nocoalesce", "async-4096", "batch-32", "sync-1", "sync-16", "sync-flush-64",
	"consume-backlog", "e2e-10k", "sync-master-64"}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve-nats" {
		if err := serveNATS(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "serve-nats:", err)
			os.Exit(1)
		}
		return
	}
	// The clients of both brokers run in this process (Wharf's in the
	// `wharf bench` child it starts, which does the same): a larger GOGC
	// keeps the collector of a few-MiB heap from running twenty times a
	// second inside the measured latencies. The brokers keep their own
	// settings.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	o := &opts{args: os.Args[1:]}
	var scen, sizes string
	flag.BoolVar(&o.quick, "quick", false, "short runs (2 s per scenario, backlog 100,000, 128 B size skipped): under 5 minutes")
	flag.StringVar(&o.wharfBin, "wharf-bin", "../bin/wharf", "the wharf binary (make build)")
	flag.StringVar(&o.doc, "doc", "../docs/BENCHMARKS.md", "file whose bench-compare section is (re)written")
	flag.BoolVar(&o.write, "write", true, "write the section into --doc")
	flag.StringVar(&scen, "scenario", "all", "comma-separated scenarios, or all")
	flag.StringVar(&sizes, "size", "", "comma-separated body sizes (default 1024,128; --quick: 1024)")
	flag.DurationVar(&o.duration, "duration", 0, "measured time per scenario (default 10s; --quick 2s)")
	flag.DurationVar(&o.warmup, "warmup", 0, "warm-up per scenario (default 2s; --quick 500ms)")
	flag.DurationVar(&o.settle, "settle", 0, "max wait for an idle broker and written-back dirty pages (default 30s; --quick 5s)")
	flag.IntVar(&o.backlog, "backlog", 0, "consume-backlog messages (default 1,000,000; --quick 100,000)")
	flag.IntVar(&o.rate, "rate", 10_000, "e2e-10k rate in msg/s")
	flag.IntVar(&o.batchFlight, "batch-inflight", 16, "batch-32: batches in flight")
	flag.IntVar(&o.natsPull, "nats-pull", 512, "consume-backlog and e2e-10k: JetStream's PullMaxMessages (its threshold is half): at most this many messages in flight, as Wharf's 2 pulls of 256")
	flag.StringVar(&o.storeDir, "store-dir", os.TempDir(), "where the temporary stores go")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds of the whole suite (figures: the median round)")
	flag.StringVar(&o.report, "report", "auto", "HTML report with charts; auto: out/compare-{quick|full}-TIME.html (git-ignored); empty: none")
	flag.Parse()
	def := func(d *time.Duration, full, quick time.Duration) {
		if *d == 0 {
			*d = full
			if o.quick {
				*d = quick
			}
		}
	}
	def(&o.duration, 10*time.Second, 2*time.Second)
	def(&o.warmup, 2*time.Second, 500*time.Millisecond)
	def(&o.settle, 30*time.Second, 5*time.Second)
	if o.backlog == 0 {
		o.backlog = 1_000_000
		if o.quick {
			o.backlog = 100_000
		}
	}
	if sizes == "" {
		sizes = "1024,128"
		if o.quick {
			sizes = "1024"
		}
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fatal(fmt.Errorf("--size %q", s))
		}
		o.sizes = append(o.sizes, n)
	}
	for _, s := range strings.Split(scen, ",") {
		s = strings.TrimSpace(s)
		if s == "all" {
			o.scenarios = append(o.scenarios, allScenarios...)
		} else if slices.Contains(allScenarios, s) {
			o.scenarios = append(o.scenarios, s)
		} else {
			fatal(fmt.Errorf("--scenario %q: want one of %s", s, strings.Join(allScenarios, ", ")))
		}
	}
	if _, err := os.Stat(o.wharfBin); err != nil {
		fatal(fmt.Errorf("wharf binary %s: %w (run make build)", o.wharfBin, err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// pair is one scenario at one size on both brokers.
type pair struct {
	scenario string
	size     int
	wharf    []result // usually one; sync-master-64 gives two
	nats     result
	werr     string
	nerr     string
}

func run(ctx context.Context, o *opts) error {
	started := time.Now()
	fmt.Fprintf(os.Stderr, "bench: disk probe\n")
	disk, err := wharfBench(ctx, o, "disk-probe", 0)
	if err != nil {
		return fmt.Errorf("disk probe: %w", err)
	}
	var rounds [][]*pair
	for round := 0; round < o.rounds; round++ {
		var ps []*pair
		for _, sc := range o.scenarios {
			sizes := o.sizes
			if sc == "sync-master-64" || sc == "e2e-10k" || sc == "consume-backlog" && !o.quick {
				sizes = o.sizes[:1] // the long ones: first size only
			}
			for _, size := range sizes {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				p := &pair{scenario: sc, size: size}
				// alternate which broker goes first
				order := []string{"wharf", "nats"}
				if (round+len(ps))%2 == 1 {
					order = []string{"nats", "wharf"}
				}
				for _, who := range order {
					fmt.Fprintf(os.Stderr, "bench: round %d %s size %d on %s\n", round+1, sc, size, who)
					if who == "wharf" {
						rs, err := wharfBench(ctx, o, sc, size)
						p.wharf = rs
						if err != nil {
							p.werr = err.Error()
							fmt.Fprintf(os.Stderr, "bench: wharf %s: %v\n", sc, err)
						}
					} else {
						r, err := runNATS(ctx, o, sc, size)
						r.Scenario, r.Size = sc, size
						p.nats = r
						if err != nil {
							p.nerr = err.Error()
							fmt.Fprintf(os.Stderr, "bench: nats %s: %v\n", sc, err)
						}
					}
				}
				printPair(p)
				ps = append(ps, p)
			}
		}
		rounds = append(rounds, ps)
	}
	ps := medianRound(rounds)
	took := time.Since(started)
	doc := render(o, disk, ps, took)
	fmt.Println(doc)
	if o.write {
		if err := writeSection(o.doc, sectionKey(o), doc); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", o.doc)
	}
	if o.report != "" {
		path := o.report
		if path == "auto" {
			path = filepath.Join("out", fmt.Sprintf("compare-%s-%s.html", sectionKey(o), started.UTC().Format("20060102-150405")))
		}
		if err := writeReport(path, htmlReport(o, ps, took)); err != nil {
			return err
		}
		abs, _ := filepath.Abs(path)
		fmt.Fprintf(os.Stderr, "bench: report with charts: %s\n", abs)
	}
	return nil
}

// medianRound picks, per scenario, the round whose Wharf/JetStream ratio
// is the median (one round: itself).
func medianRound(rounds [][]*pair) []*pair {
	if len(rounds) == 1 {
		return rounds[0]
	}
	out := make([]*pair, len(rounds[0]))
	for i := range out {
		var c []*pair
		for _, r := range rounds {
			c = append(c, r[i])
		}
		slices.SortFunc(c, func(a, b *pair) int {
			ra, rb := ratioOf(a), ratioOf(b)
			switch {
			case ra < rb:
				return -1
			case ra > rb:
				return 1
			}
			return 0
		})
		out[i] = c[len(c)/2]
	}
	return out
}

func ratioOf(p *pair) float64 {
	if len(p.wharf) == 0 || p.nats.MsgsPerS == 0 {
		return 0
	}
	return p.wharf[0].MsgsPerS / p.nats.MsgsPerS
}

func printPair(p *pair) {
	for _, w := range p.wharf {
		fmt.Fprintf(os.Stderr, "  wharf %-20s %5d B  %10.0f msg/s  p50 %.3f  p99 %.3f ms  cpu/M %s  %s\n",
			w.Scenario, w.Size, w.MsgsPerS, w.P50Ms, w.P99Ms, fmtp(w.BrokerCPUSPerMMsg), w.Note)
	}
	n := p.nats
	fmt.Fprintf(os.Stderr, "  nats  %-20s %5d B  %10.0f msg/s  p50 %.3f  p99 %.3f ms  cpu/M %s  %s\n",
		n.Scenario, n.Size, n.MsgsPerS, n.P50Ms, n.P99Ms, fmtp(n.BrokerCPUSPerMMsg), n.Note)
}

func fmtp(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'f', 1, 64)
}

// noCoalesce is async-256 with the Wharf client's send coalescing off
// (one SEND per message, as nats.go publishes): the broker's own cost per
// message. JetStream runs its async-256 for it.
const noCoalesce = "async-256-nocoalesce"

// wharfBench runs `wharf bench --json` for one scenario and size.
func wharfBench(ctx context.Context, o *opts, sc string, size int) ([]result, error) {
	run := sc
	if sc == noCoalesce {
		run = "async-256"
	}
	args := []string{"bench", "--json", "--scenario", run,
		"--duration", o.duration.String(), "--warmup", o.warmup.String(), "--settle", o.settle.String(),
		"--backlog", strconv.Itoa(o.backlog), "--rate", strconv.Itoa(o.rate),
		"--batch-inflight", strconv.Itoa(o.batchFlight), "--store-dir", o.storeDir}
	if size > 0 {
		args = append(args, "--size", strconv.Itoa(size))
	}
	if sc == "disk-probe" && o.quick {
		args = append(args, "--fsyncs", "500")
	}
	if sc == noCoalesce {
		args = append(args, "--send-coalescing=false")
	}
	cmd := exec.CommandContext(ctx, o.wharfBin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	runErr := cmd.Run()
	var rs []result
	sc2 := bufio.NewScanner(&out)
	for sc2.Scan() {
		var r result
		if err := json.Unmarshal(sc2.Bytes(), &r); err == nil && r.Scenario != "" {
			if sc == noCoalesce {
				r.Scenario = sc
			}
			rs = append(rs, r)
		}
	}
	if runErr != nil && len(rs) == 0 {
		return nil, runErr
	}
	return rs, runErr
}

// ---- measurement, mirroring internal/benchrun (wharf bench) ----

type recorder struct {
	start, end atomic.Int64
	msgs, errs atomic.Int64
	total      atomic.Int64
	firstErr   atomic.Pointer[error]
	mu         sync.Mutex
	hist       *hdrhistogram.Histogram
	perSecond  []int64 // messages completed in each second of the window
}

func newRecorder() *recorder {
	return &recorder{hist: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)}
}

func (r *recorder) open()  { r.start.Store(time.Now().UnixNano()) }
func (r *recorder) close() { r.end.Store(time.Now().UnixNano()) }

func (r *recorder) done(n int64, d time.Duration, err error) {
	if err != nil {
		r.errs.Add(n)
		r.firstErr.CompareAndSwap(nil, &err)
		return
	}
	r.total.Add(n)
	now := time.Now().UnixNano()
	s, e := r.start.Load(), r.end.Load()
	if s == 0 || now < s || (e != 0 && now >= e) {
		return
	}
	r.msgs.Add(n)
	sec := int((now - s) / int64(time.Second))
	r.mu.Lock()
	if d >= 0 {
		_ = r.hist.RecordValue(max(1, d.Microseconds()))
	}
	for len(r.perSecond) <= sec {
		r.perSecond = append(r.perSecond, 0)
	}
	r.perSecond[sec] += n
	r.mu.Unlock()
}

// count records n messages completed now with no latency to record.
func (r *recorder) count(n int64) { r.done(n, -1, nil) }

func (r *recorder) result(sc string, size int) result {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, e := r.start.Load(), r.end.Load()
	if e == 0 {
		e = time.Now().UnixNano()
	}
	secs := time.Duration(e - s).Seconds()
	res := result{Scenario: sc, Size: size, Msgs: r.msgs.Load(), Errors: r.errs.Load(), ElapsedS: round3(secs)}
	if secs > 0 {
		res.MsgsPerS = round3(float64(res.Msgs) / secs)
		res.MBPerS = round3(float64(res.Msgs) * float64(size) / 1e6 / secs)
	}
	if r.hist.TotalCount() > 0 {
		res.P50Ms = round3(float64(r.hist.ValueAtQuantile(50)) / 1000)
		res.P99Ms = round3(float64(r.hist.ValueAtQuantile(99)) / 1000)
		res.P999Ms = round3(float64(r.hist.ValueAtQuantile(99.9)) / 1000)
		res.MaxMs = f64(float64(r.hist.Max()) / 1000)
		for _, p := range benchreport.CurvePercentiles() {
			res.LatencyCurve = append(res.LatencyCurve, benchreport.Point{P: p, Ms: round3(float64(r.hist.ValueAtQuantile(p)) / 1000)})
		}
	}
	res.ThroughputPerS = perSecondRates(r.perSecond, time.Duration(e-s))
	return res
}

// perSecondRates is internal/benchrun's: the rate of every whole second of
// the window, and of the last part-second if it lasted half a second.
func perSecondRates(counts []int64, elapsed time.Duration) []float64 {
	whole := int(elapsed / time.Second)
	rest := (elapsed - time.Duration(whole)*time.Second).Seconds()
	n := whole
	if rest >= 0.5 {
		n++
	}
	out := make([]float64, 0, n)
	for i := range n {
		var c int64
		if i < len(counts) {
			c = counts[i]
		}
		span := 1.0
		if i == whole {
			span = rest
		}
		out = append(out, round3(float64(c)/span))
	}
	return out
}

func round3(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

func f64(x float64) *float64 { x = round3(x); return &x }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// timed runs load for warmup + duration and measures the second part.
func timed(ctx context.Context, o *opts, cpu func() float64, sc string, size int, load func(context.Context, *recorder) error) (result, error) {
	rec := newRecorder()
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- load(lctx, rec) }()
	select {
	case err := <-errc:
		return result{}, fmt.Errorf("load ended during warm-up: %v", err)
	case <-time.After(o.warmup):
	}
	c0, self0 := cpu(), selfCPU()
	rec.open()
	var early error
	select {
	case early = <-errc:
	case <-time.After(o.duration):
	}
	rec.close()
	c1, self1 := cpu(), selfCPU()
	stop()
	if early == nil {
		early = <-errc
	}
	res := rec.result(sc, size)
	if c0 >= 0 && c1 >= 0 {
		res.BrokerCPUS = f64(c1 - c0)
		if res.Msgs > 0 {
			res.BrokerCPUSPerMMsg = f64((c1 - c0) / float64(res.Msgs) * 1e6)
		}
	}
	res.ClientCPUSPerMMsg = perM(self1-self0, res.Msgs)
	if early == nil && res.Msgs == 0 {
		if p := rec.firstErr.Load(); p != nil {
			early = *p
		} else {
			early = errors.New("no message completed in the measured window")
		}
	}
	return res, early
}

// settle waits until the process uses < 5% of a core and dirty pages are
// below 64 MiB, as `wharf bench` does.
func settle(ctx context.Context, cpu func() float64, d time.Duration) {
	deadline := time.Now().Add(d)
	prev := cpu()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		sleep(ctx, 250*time.Millisecond)
		now := cpu()
		idle := now-prev < 0.0125
		prev = now
		if idle && dirtyMiB() < 64 {
			return
		}
	}
}

// selfCPU is this process's CPU seconds (user+system): JetStream's
// clients, which run here.
func selfCPU() float64 { return procCPU(os.Getpid()) }

// perM is cpu seconds per million of msgs, nil if either is unknown.
func perM(cpu float64, msgs int64) *float64 {
	if cpu < 0 || msgs <= 0 {
		return nil
	}
	return f64(cpu / float64(msgs) * 1e6)
}

func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

func dirtyMiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb float64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Dirty:") || strings.HasPrefix(l, "Writeback:") {
			if fs := strings.Fields(l); len(fs) >= 2 {
				v, _ := strconv.ParseFloat(fs[1], 64)
				kb += v
			}
		}
	}
	return kb / 1024
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(l[strings.IndexByte(l, ':')+1:])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		if len(f) >= 2 {
			kb, _ := strconv.ParseFloat(f[1], 64)
			mem = fmt.Sprintf(", %.0f GiB RAM", kb/(1<<20))
		}
	}
	return fmt.Sprintf("%d cores (%s)%s, %s, %s/%s", runtime.NumCPU(), model, mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
