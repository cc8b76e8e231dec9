package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

// cliDefaultCluster is the cluster topic create --namesrv creates in when
// --cluster is not given: the brokers' default brokerClusterName.
const cliDefaultCluster = "DefaultCluster"

// runTopicChangeInCluster is topic create, update and delete with
// --namesrv: create and update put the topic on every live master of
// --cluster (UPDATE_AND_CREATE_TOPIC, so either may be repeated after a
// partial failure); delete removes it from every live master hosting it
// and then from every name server's routes.
func runTopicChangeInCluster(cmd *cobra.Command, action string, o *topicFlags) error {
	f := cmd.Flags()
	if action != "delete" && (f.Changed("read-queues") || f.Changed("write-queues") || f.Changed("perm")) {
		return errors.New("--namesrv creates --queues read and write queues with perm 6 on every master: --read-queues, --write-queues and --perm need --broker")
	}
	if action != "delete" && o.queues < 1 {
		return fmt.Errorf("--queues must be at least 1, got %d", o.queues)
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	ctx, stop := cliSignalContext(cmd.Context())
	defer stop()
	addr, opts := o.target(stderr)
	a, err := client.NewAdmin(addr, opts...)
	if err != nil {
		return err
	}
	defer a.Close()
	cluster := o.cluster
	var masters []string
	if action == "delete" {
		masters, err = deleteTopicInCluster(ctx, a, o, stderr)
	} else {
		if cluster == "" {
			cluster = cliDefaultCluster
		}
		masters, err = a.CreateTopicInCluster(ctx, cluster, o.topic, o.queues)
	}
	if err != nil {
		if len(masters) > 0 {
			fmt.Fprintf(stderr, "wharf: done on %s before the error\n", strings.Join(masters, ", "))
		}
		return fmt.Errorf("topic %s %s: %w", action, o.topic, err)
	}
	if o.json {
		out := map[string]any{"ok": true, "action": action, "topic": o.topic, "cluster": cluster, "masters": masters}
		if action != "delete" {
			out["read_queue_nums"], out["write_queue_nums"], out["perm"] = o.queues, o.queues, protocol.PermRead|protocol.PermWrite
		}
		return cliWriteJSON(stdout, out)
	}
	if action == "delete" {
		fmt.Fprintf(stdout, "deleted topic %s on %d masters (%s) and in the name servers\n", o.topic, len(masters), strings.Join(masters, ", "))
		return nil
	}
	fmt.Fprintf(stdout, "%sd topic %s in cluster %s: %d queues on each of %d masters (%s)\n",
		action, o.topic, cluster, o.queues, len(masters), strings.Join(masters, ", "))
	return nil
}

// deleteTopicInCluster deletes o.topic on every live master of its route
// (of --cluster's groups only, if given; a master that has it no more is
// fine) and then in every name server, and returns the masters.
func deleteTopicInCluster(ctx context.Context, a *client.Admin, o *topicFlags, stderr io.Writer) ([]string, error) {
	rd, err := a.TopicRoute(ctx, o.topic)
	if err != nil {
		return nil, err
	}
	var masters []string
	for _, b := range rd.Brokers {
		if b.BrokerID == protocol.MasterID && b.Alive && b.BrokerRole != client.RoleSlave && (o.cluster == "" || b.ClusterName == o.cluster) {
			masters = append(masters, b.BrokerAddr)
		}
	}
	sort.Strings(masters)
	var done []string
	for _, addr := range masters {
		if err := deleteTopicOn(ctx, addr, o, stderr); err != nil {
			return done, fmt.Errorf("master %s: %w", addr, err)
		}
		done = append(done, addr)
	}
	return done, a.DeleteTopicInNameServers(ctx, o.topic, o.cluster)
}

func deleteTopicOn(ctx context.Context, addr string, o *topicFlags, stderr io.Writer) error {
	a, err := client.NewAdmin(addr, o.clientOptions(stderr)...)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.DeleteTopic(ctx, o.topic); err != nil && !errors.Is(err, client.ErrTopicNotExist) {
		return err
	}
	return nil
}

// listTopicsInCluster is topic list with --namesrv: the topics a name
// server has routes for.
func listTopicsInCluster(cmd *cobra.Command, o *topicFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	ctx, stop := cliSignalContext(cmd.Context())
	defer stop()
	addr, opts := o.target(stderr)
	a, err := client.NewAdmin(addr, opts...)
	if err != nil {
		return err
	}
	defer a.Close()
	names, err := a.NameServerTopics(ctx)
	if err != nil {
		return err
	}
	if o.json {
		type topicName struct {
			Topic string `json:"topic"`
		}
		out := struct {
			Topics []topicName `json:"topics"`
		}{Topics: make([]topicName, 0, len(names))}
		for _, n := range names {
			out.Topics = append(out.Topics, topicName{n})
		}
		return cliWriteJSON(stdout, out)
	}
	if len(names) == 0 {
		fmt.Fprintln(stdout, "no topics")
		return nil
	}
	for _, n := range names {
		fmt.Fprintln(stdout, n)
	}
	return nil
}
