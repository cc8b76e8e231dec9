package main

import (
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
	Generation       int64             `json:"generation"`
	Members          []groupMemberJSON `json:"members"`
	Queues           []groupQueueJSON  `json:"queues"`
	Lag              int64             `json:"lag"`
}

type groupMemberJSON struct {
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
  wharf group describe --group G [--broker ADDR] [--json]

With --namesrv, list asks every broker group of the cluster (its master,
else a slave) and shows each consumer group once per broker group, with
that broker's members and lag (each broker coordinates its own queues);
--json adds broker_group. describe reads one broker: give --broker.

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
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, stop := cliSignalContext(cmd.Context())
			defer stop()
			a, err := o.admin(stderr)
			if err != nil {
				return err
			}
			defer a.Close()
			d, err := a.DescribeGroup(ctx, o.group)
			if err != nil {
				if errors.Is(err, client.ErrNotFound) {
					return fmt.Errorf("consumer group %q: not found on %s", o.group, o.broker)
				}
				return err
			}
			if o.json {
				return cliWriteJSON(stdout, groupDescriptionJSON(d))
			}
			printGroupDescription(stdout, d)
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&o.group, "group", "", "consumer group (required)")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func groupDescriptionJSON(d protocol.ConsumerGroupDescription) groupDescribeJSON {
	out := groupDescribeJSON{
		Group: d.Group, MessageModel: d.MessageModel, AllocateStrategy: d.AllocateStrategy,
		ConsumeOrderly: d.ConsumeOrderly, Generation: d.Generation,
		Members: make([]groupMemberJSON, 0, len(d.Members)), Queues: make([]groupQueueJSON, 0, len(d.Queues)),
	}
	for _, m := range d.Members {
		mj := groupMemberJSON{ClientID: m.ClientID, Address: m.Address, LastHeartbeatMs: m.LastHeartbeatMs,
			Queues: make([]queueRefJSON, 0, len(m.Queues))}
		for _, q := range m.Queues {
			mj.Queues = append(mj.Queues, queueRefJSON{q.Topic, q.QueueID})
		}
		out.Members = append(out.Members, mj)
	}
	for _, q := range d.Queues {
		out.Queues = append(out.Queues, groupQueueJSON{q.Topic, q.QueueID, q.Owner, q.Pending, q.CommittedOffset, q.MaxOffset, q.Lag})
		out.Lag += q.Lag
	}
	return out
}

func printGroupDescription(w io.Writer, d protocol.ConsumerGroupDescription) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "group\t%s\n", d.Group)
	fmt.Fprintf(tw, "model\t%s\n", d.MessageModel)
	fmt.Fprintf(tw, "allocate\t%s\n", d.AllocateStrategy)
	fmt.Fprintf(tw, "orderly\t%v\n", d.ConsumeOrderly)
	fmt.Fprintf(tw, "generation\t%d\n", d.Generation)
	tw.Flush()

	fmt.Fprintf(w, "\nmembers (%d)\n", len(d.Members))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT ID\tADDRESS\tLAST HEARTBEAT\tQUEUES")
	for _, m := range d.Members {
		hb := "-"
		if m.LastHeartbeatMs > 0 {
			hb = fmt.Sprintf("%.1fs ago", max(0, time.Since(time.UnixMilli(m.LastHeartbeatMs)).Seconds()))
		}
		addr := m.Address
		if addr == "" {
			addr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.ClientID, addr, hb, formatQueueRefs(m.Queues))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nqueues (%d)\n", len(d.Queues))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tQUEUE\tOWNER\tCOMMITTED\tMAX\tLAG")
	var lag int64
	for _, q := range d.Queues {
		owner := q.Owner
		if owner == "" {
			owner = "-"
		}
		if q.Pending != "" {
			owner += " -> " + q.Pending
		}
		committed := "-"
		if q.CommittedOffset >= 0 {
			committed = fmt.Sprint(q.CommittedOffset)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\n", q.Topic, q.QueueID, owner, committed, q.MaxOffset, q.Lag)
		lag += q.Lag
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntotal lag %d\n", lag)
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

// admin connects to --broker. Group commands read one broker's
// coordinator: on a cluster, ask each group's master with --broker.
func (o *groupFlags) admin(stderr io.Writer) (*client.Admin, error) {
	if err := o.checkTarget(); err != nil {
		return nil, err
	}
	if err := o.needBroker("group describe (one broker's coordinator)"); err != nil {
		return nil, err
	}
	return client.NewAdmin(o.broker, o.clientOptions(stderr)...)
}
