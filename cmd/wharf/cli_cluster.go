package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// cliDefaultNamesrv is where the cluster commands ask by default.
const cliDefaultNamesrv = "127.0.0.1:9876"

// addClusterCommands registers `wharf cluster list` and `wharf topic route`
// (under the topic command, if it is there).
func addClusterCommands(root *cobra.Command) {
	cluster := &cobra.Command{Use: "cluster", Short: "Inspect a cluster through its name servers", Args: cobra.NoArgs}
	cluster.AddCommand(newClusterListCmd())
	root.AddCommand(cluster)
	for _, c := range root.Commands() {
		if c.Name() == "topic" {
			c.AddCommand(newTopicRouteCmd())
		}
	}
}

// namesrvFlags are the flags of the commands that ask a name server.
type namesrvFlags struct {
	namesrv string
	json    bool
	timeout time.Duration
}

func (o *namesrvFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.namesrv, "namesrv", cliDefaultNamesrv, `name server addresses, ";"-separated ("a:9876;b:9876")`)
	f.BoolVar(&o.json, "json", false, "print one JSON object as the last line of stdout")
	f.DurationVar(&o.timeout, "timeout", 3*time.Second, "timeout of each request")
}

// options are the client options of the name servers' Admin and of the
// brokers' ones: quiet, since the commands report errors themselves.
func (o *namesrvFlags) options(stderr io.Writer) []client.Option {
	return []client.Option{client.WithTimeout(o.timeout), client.WithDialTimeout(o.timeout),
		client.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))}
}

// admin connects to the first name server of --namesrv that answers.
func (o *namesrvFlags) admin(stderr io.Writer) (*client.Admin, error) {
	if strings.TrimSpace(strings.ReplaceAll(o.namesrv, ";", "")) == "" {
		return nil, errors.New("--namesrv: no address given")
	}
	return client.NewAdmin("", append(o.options(stderr), client.WithNameServer(o.namesrv))...)
}

// brokerJSON is one broker in --json output.
type brokerJSON struct {
	Cluster         string `json:"cluster"`
	Group           string `json:"group"`
	BrokerID        int64  `json:"broker_id"`
	Address         string `json:"address"`
	HAAddress       string `json:"ha_address,omitempty"`
	Role            string `json:"role"`
	Alive           bool   `json:"alive"`
	LiveSinceMs     int64  `json:"live_since_ms,omitempty"`
	LastHeartbeatMs int64  `json:"last_heartbeat_ms,omitempty"`
	LeaseMs         int64  `json:"lease_ms,omitempty"`
	Topics          int32  `json:"topics"`
	*brokerStats
}

// brokerStats is what cluster list asks each live broker (GET_BROKER_RUNTIME_INFO).
type brokerStats struct {
	MaxOffset   int64   `json:"max_offset"`    // the commit log's end, in bytes
	MsgPutTotal int64   `json:"msg_put_total"` // messages stored since the broker started
	PutTPS      float64 `json:"put_tps"`       // messages stored per second over --tps-window
	Error       string  `json:"stats_error,omitempty"`
}

