package sendpath

import (
	"testing"

	"github.com/wharfmq/wharf/protocol"
)

// classes is the class of every status protocol defines, as an answer to a
// send. TestClassifyEveryStatus fails on a status missing here, so a new
// status is classified on purpose.
var classes = map[protocol.Status]Class{
	protocol.StatusOK:                      Stored,
	protocol.StatusFlushDiskTimeout:        Unconfirmed,
	protocol.StatusFlushSlaveTimeout:       Unconfirmed,
	protocol.StatusSlaveNotAvailable:       Unconfirmed,
	protocol.StatusSystemError:             Retryable,
	protocol.StatusSystemBusy:              Retryable,
	protocol.StatusServiceNotAvailable:     Retryable,
	protocol.StatusDiskFull:                Retryable, // another broker may have room
	protocol.StatusNotMaster:               Retryable, // another broker may be the master
	protocol.StatusTopicNotExist:           Retryable, // after the route is fetched again
	protocol.StatusNoPermission:            Retryable, // a broker may be read-only for a while
	protocol.StatusPullRetryImmediately:    Retryable, // a pull's status; protocol calls it retryable
	protocol.StatusRequestCodeNotSupported: Failed,
	protocol.StatusMessageIllegal:          Failed,
	protocol.StatusTopicExistAlready:       Failed,
	protocol.StatusPullNotFound:            Failed,
	protocol.StatusPullOffsetMoved:         Failed,
	protocol.StatusQueryNotFound:           Failed,
	protocol.StatusSubscriptionParseFailed: Failed,
	protocol.StatusInvalidParameter:        Failed,
	protocol.StatusFrameIllegal:            Failed,
	// The controller's statuses answer brokers, never a send.
	protocol.StatusControllerFencedMasterEpoch:        Failed,
	protocol.StatusControllerFencedSyncStateSetEpoch:  Failed,
	protocol.StatusControllerInvalidMaster:            Failed,
	protocol.StatusControllerInvalidReplicas:          Failed,
	protocol.StatusControllerInvalidRequest:           Failed,
	protocol.StatusControllerBrokerNotAlive:           Failed,
	protocol.StatusControllerNotLeader:                Failed,
	protocol.StatusControllerBrokerMetadataNotExist:   Failed,
	protocol.StatusControllerBrokerNeedToBeRegistered: Failed,
	protocol.StatusControllerMasterStillExist:         Failed,
	protocol.StatusControllerElectMasterFailed:        Failed,
	protocol.Status(9999):                             Failed, // a status this client does not know
}

func TestClassifyEveryStatus(t *testing.T) {
	for s := protocol.Status(0); s < 10000; s++ {
		if _, ok := classes[s]; s.Known() && !ok {
			t.Errorf("status %v is not in the table of classes", s)
		}
	}
	for s, want := range classes {
		if got := Classify(Outcome{Failure: Answered, Status: s}); got != want {
			t.Errorf("Classify(%v) = %v, want %v", s, got, want)
		}
		if final := want == Stored || want == Unconfirmed; want.Final() != final {
			t.Errorf("%v.Final() = %v", want, want.Final())
		}
	}
}

func TestClassifyFailures(t *testing.T) {
	tests := []struct {
		o      Outcome
		want   Class
		blames bool
	}{
		{Outcome{Failure: Broken}, Retryable, true},
		{Outcome{Failure: TimedOut}, Failed, true}, // may be stored: never resent, but the broker was slow
		{Outcome{Failure: Local}, Failed, false},
		// The status of a failure without an answer means nothing.
		{Outcome{Failure: Local, Status: protocol.StatusSystemBusy}, Failed, false},
		{Outcome{Failure: Broken, Status: protocol.StatusOK}, Retryable, true},
		{Outcome{Status: protocol.StatusSystemBusy}, Retryable, true},
		{Outcome{Status: protocol.StatusOK}, Stored, false},
		// Stored without the durability asked: done, but the broker's disk
		// or slaves are behind, so the next sends avoid it.
		{Outcome{Status: protocol.StatusFlushDiskTimeout}, Unconfirmed, true},
		{Outcome{Status: protocol.StatusSlaveNotAvailable}, Unconfirmed, true},
		{Outcome{Status: protocol.StatusMessageIllegal}, Failed, false}, // the message's fault, not the broker's
	}
	for _, tt := range tests {
		if got := Classify(tt.o); got != tt.want {
			t.Errorf("Classify(%+v) = %v, want %v", tt.o, got, tt.want)
		}
		if got := blames(tt.o); got != tt.blames {
			t.Errorf("blames(%+v) = %v, want %v", tt.o, got, tt.blames)
		}
	}
}
