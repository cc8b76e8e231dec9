package brokertest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/netio"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// Broker is a real broker in-process: the actors over a store on an
// in-memory FS, a netio listener and a replication listener on loopback,
// and the fault proxy in front. Clients connect to Addr (the proxy).
type Broker struct {
	t     testing.TB
	cfg   actors.Config
	scfg  storage.Config
	fs    vfs.FS
	clock *Clock
	proxy *proxy
	addr  string // the proxy's: what clients dial and message ids name

	mu     sync.Mutex
	haAddr string // the replication listener's, kept across restarts
	// rmqAddr is the RocketMQ remoting listener's (WithRemoting), kept
	// across restarts; remoting turns it on.
	rmqAddr  string
	remoting bool
	run      *running
	// noLink refuses a slave's links to its master; links are the ones
	// open, cut when replication is turned off.
	noLink bool
	links  []actors.Conn
	// Name-server registrations (namesrv.go): their connections, the
	// data version's counter, and the boot time as its timestamp.
	regs   []net.Conn
	regSeq int64
	bootMs int64
}

// running is one life of the broker, from boot to stop.
type running struct {
	b            *actors.Broker
	srv, ha, rmq *netio.Server // rmq: nil unless WithRemoting
}

// WithRemoting adds a listener speaking RocketMQ's remoting protocol
// (netio.RemotingCodec), straight to the broker (not through the proxy):
// see RemotingAddr.
func WithRemoting() Option { return func(b *Broker) { b.remoting = true } }

// RemotingAddr is the remoting listener's address (WithRemoting).
func (b *Broker) RemotingAddr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rmqAddr
}

// Option changes a broker's configuration before it starts.
type Option func(*Broker)

// WithConfig lets f change the actors' configuration (delay levels,
// timeouts, ...). StoreHost is set by Start.
func WithConfig(f func(*actors.Config)) Option { return func(b *Broker) { f(&b.cfg) } }

// WithAutoCreate turns the auto-creation of topics on a send on or off
// (on by default, as in the real broker).
func WithAutoCreate(on bool) Option {
	return func(b *Broker) { b.cfg.AutoCreateTopicEnable = on }
}

// WithHeartbeatInterval sets the interval the broker asks members to
// heartbeat at; a member silent for 3 intervals is dropped.
func WithHeartbeatInterval(d time.Duration) Option {
	return func(b *Broker) { b.cfg.ConsumerHeartbeatInterval = d }
}

// WithFlushDiskType sets SYNC_FLUSH or ASYNC_FLUSH (the default).
func WithFlushDiskType(t actors.FlushDiskType) Option {
	return func(b *Broker) { b.cfg.FlushDiskType = t }
}

// WithRole sets a master's role: ASYNC_MASTER (the default) or
// SYNC_MASTER (a send waits for a slave's copy). For a slave see SlaveOf.
func WithRole(role string) Option {
	return func(b *Broker) { b.cfg.BrokerRole = role }
}

// WithDelayLevels sets the delay of each delay level (messageDelayLevel),
// which a retry's send-back waits for too.
func WithDelayLevels(levels ...time.Duration) Option {
	return func(b *Broker) { b.cfg.DelayLevels = levels }
}

// SlaveOf makes the broker a slave (brokerId 1) replicating from master.
func SlaveOf(master *Broker) Option {
	return func(b *Broker) {
		b.cfg.BrokerRole, b.cfg.BrokerID, b.cfg.HAMasterAddress = "SLAVE", 1, master.HAAddr()
	}
}

