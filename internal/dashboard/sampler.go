package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wharfmq/wharf/protocol"
)

// sampleOnce asks the name servers for the brokers and every broker, in
// parallel (a dead one costs its timeout, not the others' samples), for
// its statistics, and records them.
func (s *Server) sampleOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	ci, err := s.pool.clusterInfo(ctx)
	if err != nil {
		s.log.Debug("dashboard: sample", "err", err)
		return
	}
	out := make([]brokerSample, len(ci.Brokers))
	lat := make([]histogram, len(ci.Brokers))
	var wg sync.WaitGroup
	for i, b := range ci.Brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], lat[i] = s.sampleBroker(ctx, b)
		}()
	}
	wg.Wait()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := map[string]bool{}
	for i, bs := range out {
		addr := bs.Ref.BrokerAddr
		keep[addr] = true
		s.latest[addr] = bs
		if bs.Info != nil {
			s.hist.add(now, addr, counters{MsgIn: bs.Info.MsgPutTotal, MsgOut: bs.Info.MsgGetTotal, BytesIn: bs.Info.BytesPutTotal, Lat: lat[i]})
		}
	}
	for addr := range s.latest {
		if !keep[addr] {
			delete(s.latest, addr)
		}
	}
	s.hist.forget(keep)
}

// sampleBroker asks one broker for RuntimeInfo and its send latency.
func (s *Server) sampleBroker(ctx context.Context, b protocol.BrokerInfo) (brokerSample, histogram) {
	bs := brokerSample{At: time.Now(), Ref: b}
	a, err := s.pool.broker(b.BrokerAddr)
	if err == nil {
		var info protocol.BrokerRuntimeInfo
		info, err = a.RuntimeInfo(ctx)
		s.pool.failed(b.BrokerAddr, err)
		if err == nil {
			bs.Info = &info
		}
	}
	if err != nil {
		bs.Err = err.Error()
		return bs, histogram{}
	}
	h, err := s.scrapeLatency(ctx, b.BrokerAddr)
	if err != nil {
		bs.MetrErr = err.Error()
	}
	return bs, h
}

// scrapeLatency reads the send-latency histogram of the broker's /metrics.
func (s *Server) scrapeLatency(ctx context.Context, brokerAddr string) (histogram, error) {
	if s.cfg.MetricsPortOffset == 0 {
		return histogram{}, fmt.Errorf("no metrics port configured")
	}
	host, port, err := net.SplitHostPort(brokerAddr)
	if err != nil {
		return histogram{}, fmt.Errorf("broker address %q: %w", brokerAddr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return histogram{}, fmt.Errorf("broker address %q: %w", brokerAddr, err)
	}
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(n+s.cfg.MetricsPortOffset)) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return histogram{}, fmt.Errorf("metrics of %s: %w", brokerAddr, err)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return histogram{}, fmt.Errorf("metrics of %s: %w", brokerAddr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return histogram{}, fmt.Errorf("metrics of %s: %s", brokerAddr, resp.Status)
	}
	return parseHistogram(resp.Body, sendLatencyMetric)
}

// snapshot copies the latest samples, by address.
func (s *Server) snapshot() map[string]brokerSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]brokerSample, len(s.latest))
	for k, v := range s.latest {
		out[k] = v
	}
	return out
}

// sortedSamples orders samples by broker group, then id, then address.
func sortedSamples(m map[string]brokerSample) []brokerSample {
	out := make([]brokerSample, 0, len(m))
	for _, bs := range m {
		out = append(out, bs)
	}
	slices.SortFunc(out, func(a, b brokerSample) int {
		if c := strings.Compare(a.Ref.BrokerName, b.Ref.BrokerName); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Ref.BrokerID, b.Ref.BrokerID); c != 0 {
			return c
		}
		return strings.Compare(a.Ref.BrokerAddr, b.Ref.BrokerAddr)
	})
	return out
}
