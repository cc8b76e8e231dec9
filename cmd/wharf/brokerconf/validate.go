package brokerconf

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/wharfmq/wharf/protocol"
	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/cq"
)

// Ranges of the disk ratios, in percent. RocketMQ clamps the values it
// reads to them; Resolve, Load and Parse do the same with a warning, and
// Validate rejects a Config outside them.
const (
	diskMaxUsedMin, diskMaxUsedMax     = 10, 95
	cleanForciblyMin, cleanForciblyMax = 30, 85
	warningLevelMin, warningLevelMax   = 35, 90
)

// minCommitLogSegment is the smallest mappedFileSizeCommitLog.
const minCommitLogSegment = 64 << 10

// frameOverhead is the room a frame needs beside one message body: the
// length prefix and the largest header.
const frameOverhead = 4 + protocol.DefaultMaxHeaderSize

// Validate checks every key and the relations between keys. The error lists
// every problem found, one per line, each starting with the key.
//
// The checks run in sections, in broker.conf's key order; each section
// appends to the same list so the lines keep that order.
func (c Config) Validate() error {
	var p problems
	c.validateClient(&p)
	c.validateIdentity(&p)
	c.validateNetwork(&p)
	p = append(p, c.validateNameServers()...)
	p = append(p, c.validateController()...)
	c.validateFrames(&p)
	c.validateStore(&p)
	c.validateRetention(&p)
	c.validateCounts(&p)
	return errors.Join(p...)
}

// problems collects Validate's findings in the order they are found.
type problems []error

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

// validateClient checks the consumer-facing cadences.
func (c Config) validateClient(p *problems) {
	if c.ConsumerHeartbeatInterval < 100 || c.ConsumerHeartbeatInterval > 60_000 {
		p.add("consumerHeartbeatInterval %d: must be in [100, 60000] ms", c.ConsumerHeartbeatInterval)
	}
	if c.MaxReconsumeTimes < 1 || c.MaxReconsumeTimes > 1000 {
		p.add("maxReconsumeTimes %d: must be in [1, 1000]", c.MaxReconsumeTimes)
	}
}

// validateIdentity checks the names, the role with its id, and the flush type.
func (c Config) validateIdentity(p *problems) {
	if c.BrokerClusterName == "" || strings.IndexFunc(c.BrokerClusterName, unicode.IsSpace) >= 0 {
		p.add("brokerClusterName %q: must be a non-empty name without spaces", c.BrokerClusterName)
	}
	if c.BrokerName == "" || strings.IndexFunc(c.BrokerName, unicode.IsSpace) >= 0 {
		p.add("brokerName %q: must be a non-empty name without spaces", c.BrokerName)
	}
	switch {
	case c.EnableControllerMode:
		// The controllers assign the role and the id.
	case c.BrokerRole == AsyncMaster, c.BrokerRole == SyncMaster:
		if c.BrokerID != 0 {
			p.add("brokerId %d: brokerRole=%s needs brokerId=0 (a slave has brokerRole=SLAVE and brokerId>0)", c.BrokerID, c.BrokerRole)
		}
	case c.BrokerRole == Slave:
		if c.BrokerID <= 0 {
			p.add("brokerId %d: brokerRole=SLAVE needs brokerId>0 (brokerId 0 is the master of %s)", c.BrokerID, c.BrokerName)
		}
		if c.HAMasterAddress == "" {
			p.add("haMasterAddress is empty: brokerRole=SLAVE needs the master's host:haListenPort")
		}
	default:
		p.add("brokerRole %q: must be ASYNC_MASTER, SYNC_MASTER or SLAVE%s", c.BrokerRole, didYouMean(c.BrokerRole, AsyncMaster, SyncMaster, Slave))
	}
	switch c.FlushDiskType {
	case AsyncFlush, SyncFlush:
	default:
		p.add("flushDiskType %q: must be ASYNC_FLUSH or SYNC_FLUSH%s", c.FlushDiskType, didYouMean(c.FlushDiskType, AsyncFlush, SyncFlush))
	}
}

