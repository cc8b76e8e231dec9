package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/wharfmq/wharf/storage/vfs"
)

// Layout constants (RocketMQ IndexHeader / IndexFile).
const (
	headerSize = 40
	slotSize   = 4
	entrySize  = 20

	offBeginTimestamp = 0
	offEndTimestamp   = 8
	offBeginPhyOffset = 16
	offEndPhyOffset   = 24
	offHashSlotCount  = 32
	offIndexCount     = 36

	// nameLayout is yyyyMMddHHmmssSSS with a dot that formatName removes.
	nameLayout = "20060102150405.000"
	nameLen    = 17
)

// Name timestamps must format to exactly 17 digits: years 0000..9999 UTC.
var (
	minNameMs = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxNameMs = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC).UnixMilli()
)

var be = binary.BigEndian

// header is the decoded 40-byte file header.
type header struct {
	beginTs, endTs   int64
	beginPhy, endPhy int64
	hashSlotCount    int32
	indexCount       int32 // next entry number, >= 1
}

func (h *header) encode(b []byte) {
	be.PutUint64(b[offBeginTimestamp:], uint64(h.beginTs))
	be.PutUint64(b[offEndTimestamp:], uint64(h.endTs))
	be.PutUint64(b[offBeginPhyOffset:], uint64(h.beginPhy))
	be.PutUint64(b[offEndPhyOffset:], uint64(h.endPhy))
	be.PutUint32(b[offHashSlotCount:], uint32(h.hashSlotCount))
	be.PutUint32(b[offIndexCount:], uint32(h.indexCount))
}

func decodeHeader(b []byte) header {
	return header{
		beginTs:       int64(be.Uint64(b[offBeginTimestamp:])),
		endTs:         int64(be.Uint64(b[offEndTimestamp:])),
		beginPhy:      int64(be.Uint64(b[offBeginPhyOffset:])),
		endPhy:        int64(be.Uint64(b[offEndPhyOffset:])),
		hashSlotCount: int32(be.Uint32(b[offHashSlotCount:])),
		indexCount:    int32(be.Uint32(b[offIndexCount:])),
	}
}

// fileSize is the size of every file with these options.
func (o Options) fileSize() int64 {
	return headerSize + int64(o.SlotNum)*slotSize + int64(o.IndexNum)*entrySize
}

// indexFile is one mapped index file.
type indexFile struct {
	name   string // base name, yyyyMMddHHmmssSSS
	nameMs int64  // the name as a Unix millisecond timestamp
	path   string
	f      vfs.File
	data   []byte // the mapping, len = fileSize
	hdr    header

	slotNum, indexNum int32
	entriesOff        int64 // headerSize + slotNum*4

	// Ranges written since the last flush ([lo, hi), empty when lo >= hi).
	slotLo, slotHi int64
	entLo, entHi   int64
	hdrDirty       bool
}

// empty reports whether the file holds no entry.
func (f *indexFile) empty() bool { return f.hdr.indexCount <= 1 }

// full reports whether no entry can be added.
func (f *indexFile) full() bool { return f.hdr.indexCount >= f.indexNum }

func (f *indexFile) slotOff(slot int32) int64 { return headerSize + int64(slot)*slotSize }

func (f *indexFile) entryOff(n int32) int64 { return f.entriesOff + int64(n)*entrySize }

// slot returns the entry number at the head of slot, 0 when empty or when the
// stored value does not name a written entry (garbage after a torn write).
func (f *indexFile) slot(slot int32) int32 {
	v := int32(be.Uint32(f.data[f.slotOff(slot):]))
	if v <= 0 || v >= f.hdr.indexCount {
		return 0
	}
	return v
}

type entry struct {
	keyHash  int32
	phy      int64
	timeDiff int32
	prev     int32
}

// entry reads entry n; the caller guarantees 0 < n < indexNum.
func (f *indexFile) entry(n int32) entry {
	b := f.data[f.entryOff(n):][:entrySize]
	return entry{
		keyHash:  int32(be.Uint32(b[0:])),
		phy:      int64(be.Uint64(b[4:])),
		timeDiff: int32(be.Uint32(b[12:])),
		prev:     int32(be.Uint32(b[16:])),
	}
}

