package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// DiskModel is the simulated disk's latency: fsync latencies drawn from a
// log-normal distribution fitted to this machine (p50 about 150 µs, p99
// about 300 µs), with rare stalls.
type DiskModel struct {
	FsyncP50  time.Duration
	FsyncP99  time.Duration
	FsyncMin  time.Duration // floor of the distribution
	StallProb float64       // chance an fsync stalls
	StallMax  time.Duration // longest such stall
}

// DefaultDisk is this machine's disk.
func DefaultDisk() DiskModel {
	return DiskModel{FsyncP50: 150 * time.Microsecond, FsyncP99: 300 * time.Microsecond,
		FsyncMin: 50 * time.Microsecond, StallProb: 0.002, StallMax: 20 * time.Millisecond}
}

// sigma is the log-normal's: p99 = p50 * exp(2.326 sigma).
func (d DiskModel) sigma() float64 { return math.Log(float64(d.FsyncP99)/float64(d.FsyncP50)) / 2.326 }

// sample draws one fsync latency; sigma is d.sigma() (computed once per
// node: this runs for every fsync).
func (d DiskModel) sample(w *World, sigma float64) time.Duration {
	v := time.Duration(float64(d.FsyncP50) * math.Exp(sigma*w.rng.NormFloat64()))
	v = max(v, d.FsyncMin)
	if d.StallProb > 0 && w.rng.Float64() < d.StallProb {
		v += time.Duration(w.rng.Int63n(int64(d.StallMax)))
	}
	return v
}

// maxNormal is the longest fsync the model produces without an injected
// stall fault.
func (d DiskModel) maxNormal() time.Duration {
	return time.Duration(float64(d.FsyncP50)*math.Exp(d.sigma()*6)) + d.StallMax
}

var errEIO = errors.New("EIO: simulated fsync failure")

// Node is one simulated broker: its disk survives its crashes.
type Node struct {
	w     *World
	name  string
	addr  netip.AddrPort
	epoch int
	mem   *vfs.Mem
	fs    vfs.FS
	disk  DiskModel
	sigma float64       // disk.sigma()
	bound time.Duration // windowBound()

	store *storage.Store
	// serve and haServe are what the node's ports hand connections to: the
	// clients' (Conn) and the replication links' (linkEnd).
	serve, haServe actors.Handler
	acfg           actors.Config
	scfg           storage.Config
	faults         actors.Faults // planted bugs (Options.Bug)

	g     *brokerGroup
	drift time.Duration // its clock's offset from virtual time

	dial        func(addr string, h actors.Handler) (actors.Conn, error) // links to name servers and a slave's to its master
	dialSince   time.Time                                                // countDial's current second
	dials       int                                                      // dials in it
	nsIdx       int                                                      // a name server: 1 + its index; 0: a broker
	startedAt   time.Time                                                // the current incarnation's start
	downAt      time.Time                                                // its last crash
	reported    int64                                                    // a slave: the highest log end any incarnation reported
	reports     []mark                                                   // a slave: when its reports first reached each new high
	crashAt     time.Time                                                // a slave: its last crash
	refused     bool                                                     // a slave: its master refused it (diverged logs)
	up          bool
	stallUntil  time.Time     // injected disk stall
	failFsync   bool          // injected fsync errors
	partitioned bool          // injected network partition
	slow        time.Duration // injected: its answers to clients are this late

	ctl    *ctlState // a controller node (nil: a broker or a name server)
	paused bool      // injected: the process is stopped (pausable)
	held   []func()  // mailbox runs held while paused
	rnd    *rand.Rand
	// restart is the broker's Env.Restart (controller mode).
	restart func(reason string)

	fsyncs    int64 // CommitLog fsyncs issued
	crashes   int
	lastMax   int64
	unflushed []mark // ASYNC_FLUSH window tracking: appended offsets and when
	windowOK  time.Time
}

type mark struct {
	off int64
	at  time.Time
}

