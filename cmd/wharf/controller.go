package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/actors/controller"
	"github.com/wharfmq/wharf/internal/metrics"
	"github.com/wharfmq/wharf/netio"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage/vfs"
)

// controllerConfig is `wharf controller`'s configuration, in RocketMQ's
// controller key names where RocketMQ has the setting.
type controllerConfig struct {
	// ControllerPeers is controllerDLegerPeers: "n0-host:port;n1-host:port;...",
	// the same on every node.
	ControllerPeers string
	// ControllerSelfID is controllerDLegerSelfId: this node's id in the peers.
	ControllerSelfID string
	// StorePathRootDir holds the raft log, under controller/.
	StorePathRootDir string
	// BindAddress overrides the host of this node's own peer entry to
	// listen on (its port is always the entry's).
	BindAddress                     string
	ControllerHeartBeatTimeoutMills int64
	EnableElectUncleanMaster        bool
	// ElectionTimeoutMillis and TickIntervalMillis are the raft group's.
	ElectionTimeoutMillis           int64
	TickIntervalMillis              int64
	SnapshotEvery                   uint64
	ServerChannelMaxIdleTimeSeconds int
	MaxFrameSize                    int
	// MetricsPort serves /metrics and /healthz (-1: this node's port + 3,
	// 0: off) on MetricsHost; standalone nodes only.
	MetricsPort int
	MetricsHost string
}

func defaultControllerConfig() controllerConfig {
	// RocketMQ's defaults: one node on localhost.
	return controllerConfig{ControllerPeers: "n0-127.0.0.1:9878", ControllerSelfID: "n0", StorePathRootDir: filepath.Join(os.Getenv("HOME"), "store"),
		ControllerHeartBeatTimeoutMills: controller.DefaultHeartbeatTimeout.Milliseconds(),
		ElectionTimeoutMillis:           1000, TickIntervalMillis: 100, SnapshotEvery: 10000,
		ServerChannelMaxIdleTimeSeconds: 120, MaxFrameSize: protocol.DefaultMaxFrameSize, MetricsPort: -1, MetricsHost: "127.0.0.1"}
}

// controllerPeer is one entry of --controllerPeers.
type controllerPeer struct {
	name   string // as given: n0
	addr   string // host:port
	raftID uint64
}

// parseControllerPeers parses "n0-127.0.0.1:9878;n1-127.0.0.1:9868". A
// peer's raft id is the FNV-1a 64-bit hash of its name: the same on every
// node whatever the order of the list, and stable while a peer keeps its
// name (raft ids are in the log, so renaming a peer needs a fresh
// directory). Two names hashing alike, or to 0 (raft's "none"), are refused.
func parseControllerPeers(list string) ([]controllerPeer, error) {
	var peers []controllerPeer
	byID := map[uint64]string{}
	for _, e := range strings.FieldsFunc(list, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		name, addr, ok := strings.Cut(e, "-")
		if !ok || name == "" {
			return nil, fmt.Errorf("controller peer %q: want ID-HOST:PORT", e)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controller peer %q: %w", e, err)
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(name))
		id := h.Sum64()
		if prev, dup := byID[id]; dup || id == 0 {
			return nil, fmt.Errorf("controller peer %q: its id clashes with %q (or is 0); rename it", name, prev)
		}
		byID[id] = name
		peers = append(peers, controllerPeer{name: name, addr: addr, raftID: id})
	}
	if len(peers) == 0 {
		return nil, fmt.Errorf("--controllerPeers %q names no peer", list)
	}
	return peers, nil
}

