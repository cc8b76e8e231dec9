package dashboard

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wharfmq/wharf/client"
	"github.com/wharfmq/wharf/protocol"
)

func (s *Server) apiDeleteTopic(w http.ResponseWriter, r *http.Request) {
	if !mutating(w, r) {
		return
	}
	topic := r.PathValue("topic")
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	cluster, err := s.cluster(ctx, r.URL.Query().Get("cluster"))
	if err != nil {
		writeJSON(w, http.StatusBadGateway, mutationJSON{Topic: topic, Brokers: []string{}, Error: err.Error()})
		return
	}
	ci, err := s.pool.clusterInfo(ctx)
	var done []string
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, b := range ci.Brokers {
		if b.ClusterName != cluster || !b.Alive || b.BrokerID != protocol.MasterID {
			continue
		}
		a, err := s.pool.broker(b.BrokerAddr)
		if err == nil {
			err = a.DeleteTopic(ctx, topic)
			s.pool.failed(b.BrokerAddr, err)
		}
		if err != nil && !errors.Is(err, client.ErrTopicNotExist) {
			errs = append(errs, fmt.Errorf("master %s: %w", b.BrokerAddr, err))
			continue
		}
		done = append(done, b.BrokerAddr)
	}
	// The routes go after the brokers' copies, or a broker's next
	// registration would bring the topic back. A name server without the
	// route (the broker had not registered the topic yet) is no failure.
	if len(errs) == 0 {
		if ns, err := s.pool.names(); err != nil {
			errs = append(errs, err)
		} else if err := ns.DeleteTopicInNameServers(ctx, topic, cluster); err != nil && !errors.Is(err, client.ErrTopicNotExist) {
			errs = append(errs, err)
		}
	}
	err = errors.Join(errs...)
	status := http.StatusOK
	if err != nil {
		status = http.StatusBadGateway
	}
	s.log.Info("dashboard: delete topic", "topic", topic, "cluster", cluster, "masters", done, "err", err)
	writeJSON(w, status, mutationJSON{Topic: topic, Cluster: cluster, Brokers: nonNil(done), Error: errString(err)})
}

// messageJSON is a message found by key or id. The body is text when it
// is printable UTF-8 and hex otherwise, cut at previewBytes; the page
// shows either as text, never as markup.
type messageJSON struct {
	MsgID          string            `json:"msgId"`
	Topic          string            `json:"topic"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	StoreHost      string            `json:"storeHost"`
	BornHost       string            `json:"bornHost"`
	BornMs         int64             `json:"bornTimestamp"`
	StoreMs        int64             `json:"storeTimestamp"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties"`
	BodySize       int               `json:"bodySize"`
	BodyText       *string           `json:"bodyText,omitempty"`
	BodyHex        string            `json:"bodyHex,omitempty"`
	Truncated      bool              `json:"truncated"`
}

const previewBytes = 4096

func toMessageJSON(m protocol.MessageExt) messageJSON {
	body := m.Body
	mj := messageJSON{MsgID: m.MsgID, Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset, StoreHost: m.StoreHost,
		BornHost: m.BornHost, BornMs: m.BornTimestamp, StoreMs: m.StoreTimestamp, ReconsumeTimes: m.ReconsumeTimes,
		Properties: map[string]string{}, BodySize: len(body)}
	for k, v := range m.PropertyMap() {
		mj.Properties[k] = v
	}
	if len(body) > previewBytes {
		body, mj.Truncated = body[:previewBytes], true
	}
	if printable(body, mj.Truncated) {
		t := string(body)
		mj.BodyText = &t
	} else {
		mj.BodyHex = hex.EncodeToString(body)
	}
	return mj
}

// printable: valid UTF-8 (but for a rune cut at the end of a preview)
// with no control characters other than whitespace.
func printable(b []byte, cut bool) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return cut && len(b) < utf8.UTFMax && !utf8.FullRune(b)
		}
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return false
		}
		b = b[n:]
	}
	return true
}

// apiMessage finds messages by id (?id=) or by topic and key
// (?topic=&key=), asking every broker group's reader for a key and, for
// an id, the broker the id names and then the others (a slave holds the
// same log bytes at the same offsets).
func (s *Server) apiMessage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, topic, key := q.Get("id"), q.Get("topic"), q.Get("key")
	if id == "" && (topic == "" || key == "") {
		writeJSON(w, http.StatusBadRequest, apiError{"want ?id=MSGID or ?topic=TOPIC&key=KEY"})
		return
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	ci, err := s.pool.clusterInfo(ctx)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError{err.Error()})
		return
	}
	var msgs []protocol.MessageExt
	var errs []error
	if id != "" {
		msgs, errs = s.byID(r, ci, id)
	} else {
		for _, b := range readers(ci.Brokers) {
			a, err := s.pool.broker(b.BrokerAddr)
			var found []protocol.MessageExt
			if err == nil {
				found, err = a.QueryByKey(ctx, topic, key, zeroTime, zeroTime, 32)
				s.pool.failed(b.BrokerAddr, err)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("broker group %s (%s): %w", b.BrokerName, b.BrokerAddr, err))
			}
			msgs = append(msgs, found...)
		}
	}
	out := struct {
		Messages []messageJSON `json:"messages"`
		Errors   []string      `json:"errors"`
	}{Messages: []messageJSON{}, Errors: []string{}}
	for _, m := range msgs {
		out.Messages = append(out.Messages, toMessageJSON(m))
	}
	for _, e := range errs {
		out.Errors = append(out.Errors, e.Error())
	}
	writeJSON(w, http.StatusOK, out)
}

var zeroTime time.Time

// byID asks the broker the id names, then every other live broker, for
// the message; the first answer wins.
func (s *Server) byID(r *http.Request, ci protocol.ClusterInfo, id string) ([]protocol.MessageExt, []error) {
	host, _, err := protocol.ParseOffsetMsgID(id)
	if err != nil {
		return nil, []error{fmt.Errorf("message id %q: %w", id, err)}
	}
	order := []string{host.String()}
	for _, b := range ci.Brokers {
		if b.Alive && b.BrokerAddr != order[0] {
			order = append(order, b.BrokerAddr)
		}
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	var errs []error
	for _, addr := range order {
		a, err := s.pool.broker(addr)
		if err == nil {
			var m protocol.MessageExt
			m, err = a.ViewMessage(ctx, id)
			s.pool.failed(addr, err)
			if err == nil {
				return []protocol.MessageExt{m}, nil
			}
		}
		if !errors.Is(err, client.ErrNotFound) {
			errs = append(errs, fmt.Errorf("broker %s: %w", addr, err))
		}
	}
	return nil, errs
}