func newClusterListCmd() *cobra.Command {
	var o namesrvFlags
	var window time.Duration
	var controllerAddr string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the clusters' broker groups and brokers",
		Long: `List every broker a name server holds: cluster, group, brokerId, address,
role, whether its lease is alive and since when, and, asked of each live
broker, its commit log's max offset and the messages it stored per second
over --tps-window (twice asked; 0: once, and no TPS).
--json prints {version, brokers: [{cluster, group, broker_id, address, ha_address,
role, alive, live_since_ms, last_heartbeat_ms, lease_ms, topics, max_offset,
msg_put_total, put_tps, stats_error}]} (the last four for live brokers only).
With --controllerAddr it asks the controllers instead and lists each broker
group as their leader holds it: master id and address, master epoch,
SyncStateSet and its epoch, the replicas alive; --json then prints
{controller, groups: [{cluster, group, master_id, master_addr, master_epoch,
sync_state_set, sync_state_set_epoch, replicas: [{broker_id, address,
ha_address, alive}]}]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := cliSignalContext(cmd.Context())
			defer stop()
			if controllerAddr != "" {
				return listControllerGroups(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), controllerAddr, o.timeout, o.json)
			}
			a, err := o.admin(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer a.Close()
			ci, err := a.ClusterInfo(ctx)
			if err != nil {
				return err
			}
			stats := sampleBrokers(ctx, ci.Brokers, window, o.options(cmd.ErrOrStderr()))
			if o.json {
				out := struct {
					Version int64        `json:"version"`
					Brokers []brokerJSON `json:"brokers"`
				}{Version: ci.Version, Brokers: []brokerJSON{}}
				for _, b := range ci.Brokers {
					out.Brokers = append(out.Brokers, brokerJSON{b.ClusterName, b.BrokerName, b.BrokerID, b.BrokerAddr, b.HAServerAddr,
						b.BrokerRole, b.Alive, b.LiveSinceMs, b.LastHeartbeatMs, b.LeaseMillis, b.Topics, stats[b.BrokerAddr]})
				}
				return cliWriteJSON(cmd.OutOrStdout(), out)
			}
			printCluster(cmd.OutOrStdout(), ci.Brokers, stats, window > 0, time.Now())
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().DurationVar(&window, "tps-window", time.Second, "how long to count each broker's stored messages for TPS (0: no TPS)")
	cmd.Flags().StringVar(&controllerAddr, "controllerAddr", "", `controller addresses, ";"-separated: list the groups' masters, epochs and SyncStateSets`)
	return cmd
}

// sampleBrokers asks every live broker for its runtime info, all at once,
// and again after window (if > 0) for the rate of stored messages. The
// stats are keyed by address; a broker that did not answer has Error.
func sampleBrokers(ctx context.Context, brokers []protocol.BrokerInfo, window time.Duration, opts []client.Option) map[string]*brokerStats {
	stats := map[string]*brokerStats{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, b := range brokers {
		if !b.Alive || b.BrokerAddr == "" || stats[b.BrokerAddr] != nil {
			continue
		}
		st := &brokerStats{}
		stats[b.BrokerAddr] = st
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			s := sampleBroker(ctx, addr, window, opts)
			mu.Lock()
			*st = s
			mu.Unlock()
		}(b.BrokerAddr)
	}
	wg.Wait()
	return stats
}

func sampleBroker(ctx context.Context, addr string, window time.Duration, opts []client.Option) brokerStats {
	a, err := client.NewAdmin(addr, opts...)
	if err != nil {
		return brokerStats{Error: err.Error()}
	}
	defer a.Close()
	first, err := a.RuntimeInfo(ctx)
	if err != nil {
		return brokerStats{Error: err.Error()}
	}
	t0 := time.Now()
	st := brokerStats{MaxOffset: first.CommitLogMaxOffset, MsgPutTotal: first.MsgPutTotal}
	if window <= 0 {
		return st
	}
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return st
	}
	second, err := a.RuntimeInfo(ctx)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	st.MaxOffset, st.MsgPutTotal = second.CommitLogMaxOffset, second.MsgPutTotal
	st.PutTPS = cliRound(float64(second.MsgPutTotal-first.MsgPutTotal) / time.Since(t0).Seconds())
	return st
}

