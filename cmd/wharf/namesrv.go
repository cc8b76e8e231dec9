package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/internal/metrics"
	"github.com/wharfmq/wharf/netio"
	"github.com/wharfmq/wharf/protocol"
)

// namesrvConfig is `wharf namesrv`'s configuration, in RocketMQ's
// namesrv.conf key names where RocketMQ has the setting.
type namesrvConfig struct {
	ListenPort  int    // listenPort
	BindAddress string // bindAddress
	// StorePathRootDir is accepted for RocketMQ parity; the name server
	// keeps no files (its table is rebuilt from registrations).
	StorePathRootDir string
	// BrokerNotActiveTimeoutMillis is the lease of a broker that asks for
	// none (RocketMQ's acting-master timeout; its classic default is 120 s).
	BrokerNotActiveTimeoutMillis int64
	// ServerChannelMaxIdleTimeSeconds closes a silent connection.
	ServerChannelMaxIdleTimeSeconds int
	MaxFrameSize                    int
	// EnableControllerInNamesrv runs a controller node in the name server's
	// process (RocketMQ's key), on its own port (its --controllerPeers
	// entry), its raft log under StorePathRootDir/controller.
	EnableControllerInNamesrv bool
	Controller                controllerConfig
	// MetricsPort serves /metrics and /healthz (-1: listenPort + 3, 0:
	// off) on MetricsHost; an embedded controller shares it.
	MetricsPort int
	MetricsHost string
	// RemotingListenPort serves RocketMQ's clients in RocketMQ's remoting
	// protocol (0: off): routes that name the brokers' remoting ports.
	RemotingListenPort int
}

func defaultNamesrvConfig() namesrvConfig {
	return namesrvConfig{ListenPort: 9876, BindAddress: "0.0.0.0", BrokerNotActiveTimeoutMillis: 5000,
		ServerChannelMaxIdleTimeSeconds: 120, MaxFrameSize: protocol.DefaultMaxFrameSize, Controller: defaultControllerConfig(),
		MetricsPort: -1, MetricsHost: "127.0.0.1"}
}

