package raftnode

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/wharfmq/wharf/storage/vfs"
)

// Log is a raft node's durable state on the FS seam: its entries, hard
// state and latest snapshot, in segment files of CRC-framed records.
//
// Layout: dir/<20-digit sequence>.log. Every segment starts with a hard
// state record; the base segment (the newest that has one) follows it with a
// snapshot record, and the log is that snapshot plus the entry records of the
// base segment and of every later segment, replayed in order (an entry at
// index i replaces whatever the log held from i on, as raft overwrites a
// conflicting suffix). Segments older than the base are garbage.
//
// A base segment is written whole to a temp file, synced and renamed into
// place, so a snapshot and the entries copied after it appear together or not
// at all. Appends go to the newest segment and are synced before Save
// returns when raft asks for it (MustSync); a new segment is started once the
// newest passes SegmentBytes, after the old one is synced, so only the newest
// segment can have a torn tail. Recovery truncates that tail at its first bad
// record: those bytes were never reported persisted.
type Log struct {
	fs       vfs.FS
	dir      string
	segBytes int64
	seq      uint64   // sequence of the newest segment
	f        vfs.File // the newest segment, open for appends
	size     int64
	hs       *pb.HardState // the last hard state written
	buf      []byte
}

// Recovered is what OpenLog found: the input of NewNode.
type Recovered struct {
	HardState *pb.HardState // nil if the log is empty
	Snapshot  *pb.Snapshot  // nil if the log is empty
	Entries   []*pb.Entry   // after the snapshot, contiguous
	TornBytes int64         // cut from the newest segment's tail
}

// Persist is what a Ready asks the owner to make durable before calling
// Persisted.
type Persist struct {
	HardState *pb.HardState // nil when unchanged
	// Snapshot, when set, restarts the log from it: the log becomes the
	// snapshot followed by Entries.
	Snapshot *pb.Snapshot
	// Entries to append; the first may overwrite a suffix of the log.
	Entries []*pb.Entry
	Sync    bool // whether raft needs it on disk before going on (MustSync)
}

// Empty reports whether there is nothing to write.
func (p Persist) Empty() bool {
	return p.HardState == nil && p.Snapshot == nil && len(p.Entries) == 0
}

// DefaultSegmentBytes is the size past which the log starts a new segment.
const DefaultSegmentBytes = 4 << 20

func segName(seq uint64) string { return fmt.Sprintf("%020d.log", seq) }

// OpenLog recovers the log in dir (creating dir if needed) and opens it for
// appends. An empty Recovered means a new node. segmentBytes <= 0 means
// DefaultSegmentBytes.
func OpenLog(fsys vfs.FS, dir string, segmentBytes int64) (*Log, Recovered, error) {
	if segmentBytes <= 0 {
		segmentBytes = DefaultSegmentBytes
	}
	l := &Log{fs: fsys, dir: dir, segBytes: segmentBytes}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, Recovered{}, fmt.Errorf("raft log %s: %w", dir, err)
	}
	seqs, err := l.listSegments()
	if err != nil {
		return nil, Recovered{}, err
	}
	base := -1
	for i := len(seqs) - 1; i >= 0 && base < 0; i-- {
		ok, err := l.isBase(seqs[i])
		if err != nil {
			return nil, Recovered{}, err
		}
		if ok {
			base = i
		}
	}
	if base < 0 {
		if len(seqs) > 0 {
			return nil, Recovered{}, fmt.Errorf("raft log %s: %d segments and none holds a snapshot", dir, len(seqs))
		}
		return l, Recovered{}, nil
	}
	rec, err := l.replay(seqs[base:])
	if err != nil {
		return nil, Recovered{}, err
	}
	if err := l.removeSegments(seqs[:base]); err != nil {
		return nil, Recovered{}, err
	}
	return l, rec, nil
}

// listSegments returns the segments' sequences in order, removing the temp
// files a crash during a rewrite left behind.
func (l *Log) listSegments() ([]uint64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, fmt.Errorf("raft log %s: %w", l.dir, err)
	}
	var seqs []uint64
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") {
			if err := l.fs.Remove(path.Join(l.dir, name)); err != nil {
				return nil, fmt.Errorf("raft log: remove leftover %s: %w", name, err)
			}
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, ".log"), 10, 64)
		if err != nil || !strings.HasSuffix(name, ".log") {
			return nil, fmt.Errorf("raft log %s: unexpected file %q", l.dir, name)
		}
		seqs = append(seqs, seq)
	}
	return seqs, nil
}

