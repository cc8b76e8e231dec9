package storage

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RetentionPolicy is when whole CommitLog segments are deleted. Keys follow
// RocketMQ's broker.conf.
type RetentionPolicy struct {
	FileReservedTime            time.Duration // fileReservedTime (hours in broker.conf)
	DeleteWhen                  []int         // deleteWhen: hours of day ("04", "04;16")
	DiskMaxUsedSpaceRatio       float64       // above it, expired segments go at any hour
	DiskSpaceCleanForciblyRatio float64       // above it, the oldest segments go whatever their age
	DiskSpaceWarningLevelRatio  float64       // above it, writes are refused (DISK_FULL)
}

// diskFullHysteresis is how far usage must fall below the warning level before
// writes resume, so the store does not flap between full and not full.
const diskFullHysteresis = 0.05

// DefaultRetention is RocketMQ's: 72 h, at 04:00, 75 % / 85 % / 90 %.
func DefaultRetention() RetentionPolicy {
	return RetentionPolicy{
		FileReservedTime:            72 * time.Hour,
		DeleteWhen:                  []int{4},
		DiskMaxUsedSpaceRatio:       0.75,
		DiskSpaceCleanForciblyRatio: 0.85,
		DiskSpaceWarningLevelRatio:  0.90,
	}
}

// ParseDeleteWhen parses deleteWhen: hours of the day separated by ';'.
func ParseDeleteWhen(s string) ([]int, error) {
	var hours []int
	for _, f := range strings.Split(s, ";") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		h, err := strconv.Atoi(f)
		if err != nil || h < 0 || h > 23 {
			return nil, fmt.Errorf("deleteWhen %q: %q is not an hour 00-23", s, f)
		}
		hours = append(hours, h)
	}
	return hours, nil
}

// RetentionReport says what one retention pass saw and did.
type RetentionReport struct {
	UsedRatio       float64
	DiskFull        bool // writes refused after this pass
	DeletedSegments int
	DeletedCQFiles  int
	DeletedIndex    int
	MinOffset       int64 // the log's first offset after the pass
}

// Clean runs one retention pass at time now: it deletes expired segments
// (oldest first, never the last one) if it is a deleteWhen hour, the disk is
// above diskMaxUsedSpaceRatio, or force is set; deletes the oldest segments
// regardless of age while the disk is above diskSpaceCleanForciblyRatio;
// then drops ConsumeQueue and index files wholly below the log's new start,
// and sets or clears the disk-full state. A segment's age is the store time
// of the first record after it (when it filled), not its file time, which
// copies and backups change.
//
// Clean is called by the owner of the writes (it changes the segment list
// and the ConsumeQueues); segments it removes are unmapped only at the next
// pass, so readers that started before it finish safely.
func (s *Store) Clean(now time.Time, force bool) (RetentionReport, error) {
	rep, err := s.cleanLog(now, force)
	if err != nil {
		return rep, err
	}
	for _, k := range s.Queues() {
		n, err := s.DeleteQueueBefore(k, rep.MinOffset)
		if err != nil {
			return rep, err
		}
		rep.DeletedCQFiles += n
	}
	n, err := s.DeleteIndexBefore(rep.MinOffset)
	rep.DeletedIndex = n
	return rep, err
}

func (s *Store) cleanLog(now time.Time, force bool) (RetentionReport, error) {
	var rep RetentionReport
	pol := s.cfg.Retention
	s.cl.buryDead()
	usage, err := s.fs.Usage(s.cfg.StorePathRootDir)
	if err != nil {
		return rep, fmt.Errorf("storage: retention: disk usage: %w", err)
	}
	rep.UsedRatio = usage.UsedRatio()
	inHour := false
	for _, h := range pol.DeleteWhen {
		if now.Hour() == h {
			inHour = true
		}
	}
	expire := force || inHour || rep.UsedRatio > pol.DiskMaxUsedSpaceRatio
	cutoff := now.Add(-pol.FileReservedTime).UnixMilli()
	for expire {
		segs := s.cl.segments()
		if len(segs) < 2 {
			break
		}
		forcibly := rep.UsedRatio > pol.DiskSpaceCleanForciblyRatio
		if !forcibly {
			filled, err := s.firstStoreTime(segs[1])
			if err != nil || filled > cutoff {
				break
			}
		}
		if err := s.cl.deleteOldest(); err != nil {
			return rep, fmt.Errorf("storage: retention: %w", err)
		}
		rep.DeletedSegments++
		if u, err := s.fs.Usage(s.cfg.StorePathRootDir); err == nil {
			rep.UsedRatio = u.UsedRatio()
		}
	}
	if rep.DeletedSegments > 0 {
		if err := s.fs.SyncDir(s.commitLogDir()); err != nil {
			return rep, fmt.Errorf("storage: retention: sync commitlog dir: %w", err)
		}
	}
	minOff := s.cl.MinOffset()
	rep.MinOffset = minOff
	switch {
	case rep.UsedRatio > pol.DiskSpaceWarningLevelRatio:
		s.diskFull = true
	case rep.UsedRatio < pol.DiskSpaceWarningLevelRatio-diskFullHysteresis:
		s.diskFull = false
	}
	rep.DiskFull = s.diskFull
	return rep, nil
}

// DiskFull reports whether writes are refused for lack of disk space.
func (s *Store) DiskFull() bool { return s.diskFull }

func (s *Store) firstStoreTime(seg *segment) (int64, error) {
	r, err := s.cl.ReadRecord(seg.start, 0, false)
	if err != nil {
		return 0, err
	}
	return r.StoreTimestamp, nil
}
