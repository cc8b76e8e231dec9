package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/cmd/wharf/brokerconf"
	"github.com/wharfmq/wharf/internal/metrics"
	"github.com/wharfmq/wharf/netio"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/vfs"
)

// wallClock is the production Clock seam.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// addBrokerCommand registers `wharf broker`.
func addBrokerCommand(root *cobra.Command) {
	defaults := brokerconf.Default()
	var configPath, logLevel, logFormat string
	var printConfig bool
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a broker",
		Long: `Run a broker. Configuration comes from the built-in defaults, then the
broker.conf file given with --config (RocketMQ's properties format and key names),
then the flags: every key is also a flag of the same name (--listenPort 10911).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			cfg, warnings, err := brokerconf.Resolve(cmd.Flags(), configPath)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				log.Warn("config: " + w)
			}
			if printConfig {
				fmt.Print(cfg.Properties())
				return nil
			}
			return runBroker(cmd.Context(), cfg, log)
		},
	}
	defaults.RegisterFlags(cmd.Flags())
	cmd.Flags().StringVarP(&configPath, "config", "c", "", "broker.conf file (RocketMQ properties format)")
	cmd.Flags().BoolVar(&printConfig, "print-config", false, "print the effective configuration as a broker.conf and exit")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	cmd.AddCommand(newStatusCmd(), newRoleCmd())
	root.AddCommand(cmd)
}

func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// actorsConfig maps the broker.conf keys the actors use.
func actorsConfig(c brokerconf.Config, store storage.Config) actors.Config {
	a := actors.DefaultConfig()
	a.BrokerName = c.BrokerName
	a.BrokerID = c.BrokerID
	a.BrokerRole = c.BrokerRole
	a.StoreHost = store.StoreHost
	a.FlushDiskType = actors.FlushDiskType(c.FlushDiskType)
	a.SyncFlushTimeout = c.SyncFlushTimeout.Duration()
	a.FlushIntervalCommitLog = c.FlushIntervalCommitLog.Duration()
	a.FlushCommitLogLeastPages = c.FlushCommitLogLeastPages
	a.FlushCommitLogThoroughInterval = c.FlushCommitLogThoroughInterval.Duration()
	a.FlushIntervalConsumeQueue = c.FlushIntervalConsumeQueue.Duration()
	a.FlushConsumerOffsetInterval = c.FlushConsumerOffsetInterval.Duration()
	a.CleanResourceInterval = c.CleanResourceInterval.Duration()
	a.AutoCreateTopicEnable = c.AutoCreateTopicEnable
	a.DefaultTopicQueueNums = int32(c.DefaultTopicQueueNums)
	a.LongPollingEnable = c.LongPollingEnable
	a.ShortPollingTime = c.ShortPollingTimeMills.Duration()
	a.HAMasterAddress = c.HAMasterAddress
	a.SlaveTimeout = c.SlaveTimeout.Duration()
	a.HASendHeartbeatInterval = c.HASendHeartbeatInterval.Duration()
	a.HAHousekeepingInterval = c.HAHousekeepingInterval.Duration()
	a.HAReconnectMaxInterval = c.HAReconnectMaxInterval.Duration()
	a.HAMaxGapNotInSync = c.HAMaxGapNotInSync
	a.InSyncReplicas = c.InSyncReplicas
	a.HACatchUpFromLastSegment = c.HASlaveCatchUpFromLastSegment
	a.SlaveReadEnable = c.SlaveReadEnable
	a.AccessMessageInMemoryMaxRatio = c.AccessMessageInMemoryMaxRatio
	a.ConsumerHeartbeatInterval = c.ConsumerHeartbeatInterval.Duration()
	a.HATransferBatchSize = c.HATransferBatchSize
	a.BrokerClusterName = c.BrokerClusterName
	a.NamesrvAddr = c.NameServers()
	a.BrokerAddr = net.JoinHostPort(c.BrokerIP1, strconv.Itoa(c.ListenPort))
	a.HAServerAddr = net.JoinHostPort(cmp.Or(c.BrokerIP2, c.BrokerIP1), strconv.Itoa(c.EffectiveHAListenPort()))
	if c.RemotingListenPort != 0 {
		a.RemotingAddr = net.JoinHostPort(c.BrokerIP1, strconv.Itoa(c.RemotingListenPort))
	}
	a.BrokerHeartbeatInterval = c.BrokerHeartbeatInterval.Duration()
	a.HeartbeatTimeout = c.BrokerNotActiveTimeoutMillis.Duration()
	a.RegisterNameServerPeriod = c.RegisterNameServerPeriod.Duration()
	a.EnableControllerMode = c.EnableControllerMode
	a.ControllerAddr = c.Controllers()
	a.ControllerHeartbeatInterval = c.ControllerHeartbeatInterval.Duration()
	a.MasterLease = c.MasterLeaseMillis.Duration()
	a.HAMaxTimeSlaveNotCatchup = c.HAMaxTimeSlaveNotCatchup.Duration()
	a.BrokerElectionPriority = int32(c.BrokerElectionPriority)
	// A pull or query answer must fit in a frame and well within what a
	// connection may have unsent (a bigger answer would disconnect a client
	// that reads normally).
	a.MaxPullBytes = min(8<<20, c.MaxFrameSize-128<<10, int(c.MaxOutboundBytes/2))
	a.MaxReconsumeTimes = int32(c.MaxReconsumeTimes)
	if levels := c.DelayLevels(); len(levels) > 0 {
		a.DelayLevels = levels
	}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil {
		a.TotalMemory = int64(si.Totalram) * int64(si.Unit)
	}
	return a
}

// runBroker runs the broker until a signal or ctx ends it. A broker that
// asks for it (a slave whose log must be cut back to its master's, in
// controller mode: actors.Env.Restart) is stopped cleanly and started
// again on the same store, which Open cuts first.
//
// The metrics server and its registry outlive such a restart: the counters
// go on, and /healthz says not ready in between.
func runBroker(ctx context.Context, c brokerconf.Config, log *slog.Logger) error {
	reg := metrics.NewRegistry()
	bm := metrics.NewBroker(reg)
	ms := startMetrics(c.MetricsHost, c.EffectiveMetricsPort(), reg, log)
	defer ms.stop()
	ms.brokerStatus(bm)
	for {
		again, err := runBrokerOnce(ctx, c, log, ms.seam(bm), ms)
		if err != nil || !again {
			return err
		}
		log.Info("starting the broker again on its store")
	}
}

func runBrokerOnce(ctx context.Context, c brokerconf.Config, log *slog.Logger, m actors.Metrics, ms *metricsServer) (again bool, err error) {
	sc := c.StoreConfig()
	tuneGC(log)
	tuneProcs(log)
	log.Info("opening store", "dir", sc.StorePathRootDir)
	started := time.Now()
	store, rep, err := storage.Open(vfs.NewOS(), sc)
	if err != nil {
		if errors.Is(err, storage.ErrCorrupt) {
			log.Error("the store is corrupt; refusing to start rather than lose or invent data", "err", err)
		}
		return false, err
	}
	log.Info("store recovered", "took", time.Since(started).Round(time.Millisecond), "report", rep.String())
	if rep.DroppedSegment != "" {
		log.Warn("removed an unfinished CommitLog segment (shorter than a segment, all zeros: a creation cut short by a crash; it held no message)",
			"segment", rep.DroppedSegment)
	}
	// Refuse to start rather than forget topics or committed offsets: a
	// config file damaged along with its backup needs an operator.
	for name, v := range map[string]any{storage.TopicsFile: &storage.TopicTable{}, storage.ConsumerOffsetsFile: &storage.ConsumerOffsetTable{},
		storage.SubscriptionGroupsFile: &storage.SubscriptionGroupTable{}, actors.DelayOffsetsFile: &map[string]any{}} {
		if _, err := storage.LoadJSON(store.FS(), store.ConfigPath(name), v); err != nil {
			store.Close()
			return false, fmt.Errorf("config file %s and its backup are damaged; repair or remove them (removing loses what they hold): %w", store.ConfigPath(name), err)
		}
	}
	limits := protocol.DefaultLimits()
	limits.MaxFrameSize = c.MaxFrameSize
	limits.MaxMessageSize = c.MaxMessageSize
	restart := make(chan string, 1)
	b := actors.New(actorsConfig(c, sc), brokerEnv(log, limits, restart, m), store, limits)
	if err := b.Start(); err != nil {
		store.Close()
		return false, err
	}
	ls, err := startListeners(c, b, netio.RemotingCodec{StoreHost: sc.StoreHost}, limits, log)
	if err != nil {
		b.Stop()
		return false, err
	}
	srv := ls.srv
	ms.serveBroker(b, srv)
	ms.setReady(true)
	log.Info("broker started", "listen", srv.Addr(), "remotingListen", ls.remotingAddr(), "brokerName", c.BrokerName, "brokerRole", c.BrokerRole, "brokerId", c.BrokerID,
		"haMasterAddress", c.HAMasterAddress, "brokerClusterName", c.BrokerClusterName, "namesrvAddr", c.NamesrvAddr,
		"flushDiskType", c.FlushDiskType, "store", sc.StorePathRootDir, "pid", os.Getpid())
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		fmt.Printf("\nWharf broker listening on %s (Ctrl-C to stop). Try, in another terminal:\n"+
			"  bin/wharf produce --broker %s --topic demo --count 1000 --size 256\n"+
			"  bin/wharf consume --broker %s --topic demo --group demo-group --from first --idle-exit 3s\n\n",
			srv.Addr(), srv.Addr(), srv.Addr())
	}

	select {
	case why := <-restart:
		log.Warn("the broker stops to start again on its store", "reason", why)
		again = true
	default:
		again = waitForStopOr(ctx, log, restart)
	}
	ms.setReady(false)
	ms.serveBroker(nil, nil)
	return again, stopBroker(ls, b, log)
}

// listeners are a broker's ports: clients (Wharf's protocol), slaves,
// and RocketMQ's clients (remoting, nil when off).
type listeners struct{ srv, ha, rmq *netio.Server }

func (l *listeners) remotingAddr() string {
	if l.rmq == nil {
		return ""
	}
	return l.rmq.Addr()
}

// startListeners starts the ports; on an error none stays open.
func startListeners(c brokerconf.Config, b *actors.Broker, rmq netio.RemotingCodec, limits protocol.Limits, log *slog.Logger) (*listeners, error) {
	// The replication port listens in every role: a slave may be
	// promoted to master at run time (UPDATE_BROKER_ROLE), and refuses
	// slaves until then.
	haAddr := fmt.Sprintf("%s:%d", c.BrokerIP1, c.EffectiveHAListenPort())
	l := &listeners{ha: netio.NewServer(b.HAHandler(), netio.Options{Addr: haAddr, Limits: limits,
		MaxOutboundBytes: int(max(c.MaxOutboundBytes, 64<<20)), Logger: log.With("port", "ha")})}
	if err := l.ha.Start(); err != nil {
		return nil, fmt.Errorf("listen for slaves on %s: %w", haAddr, err)
	}
	client := func(port int, codec actors.Codec, log *slog.Logger) *netio.Server {
		return netio.NewServer(b, netio.Options{Addr: fmt.Sprintf("%s:%d", c.BrokerIP1, port), Limits: limits,
			MaxOutboundBytes: int(c.MaxOutboundBytes), Logger: log, Codec: codec,
			IdleTimeout: c.ServerChannelMaxIdleTimeSeconds.Duration()})
	}
	l.srv = client(c.ListenPort, nil, log)
	if err := l.srv.Start(); err != nil {
		l.ha.Stop(context.Background())
		return nil, fmt.Errorf("listen on %s:%d: %w", c.BrokerIP1, c.ListenPort, err)
	}
	if c.RemotingListenPort != 0 {
		l.rmq = client(c.RemotingListenPort, rmq, log.With("port", "remoting"))
		if err := l.rmq.Start(); err != nil {
			l.srv.Stop(context.Background())
			l.ha.Stop(context.Background())
			return nil, fmt.Errorf("listen for RocketMQ clients on %s:%d: %w", c.BrokerIP1, c.RemotingListenPort, err)
		}
	}
	return l, nil
}

// brokerEnv is the broker's outside world in production; a restart the
// broker asks for is sent on restart.
func brokerEnv(log *slog.Logger, limits protocol.Limits, restart chan<- string, m actors.Metrics) actors.Env {
	return actors.Env{Clock: wallClock{}, Logger: log, Dispatcher: defaultDispatcher(), Metrics: m,
		Restart: func(reason string) {
			select {
			case restart <- reason:
			default: // one is enough
			}
		},
		// Blocking storage work (fsync, segment creation, page warming)
		// runs on its own goroutine and reports back with a message.
		RunIO: func(fn func()) { go fn() },
		// An actor that keeps failing, or a broken invariant: stop now,
		// loudly, rather than serve without it. The abort file stays, so
		// the next start recovers.
		Fatal: func(err error) {
			log.Error("fatal: the broker stops", "err", err)
			os.Exit(1)
		},
		Dial: func(addr string, h actors.Handler) (actors.Conn, error) {
			return netio.Dial(addr, h, netio.DialOptions{Limits: limits, Logger: log})
		}}
}

// stopBroker stops accepting and drains the connections, then the actors
// (writes, flush, dispatch, offsets), then the store: a clean checkpoint
// and no abort file.
func stopBroker(ls *listeners, b *actors.Broker, log *slog.Logger) error {
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []string
	if err := ls.srv.Stop(stopCtx); err != nil {
		errs = append(errs, "network: "+err.Error())
	}
	if ls.rmq != nil {
		if err := ls.rmq.Stop(stopCtx); err != nil {
			errs = append(errs, "remoting port: "+err.Error())
		}
	}
	if err := ls.ha.Stop(stopCtx); err != nil {
		errs = append(errs, "replication port: "+err.Error())
	}
	if err := b.Stop(); err != nil {
		errs = append(errs, "store: "+err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("unclean shutdown (the next start recovers): %s", strings.Join(errs, "; "))
	}
	log.Info("broker stopped cleanly")
	return nil
}
