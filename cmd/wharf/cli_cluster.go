package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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

// ask sends req to the first name server that answers and decodes the
// answer into into. A status other than SUCCESS is an error, and is not
// retried on the next name server (they would agree).
func (o *namesrvFlags) ask(ctx context.Context, req protocol.Request, into protocol.Fields) error {
	var errs []error
	for _, addr := range strings.Split(o.namesrv, ";") {
		if addr = strings.TrimSpace(addr); addr == "" {
			continue
		}
		f, err := namesrvCall(ctx, addr, o.timeout, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		if f.Status != protocol.StatusOK {
			return fmt.Errorf("%s: %v: %s", addr, f.Status, f.Remark)
		}
		return protocol.DecodeResponse(f, protocol.DefaultLimits(), into)
	}
	if len(errs) == 0 {
		return errors.New("--namesrv: no address given")
	}
	return fmt.Errorf("no name server answered: %w", errors.Join(errs...))
}

// namesrvCall runs one request on its own connection. (The client
// library's name-server support replaces this for produce and consume.)
func namesrvCall(ctx context.Context, addr string, timeout time.Duration, req protocol.Request) (*protocol.Frame, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	frame, err := protocol.AppendRequest(nil, 1, 0, req)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(frame); err != nil {
		return nil, fmt.Errorf("send %v: %w", req.RequestCode(), err)
	}
	lim := protocol.DefaultLimits()
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := protocol.Split(buf, lim)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			f, err := protocol.DecodeFrame(buf[:n], lim)
			if err != nil || f.Opaque == 1 && f.IsResponse() {
				return f, err
			}
			buf = buf[n:]
			continue
		}
		m, err := c.Read(chunk)
		if err != nil {
			return nil, fmt.Errorf("read the answer to %v: %w", req.RequestCode(), err)
		}
		buf = append(buf, chunk[:m]...)
	}
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
}

func newClusterListCmd() *cobra.Command {
	var o namesrvFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the clusters' broker groups and brokers",
		Long: `List every broker a name server holds: cluster, group, brokerId, address,
role, whether its lease is alive and since when.
--json prints {version, brokers: [{cluster, group, broker_id, address, ha_address,
role, alive, live_since_ms, last_heartbeat_ms, lease_ms, topics}]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := cliSignalContext(cmd.Context())
			defer stop()
			var ci protocol.ClusterInfo
			if err := o.ask(ctx, &protocol.GetBrokerClusterInfoRequest{}, &ci); err != nil {
				return err
			}
			if o.json {
				out := struct {
					Version int64        `json:"version"`
					Brokers []brokerJSON `json:"brokers"`
				}{Version: ci.Version, Brokers: []brokerJSON{}}
				for _, b := range ci.Brokers {
					out.Brokers = append(out.Brokers, brokerJSON{b.ClusterName, b.BrokerName, b.BrokerID, b.BrokerAddr, b.HAServerAddr,
						b.BrokerRole, b.Alive, b.LiveSinceMs, b.LastHeartbeatMs, b.LeaseMillis, b.Topics})
				}
				return cliWriteJSON(cmd.OutOrStdout(), out)
			}
			printCluster(cmd.OutOrStdout(), ci.Brokers, time.Now())
			return nil
		},
	}
	o.register(cmd)
	return cmd
}

func printCluster(w io.Writer, brokers []protocol.BrokerInfo, now time.Time) {
	if len(brokers) == 0 {
		fmt.Fprintln(w, "no brokers registered")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tGROUP\tBROKER ID\tADDRESS\tROLE\tALIVE\tSINCE")
	for _, b := range brokers {
		alive, since := "yes", now.Sub(time.UnixMilli(b.LiveSinceMs)).Round(time.Second).String()+" ago"
		if !b.Alive {
			alive, since = "NO", "silent "+now.Sub(time.UnixMilli(b.LastHeartbeatMs)).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", b.ClusterName, b.BrokerName, b.BrokerID, b.BrokerAddr, b.BrokerRole, alive, since)
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
			var rd protocol.RouteData
			if err := o.ask(ctx, &protocol.GetRouteInfoRequest{Topic: topic}, &rd); err != nil {
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