func newNode(w *World, name string, acfg actors.Config, scfg storage.Config, disk DiskModel) *Node {
	n := &Node{w: w, name: name, addr: acfg.StoreHost, acfg: acfg, scfg: scfg, disk: disk,
		mem: newMem(w), sigma: disk.sigma()}
	n.bound = acfg.FlushIntervalCommitLog + disk.maxNormal() + 20*time.Millisecond
	n.wrapFS()
	return n
}

func newMem(w *World) *vfs.Mem { return vfs.NewMem(vfs.WithClock(w.Now)) }

func (n *Node) wrapFS() {
	n.fs = vfs.NewFaulty(n.mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSyncRange && strings.Contains(op.Path, "/commitlog/") {
			n.fsyncs++
			if n.failFsync {
				return errEIO
			}
		}
		return nil
	}))
}

func (n *Node) own() owner { return owner{n, n.epoch} }

// start opens (recovering) the store and starts the broker's actors.
func (n *Node) start() error {
	st, rep, err := storage.Open(n.fs, n.scfg)
	if err != nil {
		return fmt.Errorf("%s: open store: %w", n.name, err)
	}
	n.w.Tracef("%s start: %s", n.name, rep)
	b := actors.New(n.acfg, n.env(), st, protocol.DefaultLimits())
	if err := b.Start(); err != nil {
		return fmt.Errorf("%s: start actors: %w", n.name, err)
	}
	n.store, n.up, n.startedAt = st, true, n.w.Now()
	n.serve, n.haServe = b, b.HAHandler()
	n.lastMax = st.CommitLog().MaxOffset()
	n.unflushed = n.unflushed[:0]
	return nil
}

// env is the seams of the node's current incarnation: its clock (with its
// drift), the world's run queue as dispatcher, blocking I/O delayed by its
// disk model, its logger, planted bugs and outgoing links. Everything it
// schedules is dropped when the incarnation dies. Any kind of node (a
// broker today; a name server, a controller) runs its actors on it.
func (n *Node) env() actors.Env {
	own := n.own()
	env := actors.Env{
		Clock:      driftClock{n.w.clock(own), n.drift},
		Dispatcher: pausable{n, n.w.dispatcher(own)},
		RunIO: func(fn func()) {
			lat := n.disk.sample(n.w, n.sigma)
			if n.stallUntil.After(n.w.Now()) {
				lat += n.stallUntil.Sub(n.w.Now())
			}
			n.w.at(n.w.Now().Add(lat), own, fn)
		},
		Logger: n.logger(),
		Faults: &n.faults,
		Fatal:  func(err error) { n.w.Violationf("%s: %v", n.name, err) },
	}
	if n.rnd != nil {
		env.Rand = n.rnd
	}
	env.Restart = n.restart
	if n.w.metrics != nil {
		env.Metrics = nodeMetrics{log: n.w.metrics, node: n.name}
	}
	if n.dial != nil {
		dial := n.dial
		env.Dial = func(addr string, h actors.Handler) (actors.Conn, error) {
			n.countDial()
			return dial(addr, h)
		}
	}
	return env
}

// crash kills the node at once: its scheduled work is dropped, and its disk
// keeps what a power cut could leave.
func (n *Node) crash(opts vfs.CrashOptions) {
	n.epoch++
	n.crashes++
	n.up, n.downAt = false, n.w.Now()
	img := n.mem.Crash(n.w.rng.Int63(), opts)
	if n.store != nil {
		n.w.Tracef("%s crash (keep=%.2f torn=%v) log_end=%d flushed=%d", n.name, opts.UnsyncedKeepRatio, opts.TornLastPage,
			n.store.CommitLog().MaxOffset(), n.store.CommitLog().FlushedOffset())
	} else {
		n.w.Tracef("%s crash (keep=%.2f torn=%v)", n.name, opts.UnsyncedKeepRatio, opts.TornLastPage)
	}
	n.mem = img
	n.wrapFS()
	n.store, n.serve, n.haServe = nil, nil, nil
	n.stallUntil, n.failFsync = time.Time{}, false
}

// report records a slave's report of its log end, as it sends it.
func (n *Node) report(end int64) {
	if end > n.reported {
		n.reported = end
		n.reports = append(n.reports, mark{end, n.w.Now()})
	}
}

