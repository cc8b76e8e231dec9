package brokerconf

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wharfmq/wharf/storage"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
		want   string // substring of the error; "" for valid
	}{
		{"defaults", func(c *Config) {}, ""},
		{"slave", func(c *Config) { c.BrokerRole, c.BrokerID, c.HAMasterAddress = Slave, 1, "10.0.0.1:10912" }, ""},
		{"slave with id 0", func(c *Config) { c.BrokerRole, c.HAMasterAddress = Slave, "m:10912" }, "brokerId 0: brokerRole=SLAVE needs brokerId>0"},
		{"slave without master", func(c *Config) { c.BrokerRole, c.BrokerID = Slave, 2 }, "haMasterAddress is empty: brokerRole=SLAVE needs"},
		{"master with id", func(c *Config) { c.BrokerRole, c.BrokerID = SyncMaster, 1 }, "brokerId 1: brokerRole=SYNC_MASTER needs brokerId=0"},
		{"negative id", func(c *Config) { c.BrokerRole, c.BrokerID, c.HAMasterAddress = Slave, -1, "m:1" }, "brokerId -1"},
		{"role", func(c *Config) { c.BrokerRole = "MASTER" }, `brokerRole "MASTER": must be ASYNC_MASTER, SYNC_MASTER or SLAVE`},
		{"role case", func(c *Config) { c.BrokerRole = "sync_master" }, "(did you mean SYNC_MASTER?)"},
		{"flush type", func(c *Config) { c.FlushDiskType = "sync-flush" }, `flushDiskType "sync-flush": must be ASYNC_FLUSH or SYNC_FLUSH (did you mean SYNC_FLUSH?)`},
		{"empty broker name", func(c *Config) { c.BrokerName = "" }, `brokerName "": must be a non-empty name`},
		{"broker name with space", func(c *Config) { c.BrokerName = "a b" }, `brokerName "a b"`},
		{"cluster name", func(c *Config) { c.BrokerClusterName = "" }, "brokerClusterName"},
		{"ip", func(c *Config) { c.BrokerIP1 = "localhost" }, `brokerIP1 "localhost": must be an IP address`},
		{"unspecified ip", func(c *Config) { c.BrokerIP1 = "0.0.0.0" }, "brokerIP1 0.0.0.0: must be an address clients can reach"},
		{"ipv6", func(c *Config) { c.BrokerIP1 = "::1" }, ""},
		{"ip2", func(c *Config) { c.BrokerIP2 = "127.0.0.2" }, ""},
		{"bad ip2", func(c *Config) { c.BrokerIP2 = "slaves.local" }, `brokerIP2 "slaves.local": must be an IP address`},
		{"unspecified ip2", func(c *Config) { c.BrokerIP2 = "0.0.0.0" }, `brokerIP2 "0.0.0.0"`},
		{"port 0", func(c *Config) { c.ListenPort = 0 }, "listenPort 0: must be a port 1-65535"},
		{"port too big", func(c *Config) { c.ListenPort = 70000 }, "listenPort 70000"},
		{"derived ha port too big", func(c *Config) { c.ListenPort = 65535 }, "haListenPort 65536 (listenPort + 1): must be a port 1-65535; set haListenPort"},
		{"ha port", func(c *Config) { c.HAListenPort = -1 }, "haListenPort -1: must be a port"},
		{"ha port equals listen port", func(c *Config) { c.HAListenPort = c.ListenPort }, "haListenPort 10911: must differ from listenPort"},
		{"derived metrics port too big", func(c *Config) { c.ListenPort, c.HAListenPort = 65533, 4000 }, "metricsPort 65536 (listenPort + 3): must be a port 1-65535; set metricsPort (0: off)"},
		{"metrics port", func(c *Config) { c.MetricsPort = -2 }, "metricsPort -2: must be a port 1-65535, 0 (off) or -1 (listenPort + 3)"},
		{"metrics port equals ha port", func(c *Config) { c.MetricsPort = c.ListenPort + 1 }, "metricsPort 10912: must differ from listenPort and haListenPort"},
		{"metrics host", func(c *Config) { c.MetricsHost = "localhost" }, `metricsHost "localhost": must be an IP address`},
		{"ha master address", func(c *Config) { c.BrokerRole, c.BrokerID, c.HAMasterAddress = Slave, 1, "10.0.0.1" }, `haMasterAddress "10.0.0.1": must be host:port`},
		{"ha master port", func(c *Config) { c.BrokerRole, c.BrokerID, c.HAMasterAddress = Slave, 1, "m:0" }, `port "0" must be 1-65535`},
		{"namesrv", func(c *Config) { c.NamesrvAddr = "a:9876;b" }, `namesrvAddr "a:9876;b": "b": must be host:port`},
		{"namesrv list", func(c *Config) { c.NamesrvAddr = " a:9876; b:9876 ;" }, ""},
		{"namesrv twice", func(c *Config) { c.NamesrvAddr = "a:9876;a:9876" }, `namesrvAddr "a:9876;a:9876": "a:9876" is listed twice`},
		{"broker heartbeat", func(c *Config) { c.BrokerHeartbeatInterval = 10 }, "brokerHeartbeatInterval 10: must be in [100, 60000] ms"},
		{"lease below two heartbeats", func(c *Config) { c.BrokerNotActiveTimeoutMillis = 1500 },
			"brokerNotActiveTimeoutMillis 1500: must be at least twice brokerHeartbeatInterval (2000)"},
		{"register period", func(c *Config) { c.RegisterNameServerPeriod = 0 }, "registerNameServerPeriod 0: must be in [1000, 600000] ms"},
		{"namesrv ok", func(c *Config) { c.NamesrvAddr = "a:9876; b:9876" }, ""},
		{"controller mode", func(c *Config) { c.EnableControllerMode, c.ControllerAddr = true, "a:9878;b:9868" }, ""},
		{"controller mode ignores the role", func(c *Config) {
			c.EnableControllerMode, c.ControllerAddr, c.BrokerRole, c.BrokerID = true, "a:9878", Slave, 0
		}, ""},
		{"controller mode without controllers", func(c *Config) { c.EnableControllerMode = true }, "controllerAddr is empty"},
		{"controller addr", func(c *Config) { c.ControllerAddr = "a:9878;b" }, `controllerAddr "a:9878;b": "b": must be host:port`},
		{"controller addr twice", func(c *Config) { c.ControllerAddr = "a:1;a:1" }, `"a:1" is listed twice`},
		{"lease not below the controller's timeout", func(c *Config) { c.MasterLeaseMillis = 3000 }, "masterLeaseMillis 3000: must be above"},
		{"lease below the heartbeat", func(c *Config) { c.MasterLeaseMillis = 400 }, "masterLeaseMillis 400: must be above controllerHeartbeatInterval (500)"},
		{"controller heartbeat", func(c *Config) { c.ControllerHeartbeatInterval = 50 }, "controllerHeartbeatInterval 50: must be in [100, 10000] ms"},
		{"slave not catchup", func(c *Config) { c.HAMaxTimeSlaveNotCatchup = 0 }, "haMaxTimeSlaveNotCatchup 0"},
		{"commitlog path", func(c *Config) { c.StorePathCommitLog = "/other/commitlog" }, `storePathCommitLog "/other/commitlog": Wharf keeps the CommitLog in ${storePathRootDir}/commitlog (data/commitlog)`},
		{"commitlog path default spelled out", func(c *Config) { c.StorePathCommitLog = "./data/commitlog/" }, ""},
		{"commitlog multi path", func(c *Config) { c.StorePathCommitLog = "data/commitlog;/disk2/commitlog" }, "storePathCommitLog"},
		{"empty root", func(c *Config) { c.StorePathRootDir = "" }, "storePathRootDir is empty"},
		{"segment too small", func(c *Config) { c.MappedFileSizeCommitLog, c.MaxMessageSize = 32<<10, 1024 }, "mappedFileSizeCommitLog 32768: must be a multiple of 4096 and at least 65536"},
		{"segment not page aligned", func(c *Config) { c.MappedFileSizeCommitLog = 1<<30 + 1 }, "mappedFileSizeCommitLog 1073741825: must be a multiple of 4096"},
		{"segment smaller than message", func(c *Config) { c.MappedFileSizeCommitLog = 4 << 20 }, "mappedFileSizeCommitLog 4194304: must be larger than maxMessageSize + 8 (4194312)"},
		{"cq size not entries", func(c *Config) { c.MappedFileSizeConsumeQueue = 6000001 }, "mappedFileSizeConsumeQueue 6000001: must be a positive multiple of 20"},
		{"cq size zero", func(c *Config) { c.MappedFileSizeConsumeQueue = 0 }, "mappedFileSizeConsumeQueue 0"},
		{"max message", func(c *Config) { c.MaxMessageSize = 0 }, "maxMessageSize 0: must be positive"},
		{"frame below message", func(c *Config) { c.MaxFrameSize = c.MaxMessageSize }, "maxFrameSize 4194304: must be between maxMessageSize + 65540"},
		{"outbound below frame", func(c *Config) { c.MaxOutboundBytes = 1 << 20 }, "maxOutboundBytes 1048576: must be at least maxFrameSize (16777216)"},
		{"hash slots", func(c *Config) { c.MaxHashSlotNum = 0 }, "maxHashSlotNum 0"},
		{"index num", func(c *Config) { c.MaxIndexNum = 1 }, "maxIndexNum 1"},
		{"deleteWhen", func(c *Config) { c.DeleteWhen = "25" }, `deleteWhen "25": "25" is not an hour 00-23`},
		{"deleteWhen empty", func(c *Config) { c.DeleteWhen = "" }, ""},
		{"max used ratio", func(c *Config) { c.DiskMaxUsedSpaceRatio = 99 }, "diskMaxUsedSpaceRatio 99: must be a percentage 10-95"},
		{"forcibly ratio", func(c *Config) { c.DiskSpaceCleanForciblyRatio = 90 }, "diskSpaceCleanForciblyRatio 90: must be a percentage 30-85"},
		{"warning ratio", func(c *Config) { c.DiskSpaceWarningLevelRatio = 95 }, "diskSpaceWarningLevelRatio 95: must be a percentage 35-90"},
		{"memory ratio", func(c *Config) { c.AccessMessageInMemoryMaxRatio = 101 }, "accessMessageInMemoryMaxRatio 101"},
		{"reserved time", func(c *Config) { c.FileReservedTime = 0 }, "fileReservedTime 0: must be a positive number of hours"},
		{"flush interval", func(c *Config) { c.FlushIntervalCommitLog = 0 }, "flushIntervalCommitLog 0: must be a positive number of ms"},
		{"idle seconds", func(c *Config) { c.ServerChannelMaxIdleTimeSeconds = -1 }, "serverChannelMaxIdleTimeSeconds -1: must be a positive number of seconds"},
		{"least pages", func(c *Config) { c.FlushCommitLogLeastPages = -1 }, "flushCommitLogLeastPages -1"},
		{"least pages zero", func(c *Config) { c.FlushCommitLogLeastPages, c.FlushConsumeQueueLeastPages = 0, 0 }, ""},
		{"ha batch", func(c *Config) { c.HATransferBatchSize = 0 }, "haTransferBatchSize 0"},
		{"ha gap", func(c *Config) { c.HAMaxGapNotInSync = 0 }, "haMaxGapNotInSync 0"},
		{"ha heartbeat", func(c *Config) { c.HASendHeartbeatInterval = c.HAHousekeepingInterval },
			"haSendHeartbeatInterval 20000: must be below haHousekeepingInterval (20000), or an idle link is closed between heartbeats"},
		{"in sync replicas", func(c *Config) { c.InSyncReplicas = 0 }, "inSyncReplicas 0: must be at least 1"},
		{"queue nums", func(c *Config) { c.DefaultTopicQueueNums = 0 }, "defaultTopicQueueNums 0"},
		{"delay level", func(c *Config) { c.MessageDelayLevel = "1s 5x" }, `messageDelayLevel "1s 5x": "5x" is not a delay`},
		{"no delay level", func(c *Config) { c.MessageDelayLevel = " " }, "no delay levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goldenDefault()
			tt.change(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && err == nil:
				t.Errorf("no error, want %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := goldenDefault()
	c.ListenPort, c.FlushDiskType, c.InSyncReplicas = 0, "x", 0
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Errorf("want three problems, one per line:\n%v", err)
	}
}

func TestStoreConfig(t *testing.T) {
	c, _, err := Parse(strings.NewReader(`
storePathRootDir=/srv/wharf
brokerIP1=10.1.2.3
listenPort=20911
mappedFileSizeCommitLog=134217728
mappedFileSizeConsumeQueue=600000
maxMessageSize=1048576
messageIndexEnable=false
maxHashSlotNum=1000
maxIndexNum=4000
checkCRCOnRecover=false
warmMapedFileEnable=false
flushDiskType=SYNC_FLUSH
syncFlushPrezeroEnable=true
fileReservedTime=48
deleteWhen=04;16
diskMaxUsedSpaceRatio=70
diskSpaceCleanForciblyRatio=80
diskSpaceWarningLevelRatio=88
`), "broker.conf")
	if err != nil {
		t.Fatal(err)
	}
	got := c.StoreConfig()
	want := storage.Config{
		StorePathRootDir:           "/srv/wharf",
		MappedFileSizeCommitLog:    128 << 20,
		MappedFileSizeConsumeQueue: 30_000,
		MaxMessageSize:             1 << 20,
		MessageIndexEnable:         false,
		MaxHashSlotNum:             1000,
		MaxIndexNum:                4000,
		CheckCRCOnRecover:          false,
		StoreHost:                  netip.MustParseAddrPort("10.1.2.3:20911"),
		WarmMappedFileEnable:       false,
		WriteBackAhead:             true,
		Retention: storage.RetentionPolicy{
			FileReservedTime:            48 * time.Hour,
			DeleteWhen:                  []int{4, 16},
			DiskMaxUsedSpaceRatio:       0.70,
			DiskSpaceCleanForciblyRatio: 0.80,
			DiskSpaceWarningLevelRatio:  0.88,
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// TestSyncFlushPrezero: the window ahead is written back under SYNC_FLUSH
// if syncFlushPrezeroEnable turns it on, and never under ASYNC_FLUSH.
func TestSyncFlushPrezero(t *testing.T) {
	for _, c := range []struct {
		conf string
		want bool
	}{
		{"flushDiskType=SYNC_FLUSH", false},
		{"flushDiskType=SYNC_FLUSH\nsyncFlushPrezeroEnable=true", true},
		{"flushDiskType=SYNC_FLUSH\nsyncFlushPrezeroEnable=false", false},
		{"flushDiskType=ASYNC_FLUSH", false},
		{"flushDiskType=ASYNC_FLUSH\nsyncFlushPrezeroEnable=true", false},
	} {
		conf, _, err := Parse(strings.NewReader(c.conf), "broker.conf")
		if err != nil {
			t.Fatal(err)
		}
		if got := conf.StoreConfig().WriteBackAhead; got != c.want {
			t.Errorf("%q: WriteBackAhead %v, want %v", c.conf, got, c.want)
		}
	}
}

// TestStoreConfigDefaults: the defaults map onto storage's defaults, except
// for the root and the store host.
func TestStoreConfigDefaults(t *testing.T) {
	got := Default().StoreConfig()
	want := storage.DefaultConfig("./data")
	want.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestDelayLevels(t *testing.T) {
	levels := Default().DelayLevels()
	if len(levels) != 18 || levels[0] != time.Second || levels[4] != time.Minute || levels[17] != 2*time.Hour {
		t.Errorf("default levels %v", levels)
	}
	got, err := ParseDelayLevels("  1s\t2m 3h 1d ")
	if err != nil || !reflect.DeepEqual(got, []time.Duration{time.Second, 2 * time.Minute, 3 * time.Hour, 24 * time.Hour}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"1", "s", "0s", "-1s", "1.5s", "1w"} {
		if _, err := ParseDelayLevels(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestDurations(t *testing.T) {
	if Millis(1500).Duration() != 1500*time.Millisecond || Seconds(2).Duration() != 2*time.Second || Hours(3).Duration() != 3*time.Hour {
		t.Error("unit conversion")
	}
}

func TestNameServers(t *testing.T) {
	c := Default()
	if got := c.NameServers(); got != nil {
		t.Fatalf("default name servers %q, want none (standalone)", got)
	}
	c.NamesrvAddr = " a:9876; ;b:9866"
	if got := c.NameServers(); !reflect.DeepEqual(got, []string{"a:9876", "b:9866"}) {
		t.Fatalf("name servers %q", got)
	}
}

// TestValidateOrderAndText pins the whole error of a Config wrong in every
// section: each message word for word, in key order, one per line.
func TestValidateOrderAndText(t *testing.T) {
	c := goldenDefault()
	c.ConsumerHeartbeatInterval, c.MaxReconsumeTimes = 1, 0
	c.BrokerName, c.BrokerRole, c.BrokerID = "a b", Slave, 0
	c.FlushDiskType = "x"
	c.BrokerIP1, c.BrokerIP2, c.MetricsHost = "0.0.0.0", "h", "h"
	c.ListenPort, c.HAListenPort, c.MetricsPort, c.RemotingListenPort = 10911, 10911, 70000, 10911
	c.NamesrvAddr, c.ControllerAddr, c.MasterLeaseMillis = "a:1;a:1", "b", 100
	c.MaxFrameSize, c.MaxOutboundBytes = 10, 1
	c.StorePathRootDir, c.MappedFileSizeCommitLog, c.MappedFileSizeConsumeQueue = "", 4096, 7
	c.MaxHashSlotNum, c.MaxIndexNum, c.DeleteWhen = 0, 0, "x"
	c.DiskMaxUsedSpaceRatio, c.AccessMessageInMemoryMaxRatio = 1, 101
	c.FileReservedTime, c.FlushCommitLogLeastPages, c.FlushConsumeQueueLeastPages = 0, -1, -1
	c.HATransferBatchSize, c.HAMaxGapNotInSync, c.InSyncReplicas, c.DefaultTopicQueueNums = 0, 0, 0, 0
	c.MessageDelayLevel = ""
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	if got := err.Error(); got != wantValidateText {
		t.Errorf("got:\n%s\nwant:\n%s", got, wantValidateText)
	}
}

const wantValidateText = `consumerHeartbeatInterval 1: must be in [100, 60000] ms
maxReconsumeTimes 0: must be in [1, 1000]
brokerName "a b": must be a non-empty name without spaces
brokerId 0: brokerRole=SLAVE needs brokerId>0 (brokerId 0 is the master of a b)
haMasterAddress is empty: brokerRole=SLAVE needs the master's host:haListenPort
flushDiskType "x": must be ASYNC_FLUSH or SYNC_FLUSH
brokerIP1 0.0.0.0: must be an address clients can reach; it is advertised and written into every message's store host
brokerIP2 "h": must be an IP address slaves can reach, such as 127.0.0.1 (or empty: brokerIP1)
haListenPort 10911: must differ from listenPort
metricsPort 70000: must be a port 1-65535, 0 (off) or -1 (listenPort + 3)
remotingListenPort 10911: must differ from listenPort, haListenPort and metricsPort
metricsHost "h": must be an IP address such as 127.0.0.1
namesrvAddr "a:1;a:1": "a:1" is listed twice
controllerAddr "b": "b": must be host:port
masterLeaseMillis 100: must be above controllerHeartbeatInterval (500), or the lease lapses between heartbeats, and at most 2700 ms, below the controller's 3000 ms heartbeat timeout, or a new master may be elected while the old one still writes
maxFrameSize 10: must be between maxMessageSize + 65540 (4259844) and 4294967295
maxOutboundBytes 1: must be at least maxFrameSize (10), or no large response could be sent
storePathRootDir is empty
mappedFileSizeCommitLog 4096: must be a multiple of 4096 and at least 65536 (64 KiB)
mappedFileSizeConsumeQueue 7: must be a positive multiple of 20 (the entry size), at most 671088640
maxHashSlotNum 0: must be 1-2147483647
maxIndexNum 0: must be 2-2147483647
deleteWhen "x": "x" is not an hour 00-23
diskMaxUsedSpaceRatio 1: must be a percentage 10-95
accessMessageInMemoryMaxRatio 101: must be a percentage 0-100
fileReservedTime 0: must be a positive number of hours
flushCommitLogLeastPages -1: must not be negative
flushConsumeQueueLeastPages -1: must not be negative
haTransferBatchSize 0: must be positive
haMaxGapNotInSync 0: must be positive
inSyncReplicas 0: must be at least 1 (the master's copy)
defaultTopicQueueNums 0: must be at least 1
messageDelayLevel "": no delay levels`
