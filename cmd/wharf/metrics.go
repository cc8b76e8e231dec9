package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/internal/metrics"
)

// metricsServer is a daemon's HTTP server for /metrics and /healthz. A nil
// *metricsServer (metricsPort 0, or a port that could not be bound) is
// valid and does nothing.
type metricsServer struct {
	srv   *http.Server
	mux   *http.ServeMux
	ready atomic.Bool
	// broker is what the status endpoints read (status_http.go): the
	// running broker and its client listener, nil between two runs.
	broker atomic.Pointer[statusSource]
}

// startMetrics serves reg on host:port; port 0 is off. A port that cannot
// be bound is logged and the daemon runs without it: metrics are not worth
// refusing to carry messages for.
func startMetrics(host string, port int, reg *prometheus.Registry, log *slog.Logger) *metricsServer {
	if port == 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("metrics server not started: the daemon runs without /metrics and /healthz", "addr", addr, "err", err)
		return nil
	}
	m := &metricsServer{mux: http.NewServeMux()}
	m.mux.Handle("/", metrics.Handler(reg, m.ready.Load))
	m.srv = &http.Server{Handler: m.mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "addr", addr, "err", err)
		}
	}()
	log.Info("metrics server started", "addr", ln.Addr().String())
	return m
}

// setReady is what /healthz says: ready once the store recovered and the
// listeners run, not while the daemon starts or stops.
func (m *metricsServer) setReady(ready bool) {
	if m != nil {
		m.ready.Store(ready)
	}
}

func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}

// seam is the actors' Metrics: bm when the server runs, none when nobody
// can read it.
func (m *metricsServer) seam(bm *metrics.Broker) actors.Metrics {
	if m == nil {
		return nil
	}
	return bm
}

// addMetricsFlags registers --metricsPort and --metricsHost for the name
// server and the controller (the broker has them as broker.conf keys).
func addMetricsFlags(f *pflag.FlagSet, port *int, host *string) {
	f.IntVar(port, "metricsPort", *port, "port of the HTTP server for /metrics and /healthz (-1: the listening port + 3, 0: off)")
	f.StringVar(host, "metricsHost", *host, "address the metrics server binds to (127.0.0.1: loopback only)")
}

// metricsPortOf is the metrics port: set, or own + 3 when set is -1 (the
// broker's rule, brokerconf.Config.EffectiveMetricsPort); 0 is off.
func metricsPortOf(set, own int) int {
	if set == -1 {
		return own + 3
	}
	return set
}
