package protocol

import "strconv"

// Code is a request code. A response echoes the code of its request.
// Values follow RocketMQ's RequestCode where RocketMQ has the request;
// Wharf's own requests use 4000 and up.
type Code int32

// Request codes.
const (
	CodeSendMessage          Code = 10  // SEND_MESSAGE: one message
	CodePullMessage          Code = 11  // PULL_MESSAGE
	CodeQueryMessage         Code = 12  // QUERY_MESSAGE: by key and time range
	CodeQueryConsumerOffset  Code = 14  // QUERY_CONSUMER_OFFSET: one queue
	CodeUpdateConsumerOffset Code = 15  // UPDATE_CONSUMER_OFFSET: one queue
	CodeUpdateAndCreateTopic Code = 17  // UPDATE_AND_CREATE_TOPIC: upsert
	CodeGetAllTopicConfig    Code = 21  // GET_ALL_TOPIC_CONFIG: list topics
	CodeGetBrokerRuntimeInfo Code = 28  // GET_BROKER_RUNTIME_INFO: stats
	CodeGetMaxOffset         Code = 30  // GET_MAX_OFFSET
	CodeGetMinOffset         Code = 31  // GET_MIN_OFFSET
	CodeViewMessageByID      Code = 33  // VIEW_MESSAGE_BY_ID: offset message id
	CodeHeartbeat            Code = 34  // HEART_BEAT
	CodeDeleteTopic          Code = 215 // DELETE_TOPIC_IN_BROKER
	CodeSendBatchMessage     Code = 320 // SEND_BATCH_MESSAGE

	CodeCreateTopic        Code = 4001 // CREATE_TOPIC: fails with TOPIC_EXIST_ALREADY if present
	CodeGetConsumerOffsets Code = 4002 // GET_CONSUMER_OFFSETS: every queue of a group
)

var codeNames = map[Code]string{
	CodeSendMessage:          "SEND_MESSAGE",
	CodePullMessage:          "PULL_MESSAGE",
	CodeQueryMessage:         "QUERY_MESSAGE",
	CodeQueryConsumerOffset:  "QUERY_CONSUMER_OFFSET",
	CodeUpdateConsumerOffset: "UPDATE_CONSUMER_OFFSET",
	CodeUpdateAndCreateTopic: "UPDATE_AND_CREATE_TOPIC",
	CodeGetAllTopicConfig:    "GET_ALL_TOPIC_CONFIG",
	CodeGetBrokerRuntimeInfo: "GET_BROKER_RUNTIME_INFO",
	CodeGetMaxOffset:         "GET_MAX_OFFSET",
	CodeGetMinOffset:         "GET_MIN_OFFSET",
	CodeViewMessageByID:      "VIEW_MESSAGE_BY_ID",
	CodeHeartbeat:            "HEART_BEAT",
	CodeDeleteTopic:          "DELETE_TOPIC_IN_BROKER",
	CodeSendBatchMessage:     "SEND_BATCH_MESSAGE",
	CodeCreateTopic:          "CREATE_TOPIC",
	CodeGetConsumerOffsets:   "GET_CONSUMER_OFFSETS",
}

// String returns the RocketMQ-style name, or CODE(n) for an unknown code.
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return "CODE(" + strconv.Itoa(int(c)) + ")"
}

// Known reports whether c is a request code this package defines.
func (c Code) Known() bool { _, ok := codeNames[c]; return ok }

// Status is the outcome carried by a response. Values follow RocketMQ's
// ResponseCode where RocketMQ has the status; Wharf's own use 4000 and up.
type Status int32

// Status codes.
const (
	StatusOK                      Status = 0  // SUCCESS
	StatusSystemError             Status = 1  // SYSTEM_ERROR
	StatusSystemBusy              Status = 2  // SYSTEM_BUSY
	StatusRequestCodeNotSupported Status = 3  // REQUEST_CODE_NOT_SUPPORTED
	StatusFlushDiskTimeout        Status = 10 // FLUSH_DISK_TIMEOUT: stored, flush not confirmed
	StatusSlaveNotAvailable       Status = 11 // SLAVE_NOT_AVAILABLE: stored, no slave to replicate to
	StatusFlushSlaveTimeout       Status = 12 // FLUSH_SLAVE_TIMEOUT: stored, replication not confirmed
	StatusMessageIllegal          Status = 13 // MESSAGE_ILLEGAL
	StatusServiceNotAvailable     Status = 14 // SERVICE_NOT_AVAILABLE
	StatusNoPermission            Status = 16 // NO_PERMISSION
	StatusTopicNotExist           Status = 17 // TOPIC_NOT_EXIST
	StatusTopicExistAlready       Status = 18 // TOPIC_EXIST_ALREADY
	StatusPullNotFound            Status = 19 // PULL_NOT_FOUND: no new message
	StatusPullRetryImmediately    Status = 20 // PULL_RETRY_IMMEDIATELY: nothing matched the filter
	StatusPullOffsetMoved         Status = 21 // PULL_OFFSET_MOVED: offset illegal, use nextBeginOffset
	StatusQueryNotFound           Status = 22 // QUERY_NOT_FOUND
	StatusSubscriptionParseFailed Status = 23 // SUBSCRIPTION_PARSE_FAILED
	StatusInvalidParameter        Status = 29 // INVALID_PARAMETER

	StatusDiskFull     Status = 4001 // DISK_FULL: broker refuses writes
	StatusNotMaster    Status = 4002 // NOT_MASTER: write or admin sent to a slave
	StatusFrameIllegal Status = 4003 // FRAME_ILLEGAL: malformed frame; the connection is closed
)

