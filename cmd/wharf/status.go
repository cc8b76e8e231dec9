package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// statusJSON is `wharf broker status --json`.
type statusJSON struct {
	BrokerName      string        `json:"broker_name"`
	BrokerID        int64         `json:"broker_id"`
	Role            string        `json:"role"`
	MinOffset       int64         `json:"min_offset"`
	MaxOffset       int64         `json:"max_offset"`
	FlushedOffset   int64         `json:"flushed_offset"`
	Topics          int32         `json:"topics"`
	Connections     int32         `json:"connections"`
	MsgPutTotal     int64         `json:"msg_put_total"`
	MsgGetTotal     int64         `json:"msg_get_total"`
	HAStatus        string        `json:"ha_status,omitempty"`
	MasterMaxOffset int64         `json:"master_max_offset,omitempty"`
	LagBytes        *int64        `json:"lag_bytes,omitempty"`
	Slaves          []slaveStatus `json:"slaves"`
	// NameServers is the registration with each name server ("" when
	// standalone).
	NameServers string `json:"name_servers,omitempty"`
}

type slaveStatus struct {
	Address     string `json:"address"`
	BrokerID    int64  `json:"broker_id"`
	AckedOffset int64  `json:"acked_offset"`
	LagBytes    int64  `json:"lag_bytes"`
	InSync      bool   `json:"in_sync"`
}

// newStatusCmd is `wharf broker status`.
func newStatusCmd() *cobra.Command {
	var broker string
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a broker's role, offsets and replication",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			adm, err := client.NewAdmin(broker, client.WithTimeout(timeout))
			if err != nil {
				return err
			}
			defer adm.Close()
			info, err := adm.RuntimeInfo(ctx)
			if err != nil {
				return fmt.Errorf("broker %s: %w", broker, err)
			}
			st := statusOf(info)
			if asJSON {
				b, _ := json.Marshal(st)
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().StringVar(&broker, "broker", "127.0.0.1:10911", "broker address")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "request timeout")
	return cmd
}

// statusOf is what `wharf broker status` reports of a broker's runtime
// information.
func statusOf(info protocol.BrokerRuntimeInfo) statusJSON {
	st := statusJSON{BrokerName: info.BrokerName, BrokerID: info.BrokerID, Role: info.BrokerRole,
		MinOffset: info.CommitLogMinOffset, MaxOffset: info.CommitLogMaxOffset, FlushedOffset: info.FlushedOffset,
		Topics: info.TopicCount, Connections: info.ConnectionCount, MsgPutTotal: info.MsgPutTotal, MsgGetTotal: info.MsgGetTotal,
		HAStatus: info.HAStatus, MasterMaxOffset: info.MasterMaxOffset, Slaves: []slaveStatus{}, NameServers: info.Extra["namesrv"]}
	if info.BrokerRole == client.RoleSlave && info.MasterMaxOffset > 0 {
		lag := max(0, info.MasterMaxOffset-info.CommitLogMaxOffset)
		st.LagBytes = &lag
	}
	for _, s := range info.Slaves {
		st.Slaves = append(st.Slaves, slaveStatus{Address: s.Address, BrokerID: s.BrokerID, AckedOffset: s.AckedOffset, LagBytes: s.LagBytes, InSync: s.InSync})
	}
	return st
}

// printStatus prints st as tables for a person.
func printStatus(out io.Writer, st statusJSON) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "broker\t%s (brokerId %d)\n", st.BrokerName, st.BrokerID)
	fmt.Fprintf(tw, "role\t%s\n", st.Role)
	fmt.Fprintf(tw, "commitlog\t[%d, %d), flushed %d\n", st.MinOffset, st.MaxOffset, st.FlushedOffset)
	fmt.Fprintf(tw, "topics / connections\t%d / %d\n", st.Topics, st.Connections)
	fmt.Fprintf(tw, "messages put / got\t%d / %d\n", st.MsgPutTotal, st.MsgGetTotal)
	if st.NameServers != "" {
		fmt.Fprintf(tw, "name servers\t%s\n", st.NameServers)
	}
	if st.HAStatus != "" {
		fmt.Fprintf(tw, "replication\t%s\n", st.HAStatus)
	}
	if st.LagBytes != nil {
		fmt.Fprintf(tw, "lag behind master\t%d bytes (master at %d)\n", *st.LagBytes, st.MasterMaxOffset)
	}
	tw.Flush()
	if st.Role == client.RoleSlave {
		return
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLAVE\tBROKER ID\tACKED OFFSET\tLAG BYTES\tIN SYNC")
	for _, s := range st.Slaves {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%v\n", s.Address, s.BrokerID, s.AckedOffset, s.LagBytes, s.InSync)
	}
	if len(st.Slaves) == 0 {
		fmt.Fprintln(tw, "(no slave connected)\t\t\t\t")
	}
	tw.Flush()
}
