package actors

import (
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Clock is the time seam. Production uses the wall clock (cmd wires it);
// the simulator uses virtual time.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once after d, on a goroutine of the clock's choosing
	// (the simulator's run queue). f only sends a message to an actor.
	// stop cancels the call if it has not run yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Env is what the broker's actors are handed instead of the outside world.
type Env struct {
	Clock Clock
	// Dispatcher schedules every actor's mailbox; nil means protoactor's
	// default (a goroutine per active mailbox). The simulator passes its own.
	Dispatcher actor.Dispatcher
	// RunIO runs blocking storage work (fsync, segment preparation) off the
	// actors, then the work reports back with a message. nil means `go fn()`.
	// The simulator runs fn at a virtual time of its choosing.
	RunIO func(fn func())
	// Dial opens an outbound connection (a slave to its master) whose
	// frames go to h. It blocks; the actors call it through RunIO.
	Dial   func(addr string, h Handler) (Conn, error)
	Logger *slog.Logger
	// Faults plants bugs for the simulator's self-test; nil in production.
	Faults *Faults
	// Restart asks for the broker to be stopped cleanly and started again
	// on the same store, in the same process: a slave whose log must be
	// cut back to the point it shares with its master records the cut,
	// which Open does before any actor runs (storage.Store.RequestTruncate).
	// nil: the cut waits for the next start, and replication stops until
	// then.
	Restart func(reason string)
	// Fatal is called when an actor keeps panicking (more than its restart
	// budget) or broke an invariant: the broker cannot be trusted to go on.
	// Production logs and exits non-zero; the simulator fails the seed.
	// nil logs only.
	Fatal func(err error)
	// Rand is where a broker in controller mode draws its identity the
	// first time it starts on a store (ctlclient.go); nil: crypto/rand.
	// The simulator passes its seeded source.
	Rand io.Reader
	// Metrics is the observability seam (metrics.go); nil: none.
	Metrics Metrics
}

// FlushDiskType is SYNC_FLUSH or ASYNC_FLUSH.
type FlushDiskType string

const (
	SyncFlush  FlushDiskType = "SYNC_FLUSH"
	AsyncFlush FlushDiskType = "ASYNC_FLUSH"
)

// Config is the broker behaviour the actors need, in RocketMQ's terms.
type Config struct {
	BrokerName                     string
	BrokerID                       int64
	BrokerRole                     string
	StoreHost                      netip.AddrPort
	FlushDiskType                  FlushDiskType
	SyncFlushTimeout               time.Duration
	FlushIntervalCommitLog         time.Duration
	FlushCommitLogLeastPages       int
	FlushCommitLogThoroughInterval time.Duration
	FlushIntervalConsumeQueue      time.Duration // checkpoint interval
	FlushConsumerOffsetInterval    time.Duration
	CleanResourceInterval          time.Duration
	AutoCreateTopicEnable          bool
	DefaultTopicQueueNums          int32
	LongPollingEnable              bool
	ShortPollingTime               time.Duration // hold time when long polling is off
	MaxPullSuspend                 time.Duration // cap on a pull's suspend time
	MaxPullBatch                   int           // cap on messages per pull
	MaxPullBytes                   int           // cap on record bytes per pull (and query): the answer frame's budget

	// Replication.
	HAMasterAddress               string        // a slave's master (host:haListenPort)
	SlaveTimeout                  time.Duration // SYNC_MASTER wait before FLUSH_SLAVE_TIMEOUT
	HASendHeartbeatInterval       time.Duration
	HAHousekeepingInterval        time.Duration // close a silent link
	HAReconnectMaxInterval        time.Duration // a slave's longest wait between dials of its master
	HAMaxGapNotInSync             int64         // a slave further behind is not in sync
	InSyncReplicas                int           // copies a SYNC_MASTER send needs, the master's included
	HATransferBatchSize           int           // most log bytes per transfer to a slave
	HACatchUpFromLastSegment      bool          // an empty slave starts at the master's last segment, not its earliest
	HAMetadataInterval            time.Duration // topics and offsets master <-> slave
	SlaveReadEnable               bool          // pulls may suggest reading from a slave
	AccessMessageInMemoryMaxRatio int           // percent of memory behind the head before suggesting a slave
	TotalMemory                   int64         // bytes of RAM, for the ratio above

	// Name servers (registrar.go). No NamesrvAddr: standalone, no registration.
	BrokerClusterName        string
	NamesrvAddr              []string      // host:port of each name server
	BrokerAddr               string        // announced for clients: brokerIP1:listenPort (empty: StoreHost)
	HAServerAddr             string        // announced for slaves: brokerIP1:haListenPort
	RemotingAddr             string        // announced to name servers: brokerIP1:remotingListenPort, empty when off
	BrokerHeartbeatInterval  time.Duration // a heartbeat to each name server this often
	HeartbeatTimeout         time.Duration // the lease asked for (heartbeatTimeoutMillis)
	RegisterNameServerPeriod time.Duration // a full registration this often

	// Controller mode (ctlclient.go): the controllers assign the brokerId
	// and the role, so BrokerRole, BrokerID and HAMasterAddress are not
	// used; a master acknowledges a SYNC send once its SyncStateSet has it.
	EnableControllerMode bool
	ControllerAddr       []string // host:port of each controller node
	// ControllerHeartbeatInterval: a heartbeat (and a replica-info read)
	// to the leading controller this often (0: ctlagent's default).
	ControllerHeartbeatInterval time.Duration
	// MasterLease (masterLeaseMillis): a master accepts writes only this
	// long after the send time of its last heartbeat the leader answered.
	// It must stay below the controller's heartbeat timeout by more than
	// the clock-rate error, so that the master stops before another can
	// be elected (0: ctlagent's default, 1.5 s against the controller's
	// 3 s).
	MasterLease              time.Duration
	ControllerRequestTimeout time.Duration // a controller request unanswered this long failed
	// HAMaxTimeSlaveNotCatchup: a SyncStateSet member behind the master
	// (or away) this long is proposed out of the set.
	HAMaxTimeSlaveNotCatchup time.Duration
	// BrokerElectionPriority: among equally caught-up candidates the
	// controller elects the lowest (controller mode).
	BrokerElectionPriority int32

	// Consumer groups, retries and delays.
	ConsumerHeartbeatInterval time.Duration   // members heartbeat this often; 3 missed and they are out
	DelayLevels               []time.Duration // messageDelayLevel
	MaxReconsumeTimes         int32           // default retries before the dead-letter topic
}

// DefaultConfig returns RocketMQ's defaults.
func DefaultConfig() Config {
	return Config{
		BrokerName:                     "broker-a",
		BrokerRole:                     "ASYNC_MASTER",
		FlushDiskType:                  AsyncFlush,
		SyncFlushTimeout:               5 * time.Second,
		FlushIntervalCommitLog:         500 * time.Millisecond,
		FlushCommitLogLeastPages:       4,
		FlushCommitLogThoroughInterval: 10 * time.Second,
		FlushIntervalConsumeQueue:      time.Second,
		FlushConsumerOffsetInterval:    5 * time.Second,
		CleanResourceInterval:          10 * time.Second,
		AutoCreateTopicEnable:          true,
		DefaultTopicQueueNums:          8,
		LongPollingEnable:              true,
		ShortPollingTime:               time.Second,
		MaxPullSuspend:                 30 * time.Second,
		MaxPullBatch:                   256,
		MaxPullBytes:                   8 << 20,
		SlaveTimeout:                   3 * time.Second,
		HASendHeartbeatInterval:        5 * time.Second,
		HAHousekeepingInterval:         20 * time.Second,
		HAReconnectMaxInterval:         time.Second,
		HAMaxGapNotInSync:              256 << 20,
		InSyncReplicas:                 2,
		HATransferBatchSize:            256 << 10,
		HAMetadataInterval:             3 * time.Second,
		AccessMessageInMemoryMaxRatio:  40,
		BrokerClusterName:              "DefaultCluster",
		BrokerHeartbeatInterval:        time.Second,
		HeartbeatTimeout:               5 * time.Second,
		RegisterNameServerPeriod:       30 * time.Second,
		ConsumerHeartbeatInterval:      time.Second,
		DelayLevels:                    DefaultDelayLevels(),
		MaxReconsumeTimes:              16,
	}
}

// DefaultDelayLevels is RocketMQ's messageDelayLevel: 1s 5s 10s 30s 1m 2m
// 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h.
func DefaultDelayLevels() []time.Duration {
	s, m, h := time.Second, time.Minute, time.Hour
	return []time.Duration{s, 5 * s, 10 * s, 30 * s, m, 2 * m, 3 * m, 4 * m, 5 * m, 6 * m, 7 * m, 8 * m, 9 * m, 10 * m, 20 * m, 30 * m, h, 2 * h}
}
