package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

type queryFlags struct {
	cliCommon
	topic string
	key   string
	msgID string
	max   int
	body  bool
}

func newQueryCmd() *cobra.Command {
	var o queryFlags
	cmd := &cobra.Command{
		Use:   "query (--topic T --key K | --msgid ID)",
		Short: "Find messages by key or by message id",
		Long: `Find the messages of --topic whose KEYS (any of them) or UNIQ_KEY equals --key,
or the one message with offset message id --msgid. Exits non-zero when nothing
is found.

--namesrv "a:9876;b:9876" asks one broker of every broker group instead of
one --broker (a group's live master, else its slave): the groups of --topic's
route, or every group of the cluster for --msgid without --topic, and merges
their answers (sorted by store host, queue and offset).

--json prints one JSON object as the last line of stdout:
  {count, messages: [{topic, queue_id, queue_offset, msg_id, uniq_key, keys,
   tags, body_len, body_crc, born_timestamp, store_timestamp, born_host,
   store_host, commit_log_offset, reconsume_times, properties, body?}]}
(body, as text, only with --body).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runQuery(cmd, &o) },
	}
	o.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.topic, "topic", "", "topic (required with --key)")
	f.StringVar(&o.key, "key", "", "message key or UNIQ_KEY")
	f.StringVar(&o.msgID, "msgid", "", "offset message id")
	f.IntVar(&o.max, "max", 32, "most messages to return for --key")
	f.BoolVar(&o.body, "body", false, "include the bodies")
	return cmd
}

// queryMessage is one message of query's --json output.
type queryMessage struct {
	Topic           string            `json:"topic"`
	QueueID         int32             `json:"queue_id"`
	QueueOffset     int64             `json:"queue_offset"`
	MsgID           string            `json:"msg_id"`
	UniqKey         string            `json:"uniq_key,omitempty"`
	Keys            []string          `json:"keys,omitempty"`
	Tags            string            `json:"tags,omitempty"`
	BodyLen         int               `json:"body_len"`
	BodyCRC         uint32            `json:"body_crc"`
	BornTimestamp   int64             `json:"born_timestamp"`
	StoreTimestamp  int64             `json:"store_timestamp"`
	BornHost        string            `json:"born_host"`
	StoreHost       string            `json:"store_host"`
	CommitLogOffset int64             `json:"commit_log_offset"`
	ReconsumeTimes  int32             `json:"reconsume_times"`
	Properties      map[string]string `json:"properties,omitempty"`
	Body            *string           `json:"body,omitempty"`
}

type queryReport struct {
	Count    int            `json:"count"`
	Messages []queryMessage `json:"messages"`
}

func toQueryMessage(m *protocol.MessageExt, withBody bool) queryMessage {
	q := queryMessage{
		Topic:           m.Topic,
		QueueID:         m.QueueID,
		QueueOffset:     m.QueueOffset,
		MsgID:           m.MsgID,
		UniqKey:         m.UniqKey(),
		Keys:            m.Keys(),
		Tags:            m.Tags(),
		BodyLen:         len(m.Body),
		BodyCRC:         m.BodyCRC,
		BornTimestamp:   m.BornTimestamp,
		StoreTimestamp:  m.StoreTimestamp,
		BornHost:        m.BornHost,
		StoreHost:       m.StoreHost,
		CommitLogOffset: m.CommitLogOffset,
		ReconsumeTimes:  m.ReconsumeTimes,
		Properties:      m.Properties,
	}
	if withBody {
		s := string(m.Body)
		q.Body = &s
	}
	return q
}

func (o *queryFlags) validate() error {
	if err := o.checkTarget(); err != nil {
		return err
	}
	switch {
	case o.key == "" && o.msgID == "":
		return errors.New("give --key (with --topic) or --msgid")
	case o.key != "" && o.msgID != "":
		return errors.New("give either --key or --msgid, not both")
	case o.key != "" && o.topic == "":
		return errors.New("--key needs --topic")
	case o.max < 1:
		return errors.New("--max must be at least 1")
	}
	return nil
}

func runQuery(cmd *cobra.Command, o *queryFlags) error {
	if err := o.validate(); err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	ctx, stop := cliSignalContext(cmd.Context())
	defer stop()
	var msgs []protocol.MessageExt
	var err error
	if o.onCluster() {
		msgs, err = o.findInCluster(ctx, stderr)
	} else {
		msgs, err = o.findOn(ctx, o.broker, stderr)
	}
	if err != nil {
		return err
	}
	var notFound error
	switch {
	case len(msgs) > 0:
	case o.msgID != "":
		notFound = fmt.Errorf("no message with id %s", o.msgID)
	default:
		notFound = fmt.Errorf("no message of topic %s with key %s", o.topic, o.key)
	}
	sort.Slice(msgs, func(i, j int) bool {
		a, b := &msgs[i], &msgs[j]
		if a.StoreHost != b.StoreHost {
			return a.StoreHost < b.StoreHost
		}
		if a.QueueID != b.QueueID {
			return a.QueueID < b.QueueID
		}
		return a.QueueOffset < b.QueueOffset
	})
	if o.json {
		rep := queryReport{Count: len(msgs), Messages: make([]queryMessage, 0, len(msgs))}
		for i := range msgs {
			rep.Messages = append(rep.Messages, toQueryMessage(&msgs[i], o.body))
		}
		if err := cliWriteJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		printQueryMessages(stdout, msgs, o.body)
	}
	return notFound
}

// findOn runs the query on the broker at addr; a message id it does not
// hold is no message, not an error.
func (o *queryFlags) findOn(ctx context.Context, addr string, stderr io.Writer) ([]protocol.MessageExt, error) {
	a, err := client.NewAdmin(addr, o.clientOptions(stderr)...)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	if o.msgID == "" {
		return a.QueryByKey(ctx, o.topic, o.key, time.Time{}, time.Time{}, o.max)
	}
	m, err := a.ViewMessage(ctx, o.msgID)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return []protocol.MessageExt{m}, nil
}

// findInCluster runs the query on one broker of every group that may hold
// the messages (the groups of --topic's route, or every group for a
// message id without --topic), each group's live master or, without one,
// a live slave, and merges the answers. A broker that fails is reported
// on stderr; the query fails only when every one failed.
func (o *queryFlags) findInCluster(ctx context.Context, stderr io.Writer) ([]protocol.MessageExt, error) {
	addr, opts := o.target(stderr)
	a, err := client.NewAdmin(addr, opts...)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	var brokers []protocol.BrokerRef
	if o.topic != "" {
		rd, err := a.TopicRoute(ctx, o.topic)
		if err != nil {
			return nil, err
		}
		brokers = rd.Brokers
	} else {
		ci, err := a.ClusterInfo(ctx)
		if err != nil {
			return nil, err
		}
		for _, b := range ci.Brokers {
			brokers = append(brokers, b.BrokerRef)
		}
	}
	var addrs []string
	for _, b := range groupReaders(brokers) {
		addrs = append(addrs, b.BrokerAddr)
	}
	if len(addrs) == 0 {
		return nil, errors.New("no live broker in the cluster to ask")
	}
	var msgs []protocol.MessageExt
	var errs []error
	for _, addr := range addrs {
		found, err := o.findOn(ctx, addr, stderr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			fmt.Fprintf(stderr, "wharf: warning: query on %s: %v\n", addr, err)
			continue
		}
		for _, m := range found {
			// A broker asked for another's message id reads its own log
			// at that offset: only the message with that id counts.
			if o.msgID == "" || m.MsgID == "" || strings.EqualFold(m.MsgID, o.msgID) {
				msgs = append(msgs, m)
			}
		}
	}
	if len(errs) == len(addrs) {
		return nil, fmt.Errorf("query failed on every broker: %w", errors.Join(errs...))
	}
	return msgs, nil
}

// groupReaders picks one broker per group of brokers to read from: its
// live master, else its live slave of the lowest brokerId. Groups sorted.
func groupReaders(brokers []protocol.BrokerRef) []protocol.BrokerRef {
	pick := map[string]protocol.BrokerRef{}
	for _, b := range brokers {
		if !b.Alive || b.BrokerAddr == "" {
			continue
		}
		cur, ok := pick[b.BrokerName]
		if !ok || b.BrokerID < cur.BrokerID {
			pick[b.BrokerName] = b
		}
	}
	groups := make([]string, 0, len(pick))
	for g := range pick {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	refs := make([]protocol.BrokerRef, 0, len(groups))
	for _, g := range groups {
		refs = append(refs, pick[g])
	}
	return refs
}

func printQueryMessages(w io.Writer, msgs []protocol.MessageExt, withBody bool) {
	if len(msgs) == 0 {
		fmt.Fprintln(w, "no messages found")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tOFFSET\tMSG ID\tKEYS\tTAGS\tSTORED\tBODY")
	for i := range msgs {
		m := &msgs[i]
		keys := strings.Join(m.Keys(), ",")
		if keys == "" {
			keys = "-"
		}
		tags := m.Tags()
		if tags == "" {
			tags = "-"
		}
		body := fmt.Sprintf("%d bytes", len(m.Body))
		if withBody {
			body = queryPreview(m.Body, 64)
		}
		stored := time.UnixMilli(m.StoreTimestamp).Format("2006-01-02 15:04:05.000")
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", m.QueueID, m.QueueOffset, m.MsgID, keys, tags, stored, body)
	}
	tw.Flush()
}

// queryPreview returns up to n bytes of body as quoted text.
func queryPreview(body []byte, n int) string {
	b := body
	cut := len(b) > n
	if cut {
		b = b[:n]
	}
	s := string(b)
	if !utf8.ValidString(s) {
		return fmt.Sprintf("%d bytes (binary)", len(body))
	}
	q := fmt.Sprintf("%q", s)
	if cut {
		q += "..."
	}
	return q
}
