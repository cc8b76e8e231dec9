package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
)

// roleJSON is `wharf broker role --json`: the role the broker had, and its
// status once the new one is in force.
type roleJSON struct {
	PreviousRole string `json:"previous_role"`
	statusJSON
}

// newRoleCmd is `wharf broker role`.
func newRoleCmd() *cobra.Command {
	var broker, set, master string
	var brokerID int64
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "role",
		Short: "Make a running broker a master, or a slave of a given master",
		Long: `Change a running broker's role without a restart.

  wharf broker role --broker ADDR --set ASYNC_MASTER|SYNC_MASTER
  wharf broker role --broker ADDR --set SLAVE --master HOST:HAPORT [--broker-id N]

--master is the new master's haListenPort (listenPort+1 by default). A slave
reports --broker-id to its master (default: its own id, or 1 for a master
becoming a slave). A demoted master answers sends waiting for replication or
flush with FLUSH_SLAVE_TIMEOUT or FLUSH_DISK_TIMEOUT and later sends with
NOT_MASTER. A slave whose log is not a prefix of the new master's is refused
by it, moments after the change: 'wharf broker status' then says why on its
replication line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			role, err := roleFlags(set, master, brokerID, cmd.Flags().Changed("broker-id"))
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			adm, err := client.NewAdmin(broker, client.WithTimeout(timeout))
			if err != nil {
				return err
			}
			defer adm.Close()
			before, err := adm.RuntimeInfo(ctx)
			if err != nil {
				return fmt.Errorf("broker %s: %w", broker, err)
			}
			if err := adm.UpdateBrokerRole(ctx, role, master, brokerID); err != nil {
				return fmt.Errorf("broker %s: set role %s: %w", broker, role, err)
			}
			info, err := adm.RuntimeInfo(ctx)
			if err != nil {
				return fmt.Errorf("broker %s: role %s set, but reading its status: %w", broker, role, err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				b, _ := json.Marshal(roleJSON{PreviousRole: before.BrokerRole, statusJSON: statusOf(info)})
				fmt.Fprintln(out, string(b))
				return nil
			}
			what := info.BrokerRole
			if master != "" {
				what += " of " + master
			}
			fmt.Fprintf(out, "broker %s: %s -> %s\n\n", broker, before.BrokerRole, what)
			printStatus(out, statusOf(info))
			return nil
		},
	}
	cmd.Flags().StringVar(&broker, "broker", "127.0.0.1:10911", "broker address")
	cmd.Flags().StringVar(&set, "set", "", "the new role: ASYNC_MASTER, SYNC_MASTER or SLAVE (required)")
	cmd.Flags().StringVar(&master, "master", "", "with --set SLAVE: the new master's host:haListenPort")
	cmd.Flags().Int64Var(&brokerID, "broker-id", 0, "with --set SLAVE: the brokerId to report to the master (> 0)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "request timeout")
	return cmd
}

// roleFlags checks the flags of `wharf broker role` and returns the role.
func roleFlags(set, master string, brokerID int64, idSet bool) (string, error) {
	role := strings.ToUpper(strings.TrimSpace(set))
	switch role {
	case client.RoleAsyncMaster, client.RoleSyncMaster:
		if master != "" {
			return "", fmt.Errorf("--master is only for --set SLAVE: a %s has no master", role)
		}
		if idSet {
			return "", fmt.Errorf("--broker-id is only for --set SLAVE: a %s has brokerId 0", role)
		}
	case client.RoleSlave:
		if master == "" {
			return "", fmt.Errorf("--set SLAVE needs --master HOST:PORT, the new master's haListenPort")
		}
		if idSet && brokerID <= 0 {
			return "", fmt.Errorf("--broker-id %d: a slave's brokerId is > 0", brokerID)
		}
	case "":
		return "", fmt.Errorf("--set is required: ASYNC_MASTER, SYNC_MASTER or SLAVE")
	default:
		return "", fmt.Errorf("--set %q: unknown role; want ASYNC_MASTER, SYNC_MASTER or SLAVE", set)
	}
	return role, nil
}
