package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/internal/dashboard"
)

// defaultDashboardListen is clear of wharf dev's ports (9876-10944).
const defaultDashboardListen = "127.0.0.1:8080"

// dashboardConfig is `wharf dashboard`'s configuration.
type dashboardConfig struct {
	Namesrv        string
	Listen         string
	ControllerAddr string
	// MetricsOffset: a broker's /metrics is on its port plus this (the
	// brokers' default --metricsPort); 0: no latency charts.
	MetricsOffset int
	LogLevel      string
}

// addDashboardCommand registers `wharf dashboard`.
func addDashboardCommand(root *cobra.Command) {
	c := dashboardConfig{Listen: defaultDashboardListen, MetricsOffset: 3, LogLevel: "info"}
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the web dashboard of a cluster",
		Long: `Serve a web dashboard of the cluster a name server knows: its brokers and
their health, throughput and send-latency charts of the last 10 minutes,
topics with their queues and per-group lag, consumer groups, replication,
message lookup by key or id, and topic create and delete. Everything it
shows it asks the cluster for (see docs/OPERATIONS.md, "Dashboard"); the
page is part of the binary. Ctrl-C or SIGTERM stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Namesrv == "" {
				return errors.New("--namesrv is required: the name server(s) to start from, host:port[;host:port]")
			}
			log, err := newLogger(c.LogLevel, "text")
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			d, err := startDashboard(c, log)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wharf dashboard: %s\n", d.url)
			<-ctx.Done()
			return d.stop()
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Namesrv, "namesrv", "", "name server address(es), host:port[;host:port]")
	f.StringVar(&c.Listen, "listen", c.Listen, "address to serve the dashboard on (host:port; port 0: any free one)")
	f.StringVar(&c.ControllerAddr, "controllerAddr", "", "controller address(es), for the groups' epochs and SyncStateSets (controller mode)")
	f.IntVar(&c.MetricsOffset, "metricsPortOffset", c.MetricsOffset, "a broker's /metrics is on its port plus this, for the latency charts (0: none)")
	f.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn, error")
	root.AddCommand(cmd)
}

// runningDashboard is a dashboard serving and sampling.
type runningDashboard struct {
	url    string
	srv    *http.Server
	cancel context.CancelFunc
	done   chan struct{} // closed when the sampler has stopped
}

// startDashboard listens on c.Listen and serves the dashboard until stop.
func startDashboard(c dashboardConfig, log *slog.Logger) (*runningDashboard, error) {
	l, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("dashboard: listen on %s: %w", c.Listen, err)
	}
	d := dashboard.New(dashboard.Config{NameServer: c.Namesrv, ControllerAddr: c.ControllerAddr,
		MetricsPortOffset: c.MetricsOffset, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	rd := &runningDashboard{url: "http://" + l.Addr().String() + "/", cancel: cancel, done: make(chan struct{}),
		srv: &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	go func() {
		defer close(rd.done)
		_ = d.Run(ctx)
	}()
	go func() {
		if err := rd.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("dashboard: serve", "err", err)
		}
	}()
	log.Info("dashboard started", "url", rd.url, "namesrv", c.Namesrv, "pid", os.Getpid())
	return rd, nil
}

// stop shuts the server down and waits for the sampler.
func (d *runningDashboard) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := d.srv.Shutdown(ctx)
	d.cancel()
	<-d.done
	if err != nil {
		return fmt.Errorf("dashboard: stop: %w", err)
	}
	return nil
}