// reportedAt is when the slave first reported holding the log up to end
// (zero if it never did).
func (n *Node) reportedAt(end int64) time.Time {
	i := sort.Search(len(n.reports), func(i int) bool { return n.reports[i].off >= end })
	if i == len(n.reports) {
		return time.Time{}
	}
	return n.reports[i].at
}

// windowBound is the longest an appended byte may stay unflushed under
// ASYNC_FLUSH: an interval plus the longest normal fsync of this disk.
func (n *Node) windowBound() time.Duration {
	return n.bound
}

// trackWindow follows the ASYNC_FLUSH unflushed window: it returns how long
// the oldest unflushed byte has been waiting.
func (n *Node) trackWindow() time.Duration {
	if !n.up {
		return 0
	}
	cl := n.store.CommitLog()
	if m := cl.MaxOffset(); m > n.lastMax {
		n.unflushed = append(n.unflushed, mark{m, n.w.Now()})
		n.lastMax = m
	}
	f := cl.FlushedOffset()
	i := 0
	for i < len(n.unflushed) && n.unflushed[i].off <= f {
		i++
	}
	if i > 0 {
		n.unflushed = append(n.unflushed[:0], n.unflushed[i:]...)
	}
	if len(n.unflushed) == 0 {
		return 0
	}
	// The oldest unflushed byte was appended by the first batch after the
	// flushed offset; it waits since the earliest remaining mark.
	return n.w.Now().Sub(n.unflushed[0].at)
}

// durable reports whether the record at phy is, right now, byte for byte
// on the simulated disk (a crash now would keep it).
func (n *Node) durable(phy int64) (bool, string) {
	cl := n.store.CommitLog()
	hdr, err := cl.Read(phy, 8)
	if err != nil {
		return false, err.Error()
	}
	size, _, _ := storage.PeekHeader(hdr)
	cur, err := cl.Read(phy, int(size))
	if err != nil {
		return false, err.Error()
	}
	segSize := cl.SegmentSize()
	name := fmt.Sprintf("%s/commitlog/%020d", n.scfg.StorePathRootDir, phy-phy%segSize)
	got, ok := n.mem.DurableBytes(name, phy%segSize, len(cur))
	if !ok {
		return false, "segment file or range not durable"
	}
	if string(got) != string(cur) {
		return false, "record bytes not durable"
	}
	return true, ""
}

// logger sends the broker's logs into the trace when tracing (they would
// slow every other run down).
func (n *Node) logger() *slog.Logger {
	if n.w.traceOut == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(&traceHandler{w: n.w, node: n.name})
}

type traceHandler struct {
	w     *World
	node  string
	attrs []slog.Attr
}

func (h *traceHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	// Logs go to the printed trace only, not into the hash: a trace with
	// and without logs must hash the same.
	fmt.Fprintf(h.w.traceOut, "%12.6f   log %s %s: %s\n", h.w.Now().Sub(Epoch).Seconds(), h.node, r.Level, b.String())
	return nil
}
func (h *traceHandler) WithAttrs(as []slog.Attr) slog.Handler { return h }
func (h *traceHandler) WithGroup(string) slog.Handler         { return h }

// maxDialsPerSecond bounds the connections a node may open in one second
// of virtual time. Every retry in the broker waits a delay (the controller
// client's 100 ms, the registrar's and replication's intervals), so a node
// stays far below it; one that retries on every input instead of waiting
// dials thousands of times a second, as a master whose controllers were
// down once did (seed 71, ctl-rejoin): that storm is a defect even when
// nothing is lost.
const maxDialsPerSecond = 200

// countDial counts one dial in the node's current second and reports a
// storm once per second.
func (n *Node) countDial() {
	now := n.w.Now()
	if now.Sub(n.dialSince) >= time.Second {
		n.dialSince, n.dials = now, 0
	}
	n.dials++
	if n.dials == maxDialsPerSecond+1 {
		n.w.Violationf("%s dialled more than %d times within a second (since %.6fs): a retry without a delay",
			n.name, maxDialsPerSecond, n.dialSince.Sub(Epoch).Seconds())
	}
}