// Start starts a broker; t.Cleanup stops it.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	b := &Broker{t: t, cfg: defaultConfig(), scfg: storeConfig(storeDir(t)), fs: vfs.NewOS(), clock: newClock(), haAddr: "127.0.0.1:0"}
	for _, o := range opts {
		o(b)
	}
	b.proxy = newProxy(b.backend)
	if err := b.proxy.listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	b.addr = b.proxy.ln.Addr().String()
	host := netip.MustParseAddrPort(b.addr)
	b.cfg.StoreHost, b.scfg.StoreHost = host, host
	t.Cleanup(b.Stop)
	if err := b.boot(); err != nil {
		t.Fatal(err)
	}
	// A new store has no members to wait for: past the coordinator's
	// restart grace (three heartbeat intervals from boot) at once, as if
	// the broker had been up that long. A Restart keeps its grace.
	b.clock.Advance(3 * b.cfg.ConsumerHeartbeatInterval)
	return b
}

// defaultConfig is the real broker's, with the intervals a test waits on
// made short.
func defaultConfig() actors.Config {
	c := actors.DefaultConfig()
	c.FlushIntervalCommitLog = 10 * time.Millisecond
	c.FlushIntervalConsumeQueue = 20 * time.Millisecond
	c.FlushConsumerOffsetInterval = 100 * time.Millisecond
	c.HAMetadataInterval = 50 * time.Millisecond
	c.HASendHeartbeatInterval = 100 * time.Millisecond
	c.MaxPullBytes = 4 << 20
	return c
}

// storeDir is where a broker's store lives: real files, not vfs.Mem. The
// broker syncs mapped pages on I/O goroutines while its actors write
// neighbouring bytes of them, which real mappings allow and vfs.Mem (whose
// SyncRange copies the mapped bytes) does not: a data race under -race.
// A memory-backed directory when the machine has one (fsync costs nothing
// there), else t.TempDir. Removed by t.Cleanup.
func storeDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "brokertest-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// storeConfig is a store under root with small segments.
func storeConfig(root string) storage.Config {
	c := storage.DefaultConfig(root)
	c.MappedFileSizeCommitLog = 8 << 20
	c.MappedFileSizeConsumeQueue = 4096
	c.MaxHashSlotNum = 1024
	c.MaxIndexNum = 8192
	return c
}