// validateNetwork checks the advertised addresses, the listen hosts and the
// master's address; validatePorts checks the ports between them.
func (c Config) validateNetwork(p *problems) {
	if a, err := netip.ParseAddr(c.BrokerIP1); err != nil || a.Zone() != "" {
		p.add("brokerIP1 %q: must be an IP address such as 127.0.0.1", c.BrokerIP1)
	} else if a.IsUnspecified() {
		p.add("brokerIP1 %s: must be an address clients can reach; it is advertised and written into every message's store host", c.BrokerIP1)
	}
	if a, err := netip.ParseAddr(c.BrokerIP2); c.BrokerIP2 != "" && (err != nil || a.Zone() != "" || a.IsUnspecified()) {
		p.add("brokerIP2 %q: must be an IP address slaves can reach, such as 127.0.0.1 (or empty: brokerIP1)", c.BrokerIP2)
	}
	c.validatePorts(p)
	if a, err := netip.ParseAddr(c.MetricsHost); err != nil || a.Zone() != "" {
		p.add("metricsHost %q: must be an IP address such as 127.0.0.1", c.MetricsHost)
	}
	if c.HAMasterAddress != "" {
		if err := checkHostPort(c.HAMasterAddress); err != nil {
			p.add("haMasterAddress %q: %v", c.HAMasterAddress, err)
		}
	}
}

// validatePorts checks each listening port and that no two collide, the
// derived ones (haListenPort 0, metricsPort -1) as they resolve.
func (c Config) validatePorts(p *problems) {
	if !validPort(c.ListenPort) {
		p.add("listenPort %d: must be a port 1-65535", c.ListenPort)
	}
	switch ha := c.EffectiveHAListenPort(); {
	case !validPort(ha) && c.HAListenPort == 0:
		p.add("haListenPort %d (listenPort + 1): must be a port 1-65535; set haListenPort", ha)
	case !validPort(ha):
		p.add("haListenPort %d: must be a port 1-65535 (or 0 for listenPort + 1)", ha)
	case ha == c.ListenPort:
		p.add("haListenPort %d: must differ from listenPort", ha)
	}
	switch m := c.EffectiveMetricsPort(); {
	case m == 0:
	case !validPort(m) && c.MetricsPort == -1:
		p.add("metricsPort %d (listenPort + 3): must be a port 1-65535; set metricsPort (0: off)", m)
	case !validPort(m):
		p.add("metricsPort %d: must be a port 1-65535, 0 (off) or -1 (listenPort + 3)", m)
	case m == c.ListenPort || m == c.EffectiveHAListenPort():
		p.add("metricsPort %d: must differ from listenPort and haListenPort", m)
	}
	switch r := c.RemotingListenPort; {
	case r == 0:
	case !validPort(r):
		p.add("remotingListenPort %d: must be a port 1-65535, or 0 (off)", r)
	case r == c.ListenPort || r == c.EffectiveHAListenPort() || r == c.EffectiveMetricsPort():
		p.add("remotingListenPort %d: must differ from listenPort, haListenPort and metricsPort", r)
	}
}

// validateFrames checks that the largest message fits a frame and the
// largest frame fits a connection's outbound budget.
func (c Config) validateFrames(p *problems) {
	if c.MaxMessageSize <= 0 {
		p.add("maxMessageSize %d: must be positive", c.MaxMessageSize)
	}
	if c.MaxFrameSize < c.MaxMessageSize+frameOverhead || int64(c.MaxFrameSize) > math.MaxUint32 {
		p.add("maxFrameSize %d: must be between maxMessageSize + %d (%d) and %d", c.MaxFrameSize, frameOverhead, c.MaxMessageSize+frameOverhead, uint32(math.MaxUint32))
	}
	if c.MaxOutboundBytes < int64(c.MaxFrameSize) {
		p.add("maxOutboundBytes %d: must be at least maxFrameSize (%d), or no large response could be sent", c.MaxOutboundBytes, c.MaxFrameSize)
	}
}

// validateStore checks the store's paths, segment sizes and index bounds.
func (c Config) validateStore(p *problems) {
	if c.StorePathRootDir == "" {
		p.add("storePathRootDir is empty")
	}
	if c.StorePathCommitLog != "" && filepath.Clean(c.StorePathCommitLog) != defaultCommitLogPath(c.StorePathRootDir) {
		p.add("storePathCommitLog %q: Wharf keeps the CommitLog in ${storePathRootDir}/commitlog (%s); set storePathRootDir instead",
			c.StorePathCommitLog, defaultCommitLogPath(c.StorePathRootDir))
	}
	switch sz := c.MappedFileSizeCommitLog; {
	case sz < minCommitLogSegment || sz%4096 != 0:
		p.add("mappedFileSizeCommitLog %d: must be a multiple of 4096 and at least %d (64 KiB)", sz, minCommitLogSegment)
	case sz < int64(c.MaxMessageSize)+storage.BlankRecordSize+1:
		p.add("mappedFileSizeCommitLog %d: must be larger than maxMessageSize + %d (%d) so the largest message fits a segment",
			sz, storage.BlankRecordSize, int64(c.MaxMessageSize)+storage.BlankRecordSize)
	}
	if sz := c.MappedFileSizeConsumeQueue; sz <= 0 || sz%cq.UnitSize != 0 || sz/cq.UnitSize > cq.MaxEntriesPerFile {
		p.add("mappedFileSizeConsumeQueue %d: must be a positive multiple of %d (the entry size), at most %d", sz, cq.UnitSize, cq.MaxEntriesPerFile*cq.UnitSize)
	}
	if c.MaxHashSlotNum < 1 || c.MaxHashSlotNum > math.MaxInt32 {
		p.add("maxHashSlotNum %d: must be 1-%d", c.MaxHashSlotNum, math.MaxInt32)
	}
	if c.MaxIndexNum < 2 || c.MaxIndexNum > math.MaxInt32 {
		p.add("maxIndexNum %d: must be 2-%d", c.MaxIndexNum, math.MaxInt32)
	}
}

