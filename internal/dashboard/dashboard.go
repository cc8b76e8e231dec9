package dashboard

import (
	"context"
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

//go:embed web
var webFiles embed.FS

// Config says where the cluster is and how the dashboard samples it.
type Config struct {
	NameServer string // name server address(es), ";"-separated
	// ControllerAddr, when set, is asked for the groups' epochs and
	// SyncStateSets (controller mode).
	ControllerAddr string
	// MetricsPortOffset: a broker's /metrics is on its port plus this
	// (the broker's default --metricsPort is its port + 3); 0: no latency.
	MetricsPortOffset int
	SampleEvery       time.Duration // 0: 1 s
	History           time.Duration // how far back the charts go; 0: 10 min
	Timeout           time.Duration // per request to the cluster; 0: 2 s
	Logger            *slog.Logger  // nil: slog.Default()
}

// Server is the dashboard: an http.Handler, and Run, its sampler.
type Server struct {
	cfg  Config
	log  *slog.Logger
	pool *pool
	mux  *http.ServeMux
	http *http.Client // for the brokers' /metrics

	mu     sync.Mutex // guards hist and latest: Run writes, handlers read
	hist   *history
	latest map[string]brokerSample // by broker address
}

// brokerSample is the last thing the sampler heard of a broker.
type brokerSample struct {
	At      time.Time
	Ref     protocol.BrokerInfo
	Info    *protocol.BrokerRuntimeInfo // nil if RuntimeInfo failed
	Err     string                      // why Info is nil
	MetrErr string                      // why the latency is unknown
}

// New returns a dashboard for cfg; Run must run for the charts to fill.
func New(cfg Config) *Server {
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = time.Second
	}
	if cfg.History <= 0 {
		cfg.History = 10 * time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	s := &Server{cfg: cfg, log: cfg.Logger, pool: newPool(cfg.NameServer, cfg.Timeout),
		http:   &http.Client{Timeout: cfg.Timeout},
		hist:   newHistory(int(cfg.History / cfg.SampleEvery)),
		latest: map[string]brokerSample{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	static, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	s.mux = http.NewServeMux()
	s.mux.Handle("GET /", http.FileServerFS(static))
	s.mux.HandleFunc("GET /api/cluster", s.apiCluster)
	s.mux.HandleFunc("GET /api/history", s.apiHistory)
	s.mux.HandleFunc("GET /api/topics", s.apiTopics)
	s.mux.HandleFunc("POST /api/topics", s.apiCreateTopic)
	s.mux.HandleFunc("DELETE /api/topics/{topic}", s.apiDeleteTopic)
	s.mux.HandleFunc("GET /api/groups", s.apiGroups)
	s.mux.HandleFunc("GET /api/replication", s.apiReplication)
	s.mux.HandleFunc("GET /api/message", s.apiMessage)
}

// ServeHTTP serves the page and its API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
	s.mux.ServeHTTP(w, r)
}

// Run samples the cluster every SampleEvery until ctx ends, then closes
// the dashboard's connections.
func (s *Server) Run(ctx context.Context) error {
	defer s.pool.close()
	tick := time.NewTicker(s.cfg.SampleEvery)
	defer tick.Stop()
	for {
		s.sampleOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