// validate checks the header against the file's geometry. Garbage inside a
// consistent file (slots, entries) is tolerated by the readers instead.
func (f *indexFile) validate() error {
	h := &f.hdr
	if h.indexCount < 0 || h.indexCount > f.indexNum {
		return fmt.Errorf("indexCount %d outside [0, %d]", h.indexCount, f.indexNum)
	}
	if h.indexCount == 0 {
		// Created but never written (a stop between creation and the first
		// header write): RocketMQ reads it as empty too.
		h.indexCount = 1
	}
	if h.hashSlotCount < 0 || h.hashSlotCount > min(f.slotNum, h.indexCount-1) {
		return fmt.Errorf("hashSlotCount %d outside [0, min(slotNum %d, entries %d)]", h.hashSlotCount, f.slotNum, h.indexCount-1)
	}
	if h.indexCount == 1 {
		return nil // the other fields are rewritten by the first Put
	}
	if h.beginPhy < 0 || h.endPhy < h.beginPhy {
		return fmt.Errorf("phy offsets [%d, %d] out of order", h.beginPhy, h.endPhy)
	}
	if h.endTs < h.beginTs {
		return fmt.Errorf("timestamps [%d, %d] out of order", h.beginTs, h.endTs)
	}
	return nil
}

// flush syncs what was written since the last flush: entries and slots
// before the header that counts them.
// flushJob captures the dirty ranges (and clears them) and returns the
// work that syncs them (nil if none); see Index.FlushJob.
func (f *indexFile) flushJob() func() error {
	if !f.dirty() {
		return nil
	}
	type span struct {
		off, n int64
		what   string
	}
	var spans []span
	if f.entLo < f.entHi {
		spans = append(spans, span{f.entLo, f.entHi - f.entLo, "entries"})
	}
	if f.slotLo < f.slotHi {
		spans = append(spans, span{f.slotLo, f.slotHi - f.slotLo, "slots"})
	}
	if f.hdrDirty {
		spans = append(spans, span{0, headerSize, "header"})
	}
	f.entLo, f.entHi, f.slotLo, f.slotHi, f.hdrDirty = 0, 0, 0, 0, false
	file, path := f.f, f.path
	return func() error {
		for _, sp := range spans {
			if err := file.SyncRange(sp.off, sp.n); err != nil {
				return fmt.Errorf("index: sync %s of %s: %w", sp.what, path, err)
			}
		}
		return nil
	}
}

func (f *indexFile) flush() error {
	if f.entLo < f.entHi {
		if err := f.f.SyncRange(f.entLo, f.entHi-f.entLo); err != nil {
			return fmt.Errorf("index: sync entries of %s: %w", f.path, err)
		}
		f.entLo, f.entHi = 0, 0
	}
	if f.slotLo < f.slotHi {
		if err := f.f.SyncRange(f.slotLo, f.slotHi-f.slotLo); err != nil {
			return fmt.Errorf("index: sync slots of %s: %w", f.path, err)
		}
		f.slotLo, f.slotHi = 0, 0
	}
	if f.hdrDirty {
		if err := f.f.SyncRange(0, headerSize); err != nil {
			return fmt.Errorf("index: sync header of %s: %w", f.path, err)
		}
		f.hdrDirty = false
	}
	return nil
}

func (f *indexFile) dirty() bool {
	return f.hdrDirty || f.entLo < f.entHi || f.slotLo < f.slotHi
}

func (f *indexFile) close() error {
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f, f.data = nil, nil
	if err != nil {
		return fmt.Errorf("index: close %s: %w", f.path, err)
	}
	return nil
}

// markRange widens [lo, hi) to cover [off, off+n).
func markRange(lo, hi *int64, off, n int64) {
	if *lo >= *hi {
		*lo, *hi = off, off+n
		return
	}
	*lo = min(*lo, off)
	*hi = max(*hi, off+n)
}

// formatName formats a Unix millisecond timestamp as yyyyMMddHHmmssSSS, UTC.
func formatName(ms int64) string {
	s := time.UnixMilli(ms).UTC().Format(nameLayout)
	return s[:14] + s[15:]
}

// parseName parses a file name made by formatName.
func parseName(name string) (int64, bool) {
	if len(name) != nameLen {
		return 0, false
	}
	for i := 0; i < nameLen; i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	t, err := time.ParseInLocation(nameLayout, name[:14]+"."+name[14:], time.UTC)
	if err != nil {
		return 0, false
	}
	return t.UnixMilli(), true
}

// timeDiff is the whole seconds from begin to ts, clamped to [0, MaxInt32].
func timeDiff(ts, begin int64) int32 {
	if ts <= begin {
		return 0
	}
	d := (uint64(ts) - uint64(begin)) / 1000 // exact even when ts-begin overflows int64
	if d > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(d)
}

// satAdd is a+b saturated to the int64 range.
func satAdd(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}
