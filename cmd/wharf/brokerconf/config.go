package brokerconf

import (
	"math"
	"os"
	"time"
)

// Config holds every broker.conf key Wharf understands. Each field is named
// after its key; the conf tag gives the exact key (and flag) name and the
// field's doc comment is the key's documentation: flag usage, Properties()
// and MarkdownTable() read it from this file's source, so keep each comment
// on one line, saying what the key means and in which unit.
//
// Durations are typed (Millis, Seconds, Hours) so the unit RocketMQ uses in
// broker.conf stays visible; convert with their Duration method.
type Config struct {
	// Name of the cluster the broker belongs to.
	BrokerClusterName string `conf:"brokerClusterName"`
	// Name of the broker group: a master and its slaves share it (default: the host name, or broker-a).
	BrokerName string `conf:"brokerName"`
	// 0 for a master, greater than 0 for a slave of the same brokerName.
	BrokerID int64 `conf:"brokerId"`
	// ASYNC_MASTER, SYNC_MASTER (acks wait for inSyncReplicas copies) or SLAVE (read-only copy of a master).
	BrokerRole string `conf:"brokerRole"`
	// ASYNC_FLUSH (acks before fsync, flushed every flushIntervalCommitLog) or SYNC_FLUSH (acks after fsync).
	FlushDiskType string `conf:"flushDiskType"`

	// IP address the broker binds to and advertises, written into every message's store host (Wharf default 127.0.0.1).
	BrokerIP1 string `conf:"brokerIP1"`
	// TCP port for clients.
	ListenPort int `conf:"listenPort"`
	// TCP port on which a master serves its slaves (0: listenPort + 1).
	HAListenPort int `conf:"haListenPort"`
	// IP address a master announces to its slaves with haListenPort, to the controllers and name servers (empty: brokerIP1); the replication port still listens on brokerIP1.
	BrokerIP2 string `conf:"brokerIP2"`
	// SLAVE only: host:port of the master's haListenPort.
	HAMasterAddress string `conf:"haMasterAddress"`
	// Name server addresses, host:port separated by ';': the broker registers with every one (empty: standalone, no name server).
	NamesrvAddr string `conf:"namesrvAddr"`
	// Milliseconds between a broker's heartbeats to each name server (Wharf key; RocketMQ's acting-master mode uses 1000 too).
	BrokerHeartbeatInterval Millis `conf:"brokerHeartbeatInterval"`
	// Milliseconds a name server keeps the broker routable without a heartbeat: the lease the broker asks for (Wharf default 5000; RocketMQ's 10000, or 120000 without acting-master mode).
	BrokerNotActiveTimeoutMillis Millis `conf:"brokerNotActiveTimeoutMillis"`
	// Milliseconds between two full registrations (topics included) with each name server; topic changes register at once.
	RegisterNameServerPeriod Millis `conf:"registerNameServerPeriod"`
	// Wharf only: largest protocol frame in bytes, length prefix included; a larger frame closes the connection.
	MaxFrameSize int `conf:"maxFrameSize"`
	// Wharf only: bytes of unsent responses a connection may queue; a client that stops reading beyond it is disconnected.
	MaxOutboundBytes int64 `conf:"maxOutboundBytes"`
	// Seconds a client connection may stay idle before the broker closes it.
	ServerChannelMaxIdleTimeSeconds Seconds `conf:"serverChannelMaxIdleTimeSeconds"`
	// Wharf only: TCP port of the HTTP server for Prometheus metrics (/metrics) and readiness (/healthz); -1 means listenPort + 3, 0 turns it off.
	MetricsPort int `conf:"metricsPort"`
	// Wharf only: TCP port speaking RocketMQ's remoting protocol, for RocketMQ's own clients (0: off); it binds to brokerIP1 and is registered with the name servers.
	RemotingListenPort int `conf:"remotingListenPort"`
	// Wharf only: IP address the metrics server binds to (default 127.0.0.1: loopback only; 0.0.0.0 for every interface).
	MetricsHost string `conf:"metricsHost"`

	// Directory of the store's files (Wharf default ./data, where make run keeps them; RocketMQ's is ~/store).
	StorePathRootDir string `conf:"storePathRootDir"`
	// Directory of the CommitLog; Wharf supports only ${storePathRootDir}/commitlog (empty means that).
	StorePathCommitLog string `conf:"storePathCommitLog"`
	// Size in bytes of each CommitLog segment file (a multiple of 4096, at least 64 KiB).
	MappedFileSizeCommitLog int64 `conf:"mappedFileSizeCommitLog"`
	// Size in bytes of each ConsumeQueue file, a multiple of the 20-byte entry.
	MappedFileSizeConsumeQueue int `conf:"mappedFileSizeConsumeQueue"`
	// Largest message in bytes, as encoded in the CommitLog; larger sends are refused.
	MaxMessageSize int `conf:"maxMessageSize"`
	// Check every record's CRC when recovering after a crash.
	CheckCRCOnRecover bool `conf:"checkCRCOnRecover"`
	// Keep the pages of a 64 MiB window ahead of the CommitLog's end populated (MADV_POPULATE_WRITE); off by default: appends write through the page cache and populating only added CPU and ext4 journal stalls. Under SYNC_FLUSH, syncFlushPrezeroEnable keeps it regardless and writes it back.
	WarmMapedFileEnable bool `conf:"warmMapedFileEnable"`
	// Build the message index used by queries by key and by message id.
	MessageIndexEnable bool `conf:"messageIndexEnable"`
	// Hash slots per index file.
	MaxHashSlotNum int `conf:"maxHashSlotNum"`
	// Entries per index file.
	MaxIndexNum int `conf:"maxIndexNum"`

	// Hours a full CommitLog segment is kept before it may be deleted.
	FileReservedTime Hours `conf:"fileReservedTime"`
	// Hours of the day (00-23, separated by ';') at which expired segments are deleted.
	DeleteWhen string `conf:"deleteWhen"`
	// Percent of disk use above which expired segments are deleted at any hour.
	DiskMaxUsedSpaceRatio int `conf:"diskMaxUsedSpaceRatio"`
	// Percent of disk use above which the oldest segments are deleted whatever their age (30-85).
	DiskSpaceCleanForciblyRatio int `conf:"diskSpaceCleanForciblyRatio"`
	// Percent of disk use above which writes are refused with DISK_FULL (35-90); they resume 5 points below.
	DiskSpaceWarningLevelRatio int `conf:"diskSpaceWarningLevelRatio"`
	// Milliseconds between two retention passes.
	CleanResourceInterval Millis `conf:"cleanResourceInterval"`

	// ASYNC_FLUSH: milliseconds between two CommitLog flushes.
	FlushIntervalCommitLog Millis `conf:"flushIntervalCommitLog"`
	// ASYNC_FLUSH: 4 KiB pages that must be dirty before a CommitLog flush (0: flush whatever is dirty).
	FlushCommitLogLeastPages int `conf:"flushCommitLogLeastPages"`
	// ASYNC_FLUSH: milliseconds after which the CommitLog is flushed however few pages are dirty.
	FlushCommitLogThoroughInterval Millis `conf:"flushCommitLogThoroughInterval"`
	// Milliseconds between two ConsumeQueue flushes.
	FlushIntervalConsumeQueue Millis `conf:"flushIntervalConsumeQueue"`
	// 4 KiB pages that must be dirty before a ConsumeQueue flush (0: flush whatever is dirty).
	FlushConsumeQueueLeastPages int `conf:"flushConsumeQueueLeastPages"`
	// Milliseconds after which ConsumeQueues are flushed however few pages are dirty.
	FlushConsumeQueueThoroughInterval Millis `conf:"flushConsumeQueueThoroughInterval"`
	// SYNC_FLUSH: milliseconds a send waits for its fsync before FLUSH_DISK_TIMEOUT.
	SyncFlushTimeout Millis `conf:"syncFlushTimeout"`
	// Wharf only, SYNC_FLUSH: keep the 64 MiB ahead of the CommitLog's end written with zeros and flushed, so group-commit fsyncs meet written extents; off by default: the disk writes every page twice and the zeros' writeback delays the acknowledgements' fsyncs (SYNC_FLUSH-64's p999 3x) for a few percent of throughput at most.
	SyncFlushPrezeroEnable bool `conf:"syncFlushPrezeroEnable"`

	// SYNC_MASTER: milliseconds a send waits for its slave copies before FLUSH_SLAVE_TIMEOUT.
	SlaveTimeout Millis `conf:"slaveTimeout"`
	// Milliseconds between a slave's offset reports to its master, and between a master's empty transfers to a slave it streams nothing to, when no data flows. Must be below haHousekeepingInterval.
	HASendHeartbeatInterval Millis `conf:"haSendHeartbeatInterval"`
	// Milliseconds without traffic after which a master drops a slave connection (and a slave its master's).
	HAHousekeepingInterval Millis `conf:"haHousekeepingInterval"`
	// Longest wait, in milliseconds, between a slave's dials of a master it lost, so it rejoins a restarted master within it (Wharf key; RocketMQ retries every 5 s).
	HAReconnectMaxInterval Millis `conf:"haReconnectMaxInterval"`
	// Most CommitLog bytes a master sends a slave in one transfer (Wharf default 256 KiB; RocketMQ's 32 KiB slows a slave's catch-up).
	HATransferBatchSize int `conf:"haTransferBatchSize"`
	// Bytes a slave may lag behind its master and still count as in sync for SYNC_MASTER.
	HAMaxGapNotInSync int64 `conf:"haMaxGapNotInSync"`
	// SYNC_MASTER: copies, the master's included, that must hold a message before it is acknowledged (Wharf default 2; RocketMQ's 1 acks without a slave copy).
	InSyncReplicas int `conf:"inSyncReplicas"`
	// Percent of memory a master may read from before its pull responses suggest reading from a slave.
	AccessMessageInMemoryMaxRatio int `conf:"accessMessageInMemoryMaxRatio"`
	// Let a master suggest that consumers far behind read from a slave.
	SlaveReadEnable bool `conf:"slaveReadEnable"`
	// An empty slave copies only the master's last CommitLog segment instead of everything the master retains (Wharf key; RocketMQ's only behaviour).
	HASlaveCatchUpFromLastSegment bool `conf:"haSlaveCatchUpFromLastSegment"`

	// Let the controllers assign this broker's brokerId and role, and elect a new master when the master dies; brokerRole, brokerId and haMasterAddress are then ignored.
	EnableControllerMode bool `conf:"enableControllerMode"`
	// enableControllerMode: controller addresses, host:port separated by ';' (RocketMQ's format).
	ControllerAddr string `conf:"controllerAddr"`
	// enableControllerMode: milliseconds between a broker's heartbeats (and replica-info reads) to the leading controller (Wharf key: brokerHeartbeatInterval is the name servers').
	ControllerHeartbeatInterval Millis `conf:"controllerHeartbeatInterval"`
	// enableControllerMode: milliseconds a master keeps accepting writes after the send time of its last heartbeat the controller answered; below the controller's 3000 ms heartbeat timeout, so it stops before another master is elected (Wharf key).
	MasterLeaseMillis Millis `conf:"masterLeaseMillis"`
	// enableControllerMode: milliseconds a SyncStateSet member may stay behind the master (or away) before the master drops it from the set (Wharf default 3000; RocketMQ's 15000).
	HAMaxTimeSlaveNotCatchup Millis `conf:"haMaxTimeSlaveNotCatchup"`
	// enableControllerMode: among equally caught-up candidates the controller elects the lowest (RocketMQ's key).
	BrokerElectionPriority int `conf:"brokerElectionPriority"`

	// Create a topic on its first send instead of refusing it with TOPIC_NOT_EXIST.
	AutoCreateTopicEnable bool `conf:"autoCreateTopicEnable"`
	// Create a consumer group on its first use instead of refusing it.
	AutoCreateSubscriptionGroup bool `conf:"autoCreateSubscriptionGroup"`
	// Queues of an automatically created topic.
	DefaultTopicQueueNums int `conf:"defaultTopicQueueNums"`
	// Hold a pull on an empty queue until a message arrives or the consumer's suspend timeout passes.
	LongPollingEnable bool `conf:"longPollingEnable"`
	// Milliseconds a pull on an empty queue is held when longPollingEnable is false.
	ShortPollingTimeMills Millis `conf:"shortPollingTimeMills"`
	// Delays of the delay levels 1, 2, ..., separated by spaces (units s, m, h, d).
	MessageDelayLevel string `conf:"messageDelayLevel"`
	// Milliseconds between two saves of the consumer offsets to disk (they are also saved at shutdown).
	FlushConsumerOffsetInterval Millis `conf:"flushConsumerOffsetInterval"`
	// Milliseconds between a consumer group member's heartbeats; a member silent for three is removed and its queues move (Wharf key).
	ConsumerHeartbeatInterval Millis `conf:"consumerHeartbeatInterval"`
	// Deliveries of a message to a group before it goes to the group's dead-letter topic.
	MaxReconsumeTimes int `conf:"maxReconsumeTimes"`
}

