package protocol

import "fmt"

// Replication (HA) requests, exchanged on the master's haListenPort with the
// same frames as client traffic. All are oneway: the stream itself is the
// acknowledgement.
const (
	// HA_REPORT (slave -> master): the slave's CommitLog end and how far
	// it is fsynced, sent on connect, after every appended transfer, after
	// a flush (controller mode) and as a heartbeat. It acknowledges every
	// byte below MaxOffset, and every byte below FlushedOffset as durable.
	CodeHAReport Code = 4101
	// HA_TRANSFER (master -> slave): whole CommitLog records (and blank
	// segment fillers) starting at Offset, in the frame body.
	CodeHATransfer Code = 4102
	// HA_METADATA (both ways): topics and consumer offsets, JSON in the body.
	CodeHAMetadata Code = 4103
	// HA_REFUSE (master -> slave): the master will not replicate to this
	// slave (its log diverged); Reason says why. The master then closes.
	CodeHARefuse Code = 4104
	// HA_EPOCHS (master -> slave): the master's epoch entries and log end,
	// the answer to a report that carries the slave's entries. The slave
	// truncates to the point both logs share, then reports again.
	CodeHAEpochs Code = 4105
)

func init() {
	codeNames[CodeHAReport] = "HA_REPORT"
	codeNames[CodeHATransfer] = "HA_TRANSFER"
	codeNames[CodeHAMetadata] = "HA_METADATA"
	codeNames[CodeHARefuse] = "HA_REFUSE"
	codeNames[CodeHAEpochs] = "HA_EPOCHS"
}

// HAEpoch is one master epoch and the log offset of its first byte (an
// entry of the epoch file). Epoch 0 is no epoch: classic master/slave.
type HAEpoch struct {
	Epoch       int32 `msgpack:"epoch"`
	StartOffset int64 `msgpack:"startOffset"`
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
	// Epoch is the slave's newest epoch (0: none). A master whose own is
	// older is stale and refuses the slave.
	Epoch int32 `msgpack:"epoch"`
	// Epochs, on the first report of a slave that has any, are its epoch
	// entries: the master answers HA_EPOCHS instead of streaming.
	Epochs []HAEpoch `msgpack:"epochs,omitempty"`
	// FlushedOffset is how far the slave's log is fsynced (<= MaxOffset).
	// Under controller mode a SYNC_FLUSH master counts the slave's copy
	// of a send only once it is below FlushedOffset.
	FlushedOffset int64 `msgpack:"flushedOffset"`
}

// HATransferRequest carries log bytes at Offset (the frame body), all of
// one master epoch: Epoch, which began at EpochStartOffset (0, 0: classic
// mode, no epoch). A batch never crosses an epoch boundary, so a slave
// records a new epoch entry when Epoch changes, before appending the
// bytes. MasterMaxOffset is the master's log end, for the slave's lag;
// ConfirmOffset is how far the master's log is confirmed (0: not known).
type HATransferRequest struct {
	Offset           int64  `msgpack:"offset"`
	MasterMaxOffset  int64  `msgpack:"masterMaxOffset"`
	Epoch            int32  `msgpack:"epoch"`
	EpochStartOffset int64  `msgpack:"epochStartOffset"`
	ConfirmOffset    int64  `msgpack:"confirmOffset"`
	Data             []byte `msgpack:"-"`
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

// HARefuseRequest tells a slave why the master refuses it. A refusal
// stops the slave's replication until an operator acts, unless NotMaster
// says the broker dialled is not a master (yet): under controller mode a
// slave learns its new master from the controllers, possibly before that
// broker has taken the role, so it dials again.
type HARefuseRequest struct {
	Reason    string `msgpack:"reason"`
	NotMaster bool   `msgpack:"notMaster,omitempty"`
}

// HAEpochsRequest is the master's epoch entries and its log's end.
type HAEpochsRequest struct {
	Epochs    []HAEpoch `msgpack:"epochs"`
	MaxOffset int64     `msgpack:"maxOffset"`
}

func (r *HAReportRequest) RequestCode() Code   { return CodeHAReport }
func (r *HATransferRequest) RequestCode() Code { return CodeHATransfer }
func (r *HAMetadataRequest) RequestCode() Code { return CodeHAMetadata }
func (r *HARefuseRequest) RequestCode() Code   { return CodeHARefuse }
func (r *HAEpochsRequest) RequestCode() Code   { return CodeHAEpochs }

func (*HAReportRequest) isFields()   {}
func (*HATransferRequest) isFields() {}
func (*HAMetadataRequest) isFields() {}
func (*HARefuseRequest) isFields()   {}
func (*HAEpochsRequest) isFields()   {}