// boot opens the store and starts the actors and both listeners.
func (b *Broker) boot() error {
	b.scfg.DispatchConfirmedOnly = b.cfg.EnableControllerMode
	st, _, err := storage.Open(b.fs, b.scfg)
	if err != nil {
		return fmt.Errorf("brokertest: open store: %w", err)
	}
	limits := protocol.DefaultLimits()
	quiet := slog.New(slog.DiscardHandler)
	env := actors.Env{Clock: b.clock, RunIO: func(fn func()) { go fn() },
		Fatal: func(err error) { b.t.Errorf("brokertest: broker fatal: %v", err) },
		Dial:  func(addr string, h actors.Handler) (actors.Conn, error) { return b.dial(addr, h, limits) }}
	ab := actors.New(b.cfg, env, st, limits)
	if err := ab.Start(); err != nil {
		st.Close()
		return fmt.Errorf("brokertest: start actors: %w", err)
	}
	r := &running{b: ab}
	b.mu.Lock()
	r.ha = netio.NewServer(ab.HAHandler(), netio.Options{Addr: b.haAddr, Limits: limits, Logger: quiet})
	b.mu.Unlock()
	r.srv = netio.NewServer(ab, netio.Options{Addr: "127.0.0.1:0", Limits: limits, Logger: quiet})
	if err := r.ha.Start(); err != nil {
		ab.Stop()
		return fmt.Errorf("brokertest: replication listener: %w", err)
	}
	if err := r.srv.Start(); err != nil {
		r.ha.Stop(context.Background())
		ab.Stop()
		return fmt.Errorf("brokertest: listener: %w", err)
	}
	b.mu.Lock()
	b.haAddr, b.run = r.ha.Addr(), r
	b.mu.Unlock()
	if b.remoting {
		if err := b.startRemoting(r, ab, limits, quiet); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.bootMs, b.regSeq = max(time.Now().UnixMilli(), b.bootMs+1), 0
	b.mu.Unlock()
	return nil
}

func (b *Broker) startRemoting(r *running, ab *actors.Broker, limits protocol.Limits, log *slog.Logger) error {
	b.mu.Lock()
	addr := cmp.Or(b.rmqAddr, "127.0.0.1:0")
	b.mu.Unlock()
	r.rmq = netio.NewServer(ab, netio.Options{Addr: addr, Limits: limits, Logger: log, Codec: netio.RemotingCodec{StoreHost: b.cfg.StoreHost}})
	if err := r.rmq.Start(); err != nil {
		return fmt.Errorf("brokertest: remoting listener: %w", err)
	}
	b.mu.Lock()
	b.rmqAddr = r.rmq.Addr()
	b.mu.Unlock()
	return nil
}

// dial is the Env.Dial of a slave: netio's, unless replication is off.
func (b *Broker) dial(addr string, h actors.Handler, limits protocol.Limits) (actors.Conn, error) {
	b.mu.Lock()
	off := b.noLink
	b.mu.Unlock()
	if off {
		return nil, errors.New("brokertest: replication turned off")
	}
	c, err := netio.Dial(addr, h, netio.DialOptions{Limits: limits, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.links = append(b.links, c)
	b.mu.Unlock()
	return c, nil
}

// SetReplicating turns a slave's replication off (its link to the master
// is cut and it may not dial again) or back on (it dials again at its
// next retry).
func (b *Broker) SetReplicating(on bool) {
	b.mu.Lock()
	b.noLink = !on
	links := b.links
	if !on {
		b.links = nil
	}
	b.mu.Unlock()
	if !on {
		for _, c := range links {
			c.Close("brokertest: replication turned off")
		}
	}
}

// backend is the broker's own listener (the proxy's target); "" while
// stopped.
func (b *Broker) backend() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.run == nil {
		return "127.0.0.1:1" // refused: the proxy cuts the client
	}
	return b.run.srv.Addr()
}

// Addr is the address clients dial ("127.0.0.1:port"), the same across
// restarts.
func (b *Broker) Addr() string { return b.addr }

// StoreHost is the address message ids are made of (Addr's).
func (b *Broker) StoreHost() netip.AddrPort { return b.cfg.StoreHost }

// HAAddr is the replication listener's address, the same across restarts.
func (b *Broker) HAAddr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.haAddr
}

// Clock is the broker's clock (see Clock).
func (b *Broker) Clock() *Clock { return b.clock }

// Stop stops the broker cleanly: the proxy (clients see their
// connections close and new ones refused), the listeners, the actors and
// the store. The data stays for Restart. Stopping a stopped broker does
// nothing; t.Cleanup calls it.
func (b *Broker) Stop() {
	b.closeRegistrations()
	b.proxy.close()
	b.mu.Lock()
	r := b.run
	b.run = nil
	b.mu.Unlock()
	if r == nil {
		return
	}
	// Both listeners at once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	servers := []*netio.Server{r.srv, r.ha}
	if r.rmq != nil {
		servers = append(servers, r.rmq)
	}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errs <- s.Stop(ctx) }()
	}
	for range servers {
		if err := <-errs; err != nil {
			b.t.Errorf("brokertest: stop listener: %v", err)
		}
	}
	if err := r.b.Stop(); err != nil {
		b.t.Errorf("brokertest: stop broker: %v", err)
	}
}

// Restart stops the broker (if it runs) and starts it again on the same
// store, at the same client and replication addresses.
func (b *Broker) Restart() {
	b.t.Helper()
	b.Stop()
	if err := b.boot(); err != nil {
		b.t.Fatal(err)
	}
	if err := b.proxy.listen(b.addr); err != nil {
		b.t.Fatal(err)
	}
}

// DropConns cuts every client connection; the broker keeps listening.
func (b *Broker) DropConns() { b.proxy.dropConns() }
