package brokerconf

import (
	"net/netip"
	"time"

	"github.com/wharfmq/wharf/storage"
	"github.com/wharfmq/wharf/storage/cq"
)

// StoreConfig maps the store's keys into a storage.Config: sizes as they
// are, mappedFileSizeConsumeQueue from bytes to entries, retention hours and
// percentages to a duration and ratios, deleteWhen to hours of the day, and
// brokerIP1:listenPort to the store host written into every record. Call it
// on a validated Config (Resolve, Load and Parse return one); a value that
// does not parse is left zero.
func (c Config) StoreConfig() storage.Config {
	sc := storage.DefaultConfig(c.StorePathRootDir)
	sc.MappedFileSizeCommitLog = c.MappedFileSizeCommitLog
	sc.MappedFileSizeConsumeQueue = c.MappedFileSizeConsumeQueue / cq.UnitSize
	sc.MaxMessageSize = c.MaxMessageSize
	sc.MessageIndexEnable = c.MessageIndexEnable
	sc.MaxHashSlotNum = c.MaxHashSlotNum
	sc.MaxIndexNum = c.MaxIndexNum
	sc.CheckCRCOnRecover = c.CheckCRCOnRecover
	sc.WarmMappedFileEnable = c.WarmMapedFileEnable
	sc.WriteBackAhead = c.FlushDiskType == SyncFlush && c.SyncFlushPrezeroEnable
	sc.DispatchConfirmedOnly = c.EnableControllerMode
	if a, err := netip.ParseAddr(c.BrokerIP1); err == nil && validPort(c.ListenPort) {
		sc.StoreHost = netip.AddrPortFrom(a, uint16(c.ListenPort))
	}
	hours, _ := storage.ParseDeleteWhen(c.DeleteWhen)
	sc.Retention = storage.RetentionPolicy{
		FileReservedTime:            c.FileReservedTime.Duration(),
		DeleteWhen:                  hours,
		DiskMaxUsedSpaceRatio:       float64(c.DiskMaxUsedSpaceRatio) / 100,
		DiskSpaceCleanForciblyRatio: float64(c.DiskSpaceCleanForciblyRatio) / 100,
		DiskSpaceWarningLevelRatio:  float64(c.DiskSpaceWarningLevelRatio) / 100,
	}
	return sc
}

// DelayLevels returns messageDelayLevel parsed (nil if it does not parse;
// Validate reports that).
func (c Config) DelayLevels() []time.Duration {
	levels, _ := ParseDelayLevels(c.MessageDelayLevel)
	return levels
}