// Broker roles.
const (
	AsyncMaster = "ASYNC_MASTER"
	SyncMaster  = "SYNC_MASTER"
	Slave       = "SLAVE"
)

// Flush disk types.
const (
	AsyncFlush = "ASYNC_FLUSH"
	SyncFlush  = "SYNC_FLUSH"
)

// DefaultStorePathRootDir is Wharf's storePathRootDir. RocketMQ's is
// ~/store; Wharf keeps its data next to where it runs, in ./data, as
// `make run` does, so a broker started in a checkout never writes into the
// home directory and `rm -rf data` resets it.
const DefaultStorePathRootDir = "./data"

// fallbackBrokerName is brokerName when the host name is unknown.
const fallbackBrokerName = "broker-a"

// Default returns the configuration of a broker started without a file or
// flags: RocketMQ's defaults, except where Config's comments say otherwise
// (storePathRootDir ./data, brokerIP1 127.0.0.1, inSyncReplicas 2, and the
// Wharf-only maxFrameSize and
// maxOutboundBytes). haListenPort 0 and an empty storePathCommitLog mean
// "derived": Resolve, Load and Parse fill them in.
func Default() Config {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = fallbackBrokerName
	}
	return Config{
		BrokerClusterName: "DefaultCluster",
		BrokerName:        name,
		BrokerID:          0,
		BrokerRole:        AsyncMaster,
		FlushDiskType:     AsyncFlush,

		BrokerIP1:                       "127.0.0.1",
		ListenPort:                      10911,
		HAListenPort:                    0,
		BrokerHeartbeatInterval:         1000,
		BrokerNotActiveTimeoutMillis:    5000,
		RegisterNameServerPeriod:        30_000,
		ControllerHeartbeatInterval:     500,
		MasterLeaseMillis:               1500,
		HAMaxTimeSlaveNotCatchup:        3000,
		BrokerElectionPriority:          math.MaxInt32,
		MaxFrameSize:                    16 << 20,
		MaxOutboundBytes:                64 << 20,
		ServerChannelMaxIdleTimeSeconds: 120,
		MetricsPort:                     -1,
		MetricsHost:                     "127.0.0.1",

		StorePathRootDir:           DefaultStorePathRootDir,
		MappedFileSizeCommitLog:    1 << 30,
		MappedFileSizeConsumeQueue: 300_000 * 20,
		MaxMessageSize:             4 << 20,
		CheckCRCOnRecover:          true,
		WarmMapedFileEnable:        false,
		MessageIndexEnable:         true,
		MaxHashSlotNum:             5_000_000,
		MaxIndexNum:                20_000_000,

		FileReservedTime:            72,
		DeleteWhen:                  "04",
		DiskMaxUsedSpaceRatio:       75,
		DiskSpaceCleanForciblyRatio: 85,
		DiskSpaceWarningLevelRatio:  90,
		CleanResourceInterval:       10_000,

		FlushIntervalCommitLog:            500,
		FlushCommitLogLeastPages:          4,
		FlushCommitLogThoroughInterval:    10_000,
		FlushIntervalConsumeQueue:         1000,
		FlushConsumeQueueLeastPages:       2,
		FlushConsumeQueueThoroughInterval: 60_000,
		SyncFlushTimeout:                  5000,

		SlaveTimeout:                  3000,
		HASendHeartbeatInterval:       5000,
		HAHousekeepingInterval:        20_000,
		HAReconnectMaxInterval:        1000,
		HATransferBatchSize:           256 << 10,
		HAMaxGapNotInSync:             256 << 20,
		InSyncReplicas:                2,
		AccessMessageInMemoryMaxRatio: 40,
		SlaveReadEnable:               false,

		AutoCreateTopicEnable:       true,
		AutoCreateSubscriptionGroup: true,
		DefaultTopicQueueNums:       8,
		LongPollingEnable:           true,
		ShortPollingTimeMills:       1000,
		MessageDelayLevel:           "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
		FlushConsumerOffsetInterval: 5000,
		ConsumerHeartbeatInterval:   1000,
		MaxReconsumeTimes:           16,
	}
}