func (l *Log) readSegment(seq uint64) ([]byte, error) {
	name := path.Join(l.dir, segName(seq))
	f, err := l.fs.Open(name)
	if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	defer f.Close()
	data := make([]byte, f.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("raft log: read %s: %w", name, err)
	}
	return data, nil
}

// isBase reports whether segment seq starts with a hard state and a
// snapshot.
func (l *Log) isBase(seq uint64) (bool, error) {
	data, err := l.readSegment(seq)
	if err != nil {
		return false, err
	}
	typ, _, n, err := readRecord(data)
	if err != nil || typ != recHardState {
		return false, nil
	}
	typ, _, _, err = readRecord(data[n:])
	return err == nil && typ == recSnapshot, nil
}

// replay rebuilds the log from the base segment seqs[0] and the later ones,
// truncating the newest segment's torn tail, and opens it for appends.
func (l *Log) replay(seqs []uint64) (Recovered, error) {
	var rec Recovered
	for i, seq := range seqs {
		data, err := l.readSegment(seq)
		if err != nil {
			return rec, err
		}
		good, err := applySegment(&rec, data)
		if err != nil && i < len(seqs)-1 {
			return rec, fmt.Errorf("raft log: segment %s damaged at byte %d, before the newest segment: %w",
				segName(seq), good, err)
		}
		if err != nil && !errors.Is(err, errTorn) {
			return rec, fmt.Errorf("raft log: segment %s at byte %d: %w", segName(seq), good, err)
		}
		l.seq, l.size = seq, int64(good)
		rec.TornBytes = int64(len(data) - good)
	}
	f, err := l.fs.Open(path.Join(l.dir, segName(l.seq)))
	if err != nil {
		return rec, fmt.Errorf("raft log: %w", err)
	}
	l.f, l.hs = f, rec.HardState
	if rec.TornBytes > 0 {
		if err := f.Truncate(l.size); err != nil {
			return rec, fmt.Errorf("raft log: cut torn tail of %s: %w", segName(l.seq), err)
		}
		if err := f.Sync(); err != nil {
			return rec, fmt.Errorf("raft log: sync %s: %w", segName(l.seq), err)
		}
	}
	return rec, nil
}

// applySegment replays the records of one segment into rec. good is the
// length of its valid prefix; the error is errTorn for bytes that are not a
// record, another error for a record that breaks the log's rules.
func applySegment(rec *Recovered, data []byte) (good int, err error) {
	for good < len(data) {
		typ, payload, n, err := readRecord(data[good:])
		if err != nil {
			return good, err
		}
		if err := applyRecord(rec, typ, payload); err != nil {
			return good, err
		}
		good += n
	}
	return good, nil
}

func applyRecord(rec *Recovered, typ byte, payload []byte) error {
	switch typ {
	case recHardState:
		hs, err := decodeHardState(payload)
		if err != nil {
			return err
		}
		rec.HardState = hs
	case recSnapshot:
		s, err := decodeSnapshot(payload)
		if err != nil {
			return err
		}
		rec.Snapshot, rec.Entries = s, nil
	case recEntry:
		e, err := decodeEntry(payload)
		if err != nil {
			return err
		}
		return appendEntry(rec, e)
	default:
		return fmt.Errorf("unknown record type %d", typ)
	}
	return nil
}

// appendEntry adds e to rec.Entries, replacing the suffix from its index.
func appendEntry(rec *Recovered, e *pb.Entry) error {
	if rec.Snapshot == nil {
		return errors.New("entry before any snapshot")
	}
	first := rec.Snapshot.GetMetadata().GetIndex() + 1
	next := first + uint64(len(rec.Entries))
	switch {
	case e.GetIndex() < first:
		return fmt.Errorf("entry %d at or before the snapshot at %d", e.GetIndex(), first-1)
	case e.GetIndex() > next:
		return fmt.Errorf("entry %d leaves a gap after %d", e.GetIndex(), next-1)
	}
	rec.Entries = append(rec.Entries[:e.GetIndex()-first], e)
	return nil
}

