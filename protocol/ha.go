package protocol

import "fmt"

// Replication (HA) requests, exchanged on the master's haListenPort with the
// same frames as client traffic. All are oneway: the stream itself is the
// acknowledgement.
const (
	// HA_REPORT (slave -> master): the slave's CommitLog end, sent on
	// connect, after every appended transfer and as a heartbeat. It
	// acknowledges every byte below MaxOffset.
	CodeHAReport Code = 4101
	// HA_TRANSFER (master -> slave): whole CommitLog records (and blank
	// segment fillers) starting at Offset, in the frame body.
	CodeHATransfer Code = 4102
	// HA_METADATA (both ways): topics and consumer offsets, JSON in the body.
	CodeHAMetadata Code = 4103
	// HA_REFUSE (master -> slave): the master will not replicate to this
	// slave (its log diverged); Reason says why. The master then closes.
	CodeHARefuse Code = 4104
)

func init() {
	codeNames[CodeHAReport] = "HA_REPORT"
	codeNames[CodeHATransfer] = "HA_TRANSFER"
	codeNames[CodeHAMetadata] = "HA_METADATA"
	codeNames[CodeHARefuse] = "HA_REFUSE"
}

// HAReportRequest is a slave's position. TailCRC is the CRC-32 (IEEE) of the
// TailLen bytes of its log just below MaxOffset, so the master can tell a
// slave whose bytes differ from its own at the same offsets.
type HAReportRequest struct {
	BrokerName string `msgpack:"brokerName"`
	BrokerID   int64  `msgpack:"brokerId"`
	MaxOffset  int64  `msgpack:"maxOffset"`
	MinOffset  int64  `msgpack:"minOffset"`
	TailCRC    uint32 `msgpack:"tailCrc"`
	TailLen    int32  `msgpack:"tailLen"`
	// SegmentSize is the slave's mappedFileSizeCommitLog: it must equal the
	// master's for the logs to be byte-identical.
	SegmentSize int64 `msgpack:"segmentSize"`
}

// HATransferRequest carries log bytes at Offset (the frame body).
// MasterMaxOffset is the master's log end, for the slave's lag.
type HATransferRequest struct {
	Offset          int64  `msgpack:"offset"`
	MasterMaxOffset int64  `msgpack:"masterMaxOffset"`
	Data            []byte `msgpack:"-"`
}

func (r *HATransferRequest) appendBody(b []byte) ([]byte, error) { return append(b, r.Data...), nil }
func (r *HATransferRequest) decodeBody(body []byte, lim Limits) error {
	r.Data = body
	return nil
}

// HAMetadataRequest carries metadata as JSON in the body. Kind is "topics",
// "offsets" or "deletedTopics".
type HAMetadataRequest struct {
	Kind    string `msgpack:"kind"`
	Version int64  `msgpack:"version"`
	Data    []byte `msgpack:"-"`
}

func (r *HAMetadataRequest) appendBody(b []byte) ([]byte, error) { return append(b, r.Data...), nil }
func (r *HAMetadataRequest) decodeBody(body []byte, lim Limits) error {
	if r.Kind != "topics" && r.Kind != "offsets" && r.Kind != "deletedTopics" {
		return fmt.Errorf("%w: HA_METADATA kind %q", ErrFrameIllegal, r.Kind)
	}
	r.Data = body
	return nil
}

// HARefuseRequest tells a slave why the master refuses it.
type HARefuseRequest struct {
	Reason string `msgpack:"reason"`
}

func (r *HAReportRequest) RequestCode() Code   { return CodeHAReport }
func (r *HATransferRequest) RequestCode() Code { return CodeHATransfer }
func (r *HAMetadataRequest) RequestCode() Code { return CodeHAMetadata }
func (r *HARefuseRequest) RequestCode() Code   { return CodeHARefuse }

func (*HAReportRequest) isFields()   {}
func (*HATransferRequest) isFields() {}
func (*HAMetadataRequest) isFields() {}
func (*HARefuseRequest) isFields()   {}
