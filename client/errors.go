package client

import (
	"errors"
	"fmt"

	"github.com/wharfmq/wharf/client/sendpath"
	"github.com/wharfmq/wharf/protocol"
)

// Sentinel errors. Every error the package returns wraps at most one of them
// (plus context.DeadlineExceeded or context.Canceled where a context ended);
// test with errors.Is. Errors that carry a broker status are *StatusError,
// which unwraps to the sentinel of its status.
var (
	// ErrClosed: the client was closed (before or during the call).
	ErrClosed = errors.New("wharf client: closed")
	// ErrTimeout: the request's deadline passed before the response came.
	// Such an error also wraps context.DeadlineExceeded. The broker may still
	// execute the request.
	ErrTimeout = errors.New("wharf client: timeout")
	// ErrBrokerUnavailable: the connection could not be made, or it broke
	// before the response came (the request may or may not have executed).
	ErrBrokerUnavailable = errors.New("wharf client: broker unavailable")

	// Status sentinels: see StatusError.
	ErrTopicNotExist       = errors.New("wharf: topic does not exist")                               // TOPIC_NOT_EXIST
	ErrMessageIllegal      = errors.New("wharf: message illegal")                                    // MESSAGE_ILLEGAL (also client-side validation)
	ErrFlushDiskTimeout    = errors.New("wharf: stored, but the flush to disk was not confirmed")    // FLUSH_DISK_TIMEOUT
	ErrFlushSlaveTimeout   = errors.New("wharf: stored, but the replication was not confirmed")      // FLUSH_SLAVE_TIMEOUT
	ErrSlaveNotAvailable   = errors.New("wharf: stored, but no slave was available to replicate to") // SLAVE_NOT_AVAILABLE
	ErrDiskFull            = errors.New("wharf: broker disk full")                                   // DISK_FULL
	ErrServiceNotAvailable = errors.New("wharf: service not available")                              // SERVICE_NOT_AVAILABLE
	ErrSystemBusy          = errors.New("wharf: broker busy")                                        // SYSTEM_BUSY
	ErrNoPermission        = errors.New("wharf: no permission")                                      // NO_PERMISSION
	ErrSystemError         = errors.New("wharf: broker system error")                                // SYSTEM_ERROR
	ErrNotMaster           = errors.New("wharf: broker is not the master")                           // NOT_MASTER
	ErrTopicExist          = errors.New("wharf: topic already exists")                               // TOPIC_EXIST_ALREADY
	ErrNotFound            = errors.New("wharf: not found")                                          // QUERY_NOT_FOUND
	ErrInvalidParameter    = errors.New("wharf: invalid parameter")                                  // INVALID_PARAMETER
	ErrSubscription        = errors.New("wharf: malformed subscription expression")                  // SUBSCRIPTION_PARSE_FAILED (also client-side parsing)
	ErrNotSupported        = errors.New("wharf: request code not supported by the broker")           // REQUEST_CODE_NOT_SUPPORTED
	ErrFrameIllegal        = errors.New("wharf: the broker rejected a frame as illegal")             // FRAME_ILLEGAL
	ErrProtocol            = errors.New("wharf client: malformed response from the broker")          // a response we could not decode
)

var statusSentinels = map[protocol.Status]error{
	protocol.StatusSystemError:             ErrSystemError,
	protocol.StatusSystemBusy:              ErrSystemBusy,
	protocol.StatusRequestCodeNotSupported: ErrNotSupported,
	protocol.StatusFlushDiskTimeout:        ErrFlushDiskTimeout,
	protocol.StatusSlaveNotAvailable:       ErrSlaveNotAvailable,
	protocol.StatusFlushSlaveTimeout:       ErrFlushSlaveTimeout,
	protocol.StatusMessageIllegal:          ErrMessageIllegal,
	protocol.StatusServiceNotAvailable:     ErrServiceNotAvailable,
	protocol.StatusNoPermission:            ErrNoPermission,
	protocol.StatusTopicNotExist:           ErrTopicNotExist,
	protocol.StatusTopicExistAlready:       ErrTopicExist,
	protocol.StatusQueryNotFound:           ErrNotFound,
	protocol.StatusSubscriptionParseFailed: ErrSubscription,
	protocol.StatusInvalidParameter:        ErrInvalidParameter,
	protocol.StatusDiskFull:                ErrDiskFull,
	protocol.StatusNotMaster:               ErrNotMaster,
	protocol.StatusFrameIllegal:            ErrFrameIllegal,
}

// StatusError is a broker response whose status is not the success the
// request wanted. It unwraps to the sentinel error of its status (nil for a
// status this package does not know).
type StatusError struct {
	Code   protocol.Code   // the request
	Status protocol.Status // the response's status
	Remark string          // the broker's explanation, if any
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("wharf: %v: broker answered %v", e.Code, e.Status)
	if e.Remark != "" {
		s += ": " + e.Remark
	}
	return s
}

// Unwrap returns the sentinel of e.Status.
func (e *StatusError) Unwrap() error { return statusSentinels[e.Status] }

// Retryable reports whether repeating the request may succeed (see
// protocol.Status.Retryable).
func (e *StatusError) Retryable() bool { return e.Status.Retryable() }

// StatusFromError returns the broker status carried by err (a *StatusError
// anywhere in its chain) and whether there was one.
func StatusFromError(err error) (protocol.Status, bool) {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status, true
	}
	return 0, false
}

func statusError(f *protocol.Frame) error {
	return &StatusError{Code: f.Code, Status: f.Status, Remark: f.Remark}
}

// retryable reports whether a failed attempt may be repeated: a retryable
// broker status, or a connection that failed or broke. Timeouts are not
// retried (the attempt may still be executed), nor is anything after the
// caller's context ended or the client closed. The judgement is the send
// core's (sendpath.Classify).
func retryable(err error) bool {
	return err != nil && sendpath.Classify(outcomeOf(err)) == sendpath.Retryable
}

// outcomeOf is the send core's view of a failed call's error: the broker's
// status it carries, a broken connection, a timeout, or a local failure
// (the client closed, the caller's context ended, anything else).
func outcomeOf(err error) sendpath.Outcome {
	switch {
	case errors.Is(err, ErrClosed):
		return sendpath.Outcome{Failure: sendpath.Local}
	case errors.Is(err, ErrTimeout):
		return sendpath.Outcome{Failure: sendpath.TimedOut}
	}
	if s, ok := StatusFromError(err); ok {
		return sendpath.Outcome{Failure: sendpath.Answered, Status: s}
	}
	if errors.Is(err, ErrBrokerUnavailable) {
		return sendpath.Outcome{Failure: sendpath.Broken}
	}
	return sendpath.Outcome{Failure: sendpath.Local}
}