// StatusOffsetMoved is the short name the design uses for PULL_OFFSET_MOVED.
const StatusOffsetMoved = StatusPullOffsetMoved

var statusNames = map[Status]string{
	StatusOK:                      "SUCCESS",
	StatusSystemError:             "SYSTEM_ERROR",
	StatusSystemBusy:              "SYSTEM_BUSY",
	StatusRequestCodeNotSupported: "REQUEST_CODE_NOT_SUPPORTED",
	StatusFlushDiskTimeout:        "FLUSH_DISK_TIMEOUT",
	StatusSlaveNotAvailable:       "SLAVE_NOT_AVAILABLE",
	StatusFlushSlaveTimeout:       "FLUSH_SLAVE_TIMEOUT",
	StatusMessageIllegal:          "MESSAGE_ILLEGAL",
	StatusServiceNotAvailable:     "SERVICE_NOT_AVAILABLE",
	StatusNoPermission:            "NO_PERMISSION",
	StatusTopicNotExist:           "TOPIC_NOT_EXIST",
	StatusTopicExistAlready:       "TOPIC_EXIST_ALREADY",
	StatusPullNotFound:            "PULL_NOT_FOUND",
	StatusPullRetryImmediately:    "PULL_RETRY_IMMEDIATELY",
	StatusPullOffsetMoved:         "PULL_OFFSET_MOVED",
	StatusQueryNotFound:           "QUERY_NOT_FOUND",
	StatusSubscriptionParseFailed: "SUBSCRIPTION_PARSE_FAILED",
	StatusInvalidParameter:        "INVALID_PARAMETER",
	StatusDiskFull:                "DISK_FULL",
	StatusNotMaster:               "NOT_MASTER",
	StatusFrameIllegal:            "FRAME_ILLEGAL",
}

// String returns the RocketMQ-style name, or STATUS(n) for an unknown status.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "STATUS(" + strconv.Itoa(int(s)) + ")"
}

// Known reports whether s is a status this package defines.
func (s Status) Known() bool { _, ok := statusNames[s]; return ok }

// Stored reports whether a send with this status was written to the
// CommitLog: StatusOK, or one of the three statuses where the message is
// stored but its durability is unconfirmed (see Unconfirmed). A producer must
// not resend a Stored message (it would duplicate it).
func (s Status) Stored() bool { return s == StatusOK || s.Unconfirmed() }

// Unconfirmed reports whether the message was stored but the flush to disk
// or the replication to a slave was not confirmed in time: FLUSH_DISK_TIMEOUT,
// FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE.
func (s Status) Unconfirmed() bool {
	return s == StatusFlushDiskTimeout || s == StatusFlushSlaveTimeout || s == StatusSlaveNotAvailable
}

// Retryable reports whether the same request may succeed if retried, either
// later or on another broker. It is false for success, for rejections of the
// request itself (MESSAGE_ILLEGAL, INVALID_PARAMETER, FRAME_ILLEGAL, ...) and
// for Stored statuses (retrying would duplicate the message).
func (s Status) Retryable() bool {
	switch s {
	case StatusSystemError, StatusSystemBusy, StatusServiceNotAvailable, StatusDiskFull,
		StatusNotMaster, StatusTopicNotExist, StatusNoPermission, StatusPullRetryImmediately:
		return true
	}
	return false
}

// ClosesConnection reports whether the server closes the connection after
// sending a response with this status (only FRAME_ILLEGAL).
func (s Status) ClosesConnection() bool { return s == StatusFrameIllegal }

// Flags is the frame flag word.
type Flags uint32

// Flag bits (RocketMQ's values).
const (
	FlagResponse Flags = 1 << 0 // the frame is a response
	FlagOneway   Flags = 1 << 1 // the request wants no response
)

// PullStatus is the client's view of a pull response's status.
type PullStatus int

// Pull outcomes.
const (
	PullFound         PullStatus = iota // messages returned (SUCCESS)
	PullNoNewMsg                        // nothing at or after the offset yet (PULL_NOT_FOUND)
	PullNoMatchedMsg                    // entries scanned but none matched the filter (PULL_RETRY_IMMEDIATELY)
	PullOffsetIllegal                   // the offset is outside [min, max] (PULL_OFFSET_MOVED)
	PullError                           // any other status: an error
)

// PullStatusOf maps a pull response status to a PullStatus.
func PullStatusOf(s Status) PullStatus {
	switch s {
	case StatusOK:
		return PullFound
	case StatusPullNotFound:
		return PullNoNewMsg
	case StatusPullRetryImmediately:
		return PullNoMatchedMsg
	case StatusPullOffsetMoved:
		return PullOffsetIllegal
	}
	return PullError
}

func (p PullStatus) String() string {
	switch p {
	case PullFound:
		return "FOUND"
	case PullNoNewMsg:
		return "NO_NEW_MSG"
	case PullNoMatchedMsg:
		return "NO_MATCHED_MSG"
	case PullOffsetIllegal:
		return "OFFSET_ILLEGAL"
	}
	return "ERROR"
}
