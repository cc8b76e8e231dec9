package storage

import (
	"fmt"
	"hash/crc32"
	"path"
)

// This file is the CommitLog's side of master/slave replication: a master
// reads whole records to stream; a slave appends the same bytes at the same
// offsets, so its log is a byte-identical prefix of the master's.

// ReadRecords returns the whole records (and a blank segment filler) that
// start at off, within off's segment, up to max bytes but at least one
// record if one is there. The slice aliases the mapping.
func (c *CommitLog) ReadRecords(off int64, max int) ([]byte, error) {
	end := c.maxOffset.Load()
	if off >= end {
		return nil, nil
	}
	s := c.findSegment(off)
	if s == nil {
		return nil, fmt.Errorf("commitlog: records at %d: below the log's minimum %d", off, c.MinOffset())
	}
	limit := min(end, s.end()) - s.start
	pos := off - s.start
	p := pos
	for p < limit {
		size, magic, ok := PeekHeader(s.data[p:limit])
		if !ok || size <= 0 || int64(size) > limit-p {
			return nil, fmt.Errorf("%w: commitlog at %d: no whole record (size %d)", ErrCorrupt, s.start+p, size)
		}
		if p > pos && p-pos+int64(size) > int64(max) {
			break
		}
		p += int64(size)
		if magic == MagicBlank {
			break
		}
	}
	return s.data[pos:p:p], nil
}

// TailCRC is the CRC-32 of the up to n bytes just below MaxOffset within the
// last segment, and how many bytes it covers. A master compares it with its
// own bytes at the same offsets to tell a diverged slave.
func (c *CommitLog) TailCRC(n int) (uint32, int) {
	end := c.maxOffset.Load()
	segs := c.segments()
	if len(segs) == 0 || end == 0 {
		return 0, 0
	}
	s := c.findSegment(end - 1)
	if s == nil {
		return 0, 0
	}
	from := max(s.start, end-int64(n))
	return crc32.ChecksumIEEE(s.data[from-s.start : end-s.start]), int(end - from)
}

// RangeCRC is the CRC-32 of [from, to), which must lie within one segment.
func (c *CommitLog) RangeCRC(from, to int64) (uint32, error) {
	b, err := c.Read(from, int(to-from))
	if err != nil {
		return 0, err
	}
	return crc32.ChecksumIEEE(b), nil
}

// Empty reports whether the log holds no byte (a new or wiped slave).
func (c *CommitLog) Empty() bool { return len(c.segments()) == 0 && c.maxOffset.Load() == 0 }

// StartAt makes an empty log start at off (a segment boundary): a new slave
// catching up from its master's earliest retained offset.
func (c *CommitLog) StartAt(off int64) error {
	if !c.Empty() {
		return fmt.Errorf("commitlog: start at %d: the log is not empty", off)
	}
	if off%c.segSize != 0 {
		return fmt.Errorf("commitlog: start at %d: not a segment boundary (segment size %d)", off, c.segSize)
	}
	// A segment prepared for the old start (a master prepares its first at
	// once, then may become a slave) would stay on disk as a segment of
	// zeros before off, and the next Open would refuse the gap after it.
	if s := c.next; s != nil && s.start != off {
		c.next = nil
		s.f.Close()
		if err := c.fs.Remove(path.Join(c.dir, segmentName(s.start))); err != nil {
			return fmt.Errorf("commitlog: start at %d: remove the segment prepared at %d: %w", off, s.start, err)
		}
		if err := c.fs.SyncDir(c.dir); err != nil {
			return fmt.Errorf("commitlog: start at %d: sync dir: %w", off, err)
		}
	}
	c.maxOffset.Store(off)
	c.flushed.Store(off)
	return nil
}

// StartAt makes an empty store start at log offset off: see
// CommitLog.StartAt. The reput position moves there too.
func (s *Store) StartAt(off int64) error {
	if err := s.cl.StartAt(off); err != nil {
		return err
	}
	s.dispatched.Store(off)
	return nil
}
