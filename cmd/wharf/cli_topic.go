package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

type topicFlags struct {
	cliCommon
	topic       string
	queues      int32
	readQueues  int32
	writeQueues int32
	perm        int32
	cluster     string
}

// topicJSON is a topic config in topic's --json output.
type topicJSON struct {
	Topic          string `json:"topic"`
	ReadQueueNums  int32  `json:"read_queue_nums"`
	WriteQueueNums int32  `json:"write_queue_nums"`
	Perm           int32  `json:"perm"`
}

func newTopicCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, update, list and delete topics",
		Long: `Manage the topics of a broker.

  wharf topic create --topic T [--queues 8] [--perm 6]
  wharf topic update --topic T [--queues N | --read-queues R --write-queues W] [--perm P]
      (update changes only the settings given; a missing topic is created)
  wharf topic list
  wharf topic delete --topic T

perm bits: 4 read, 2 write, 1 inherit (6 = read+write).

With --namesrv "a:9876;b:9876" instead of --broker, on a cluster:
  wharf topic create --namesrv ADDR [--cluster C] --topic T [--queues 8]
      (N read and write queues on every live master of cluster C, default
      DefaultCluster; update does the same; an existing topic is updated)
  wharf topic delete --namesrv ADDR --topic T [--cluster C]
      (on every live master of T's route, then in every name server)
  wharf topic list --namesrv ADDR    (the topics the routes have)
  wharf topic route --namesrv ADDR --topic T

--json prints one JSON object as the last line of stdout: for list
{topics: [{topic, read_queue_nums, write_queue_nums, perm}]} ({topics:
[{topic}]} with --namesrv), otherwise {ok, action, topic, ...config}, with
--namesrv also {cluster, masters: [address]}.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTopicSubcommand("create", "Create a topic (fails if it exists)", true),
		newTopicSubcommand("update", "Create a topic or replace its configuration", true),
		newTopicSubcommand("delete", "Delete a topic", false),
		newTopicListCmd())
	return cmd
}

func newTopicSubcommand(action, short string, config bool) *cobra.Command {
	var o topicFlags
	cmd := &cobra.Command{
		Use:   action + " --topic T",
		Short: short,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runTopicChange(cmd, action, &o) },
	}
	o.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.topic, "topic", "", "topic name (required)")
	f.StringVar(&o.cluster, "cluster", "", "with --namesrv: the cluster whose masters get the change (create, update: "+cliDefaultCluster+"; delete: every cluster)")
	if config {
		f.Int32Var(&o.queues, "queues", 8, "read and write queue count")
		f.Int32Var(&o.readQueues, "read-queues", 0, "read queue count (overrides --queues)")
		f.Int32Var(&o.writeQueues, "write-queues", 0, "write queue count (overrides --queues)")
		f.Int32Var(&o.perm, "perm", protocol.PermRead|protocol.PermWrite, "permission bits: 4 read, 2 write, 1 inherit")
	}
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// config builds the topic config from base (the current config for update,
// else the defaults) and the flags given.
func (o *topicFlags) config(cmd *cobra.Command, base protocol.TopicConfig) (protocol.TopicConfig, error) {
	tc := base
	tc.Topic = o.topic
	f := cmd.Flags()
	if f.Changed("queues") || tc.ReadQueueNums == 0 {
		tc.ReadQueueNums, tc.WriteQueueNums = o.queues, o.queues
	}
	if f.Changed("read-queues") {
		tc.ReadQueueNums = o.readQueues
	}
	if f.Changed("write-queues") {
		tc.WriteQueueNums = o.writeQueues
	}
	if f.Changed("perm") || tc.Perm == 0 {
		tc.Perm = o.perm
	}
	switch {
	case tc.ReadQueueNums < 1 || tc.WriteQueueNums < 1:
		return tc, fmt.Errorf("queue counts must be at least 1 (read %d, write %d)", tc.ReadQueueNums, tc.WriteQueueNums)
	case tc.Perm < 0 || tc.Perm > 7:
		return tc, fmt.Errorf("--perm must be in 0..7, got %d", tc.Perm)
	}
	return tc, nil
}

func runTopicChange(cmd *cobra.Command, action string, o *topicFlags) error {
	if err := protocol.ValidateTopic(o.topic); err != nil {
		return fmt.Errorf("--topic: %w", err)
	}
	if err := o.checkTarget(); err != nil {
		return err
	}
	if o.onCluster() {
		return runTopicChangeInCluster(cmd, action, o)
	}
	if cmd.Flags().Changed("cluster") {
		return errors.New("--cluster needs --namesrv")
	}
	var tc protocol.TopicConfig
	if action == "create" {
		var err error
		if tc, err = o.config(cmd, protocol.TopicConfig{}); err != nil {
			return err
		}
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	ctx, stop := cliSignalContext(cmd.Context())
	defer stop()
	a, err := client.NewAdmin(o.broker, o.clientOptions(stderr)...)
	if err != nil {
		return err
	}
	defer a.Close()
	if action == "update" { // change only what the flags say
		base, err := a.GetTopic(ctx, o.topic)
		if err != nil && !errors.Is(err, client.ErrTopicNotExist) {
			return err
		}
		if tc, err = o.config(cmd, base); err != nil {
			return err
		}
	}
	switch action {
	case "create":
		err = a.CreateTopic(ctx, tc)
	case "update":
		err = a.UpdateTopic(ctx, tc)
	case "delete":
		err = a.DeleteTopic(ctx, o.topic)
	default:
		err = errors.New("unknown topic action " + action)
	}
	if err != nil {
		return fmt.Errorf("topic %s %s: %w", action, o.topic, err)
	}
	if o.json {
		out := map[string]any{"ok": true, "action": action, "topic": o.topic}
		if action != "delete" {
			out["read_queue_nums"], out["write_queue_nums"], out["perm"] = tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm
		}
		return cliWriteJSON(stdout, out)
	}
	switch action {
	case "delete":
		fmt.Fprintf(stdout, "deleted topic %s\n", o.topic)
	default:
		fmt.Fprintf(stdout, "%sd topic %s: %d read queues, %d write queues, perm %s\n",
			action, o.topic, tc.ReadQueueNums, tc.WriteQueueNums, topicPermString(tc.Perm))
	}
	return nil
}

func newTopicListCmd() *cobra.Command {
	var o topicFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the broker's topics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkTarget(); err != nil {
				return err
			}
			if o.onCluster() {
				return listTopicsInCluster(cmd, &o)
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, stop := cliSignalContext(cmd.Context())
			defer stop()
			a, err := client.NewAdmin(o.broker, o.clientOptions(stderr)...)
			if err != nil {
				return err
			}
			defer a.Close()
			topics, err := a.ListTopics(ctx)
			if err != nil {
				return err
			}
			sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
			if o.json {
				out := struct {
					Topics []topicJSON `json:"topics"`
				}{Topics: make([]topicJSON, 0, len(topics))}
				for _, t := range topics {
					out.Topics = append(out.Topics, topicJSON{t.Topic, t.ReadQueueNums, t.WriteQueueNums, t.Perm})
				}
				return cliWriteJSON(stdout, out)
			}
			printTopics(stdout, topics)
			return nil
		},
	}
	o.register(cmd)
	return cmd
}

func printTopics(w io.Writer, topics []protocol.TopicConfig) {
	if len(topics) == 0 {
		fmt.Fprintln(w, "no topics")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tREAD QUEUES\tWRITE QUEUES\tPERM")
	for _, t := range topics {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", t.Topic, t.ReadQueueNums, t.WriteQueueNums, topicPermString(t.Perm))
	}
	tw.Flush()
}

// topicPermString renders perm bits as RocketMQ does in its tools: "RW-".
func topicPermString(p int32) string {
	b := []byte("---")
	if p&protocol.PermRead != 0 {
		b[0] = 'R'
	}
	if p&protocol.PermWrite != 0 {
		b[1] = 'W'
	}
	if p&protocol.PermInherit != 0 {
		b[2] = 'X'
	}
	return fmt.Sprintf("%s (%d)", b, p)
}
