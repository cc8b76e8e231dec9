package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

type groupFlags struct {
	cliCommon
	group string
}

// groupListJSON is group list's --json output.
type groupListJSON struct {
	Groups []groupSummaryJSON `json:"groups"`
}

type groupSummaryJSON struct {
	BrokerGroup  string   `json:"broker_group,omitempty"` // with --namesrv
	Group        string   `json:"group"`
	MessageModel string   `json:"message_model"`
	Members      int32    `json:"members"`
	Topics       []string `json:"topics"`
	Lag          int64    `json:"lag"`
}

// groupDescribeJSON is group describe's --json output.
type groupDescribeJSON struct {
	Group            string            `json:"group"`
	MessageModel     string            `json:"message_model"`
	AllocateStrategy string            `json:"allocate_strategy"`
	ConsumeOrderly   bool              `json:"consume_orderly"`
	Generation       int64             `json:"generation"`              // with --namesrv: the first broker group's
	BrokerGroups     []groupCoordJSON  `json:"broker_groups,omitempty"` // with --namesrv
	Members          []groupMemberJSON `json:"members"`
	Queues           []groupQueueJSON  `json:"queues"`
	Lag              int64             `json:"lag"`
}

// groupCoordJSON is one broker group's coordinator of the group.
type groupCoordJSON struct {
	BrokerGroup string `json:"broker_group"`
	BrokerAddr  string `json:"broker_addr"`
	Generation  int64  `json:"generation"`
	Members     int    `json:"members"`
	Lag         int64  `json:"lag"`
}

type groupMemberJSON struct {
	BrokerGroup     string         `json:"broker_group,omitempty"` // with --namesrv
	ClientID        string         `json:"client_id"`
	Address         string         `json:"address"`
	LastHeartbeatMs int64          `json:"last_heartbeat_ms"`
	Queues          []queueRefJSON `json:"queues"`
}

type queueRefJSON struct {
	Topic   string `json:"topic"`
	QueueID int32  `json:"queue_id"`
}

type groupQueueJSON struct {
	BrokerGroup     string `json:"broker_group,omitempty"` // with --namesrv
	Topic           string `json:"topic"`
	QueueID         int32  `json:"queue_id"`
	Owner           string `json:"owner"`
	Pending         string `json:"pending,omitempty"`
	CommittedOffset int64  `json:"committed_offset"`
	MaxOffset       int64  `json:"max_offset"`
	Lag             int64  `json:"lag"`
}

func newGroupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List and describe consumer groups",
		Long: `Show the consumer groups the broker coordinates.

  wharf group list [--broker ADDR | --namesrv "a:9876;b:9876"] [--json]
  wharf group describe --group G [--broker ADDR | --namesrv "a:9876;b:9876"] [--json]

With --namesrv, both ask every broker group of the cluster (its master,
else a slave): each broker coordinates its own queues. list shows each
consumer group once per broker group, with that broker's members and lag.
describe shows the group on every broker group it is known to, with the
broker group as the first column of the members and queues, each broker
group's coordinator (address, generation, members, lag) and the total lag;
--json adds broker_group to groups, members and queues, and broker_groups
[{broker_group, broker_addr, generation, members, lag}].

list shows each group's message model, member count, topics and total lag.
describe shows the members with their assigned queues, then per queue its
owner (the member consuming it; a queue being handed over shows the member
waiting for it as "-> next"), committed offset ("-" if none), max offset and
lag (max offset - committed offset).

--json prints one JSON object as the last line of stdout: for list
{groups: [{group, message_model, members, topics, lag}]}; for describe
{group, message_model, allocate_strategy, consume_orderly, generation,
members: [{client_id, address, last_heartbeat_ms, queues: [{topic, queue_id}]}],
queues: [{topic, queue_id, owner, pending, committed_offset, max_offset, lag}], lag}.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newGroupListCmd(), newGroupDescribeCmd())
	return cmd
}

func newGroupListCmd() *cobra.Command {
	var o groupFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the consumer groups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkTarget(); err != nil {
				return err
			}
			if o.onCluster() {
				return listGroupsInCluster(cmd, &o)
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, stop := cliSignalContext(cmd.Context())
			defer stop()
			a, err := o.admin(stderr)
			if err != nil {
				return err
			}
			defer a.Close()
			groups, err := a.ListGroups(ctx)
			if err != nil {
				return err
			}
			if o.json {
				out := groupListJSON{Groups: make([]groupSummaryJSON, 0, len(groups))}
				for _, g := range groups {
					topics := g.Topics
					if topics == nil {
						topics = []string{}
					}
					out.Groups = append(out.Groups, groupSummaryJSON{"", g.Group, g.MessageModel, g.Members, topics, g.Lag})
				}
				return cliWriteJSON(stdout, out)
			}
			printGroups(stdout, groups)
			return nil
		},
	}
	o.register(cmd)
	return cmd
}

func printGroups(w io.Writer, groups []protocol.GroupSummary) {
	if len(groups) == 0 {
		fmt.Fprintln(w, "no consumer groups")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tMODEL\tMEMBERS\tLAG\tTOPICS")
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", g.Group, g.MessageModel, g.Members, g.Lag, strings.Join(g.Topics, ","))
	}
	tw.Flush()
}

func newGroupDescribeCmd() *cobra.Command {
	var o groupFlags
	cmd := &cobra.Command{
		Use:   "describe --group G",
		Short: "Show a group's members, assignment, offsets and lag",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.group == "" {
				return errors.New("--group is required")
			}
			if err := o.checkTarget(); err != nil {
				return err
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, stop := cliSignalContext(cmd.Context())
			defer stop()
			var ds []describedGroup
			var err error
			if o.onCluster() {
				ds, err = describeGroupInCluster(ctx, stderr, &o)
			} else {
				ds, err = describeGroupOn(ctx, stderr, &o)
			}
			if err != nil {
				return err
			}
			if o.json {
				return cliWriteJSON(stdout, groupDescriptionJSON(ds))
			}
			printGroupDescription(stdout, ds)
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&o.group, "group", "", "consumer group (required)")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

// describedGroup is the group as one broker coordinates it.
type describedGroup struct {
	brokerGroup string // "" with --broker
	addr        string
	d           protocol.ConsumerGroupDescription
}

// describeGroupOn describes the group on --broker.
func describeGroupOn(ctx context.Context, stderr io.Writer, o *groupFlags) ([]describedGroup, error) {
	a, err := client.NewAdmin(o.broker, o.clientOptions(stderr)...)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	d, err := a.DescribeGroup(ctx, o.group)
	if err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return nil, fmt.Errorf("consumer group %q: not found on %s", o.group, o.broker)
		}
		return nil, err
	}
	return []describedGroup{{addr: o.broker, d: d}}, nil
}

func groupDescriptionJSON(ds []describedGroup) groupDescribeJSON {
	d0 := ds[0].d
	out := groupDescribeJSON{
		Group: d0.Group, MessageModel: d0.MessageModel, AllocateStrategy: d0.AllocateStrategy,
		ConsumeOrderly: d0.ConsumeOrderly, Generation: d0.Generation,
		Members: []groupMemberJSON{}, Queues: []groupQueueJSON{},
	}
	for _, dg := range ds {
		d := dg.d
		var lag int64
		for _, m := range d.Members {
			mj := groupMemberJSON{BrokerGroup: dg.brokerGroup, ClientID: m.ClientID, Address: m.Address, LastHeartbeatMs: m.LastHeartbeatMs,
				Queues: make([]queueRefJSON, 0, len(m.Queues))}
			for _, q := range m.Queues {
				mj.Queues = append(mj.Queues, queueRefJSON{q.Topic, q.QueueID})
			}
			out.Members = append(out.Members, mj)
		}
		for _, q := range d.Queues {
			out.Queues = append(out.Queues, groupQueueJSON{dg.brokerGroup, q.Topic, q.QueueID, q.Owner, q.Pending, q.CommittedOffset, q.MaxOffset, q.Lag})
			lag += q.Lag
		}
		out.Lag += lag
		if dg.brokerGroup != "" {
			out.BrokerGroups = append(out.BrokerGroups, groupCoordJSON{dg.brokerGroup, dg.addr, d.Generation, len(d.Members), lag})
		}
	}
	return out
}

// printGroupDescription prints the group as ds's brokers coordinate it;
// with broker groups (--namesrv) each row says which.
func printGroupDescription(w io.Writer, ds []describedGroup) {
	d0, cluster := ds[0].d, ds[0].brokerGroup != ""
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "group\t%s\n", d0.Group)
	fmt.Fprintf(tw, "model\t%s\n", d0.MessageModel)
	fmt.Fprintf(tw, "allocate\t%s\n", d0.AllocateStrategy)
	fmt.Fprintf(tw, "orderly\t%v\n", d0.ConsumeOrderly)
	if !cluster {
		fmt.Fprintf(tw, "generation\t%d\n", d0.Generation)
	}
	tw.Flush()
	col := func(dg describedGroup) string { // the broker group column
		if cluster {
			return dg.brokerGroup + "\t"
		}
		return ""
	}
	head := col(describedGroup{brokerGroup: "BROKER GROUP"})
	if cluster {
		fmt.Fprintf(w, "\nbroker groups (%d)\n", len(ds))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "BROKER GROUP\tADDRESS\tGENERATION\tMEMBERS")
		for _, dg := range ds {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", dg.brokerGroup, dg.addr, dg.d.Generation, len(dg.d.Members))
		}
		tw.Flush()
	}
	var members, queues int
	for _, dg := range ds {
		members, queues = members+len(dg.d.Members), queues+len(dg.d.Queues)
	}
	fmt.Fprintf(w, "\nmembers (%d)\n", members)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, head+"CLIENT ID\tADDRESS\tLAST HEARTBEAT\tQUEUES")
	for _, dg := range ds {
		for _, m := range dg.d.Members {
			hb := "-"
			if m.LastHeartbeatMs > 0 {
				hb = fmt.Sprintf("%.1fs ago", max(0, time.Since(time.UnixMilli(m.LastHeartbeatMs)).Seconds()))
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", col(dg), m.ClientID, cmp.Or(m.Address, "-"), hb, formatQueueRefs(m.Queues))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nqueues (%d)\n", queues)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, head+"TOPIC\tQUEUE\tOWNER\tCOMMITTED\tMAX\tLAG")
	var lag int64
	for _, dg := range ds {
		for _, q := range dg.d.Queues {
			fmt.Fprintf(tw, "%s%s\t%d\t%s\t%s\t%d\t%d\n", col(dg), q.Topic, q.QueueID, queueOwner(q), committedText(q.CommittedOffset), q.MaxOffset, q.Lag)
			lag += q.Lag
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntotal lag %d\n", lag)
}

// queueOwner is a queue's owner as describe prints it: "-" if none, and
// "-> next" for a queue being handed over.
func queueOwner(q protocol.GroupQueue) string {
	owner := cmp.Or(q.Owner, "-")
	if q.Pending != "" {
		owner += " -> " + q.Pending
	}
	return owner
}

func committedText(off int64) string {
	if off < 0 {
		return "-"
	}
	return fmt.Sprint(off)
}

// formatQueueRefs renders queues compactly: "T[0,1,2] %RETRY%G[0]".
func formatQueueRefs(refs []protocol.QueueRef) string {
	if len(refs) == 0 {
		return "-"
	}
	var parts []string
	for i := 0; i < len(refs); {
		j := i
		var ids []string
		for j < len(refs) && refs[j].Topic == refs[i].Topic {
			ids = append(ids, fmt.Sprint(refs[j].QueueID))
			j++
		}
		parts = append(parts, refs[i].Topic+"["+strings.Join(ids, ",")+"]")
		i = j
	}
	return strings.Join(parts, " ")
}

// parseDeliverAt parses --deliver-at: an RFC 3339 time, or "+DURATION"
// from now.
func parseDeliverAt(s string, now time.Time) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return time.Time{}, err
		}
		if d < 0 {
			return time.Time{}, fmt.Errorf("negative duration %v", d)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want RFC 3339 (2006-01-02T15:04:05Z) or +DURATION: %w", err)
	}
	return t, nil
}

// admin connects to --broker.
func (o *groupFlags) admin(stderr io.Writer) (*client.Admin, error) {
	if err := o.checkTarget(); err != nil {
		return nil, err
	}
	return client.NewAdmin(o.broker, o.clientOptions(stderr)...)
}