// addControllerCommand registers `wharf controller` and its status call.
func addControllerCommand(root *cobra.Command) {
	c := defaultControllerConfig()
	var logLevel, logFormat string
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run a controller node (automatic failover of broker groups)",
		Long: `Run a controller node: a member of a raft group (3 nodes for a real
deployment) that holds every broker group's master, master epoch and
SyncStateSet, takes the brokers' heartbeats and elects a new master from the
SyncStateSet when one dies. Brokers and admins connect to the same port as
the peers. Every setting is a flag named as RocketMQ's controller key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			return runController(cmd.Context(), c, log)
		},
	}
	f := cmd.Flags()
	c.addFlags(f, true)
	f.StringVar(&c.BindAddress, "bindAddress", c.BindAddress, "host to listen on (default: the host of this node's entry)")
	f.IntVar(&c.ServerChannelMaxIdleTimeSeconds, "serverChannelMaxIdleTimeSeconds", c.ServerChannelMaxIdleTimeSeconds,
		"close a connection idle that long (0: never)")
	f.IntVar(&c.MaxFrameSize, "maxFrameSize", c.MaxFrameSize, "largest frame accepted (bytes)")
	addMetricsFlags(f, &c.MetricsPort, &c.MetricsHost)
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	cmd.AddCommand(newControllerStatusCmd())
	root.AddCommand(cmd)
}

// addFlags registers the controller's own keys; withStore also the store
// directory (a name server with an embedded controller has its own
// storePathRootDir flag).
func (c *controllerConfig) addFlags(f *pflag.FlagSet, withStore bool) {
	f.StringVar(&c.ControllerPeers, "controllerPeers", c.ControllerPeers, `every controller node, "ID-HOST:PORT;..." (the same list on each node)`)
	f.StringVar(&c.ControllerSelfID, "controllerSelfId", c.ControllerSelfID, "this node's ID in --controllerPeers; it listens on its entry's port")
	if withStore {
		f.StringVar(&c.StorePathRootDir, "storePathRootDir", c.StorePathRootDir, "directory of the raft log (under controller/)")
	}
	f.Int64Var(&c.ControllerHeartBeatTimeoutMills, "controllerHeartBeatTimeoutMills", c.ControllerHeartBeatTimeoutMills,
		"a broker silent that long is dead; a new controller leader waits that long before electing (ms)")
	f.BoolVar(&c.EnableElectUncleanMaster, "enableElectUncleanMaster", c.EnableElectUncleanMaster,
		"with no live SyncStateSet member, elect any live replica (may lose acknowledged messages)")
	f.Int64Var(&c.ElectionTimeoutMillis, "electionTimeoutMillis", c.ElectionTimeoutMillis, "raft election timeout (ms; randomized up to twice that)")
	f.Int64Var(&c.TickIntervalMillis, "tickIntervalMillis", c.TickIntervalMillis, "raft tick (ms)")
	f.Uint64Var(&c.SnapshotEvery, "snapshotEvery", c.SnapshotEvery, "compact the raft log every this many applied entries")
}

// controllerNodeConfig turns the flags into the node's configuration and
// its listen address.
func controllerNodeConfig(c controllerConfig) (actors.ControllerConfig, string, error) {
	peers, err := parseControllerPeers(c.ControllerPeers)
	if err != nil {
		return actors.ControllerConfig{}, "", err
	}
	cfg := actors.ControllerConfig{Peers: map[uint64]string{}, FS: vfs.NewOS(), Dir: filepath.Join(c.StorePathRootDir, "controller"),
		TickInterval: time.Duration(c.TickIntervalMillis) * time.Millisecond, ElectionTimeout: time.Duration(c.ElectionTimeoutMillis) * time.Millisecond,
		SnapshotEvery: c.SnapshotEvery, Seed: rand.Uint64(),
		Core: controller.Config{HeartbeatTimeout: time.Duration(c.ControllerHeartBeatTimeoutMills) * time.Millisecond, ElectUnclean: c.EnableElectUncleanMaster}}
	var listen string
	for _, p := range peers {
		cfg.Peers[p.raftID] = p.addr
		if p.name == c.ControllerSelfID {
			cfg.SelfID, listen = p.raftID, p.addr
		}
	}
	switch {
	case listen == "":
		return cfg, "", fmt.Errorf("--controllerSelfId %q is not in --controllerPeers", c.ControllerSelfID)
	case c.ControllerHeartBeatTimeoutMills <= 0 || c.ElectionTimeoutMillis <= 0 || c.TickIntervalMillis <= 0:
		return cfg, "", fmt.Errorf("controllerHeartBeatTimeoutMills, electionTimeoutMillis and tickIntervalMillis must be > 0")
	case c.TickIntervalMillis >= c.ElectionTimeoutMillis:
		return cfg, "", fmt.Errorf("--tickIntervalMillis %d must be below --electionTimeoutMillis %d", c.TickIntervalMillis, c.ElectionTimeoutMillis)
	}
	if c.BindAddress != "" {
		_, port, _ := net.SplitHostPort(listen)
		listen = net.JoinHostPort(c.BindAddress, port)
	}
	return cfg, listen, nil
}

func runController(ctx context.Context, c controllerConfig, log *slog.Logger) error {
	_, listen, err := controllerNodeConfig(c)
	if err != nil {
		return err
	}
	started := time.Now()
	stop, err := startController(c, log)
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(listen)
	own, _ := strconv.Atoi(port)
	ms := startMetrics(c.MetricsHost, metricsPortOf(c.MetricsPort, own), metrics.NewRegistry(), log)
	defer ms.stop()
	ms.controllerStatus(listen, started)
	ms.setReady(true)
	waitForStop(ctx, log)
	ms.setReady(false)
	if err := stop(); err != nil {
		return err
	}
	log.Info("controller stopped cleanly")
	return nil
}

// startController starts a controller node and its listener; stop stops
// them (the transport first, then the raft actor).
func startController(c controllerConfig, log *slog.Logger) (stop func() error, err error) {
	cfg, listen, err := controllerNodeConfig(c)
	if err != nil {
		return nil, err
	}
	limits := protocol.DefaultLimits()
	limits.MaxFrameSize = c.MaxFrameSize
	env := actors.Env{Clock: wallClock{}, Logger: log, Dispatcher: defaultDispatcher(),
		RunIO: func(fn func()) { go fn() },
		Fatal: func(err error) {
			log.Error("fatal: the controller stops", "err", err)
			os.Exit(1)
		},
		Dial: func(addr string, h actors.Handler) (actors.Conn, error) {
			return netio.Dial(addr, h, netio.DialOptions{Limits: limits, Logger: log})
		}}
	node := actors.NewController(cfg, env, limits)
	if err := node.Start(); err != nil {
		return nil, err
	}
	srv := netio.NewServer(node, netio.Options{Addr: listen, Limits: limits, Logger: log,
		IdleTimeout: time.Duration(c.ServerChannelMaxIdleTimeSeconds) * time.Second})
	if err := srv.Start(); err != nil {
		_ = node.Stop()
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	log.Info("controller started", "listen", srv.Addr(), "selfId", c.ControllerSelfID, "raftId", cfg.SelfID,
		"peers", c.ControllerPeers, "dir", cfg.Dir, "controllerHeartBeatTimeoutMills", c.ControllerHeartBeatTimeoutMills,
		"enableElectUncleanMaster", c.EnableElectUncleanMaster, "pid", os.Getpid())
	return func() error {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Stop(stopCtx)
		_ = node.Stop()
		if err != nil {
			return fmt.Errorf("controller: unclean shutdown: %w", err)
		}
		return nil
	}, nil
}
