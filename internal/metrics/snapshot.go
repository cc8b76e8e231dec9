package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharfmq/wharf/actors"
)

// maxLagSeries bounds the consumer lag series: groups and topics are
// named by clients, so beyond this many (group, topic) pairs the rest are
// left out (the status endpoint /groups still lists them all).
const maxLagSeries = 1000

// gauges are the broker's gauges set from its snapshot.
type gauges struct {
	flushBehind, dispatchBehind, diskBytes prometheus.Gauge
	syncSet, inSync                        prometheus.Gauge
	lagMsgs, lagSecs                       *prometheus.GaugeVec // {group, topic}
	replLag                                *prometheus.GaugeVec // {slave}
	mailbox                                *prometheus.GaugeVec // {actor}

	mu      sync.Mutex // Snapshot calls in order, but a test may call from two
	lagSeen map[[2]string]bool
	slaves  map[string]bool
}

func newGauges(f factory) *gauges {
	return &gauges{
		flushBehind: f.gauge("wharf_commitlog_flush_behind_bytes", "CommitLog bytes appended and not yet fsynced."),
		dispatchBehind: f.gauge("wharf_commitlog_dispatch_behind_bytes",
			"CommitLog bytes appended and not yet dispatched to the ConsumeQueues (not yet visible to pulls)."),
		diskBytes: f.gauge("wharf_commitlog_disk_bytes", "Size of the CommitLog's segment files on disk (preallocated)."),
		syncSet: f.gauge("wharf_sync_state_set_size",
			"Controller mode, on a master: brokers in the SyncStateSet, the master included (0 otherwise)."),
		inSync: f.gauge("wharf_in_sync_slaves", "Slaves within haMaxGapNotInSync of this master."),
		lagMsgs: f.gaugeVec("wharf_consumer_lag_messages",
			"Messages stored and not yet committed by the consumer group, over the topic's queues on this broker.", "group", "topic"),
		lagSecs: f.gaugeVec("wharf_consumer_lag_seconds",
			"Age of the group's oldest unconsumed message of the topic on this broker (0: no lag).", "group", "topic"),
		replLag: f.gaugeVec("wharf_replication_lag_bytes",
			"CommitLog bytes this master has and the slave has not acknowledged, by the slave's brokerId.", "slave"),
		mailbox: f.gaugeVec("wharf_mailbox_depth", "Messages waiting in the broker's actor mailboxes, by actor kind.", "actor"),
		lagSeen: map[[2]string]bool{},
		slaves:  map[string]bool{},
	}
}

// Snapshot implements actors.Metrics: it sets the gauges from s, and
// deletes the series of groups, topics and slaves s no longer has.
func (b *Broker) Snapshot(s *actors.BrokerSnapshot) {
	g := b.gauges
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flushBehind.Set(float64(s.CommitLog.FlushBehindBytes))
	g.dispatchBehind.Set(float64(s.CommitLog.DispatchBehindBytes))
	g.diskBytes.Set(float64(s.CommitLog.DiskBytes))
	g.syncSet.Set(float64(len(s.Replication.SyncStateSet)))
	g.inSync.Set(float64(s.Replication.InSyncSlaves))
	for kind, n := range s.MailboxDepths {
		g.mailbox.WithLabelValues(kind).Set(float64(n))
	}
	g.setLag(s.Groups)
	g.setSlaves(s.Replication.Slaves)
}

// setLag sets the lag of each (group, topic): the sum of its queues'
// lags in messages, the oldest message's age in time.
func (g *gauges) setLag(groups []actors.GroupSnapshot) {
	type lag struct{ msgs, ms int64 }
	now := map[[2]string]lag{}
	for _, gr := range groups {
		for _, q := range gr.Queues {
			k := [2]string{gr.Group, q.Topic}
			if _, ok := now[k]; !ok && len(now) >= maxLagSeries {
				continue
			}
			l := now[k]
			l.msgs += q.Lag
			l.ms = max(l.ms, q.LagMs)
			now[k] = l
		}
	}
	for k, l := range now {
		g.lagMsgs.WithLabelValues(k[0], k[1]).Set(float64(l.msgs))
		g.lagSecs.WithLabelValues(k[0], k[1]).Set(float64(l.ms) / 1000)
	}
	for k := range g.lagSeen {
		if _, ok := now[k]; !ok {
			g.lagMsgs.DeleteLabelValues(k[0], k[1])
			g.lagSecs.DeleteLabelValues(k[0], k[1])
		}
	}
	g.lagSeen = make(map[[2]string]bool, len(now))
	for k := range now {
		g.lagSeen[k] = true
	}
}

// setSlaves sets each slave's lag, by brokerId (a handful per group).
func (g *gauges) setSlaves(slaves []actors.SlaveSnapshot) {
	now := make(map[string]bool, len(slaves))
	for _, s := range slaves {
		id := strconv.FormatInt(s.BrokerID, 10)
		now[id] = true
		g.replLag.WithLabelValues(id).Set(float64(s.LagBytes))
	}
	for id := range g.slaves {
		if !now[id] {
			g.replLag.DeleteLabelValues(id)
		}
	}
	g.slaves = now
}

// OutboundQueued registers wharf_outbound_queued_bytes, read from queued
// at each scrape (the transport's count: actors do not see it).
func (b *Broker) OutboundQueued(queued func() int64) {
	b.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "wharf_outbound_queued_bytes",
		Help: "Answer bytes queued on client connections and not yet written to their sockets."},
		func() float64 { return float64(queued()) }))
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}
