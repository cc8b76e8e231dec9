package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// cliDefaultController is where the controller commands ask by default.
const cliDefaultController = "127.0.0.1:9878"

func controllerClientOptions(stderr io.Writer, timeout time.Duration) []client.Option {
	return []client.Option{client.WithTimeout(timeout), client.WithDialTimeout(timeout),
		client.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))}
}

// controllerNodeJSON is one node in `controller status --json`.
type controllerNodeJSON struct {
	Address    string `json:"address"`
	Leader     bool   `json:"leader"`
	LeaderAddr string `json:"leader_addr,omitempty"`
	Term       int64  `json:"term"`
	Groups     int    `json:"groups"`
	Error      string `json:"error,omitempty"`
}

func newControllerStatusCmd() *cobra.Command {
	var addrs string
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show which controller node leads",
		Long: `Ask every controller node of --controllerAddr (GET_METADATA_INFO) whether
it leads, whom it takes for the leader and how many broker groups it holds.
--json prints {leader, nodes: [{address, leader, leader_addr, term, groups, error}]}
(leader: the address of the node that says it leads, "" if none).
Exits non-zero if no node answers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := cliSignalContext(cmd.Context())
			defer stop()
			nodes, err := client.ControllerNodes(ctx, addrs, controllerClientOptions(cmd.ErrOrStderr(), timeout)...)
			if err != nil {
				return err
			}
			return printControllerStatus(cmd.OutOrStdout(), nodes, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addrs, "controllerAddr", cliDefaultController, `controller addresses, ";"-separated`)
	f.BoolVar(&asJSON, "json", false, "print one JSON object as the last line of stdout")
	f.DurationVar(&timeout, "timeout", 3*time.Second, "timeout of each request")
	return cmd
}

func printControllerStatus(w io.Writer, nodes []client.ControllerNode, asJSON bool) error {
	out := struct {
		Leader string               `json:"leader"`
		Nodes  []controllerNodeJSON `json:"nodes"`
	}{Nodes: []controllerNodeJSON{}}
	answered := 0
	for _, n := range nodes {
		j := controllerNodeJSON{Address: n.Addr, Leader: n.IsLeader, LeaderAddr: n.LeaderAddr, Term: n.Term, Groups: len(n.Groups)}
		if n.Err != nil {
			j.Error = n.Err.Error()
		} else {
			answered++
		}
		if n.IsLeader && out.Leader == "" {
			out.Leader = n.Addr
		}
		out.Nodes = append(out.Nodes, j)
	}
	if asJSON {
		if err := cliWriteJSON(w, out); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ADDRESS\tROLE\tTERM\tLEADER\tGROUPS\tERROR")
		for _, n := range out.Nodes {
			role := "follower"
			switch {
			case n.Error != "":
				role = "unreachable"
			case n.Leader:
				role = "leader"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", n.Address, role, n.Term, n.LeaderAddr, n.Groups, n.Error)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if answered == 0 {
		return fmt.Errorf("no controller node answered")
	}
	return nil
}

// controllerGroupJSON is one broker group in `cluster list --controllerAddr --json`.
type controllerGroupJSON struct {
	Cluster           string                  `json:"cluster"`
	Group             string                  `json:"group"`
	MasterID          int64                   `json:"master_id"`
	MasterAddr        string                  `json:"master_addr,omitempty"`
	MasterEpoch       int32                   `json:"master_epoch"`
	SyncStateSet      []int64                 `json:"sync_state_set"`
	SyncStateSetEpoch int32                   `json:"sync_state_set_epoch"`
	Replicas          []controllerReplicaJSON `json:"replicas"`
}

type controllerReplicaJSON struct {
	BrokerID  int64  `json:"broker_id"`
	Address   string `json:"address"`
	HAAddress string `json:"ha_address,omitempty"`
	Alive     bool   `json:"alive"`
}

// listControllerGroups is `cluster list --controllerAddr`: the broker
// groups as the controller leader holds them.
func listControllerGroups(ctx context.Context, w, stderr io.Writer, addrs string, timeout time.Duration, asJSON bool) error {
	leader, err := client.ControllerMetadata(ctx, addrs, controllerClientOptions(stderr, timeout)...)
	if err != nil {
		return err
	}
	groups := make([]controllerGroupJSON, 0, len(leader.Groups))
	for _, g := range leader.Groups {
		j := controllerGroupJSON{Cluster: g.ClusterName, Group: g.BrokerName, MasterID: g.MasterID, MasterAddr: g.MasterAddr,
			MasterEpoch: g.MasterEpoch, SyncStateSet: append([]int64{}, g.SyncStateSet...), SyncStateSetEpoch: g.SyncStateSetEpoch,
			Replicas: []controllerReplicaJSON{}}
		for _, r := range g.Replicas {
			j.Replicas = append(j.Replicas, controllerReplicaJSON{r.BrokerID, r.BrokerAddr, r.HAServerAddr, r.Alive})
		}
		groups = append(groups, j)
	}
	if asJSON {
		return cliWriteJSON(w, struct {
			Controller string                `json:"controller"`
			Groups     []controllerGroupJSON `json:"groups"`
		}{leader.Addr, groups})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tGROUP\tMASTER\tMASTER_ADDR\tEPOCH\tSYNC_STATE_SET\tSET_EPOCH\tALIVE")
	for _, g := range groups {
		var alive []string
		for _, r := range g.Replicas {
			if r.Alive {
				alive = append(alive, strconv.FormatInt(r.BrokerID, 10))
			}
		}
		master := "-"
		if g.MasterID != protocol.NoBroker {
			master = strconv.FormatInt(g.MasterID, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d/%d [%s]\n", g.Cluster, g.Group, master, g.MasterAddr, g.MasterEpoch,
			idList(g.SyncStateSet), g.SyncStateSetEpoch, len(alive), len(g.Replicas), strings.Join(alive, ","))
	}
	return tw.Flush()
}

func idList(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return "{" + strings.Join(s, ",") + "}"
}