// Millis is a duration in milliseconds, as broker.conf writes most of them.
type Millis int64

// Duration converts m to a time.Duration.
func (m Millis) Duration() time.Duration { return time.Duration(m) * time.Millisecond }

// Seconds is a duration in seconds.
type Seconds int64

// Duration converts s to a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(s) * time.Second }

// Hours is a duration in hours (fileReservedTime).
type Hours int64

// Duration converts h to a time.Duration.
func (h Hours) Duration() time.Duration { return time.Duration(h) * time.Hour }

// EffectiveHAListenPort is haListenPort, or listenPort + 1 when it is 0.
func (c Config) EffectiveHAListenPort() int {
	if c.HAListenPort == 0 {
		return c.ListenPort + 1
	}
	return c.HAListenPort
}

// EffectiveMetricsPort is metricsPort, or listenPort + 3 when it is -1
// (listenPort + 1 is replication's, and RocketMQ's fast port was
// listenPort - 2); 0 is off.
func (c Config) EffectiveMetricsPort() int {
	if c.MetricsPort == -1 {
		return c.ListenPort + 3
	}
	return c.MetricsPort
}

// fillDerived sets the keys whose default depends on other keys:
// haListenPort, metricsPort and storePathCommitLog. A port the derivation
// would make invalid stays as it was, for Validate to explain.
func (c *Config) fillDerived() {
	if validPort(c.EffectiveHAListenPort()) {
		c.HAListenPort = c.EffectiveHAListenPort()
	}
	if validPort(c.EffectiveMetricsPort()) {
		c.MetricsPort = c.EffectiveMetricsPort()
	}
	if c.StorePathCommitLog == "" {
		c.StorePathCommitLog = defaultCommitLogPath(c.StorePathRootDir)
	}
}

// unitName names the unit of a typed duration for messages and flag help.
func unitName(v any) string {
	switch v.(type) {
	case Millis:
		return "ms"
	case Seconds:
		return "seconds"
	case Hours:
		return "hours"
	}
	return ""
}
