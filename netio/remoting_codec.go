package netio

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/wharfmq/wharf/actors"
	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/protocol/remoting"
)

// RemotingCodec is the codec of RocketMQ's remoting protocol (package
// protocol/remoting; docs/PROTOCOL.md, "RocketMQ remoting listener"): it
// turns remoting requests into the typed requests the actors handle, the
// same values Wharf's own frames decode to, and their typed answers into
// remoting responses. A pull's records become the response body as they
// are, which is RocketMQ's pull body. Answers are written with a JSON
// header, which every RocketMQ client reads.
type RemotingCodec struct {
	// StoreHost is the broker's store host, which its message ids name
	// (VIEW_MESSAGE_BY_ID gives only the CommitLog offset). Zero on a
	// name server.
	StoreHost netip.AddrPort
}

var (
	_ actors.Codec = RemotingCodec{}
	_ framer       = RemotingCodec{}
)

// framer is what a codec that reads its own wire adds: how frames are
// measured and decoded, and how the answer to a malformed one is written.
// A codec without it is read with Wharf's framing.
type framer interface {
	split(buf []byte, lim protocol.Limits) (int, error)
	decode(frame []byte, lim protocol.Limits) (*protocol.Frame, error)
	errorFrame(code protocol.Code, opaque uint32, remark string) []byte
}

// wharfFramer is Wharf's own framing.
type wharfFramer struct{}

func (wharfFramer) split(buf []byte, lim protocol.Limits) (int, error) {
	return protocol.Split(buf, lim)
}
func (wharfFramer) decode(frame []byte, lim protocol.Limits) (*protocol.Frame, error) {
	return protocol.DecodeFrame(frame, lim)
}
func (wharfFramer) errorFrame(code protocol.Code, opaque uint32, remark string) []byte {
	return protocol.AppendErrorResponse(nil, code, opaque, protocol.StatusFrameIllegal, remark)
}

func remotingLimits(lim protocol.Limits) remoting.Limits {
	d := protocol.DefaultLimits()
	if lim.MaxFrameSize <= 0 {
		lim.MaxFrameSize = d.MaxFrameSize
	}
	if lim.MaxHeaderSize <= 0 {
		lim.MaxHeaderSize = d.MaxHeaderSize
	}
	return remoting.Limits{MaxFrameSize: lim.MaxFrameSize, MaxHeaderSize: lim.MaxHeaderSize}
}

func (RemotingCodec) split(buf []byte, lim protocol.Limits) (int, error) {
	n, err := remoting.Split(buf, remotingLimits(lim))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", protocol.ErrFrameIllegal, err)
	}
	return n, nil
}

// decode turns one remoting frame into a Frame carrying its typed request
// (Frame.Request), or the error a request of it earned (Frame.RequestErr:
// answered, the connection kept). Only a frame that does not parse is an
// error here (the connection is closed).
func (rc RemotingCodec) decode(frame []byte, lim protocol.Limits) (*protocol.Frame, error) {
	cmd, err := remoting.Decode(frame, remotingLimits(lim))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", protocol.ErrFrameIllegal, err)
	}
	f := &protocol.Frame{Code: protocol.Code(cmd.Code), Opaque: uint32(cmd.Opaque)}
	if cmd.IsResponse() {
		f.Flags |= protocol.FlagResponse
	}
	if cmd.IsOneway() {
		f.Flags |= protocol.FlagOneway
	}
	if !cmd.IsResponse() {
		code, req, err := translateRequest(cmd, lim, rc.StoreHost)
		f.Code, f.Request, f.RequestErr = code, req, err
	}
	return f, nil
}

func (RemotingCodec) errorFrame(code protocol.Code, opaque uint32, remark string) []byte {
	b, _ := remoting.Append(nil, &remoting.Command{Code: remoting.SystemError, Opaque: int32(opaque),
		Flag: remoting.FlagResponse, Remark: remark, Version: remotingVersion})
	return b
}

// remotingVersion is the MQVersion Wharf's answers announce (V4_5_2, what
// the Go client sends).
const remotingVersion = 317

// AppendResponse implements actors.Codec.
func (RemotingCodec) AppendResponse(dst []byte, r *actors.Response) []byte {
	cmd := remoting.Command{Code: remotingStatus(r.Status), Opaque: int32(r.Opaque), Flag: remoting.FlagResponse,
		Remark: r.Remark, Version: remotingVersion}
	var err error
	var parts [][]byte // a records answer's body: the records as read
	if r.Records != nil {
		err = recordsAnswer(&cmd, r.Records)
		parts = r.Records.Raw
		dst = reserve(dst, 512+recordsSize(parts))
	} else if r.Fields != nil {
		err = fieldsAnswer(&cmd, r.Fields)
	}
	if err != nil {
		cmd = remoting.Command{Code: remoting.SystemError, Opaque: int32(r.Opaque), Flag: remoting.FlagResponse,
			Remark: "encode answer: " + err.Error(), Version: remotingVersion}
	}
	if err != nil {
		parts = nil
	}
	b, err := remoting.AppendParts(dst, &cmd, parts) // on an error, dst as it was
	if err != nil {
		b, _ = remoting.Append(b, &remoting.Command{Code: remoting.SystemError, Opaque: int32(r.Opaque),
			Flag: remoting.FlagResponse, Remark: "encode answer: " + err.Error(), Version: remotingVersion})
	}
	return b
}

