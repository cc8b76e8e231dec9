package netio_test

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/internal/brokertest"
	"github.com/wharfmq/wharf/internal/testwait"
	"github.com/wharfmq/wharf/netio"
	"github.com/wharfmq/wharf/protocol/remoting"
	"github.com/wharfmq/wharf/storage"
)

// rmqConn speaks raw remoting frames, as RocketMQ's clients write them.
type rmqConn struct {
	t      *testing.T
	c      net.Conn
	r      *bufio.Reader
	opaque int32
}

func dialRemoting(t *testing.T, addr string) *rmqConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rmqConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *rmqConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.c.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// send writes a request in the serialize type given, and returns its opaque.
func (c *rmqConn) send(st byte, code, flag int32, ext map[string]string, body []byte) int32 {
	c.t.Helper()
	c.opaque++
	b, err := remoting.Append(nil, &remoting.Command{Code: code, Language: remoting.LangGo, Version: 317, Opaque: c.opaque,
		Flag: flag, ExtFields: ext, Body: body, Serialize: st})
	if err != nil {
		c.t.Fatal(err)
	}
	c.write(b)
	return c.opaque
}

// read reads one frame, or returns the read error (io.EOF: closed).
func (c *rmqConn) read() (*remoting.Command, error) {
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var n [4]byte
	if _, err := io.ReadFull(c.r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > 32<<20 {
		return nil, fmt.Errorf("answer of %d bytes", size)
	}
	f := make([]byte, 4+size)
	copy(f, n[:])
	if _, err := io.ReadFull(c.r, f[4:]); err != nil {
		return nil, err
	}
	return remoting.Decode(f, remoting.Limits{MaxFrameSize: 64 << 20})
}

func (c *rmqConn) call(code int32, ext map[string]string, body []byte) *remoting.Command {
	c.t.Helper()
	op := c.send(remoting.SerializeJSON, code, 0, ext, body)
	a, err := c.read()
	if err != nil {
		c.t.Fatalf("code %d: %v", code, err)
	}
	if a.Opaque != op || !a.IsResponse() {
		c.t.Fatalf("code %d: answer %+v to opaque %d", code, a, op)
	}
	return a
}

func want(t *testing.T, a *remoting.Command, code int32, what string) {
	t.Helper()
	if a.Code != code {
		t.Fatalf("%s: code %d (%s), want %d", what, a.Code, a.Remark, code)
	}
}

// TestRemotingBroker speaks RocketMQ's frames, as the Go client writes
// them, to a real broker: sends with tags, keys and a compressed body,
// a pull of the raw records, offsets, and an unsupported code.
func TestRemotingBroker(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithRemoting())
	b.CreateTopic("demo", 2)
	c := dialRemoting(t, b.RemotingAddr())

	props := "KEYS\x01order-1\x02TAGS\x01tagA\x02UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02WAIT\x01true\x02"
	a := c.call(remoting.SendMessage, map[string]string{"producerGroup": "pg", "topic": "demo", "queueId": "1", "sysFlag": "0",
		"bornTimestamp": "1700000000000", "flag": "3", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0",
		"defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "batch": "false", "properties": props, "bname": "broker-a"}, []byte("hello"))
	want(t, a, remoting.Success, "SEND_MESSAGE")
	if a.ExtFields["queueId"] != "1" || a.ExtFields["queueOffset"] != "0" || len(a.ExtFields["msgId"]) != 32 {
		t.Fatalf("send answer fields %v", a.ExtFields)
	}
	body := make([]byte, 8000) // the clients compress bodies above 4 KiB
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	a = c.call(remoting.SendMessageV2, map[string]string{"a": "pg", "b": "demo", "e": "1", "f": "1", "g": "1700000000001",
		"h": "0", "i": "TAGS\x01tagB\x02"}, zlibbed(body))
	want(t, a, remoting.Success, "SEND_MESSAGE_V2, compressed")

	waitMax(t, c, "demo", 1, 2)
	a = c.call(remoting.PullMessage, map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "1", "queueOffset": "0",
		"maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}, nil)
	want(t, a, remoting.Success, "PULL_MESSAGE")
	recs := splitRecords(t, a.Body)
	if len(recs) != 2 || a.ExtFields["nextBeginOffset"] != "2" || a.ExtFields["maxOffset"] != "2" || a.ExtFields["minOffset"] != "0" {
		t.Fatalf("pull: %d records, fields %v", len(recs), a.ExtFields)
	}
	p := netio.ParseProperties(string(recs[0].Properties))
	if string(recs[0].Body) != "hello" || recs[0].Flag != 3 || recs[0].BornTimestamp != 1700000000000 ||
		p["TAGS"] != "tagA" || p["KEYS"] != "order-1" || p["UNIQ_KEY"] != "AC11000100002A9F0000000000000001" ||
		string(recs[0].Topic) != "demo" || recs[0].QueueID != 1 {
		t.Fatalf("first record %+v, properties %v", recs[0], p)
	}
	// RocketMQ's send header has no born host: it is the producer's end
	// of the connection, as RocketMQ's broker takes it.
	if recs[0].BornHost.String() != c.c.LocalAddr().String() {
		t.Fatalf("born host %v, the producer is at %v", recs[0].BornHost, c.c.LocalAddr())
	}
	if string(recs[1].Body) != string(body) || recs[1].SysFlag&1 != 0 || netio.ParseProperties(string(recs[1].Properties))["TAGS"] != "tagB" {
		t.Fatalf("second record: %d body bytes, sysFlag %d", len(recs[1].Body), recs[1].SysFlag)
	}

	// Tag filter, and the pull at the end of the queue.
	a = c.call(remoting.PullMessage, map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "1", "queueOffset": "0",
		"maxMsgNums": "32", "sysFlag": "4", "subscription": "tagB", "expressionType": "TAG"}, nil)
	if a.Code != remoting.Success || len(splitRecords(t, a.Body)) != 1 {
		t.Fatalf("pull tagB: code %d, %d bytes", a.Code, len(a.Body))
	}
	a = c.call(remoting.PullMessage, map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "1", "queueOffset": "2",
		"maxMsgNums": "32", "sysFlag": "0"}, nil)
	want(t, a, remoting.PullNotFound, "PULL_MESSAGE at the end")
	a = c.call(remoting.PullMessage, map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "1", "queueOffset": "99",
		"maxMsgNums": "32", "sysFlag": "0"}, nil)
	want(t, a, remoting.PullOffsetMoved, "PULL_MESSAGE past the end")

	// By key, from the index: the records as the body.
	// (The index follows the log on its own: wait for it.)
	testwait.For(t, testwait.Wall, 5*time.Second, "QUERY_MESSAGE finds the message by key", func() bool {
		a = c.call(remoting.QueryMessage, map[string]string{"topic": "demo", "key": "order-1", "maxNum": "32",
			"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}, nil)
		return a.Code == remoting.Success
	})
	if recs := splitRecords(t, a.Body); len(recs) != 1 || string(recs[0].Body) != "hello" {
		t.Fatalf("QUERY_MESSAGE: %d records", len(recs))
	}

	view(t, c, recs[0])
	longPoll(t, b.RemotingAddr(), c)
	offsets(t, c)
	a = c.call(remoting.GetAllTopicConfig, nil, nil)
	want(t, a, remoting.Success, "GET_ALL_TOPIC_CONFIG")
	if !strings.Contains(string(a.Body), `"demo":{"topicName":"demo","readQueueNums":2,"writeQueueNums":2,"perm":6}`) {
		t.Fatalf("topic configs %s", a.Body)
	}
	a = c.call(remoting.EndTransaction, map[string]string{"producerGroup": "pg"}, nil)
	want(t, a, remoting.RequestCodeNotSupported, "END_TRANSACTION")
	a = c.call(remoting.GetMaxOffset, map[string]string{"topic": "demo", "queueId": "0"}, nil)
	want(t, a, remoting.Success, "GET_MAX_OFFSET after an unsupported code, same connection")
}

func offsets(t *testing.T, c *rmqConn) {
	t.Helper()
	a := c.call(remoting.GetMaxOffset, map[string]string{"topic": "demo", "queueId": "1"}, nil)
	if a.Code != remoting.Success || a.ExtFields["offset"] != "2" {
		t.Fatalf("GET_MAX_OFFSET: %+v", a)
	}
	a = c.call(remoting.GetMinOffset, map[string]string{"topic": "demo", "queueId": "1"}, nil)
	if a.Code != remoting.Success || a.ExtFields["offset"] != "0" {
		t.Fatalf("GET_MIN_OFFSET: %+v", a)
	}
	q := map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "1"}
	want(t, c.call(remoting.QueryConsumerOffset, q, nil), remoting.QueryNotFound, "QUERY_CONSUMER_OFFSET before a commit")
	// Oneway, as the clients commit: no answer, so the query after it is
	// the next frame read.
	c.send(remoting.SerializeJSON, remoting.UpdateConsumerOffset, remoting.FlagOneway,
		map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "1", "commitOffset": "2"}, nil)
	a = c.call(remoting.QueryConsumerOffset, q, nil)
	if a.Code != remoting.Success || a.ExtFields["offset"] != "2" {
		t.Fatalf("QUERY_CONSUMER_OFFSET after the commit: %+v", a)
	}
	// The binary header too.
	op := c.send(remoting.SerializeRocketMQ, remoting.QueryConsumerOffset, 0, q, nil)
	a, err := c.read()
	if err != nil || a.Opaque != op || a.ExtFields["offset"] != "2" {
		t.Fatalf("binary QUERY_CONSUMER_OFFSET: %+v, %v", a, err)
	}
}