func printCluster(w io.Writer, brokers []protocol.BrokerInfo, stats map[string]*brokerStats, withTPS bool, now time.Time) {
	if len(brokers) == 0 {
		fmt.Fprintln(w, "no brokers registered")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tGROUP\tBROKER ID\tADDRESS\tROLE\tALIVE\tSINCE\tMAX OFFSET\tTPS")
	for _, b := range brokers {
		alive, since := "yes", now.Sub(time.UnixMilli(b.LiveSinceMs)).Round(time.Second).String()+" ago"
		if !b.Alive {
			alive, since = "NO", "silent "+now.Sub(time.UnixMilli(b.LastHeartbeatMs)).Round(time.Second).String()
		}
		maxOff, tps := "-", "-"
		switch st := stats[b.BrokerAddr]; {
		case st == nil || !b.Alive:
		case st.Error != "" && st.MsgPutTotal == 0 && st.MaxOffset == 0:
			maxOff = "unreachable"
		default:
			maxOff = fmt.Sprint(st.MaxOffset)
			if withTPS && st.Error == "" {
				tps = fmt.Sprintf("%.1f", st.PutTPS)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ClusterName, b.BrokerName, b.BrokerID, b.BrokerAddr, b.BrokerRole, alive, since, maxOff, tps)
	}
	tw.Flush()
}

// queueDataJSON is one group's queues in topic route's --json output.
type queueDataJSON struct {
	Group          string `json:"group"`
	ReadQueueNums  int32  `json:"read_queue_nums"`
	WriteQueueNums int32  `json:"write_queue_nums"`
	Perm           int32  `json:"perm"`
}

func newTopicRouteCmd() *cobra.Command {
	var o namesrvFlags
	var topic string
	cmd := &cobra.Command{
		Use:   "route",
		Short: "Show a topic's route from a name server",
		Long: `Show which broker groups host a topic, their queues and their brokers.
A group without a live master shows 0 write queues: it is read from its slaves.
--json prints {topic, version, queue_datas: [{group, read_queue_nums,
write_queue_nums, perm}], brokers: [{cluster, group, broker_id, address, ...}]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic == "" {
				return errors.New("--topic is required")
			}
			ctx, stop := cliSignalContext(cmd.Context())
			defer stop()
			a, err := o.admin(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer a.Close()
			rd, err := a.TopicRoute(ctx, topic)
			if err != nil {
				return err
			}
			if o.json {
				return cliWriteJSON(cmd.OutOrStdout(), routeJSON(&rd))
			}
			printRoute(cmd.OutOrStdout(), &rd)
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&topic, "topic", "", "topic")
	return cmd
}

func routeJSON(rd *protocol.RouteData) any {
	out := struct {
		Topic      string          `json:"topic"`
		Version    int64           `json:"version"`
		QueueDatas []queueDataJSON `json:"queue_datas"`
		Brokers    []brokerJSON    `json:"brokers"`
	}{Topic: rd.Topic, Version: rd.Version, QueueDatas: []queueDataJSON{}, Brokers: []brokerJSON{}}
	for _, q := range rd.QueueDatas {
		out.QueueDatas = append(out.QueueDatas, queueDataJSON{q.BrokerName, q.ReadQueueNums, q.WriteQueueNums, q.Perm})
	}
	for _, b := range rd.Brokers {
		out.Brokers = append(out.Brokers, brokerJSON{Cluster: b.ClusterName, Group: b.BrokerName, BrokerID: b.BrokerID,
			Address: b.BrokerAddr, HAAddress: b.HAServerAddr, Role: b.BrokerRole, Alive: b.Alive})
	}
	return out
}

func printRoute(w io.Writer, rd *protocol.RouteData) {
	fmt.Fprintf(w, "topic %s, route version %d\n", rd.Topic, rd.Version)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tREAD QUEUES\tWRITE QUEUES\tPERM\tBROKERS")
	for _, q := range rd.QueueDatas {
		var bs []string
		for _, b := range rd.Brokers {
			if b.BrokerName != q.BrokerName {
				continue
			}
			s := fmt.Sprintf("%d=%s", b.BrokerID, b.BrokerAddr)
			if !b.Alive {
				s += "(dead)"
			}
			bs = append(bs, s)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", q.BrokerName, q.ReadQueueNums, q.WriteQueueNums, topicPermString(q.Perm), strings.Join(bs, " "))
	}
	tw.Flush()
}