// AppendRequest implements actors.Codec: the oneway requests a broker
// pushes to its clients that RocketMQ has too.
func (RemotingCodec) AppendRequest(dst []byte, req protocol.Request) ([]byte, error) {
	switch m := req.(type) {
	case *protocol.NotifyConsumerIDsChangedRequest:
		return remoting.Append(dst, &remoting.Command{Code: remoting.NotifyConsumerIdsChanged, Flag: remoting.FlagOneway,
			Version: remotingVersion, ExtFields: map[string]string{"consumerGroup": m.Group}})
	}
	return dst, fmt.Errorf("request %v has no remoting form", req.RequestCode())
}

// remotingStatus maps a Wharf status to RocketMQ's response code: the
// same number where RocketMQ has the status, else the code a RocketMQ
// client reacts to the same way.
func remotingStatus(s protocol.Status) int32 {
	switch s {
	case protocol.StatusDiskFull, protocol.StatusNotMaster:
		return remoting.ServiceNotAvailable // RocketMQ's answer to both: retry another broker
	case protocol.StatusFrameIllegal:
		return remoting.SystemError
	}
	if s < 0 || s > 1<<15-1 || !s.Known() {
		return remoting.SystemError
	}
	return int32(s)
}

func recordsSize(raw [][]byte) int {
	n := 0
	for _, b := range raw {
		n += len(b)
	}
	return n
}

// recordsAnswer sets the fields of a records answer; its body is the
// records, appended by AppendResponse.
func recordsAnswer(cmd *remoting.Command, rs *actors.Records) error {
	switch rs.Kind {
	case actors.RecordsPull:
		if rs.Pull != nil {
			cmd.ExtFields = pullFields(rs.Pull)
		}
	case actors.RecordsQuery:
		cmd.ExtFields = map[string]string{"indexLastUpdateTimestamp": "0", "indexLastUpdatePhyoffset": "0"}
	case actors.RecordsView:
	default:
		return fmt.Errorf("records answer of kind %d", rs.Kind)
	}
	return nil
}

func pullFields(p *protocol.PullResponse) map[string]string {
	return map[string]string{
		"nextBeginOffset":      strconv.FormatInt(p.NextBeginOffset, 10),
		"minOffset":            strconv.FormatInt(p.MinOffset, 10),
		"maxOffset":            strconv.FormatInt(p.MaxOffset, 10),
		"suggestWhichBrokerId": strconv.FormatInt(p.SuggestWhichBrokerID, 10),
	}
}

// fieldsAnswer puts a typed answer's fields where RocketMQ's clients read
// them: the ext fields, or a JSON body for the name server's answers.
func fieldsAnswer(cmd *remoting.Command, f protocol.Fields) error {
	var err error
	switch m := f.(type) {
	case *protocol.SendResponse:
		cmd.ExtFields = map[string]string{"msgId": m.MsgID, "queueId": itoa(m.QueueID),
			"queueOffset": strconv.FormatInt(m.QueueOffset, 10)}
	case *protocol.SendBatchResponse:
		cmd.ExtFields = map[string]string{"msgId": strings.Join(m.MsgIDs, ","), "queueId": itoa(m.QueueID),
			"queueOffset": strconv.FormatInt(m.QueueOffset, 10)}
	case *protocol.PullResponse:
		cmd.ExtFields = pullFields(m)
	case *protocol.OffsetResponse:
		cmd.ExtFields = map[string]string{"offset": strconv.FormatInt(m.Offset, 10)}
	case *protocol.RouteData:
		cmd.Body, err = routeBody(m)
	case *protocol.ClusterInfo:
		cmd.Body, err = clusterBody(m)
	case *protocol.TopicNameList:
		cmd.Body, err = topicListBody(m)
	case *protocol.TopicListResponse:
		cmd.Body, err = topicConfigBody(m)
	case *protocol.ConsumerListResponse:
		cmd.Body, err = consumerListBody(m)
	case *protocol.LockBatchResponse:
		cmd.Body, err = lockedBody(m)
	}
	// Everything else (a heartbeat's assignments, a topic's config) has
	// no RocketMQ form: the code says all a RocketMQ client reads.
	return err
}

func itoa(v int32) string { return strconv.FormatInt(int64(v), 10) }

// consumerListBody is GetConsumerListByGroupResponseBody.
func consumerListBody(m *protocol.ConsumerListResponse) ([]byte, error) {
	ids := m.ClientIDs
	if ids == nil {
		ids = []string{}
	}
	return json.Marshal(struct {
		IDs []string `json:"consumerIdList"`
	}{ids})
}

// lockedBody is LockBatchResponseBody.
func lockedBody(m *protocol.LockBatchResponse) ([]byte, error) {
	qs := make([]rmqQueue, 0, len(m.Locked))
	for _, q := range m.Locked {
		qs = append(qs, rmqQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID})
	}
	return json.Marshal(struct {
		MQs []rmqQueue `json:"lockOKMQSet"`
	}{qs})
}
