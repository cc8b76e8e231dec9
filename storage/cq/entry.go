package cq

import (
	"encoding/binary"
	"fmt"
	"math"
)

// UnitSize is the size in bytes of one ConsumeQueue entry on disk.
const UnitSize = 20

// DefaultEntriesPerFile is RocketMQ's ConsumeQueue file size in entries
// (300,000 entries, 6,000,000 bytes per file).
const DefaultEntriesPerFile = 300_000

// MaxEntriesPerFile bounds the entriesPerFile argument of Open (files of at
// most 640 MiB).
const MaxEntriesPerFile = 1 << 25

// Entry is one ConsumeQueue unit: where a message lives in the CommitLog and
// the hash of its tag. On disk it is 20 bytes, big-endian: Offset int64,
// Size int32, TagsCode int64.
type Entry struct {
	Offset   int64 // CommitLog (physical) offset of the message record
	Size     int32 // total size of the record in the CommitLog
	TagsCode int64 // hash of the TAGS property (0 if none), or a delivery time
}

// Dummy is the filler entry written into the gap before the first entry of a
// queue that starts past offset 0 (RocketMQ's (0, Integer.MAX_VALUE, 0)). It
// is never returned as a message.
var Dummy = Entry{Offset: 0, Size: math.MaxInt32, TagsCode: 0}

// Valid reports whether e can index a message: Offset >= 0, Size > 0,
// Offset+Size does not overflow, and e is not the Dummy filler. Offset 0 (the
// first message of the log) is valid.
func (e Entry) Valid() bool {
	return e.Offset >= 0 && e.Size > 0 && e.Offset <= math.MaxInt64-int64(e.Size) && e != Dummy
}

// End is the CommitLog offset just past the message: Offset + Size.
func (e Entry) End() int64 { return e.Offset + int64(e.Size) }

// String formats e for error messages.
func (e Entry) String() string {
	return fmt.Sprintf("{offset %d size %d tags %d}", e.Offset, e.Size, e.TagsCode)
}

// EntryAt decodes the entry in the first UnitSize bytes of b. It panics if b
// is shorter than UnitSize.
func EntryAt(b []byte) Entry {
	_ = b[UnitSize-1]
	return Entry{
		Offset:   int64(binary.BigEndian.Uint64(b[0:8])),
		Size:     int32(binary.BigEndian.Uint32(b[8:12])),
		TagsCode: int64(binary.BigEndian.Uint64(b[12:20])),
	}
}

// PutEntry encodes e into the first UnitSize bytes of b. It panics if b is
// shorter than UnitSize.
func PutEntry(b []byte, e Entry) {
	_ = b[UnitSize-1]
	binary.BigEndian.PutUint64(b[0:8], uint64(e.Offset))
	binary.BigEndian.PutUint32(b[8:12], uint32(e.Size))
	binary.BigEndian.PutUint64(b[12:20], uint64(e.TagsCode))
}

// Scan returns the number of leading units of b that form a valid queue
// prefix, the way Open recovers the tail of a queue: an optional run of Dummy
// fillers, then valid entries whose offsets strictly increase (each Offset at
// least the previous entry's End). It stops at the first unit that is zero,
// invalid, a Dummy after a real entry, or out of order. last is the last real
// entry of the prefix and ok reports whether there is one. A trailing partial
// unit is ignored.
func Scan(b []byte) (n int, last Entry, ok bool) {
	s := scanner{allowDummy: true}
	n = s.scan(b)
	return n, s.last, s.hasLast
}

// scanner carries the state of a recovery scan across files.
type scanner struct {
	allowDummy bool  // Dummy fillers are accepted (only before any real entry)
	hasLast    bool  // a real entry was seen
	last       Entry // the last real entry seen
}

// scan consumes the valid units at the start of b and returns their count.
func (s *scanner) scan(b []byte) int {
	n := 0
	for off := 0; off+UnitSize <= len(b); off += UnitSize {
		e := EntryAt(b[off:])
		if e == Dummy {
			if !s.allowDummy {
				break
			}
			n++
			continue
		}
		if !e.Valid() || (s.hasLast && e.Offset < s.last.End()) {
			break
		}
		s.allowDummy = false
		s.hasLast, s.last = true, e
		n++
	}
	return n
}