// validateRetention checks deleteWhen and the disk ratios, in percent.
func (c Config) validateRetention(p *problems) {
	if _, err := storage.ParseDeleteWhen(c.DeleteWhen); err != nil {
		p.add("%v", err)
	}
	ratios := []struct {
		key       string
		v, lo, hi int
	}{
		{"diskMaxUsedSpaceRatio", c.DiskMaxUsedSpaceRatio, diskMaxUsedMin, diskMaxUsedMax},
		{"diskSpaceCleanForciblyRatio", c.DiskSpaceCleanForciblyRatio, cleanForciblyMin, cleanForciblyMax},
		{"diskSpaceWarningLevelRatio", c.DiskSpaceWarningLevelRatio, warningLevelMin, warningLevelMax},
		{"accessMessageInMemoryMaxRatio", c.AccessMessageInMemoryMaxRatio, 0, 100},
	}
	for _, r := range ratios {
		if r.v < r.lo || r.v > r.hi {
			p.add("%s %d: must be a percentage %d-%d", r.key, r.v, r.lo, r.hi)
		}
	}
}

// validateCounts checks the durations (every key with a unit type must be
// positive), the flush and HA counts, and the delay levels.
func (c Config) validateCounts(p *problems) {
	v := reflect.ValueOf(c)
	for _, f := range fields() {
		if u := unitName(v.Field(f.index).Interface()); u != "" && v.Field(f.index).Int() <= 0 {
			p.add("%s %d: must be a positive number of %s", f.key, v.Field(f.index).Int(), u)
		}
	}
	if c.FlushCommitLogLeastPages < 0 {
		p.add("flushCommitLogLeastPages %d: must not be negative", c.FlushCommitLogLeastPages)
	}
	if c.FlushConsumeQueueLeastPages < 0 {
		p.add("flushConsumeQueueLeastPages %d: must not be negative", c.FlushConsumeQueueLeastPages)
	}
	if c.HATransferBatchSize <= 0 {
		p.add("haTransferBatchSize %d: must be positive", c.HATransferBatchSize)
	}
	if c.HASendHeartbeatInterval > 0 && c.HASendHeartbeatInterval >= c.HAHousekeepingInterval {
		p.add("haSendHeartbeatInterval %d: must be below haHousekeepingInterval (%d), or an idle link is closed between heartbeats",
			c.HASendHeartbeatInterval, c.HAHousekeepingInterval)
	}
	if c.HAMaxGapNotInSync <= 0 {
		p.add("haMaxGapNotInSync %d: must be positive", c.HAMaxGapNotInSync)
	}
	if c.InSyncReplicas < 1 {
		p.add("inSyncReplicas %d: must be at least 1 (the master's copy)", c.InSyncReplicas)
	}
	if c.DefaultTopicQueueNums < 1 {
		p.add("defaultTopicQueueNums %d: must be at least 1", c.DefaultTopicQueueNums)
	}
	if _, err := ParseDelayLevels(c.MessageDelayLevel); err != nil {
		p.add("%v", err)
	}
}

func validPort(p int) bool { return p >= 1 && p <= 65535 }

// checkHostPort checks a host:port address.
func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New("must be host:port")
	}
	if host == "" {
		return errors.New("must be host:port with a host")
	}
	if p, err := strconv.Atoi(port); err != nil || !validPort(p) {
		return fmt.Errorf("port %q must be 1-65535", port)
	}
	return nil
}

// defaultCommitLogPath is ${storePathRootDir}/commitlog, the only CommitLog
// directory Wharf supports.
func defaultCommitLogPath(root string) string { return filepath.Join(root, "commitlog") }

// didYouMean suggests the choice equal to s but for case, if any.
func didYouMean(s string, choices ...string) string {
	for _, ch := range choices {
		if strings.EqualFold(strings.ReplaceAll(s, "-", "_"), ch) {
			return " (did you mean " + ch + "?)"
		}
	}
	return ""
}