func splitRecords(t *testing.T, body []byte) []storage.Record {
	t.Helper()
	var out []storage.Record
	for len(body) > 0 {
		if len(body) < 4 {
			t.Fatalf("%d bytes left", len(body))
		}
		n := int(binary.BigEndian.Uint32(body))
		if n > len(body) || n < 4 {
			t.Fatalf("record of %d bytes, %d left", n, len(body))
		}
		r, err := storage.DecodeRecord(body[:n], true)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
		body = body[n:]
	}
	return out
}

// TestRemotingHostile: malformed frames get an error answer or a closed
// connection, never a crash or an allocation of what they declare; the
// broker serves the next connection.
func TestRemotingHostile(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithRemoting())
	b.CreateTopic("demo", 1)
	hdr := func(length, word uint32, rest ...byte) []byte {
		f := binary.BigEndian.AppendUint32(nil, length)
		return append(binary.BigEndian.AppendUint32(f, word), rest...)
	}
	cases := map[string][]byte{
		"length 4 GiB":                {0xff, 0xff, 0xff, 0xff},
		"length zero":                 {0, 0, 0, 0},
		"huge header length":          hdr(100, 0xFFFFFF),
		"header past the frame":       hdr(8, 100, 0, 0, 0, 0),
		"unknown serialize type":      hdr(6, 7<<24|2, '{', '}'),
		"bad JSON":                    hdr(4+11, 11, []byte(`{"code":10,`)...),
		"ext value not a string":      hdr(4+24, 24, []byte(`{"extFields":{"a":[1]}}`+" ")...),
		"binary remark too long":      hdr(4+21, 1<<24|21, 0, 10, 9, 1, 61, 0, 0, 0, 1, 0, 0, 0, 0, 0x7f, 0, 0, 0, 0, 0, 0, 0),
		"a response sent to a broker": mustAppend(t, &remoting.Command{Code: 0, Flag: remoting.FlagResponse, Opaque: 5}),
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialRemoting(t, b.RemotingAddr())
			c.write(frame)
			for {
				a, err := c.read()
				if err != nil { // closed: fine, after or without an answer
					return
				}
				if !a.IsResponse() || a.Code == remoting.Success {
					t.Fatalf("answer %+v to a malformed frame", a)
				}
			}
		})
	}
	c := dialRemoting(t, b.RemotingAddr())
	a := c.call(remoting.GetMaxOffset, map[string]string{"topic": "demo", "queueId": "0"}, nil)
	want(t, a, remoting.Success, "GET_MAX_OFFSET after the hostile connections")
	// Wrong values in well-formed frames are answered, and the connection kept.
	a = c.call(remoting.GetMaxOffset, map[string]string{"topic": "demo", "queueId": "zero"}, nil)
	want(t, a, remoting.InvalidParameter, "queueId not a number")
	a = c.call(remoting.HeartBeat, nil, []byte("{not json"))
	want(t, a, remoting.InvalidParameter, "heartbeat body not JSON")
	a = c.call(remoting.GetMaxOffset, map[string]string{"topic": "demo", "queueId": strconv.Itoa(0)}, nil)
	want(t, a, remoting.Success, "GET_MAX_OFFSET on the same connection")
}