// Save makes p durable (synced when p.Sync or when it starts a segment).
func (l *Log) Save(p Persist) error {
	if p.Empty() {
		return nil
	}
	if p.HardState != nil {
		l.hs = p.HardState
	}
	if p.Snapshot != nil {
		return l.rewrite(p.Snapshot, p.Entries)
	}
	if l.f == nil {
		return errors.New("raft log: append to a log that has no snapshot yet")
	}
	if l.size >= l.segBytes {
		if err := l.roll(); err != nil {
			return err
		}
	}
	l.buf = l.buf[:0]
	if p.HardState != nil {
		l.buf = appendRecord(l.buf, recHardState, encodeHardState(p.HardState))
	}
	for _, e := range p.Entries {
		l.buf = appendRecord(l.buf, recEntry, encodeEntry(e))
	}
	if _, err := l.f.WriteAt(l.buf, l.size); err != nil {
		return fmt.Errorf("raft log: append to %s: %w", segName(l.seq), err)
	}
	l.size += int64(len(l.buf))
	if p.Sync {
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("raft log: sync %s: %w", segName(l.seq), err)
		}
	}
	return nil
}

// roll syncs the newest segment and starts the next with the hard state.
func (l *Log) roll() error {
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("raft log: sync %s: %w", segName(l.seq), err)
	}
	seq := l.seq + 1
	name := path.Join(l.dir, segName(seq))
	f, err := l.fs.Create(name, 0)
	if err != nil {
		return fmt.Errorf("raft log: start segment: %w", err)
	}
	head := appendRecord(nil, recHardState, encodeHardState(l.hardState()))
	if _, err := f.WriteAt(head, 0); err != nil {
		f.Close()
		return fmt.Errorf("raft log: write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("raft log: sync %s: %w", name, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return fmt.Errorf("raft log: sync dir %s: %w", l.dir, err)
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("raft log: close %s: %w", segName(l.seq), err)
	}
	l.f, l.seq, l.size = f, seq, int64(len(head))
	return nil
}

func (l *Log) hardState() *pb.HardState {
	if l.hs == nil {
		return &pb.HardState{}
	}
	return l.hs
}

// rewrite writes a new base segment holding the hard state, snap and ents,
// atomically, then drops the older segments (compaction).
func (l *Log) rewrite(snap *pb.Snapshot, ents []*pb.Entry) error {
	buf := appendRecord(nil, recHardState, encodeHardState(l.hardState()))
	buf = appendRecord(buf, recSnapshot, encodeSnapshot(snap))
	for _, e := range ents {
		buf = appendRecord(buf, recEntry, encodeEntry(e))
	}
	seq := l.seq + 1
	name := path.Join(l.dir, segName(seq))
	if err := writeFileAtomic(l.fs, name, buf); err != nil {
		return fmt.Errorf("raft log: %w", err)
	}
	f, err := l.fs.Open(name)
	if err != nil {
		return fmt.Errorf("raft log: %w", err)
	}
	old, err := l.listSegments()
	if err != nil {
		f.Close()
		return err
	}
	if l.f != nil {
		if err := l.f.Close(); err != nil {
			f.Close()
			return fmt.Errorf("raft log: close %s: %w", segName(l.seq), err)
		}
	}
	l.f, l.seq, l.size = f, seq, int64(len(buf))
	return l.removeSegments(old[:len(old)-1])
}

// removeSegments deletes garbage segments (older than the base).
func (l *Log) removeSegments(seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	for _, seq := range seqs {
		if err := l.fs.Remove(path.Join(l.dir, segName(seq))); err != nil {
			return fmt.Errorf("raft log: remove %s: %w", segName(seq), err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("raft log: sync dir %s: %w", l.dir, err)
	}
	return nil
}

// Close releases the newest segment.
func (l *Log) Close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("raft log: close: %w", err)
	}
	return nil
}

// writeFileAtomic is vfs.WriteFileAtomic.
func writeFileAtomic(fsys vfs.FS, name string, data []byte) error {
	return vfs.WriteFileAtomic(fsys, name, data)
}