// ParseDelayLevels parses messageDelayLevel: delays separated by spaces, each
// a positive integer followed by s, m, h or d ("1s 5s 10s 30s 1m ... 2h").
// Level n is the n-th delay.
func ParseDelayLevels(s string) ([]time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}
	var levels []time.Duration
	for _, f := range strings.Fields(s) {
		unit, ok := units[f[len(f)-1]]
		n, err := strconv.ParseInt(f[:len(f)-1], 10, 32)
		if !ok || err != nil || n <= 0 {
			return nil, fmt.Errorf("messageDelayLevel %q: %q is not a delay such as 10s, 5m, 2h or 1d", s, f)
		}
		levels = append(levels, time.Duration(n)*unit)
	}
	if len(levels) == 0 {
		return nil, fmt.Errorf("messageDelayLevel %q: no delay levels", s)
	}
	return levels, nil
}

// validateNameServers checks namesrvAddr and the registration cadence.
func (c Config) validateNameServers() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	for _, a := range strings.Split(c.NamesrvAddr, ";") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if err := checkHostPort(a); err != nil {
			bad("namesrvAddr %q: %q: %v", c.NamesrvAddr, a, err)
		} else if seen[a] {
			bad("namesrvAddr %q: %q is listed twice", c.NamesrvAddr, a)
		}
		seen[a] = true
	}
	if c.BrokerHeartbeatInterval < 100 || c.BrokerHeartbeatInterval > 60_000 {
		bad("brokerHeartbeatInterval %d: must be in [100, 60000] ms", c.BrokerHeartbeatInterval)
	}
	if c.BrokerNotActiveTimeoutMillis < 2*c.BrokerHeartbeatInterval || c.BrokerNotActiveTimeoutMillis > 600_000 {
		bad("brokerNotActiveTimeoutMillis %d: must be at least twice brokerHeartbeatInterval (%d) and at most 600000 ms, or one lost heartbeat would expire the broker",
			c.BrokerNotActiveTimeoutMillis, 2*c.BrokerHeartbeatInterval)
	}
	if c.RegisterNameServerPeriod < 1000 || c.RegisterNameServerPeriod > 600_000 {
		bad("registerNameServerPeriod %d: must be in [1000, 600000] ms", c.RegisterNameServerPeriod)
	}
	return errs
}

// controllerHeartbeatTimeout is the controller's default
// controllerHeartBeatTimeoutMills: a master lease must end before it.
const controllerHeartbeatTimeout = 3000

// validateController checks the controller-mode keys.
func (c Config) validateController() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	for _, a := range strings.Split(c.ControllerAddr, ";") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if err := checkHostPort(a); err != nil {
			bad("controllerAddr %q: %q: %v", c.ControllerAddr, a, err)
		} else if seen[a] {
			bad("controllerAddr %q: %q is listed twice", c.ControllerAddr, a)
		}
		seen[a] = true
	}
	if c.EnableControllerMode && len(seen) == 0 {
		bad("controllerAddr is empty: enableControllerMode needs the controllers' host:port")
	}
	if c.ControllerHeartbeatInterval < 100 || c.ControllerHeartbeatInterval > 10_000 {
		bad("controllerHeartbeatInterval %d: must be in [100, 10000] ms", c.ControllerHeartbeatInterval)
	}
	if c.MasterLeaseMillis <= c.ControllerHeartbeatInterval || c.MasterLeaseMillis > controllerHeartbeatTimeout*9/10 {
		bad("masterLeaseMillis %d: must be above controllerHeartbeatInterval (%d), or the lease lapses between heartbeats, and at most %d ms, below the controller's %d ms heartbeat timeout, or a new master may be elected while the old one still writes",
			c.MasterLeaseMillis, c.ControllerHeartbeatInterval, controllerHeartbeatTimeout*9/10, controllerHeartbeatTimeout)
	}
	if c.HAMaxTimeSlaveNotCatchup < 100 || c.HAMaxTimeSlaveNotCatchup > 600_000 {
		bad("haMaxTimeSlaveNotCatchup %d: must be in [100, 600000] ms", c.HAMaxTimeSlaveNotCatchup)
	}
	return errs
}

// Controllers returns controllerAddr's addresses.
func (c Config) Controllers() []string {
	var out []string
	for _, a := range strings.Split(c.ControllerAddr, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// NameServers returns namesrvAddr's addresses (none: standalone).
func (c Config) NameServers() []string {
	var out []string
	for _, a := range strings.Split(c.NamesrvAddr, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
