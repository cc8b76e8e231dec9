package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// listGroupsInCluster is group list with --namesrv: every broker group's
// consumer groups, asked of its live master (else a live slave). Each
// broker's coordinator keeps its own members and lag, so a consumer group
// shows once per broker group it consumes from.
func listGroupsInCluster(cmd *cobra.Command, o *groupFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	ctx, stop := cliSignalContext(cmd.Context())
	defer stop()
	addr, opts := o.target(stderr)
	a, err := client.NewAdmin(addr, opts...)
	if err != nil {
		return err
	}
	defer a.Close()
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return err
	}
	var rows []groupSummaryJSON
	brokers := make([]protocol.BrokerRef, 0, len(ci.Brokers))
	for _, b := range ci.Brokers {
		brokers = append(brokers, b.BrokerRef)
	}
	for _, b := range groupReaders(brokers) {
		ba, err := client.NewAdmin(b.BrokerAddr, o.clientOptions(stderr)...)
		if err != nil {
			return fmt.Errorf("broker group %s (%s): %w", b.BrokerName, b.BrokerAddr, err)
		}
		groups, err := ba.ListGroups(ctx)
		ba.Close()
		if err != nil {
			return fmt.Errorf("broker group %s (%s): %w", b.BrokerName, b.BrokerAddr, err)
		}
		for _, g := range groups {
			topics := g.Topics
			if topics == nil {
				topics = []string{}
			}
			rows = append(rows, groupSummaryJSON{b.BrokerName, g.Group, g.MessageModel, g.Members, topics, g.Lag})
		}
	}
	if o.json {
		if rows == nil {
			rows = []groupSummaryJSON{}
		}
		return cliWriteJSON(stdout, groupListJSON{Groups: rows})
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no consumer groups")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BROKER GROUP\tGROUP\tMODEL\tMEMBERS\tLAG\tTOPICS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.BrokerGroup, r.Group, r.MessageModel, r.Members, r.Lag, strings.Join(r.Topics, ","))
	}
	return tw.Flush()
}

// describeGroupInCluster is group describe with --namesrv: the group as
// every broker group's live master (else a live slave) coordinates it,
// skipping the broker groups that do not know it.
func describeGroupInCluster(ctx context.Context, stderr io.Writer, o *groupFlags) ([]describedGroup, error) {
	addr, opts := o.target(stderr)
	a, err := client.NewAdmin(addr, opts...)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	brokers := make([]protocol.BrokerRef, 0, len(ci.Brokers))
	for _, b := range ci.Brokers {
		brokers = append(brokers, b.BrokerRef)
	}
	var ds []describedGroup
	for _, b := range groupReaders(brokers) {
		ba, err := client.NewAdmin(b.BrokerAddr, o.clientOptions(stderr)...)
		if err != nil {
			return nil, fmt.Errorf("broker group %s (%s): %w", b.BrokerName, b.BrokerAddr, err)
		}
		d, err := ba.DescribeGroup(ctx, o.group)
		ba.Close()
		switch {
		case errors.Is(err, client.ErrNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("broker group %s (%s): %w", b.BrokerName, b.BrokerAddr, err)
		}
		ds = append(ds, describedGroup{brokerGroup: b.BrokerName, addr: b.BrokerAddr, d: d})
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("consumer group %q: not found on any broker group of the cluster (%d live)", o.group, len(groupReaders(brokers)))
	}
	return ds, nil
}