// addNamesrvCommand registers `wharf namesrv`.
func addNamesrvCommand(root *cobra.Command) {
	c := defaultNamesrvConfig()
	var logLevel, logFormat string
	cmd := &cobra.Command{
		Use:   "namesrv",
		Short: "Run a name server",
		Long: `Run a name server: the route table brokers register with and clients ask
for routes. Name servers are stateless and independent: run two or more and
give every broker and client all of their addresses ("a:9876;b:9876").
Every setting is a flag named as RocketMQ's namesrv.conf key; no file is needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			return runNamesrv(cmd.Context(), c, log)
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.ListenPort, "listenPort", c.ListenPort, "port brokers and clients connect to")
	f.StringVar(&c.BindAddress, "bindAddress", c.BindAddress, "address to listen on")
	f.StringVar(&c.StorePathRootDir, "storePathRootDir", c.StorePathRootDir,
		"the name server keeps no files; with --enableControllerInNamesrv, the embedded controller's raft log is under DIR/controller")
	f.BoolVar(&c.EnableControllerInNamesrv, "enableControllerInNamesrv", c.EnableControllerInNamesrv,
		"run a controller node in this process too, on its --controllerPeers entry's port")
	c.Controller.addFlags(f, false)
	f.Int64Var(&c.BrokerNotActiveTimeoutMillis, "brokerNotActiveTimeoutMillis", c.BrokerNotActiveTimeoutMillis,
		"lease of a broker that asks for none: silent that long, it leaves the routes (ms)")
	f.IntVar(&c.ServerChannelMaxIdleTimeSeconds, "serverChannelMaxIdleTimeSeconds", c.ServerChannelMaxIdleTimeSeconds,
		"close a connection idle that long (0: never)")
	f.IntVar(&c.MaxFrameSize, "maxFrameSize", c.MaxFrameSize, "largest frame accepted (bytes)")
	f.IntVar(&c.RemotingListenPort, "remotingListenPort", c.RemotingListenPort,
		"port for RocketMQ's own clients, in RocketMQ's remoting protocol (0: off); its routes name the brokers' remoting ports")
	addMetricsFlags(f, &c.MetricsPort, &c.MetricsHost)
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	root.AddCommand(cmd)
}

func runNamesrv(ctx context.Context, c namesrvConfig, log *slog.Logger) error {
	if c.BrokerNotActiveTimeoutMillis <= 0 {
		return fmt.Errorf("--brokerNotActiveTimeoutMillis %d: want > 0", c.BrokerNotActiveTimeoutMillis)
	}
	started := time.Now()
	limits := protocol.DefaultLimits()
	limits.MaxFrameSize = c.MaxFrameSize
	env := actors.Env{Clock: wallClock{}, Logger: log, RunIO: func(fn func()) { go fn() },
		Fatal: func(err error) {
			log.Error("fatal: the name server stops", "err", err)
			os.Exit(1)
		}}
	ns := actors.NewNameServer(actors.NameServerConfig{Lease: time.Duration(c.BrokerNotActiveTimeoutMillis) * time.Millisecond}, env, limits)
	if err := ns.Start(); err != nil {
		return err
	}
	addr := net.JoinHostPort(c.BindAddress, strconv.Itoa(c.ListenPort))
	srv := netio.NewServer(ns, netio.Options{Addr: addr, Limits: limits, Logger: log,
		IdleTimeout: time.Duration(c.ServerChannelMaxIdleTimeSeconds) * time.Second})
	if err := srv.Start(); err != nil {
		ns.Stop()
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	rmq, err := startNamesrvRemoting(ns, c, limits, log)
	if err != nil {
		_ = srv.Stop(context.Background())
		ns.Stop()
		return err
	}
	log.Info("name server started", "listen", srv.Addr(), "remotingListen", rmq.Addr(),
		"brokerNotActiveTimeoutMillis", c.BrokerNotActiveTimeoutMillis, "pid", os.Getpid())
	stopController := func() error { return nil }
	ctlListen := "" // the embedded controller's address, for /status
	if c.EnableControllerInNamesrv {
		cc := c.Controller
		cc.StorePathRootDir, cc.ServerChannelMaxIdleTimeSeconds, cc.MaxFrameSize = c.StorePathRootDir, c.ServerChannelMaxIdleTimeSeconds, c.MaxFrameSize
		if cc.StorePathRootDir == "" {
			cc.StorePathRootDir = defaultControllerConfig().StorePathRootDir
		}
		stop, err := startController(cc, log.With("component", "controller"))
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Stop(stopCtx)
			ns.Stop()
			return fmt.Errorf("the embedded controller: %w", err)
		}
		stopController = stop
		_, ctlListen, _ = controllerNodeConfig(cc)
	}

	ms := startMetrics(c.MetricsHost, metricsPortOf(c.MetricsPort, c.ListenPort), metrics.NewRegistry(), log)
	defer ms.stop()
	ms.namesrvStatus(srv.Addr(), ctlListen, started)
	ms.setReady(true)
	waitForStop(ctx, log)
	ms.setReady(false)
	cerr := stopController()
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = errors.Join(srv.Stop(stopCtx), rmq.Stop(stopCtx))
	ns.Stop()
	if err != nil || cerr != nil {
		return fmt.Errorf("unclean shutdown: %w", errors.Join(err, cerr))
	}
	log.Info("name server stopped cleanly")
	return nil
}

// startNamesrvRemoting starts the remoting listener, if configured: the
// same name server behind RocketMQ's wire (netio.RemotingCodec). Off, it
// returns a Server that was never started (Addr is empty, Stop a no-op).
func startNamesrvRemoting(ns *actors.NameServer, c namesrvConfig, limits protocol.Limits, log *slog.Logger) (*netio.Server, error) {
	if c.RemotingListenPort == 0 {
		return netio.NewServer(ns, netio.Options{Codec: netio.RemotingCodec{}}), nil
	}
	addr := net.JoinHostPort(c.BindAddress, strconv.Itoa(c.RemotingListenPort))
	rmq := netio.NewServer(ns, netio.Options{Addr: addr, Limits: limits, Logger: log.With("port", "remoting"),
		Codec: netio.RemotingCodec{}, IdleTimeout: time.Duration(c.ServerChannelMaxIdleTimeSeconds) * time.Second})
	if err := rmq.Start(); err != nil {
		return nil, fmt.Errorf("listen for RocketMQ clients on %s: %w", addr, err)
	}
	return rmq, nil
}