func mustAppend(t *testing.T, c *remoting.Command) []byte {
	b, err := remoting.Append(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func zlibbed(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// longPoll: a pull with the suspend flag at the end of the queue is held,
// and answered with the message sent meanwhile on another connection.
func longPoll(t *testing.T, addr string, c *rmqConn) {
	t.Helper()
	op := c.send(remoting.SerializeJSON, remoting.PullMessage, 0, map[string]string{"consumerGroup": "cg", "topic": "demo",
		"queueId": "0", "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "2", "suspendTimeoutMillis": "20000"}, nil)
	c.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.r.Peek(1); err == nil {
		t.Fatal("a suspended pull of an empty queue was answered at once")
	}
	p := dialRemoting(t, addr)
	want(t, p.call(remoting.SendMessage, map[string]string{"topic": "demo", "queueId": "0"}, []byte("wake")), remoting.Success, "send")
	a, err := c.read()
	if err != nil || a.Opaque != op || a.Code != remoting.Success {
		t.Fatalf("held pull: %+v, %v", a, err)
	}
	if recs := splitRecords(t, a.Body); len(recs) != 1 || string(recs[0].Body) != "wake" {
		t.Fatalf("held pull: %d records", len(recs))
	}
}

// view: VIEW_MESSAGE_BY_ID by the CommitLog offset, as RocketMQ's admin
// asks (it takes the offset out of the offset message id).
func view(t *testing.T, c *rmqConn, rec storage.Record) {
	t.Helper()
	a := c.call(remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(rec.PhysicalOffset, 10)}, nil)
	want(t, a, remoting.Success, "VIEW_MESSAGE_BY_ID")
	if recs := splitRecords(t, a.Body); len(recs) != 1 || string(recs[0].Body) != string(rec.Body) {
		t.Fatalf("view: %d records", len(recs))
	}
	a = c.call(remoting.ViewMessageByID, map[string]string{"offset": "999999999"}, nil)
	if a.Code == remoting.Success {
		t.Fatal("a view past the log succeeded")
	}
}

// TestRemotingSendBack: CONSUMER_SEND_MSG_BACK as RocketMQ's consumers send
// it; a negative delay level sends the message straight to the group's
// dead-letter topic, %DLQ%group, with RETRY_TOPIC naming where it came from.
func TestRemotingSendBack(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithRemoting())
	b.CreateTopic("demo", 1)
	c := dialRemoting(t, b.RemotingAddr())
	want(t, c.call(remoting.SendMessage, map[string]string{"topic": "demo", "queueId": "0", "properties": "TAGS\x01t\x02"},
		[]byte("poison")), remoting.Success, "send")
	waitMax(t, c, "demo", 0, 1)
	a := c.call(remoting.PullMessage, map[string]string{"consumerGroup": "cg", "topic": "demo", "queueId": "0", "maxMsgNums": "1"}, nil)
	want(t, a, remoting.Success, "pull")
	rec := splitRecords(t, a.Body)[0]
	want(t, c.call(remoting.ConsumerSendMsgBack, map[string]string{"group": "cg", "offset": strconv.FormatInt(rec.PhysicalOffset, 10),
		"delayLevel": "-1", "originMsgId": "x", "originTopic": "demo", "unitMode": "false", "maxReconsumeTimes": "16"}, nil),
		remoting.Success, "CONSUMER_SEND_MSG_BACK")
	testwait.For(t, testwait.Wall, 5*time.Second, "the message in %DLQ%cg", func() bool {
		a = c.call(remoting.PullMessage, map[string]string{"consumerGroup": "cg", "topic": "%DLQ%cg", "queueId": "0", "maxMsgNums": "1"}, nil)
		return a.Code == remoting.Success
	})
	dl := splitRecords(t, a.Body)[0]
	if p := netio.ParseProperties(string(dl.Properties)); string(dl.Body) != "poison" || p["RETRY_TOPIC"] != "demo" || p["TAGS"] != "t" {
		t.Fatalf("dead letter %q, properties %v", dl.Body, p)
	}
}

// waitMax waits until queue q of topic has n messages: an acknowledged
// send is in the log, and in its queue's index a moment later.
func waitMax(t *testing.T, c *rmqConn, topic string, q, n int) {
	t.Helper()
	testwait.For(t, testwait.Wall, 5*time.Second, fmt.Sprintf("%d messages in queue %d", n, q), func() bool {
		a := c.call(remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(q)}, nil)
		return a.ExtFields["offset"] == strconv.Itoa(n)
	})
}
