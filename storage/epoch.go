package storage

import (
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"slices"
	"strconv"
	"strings"
)

// This file is the epoch file: the start offset of every master epoch the
// log holds bytes of (RocketMQ's EpochFileCache, Kafka's leader epochs). A
// replica that rejoins a new master compares its entries with the master's
// to find the last point both logs agree on (CommonPoint) and truncates
// there (TruncateTo) before it copies anything.
//
// Epoch 0 means "no epoch": a store in classic master/slave mode never
// starts one, its file does not exist and Epochs is empty. Controller mode
// numbers epochs from 1.

// EpochEntry is one epoch and the log offset of its first byte. The epoch's
// bytes end where the next entry starts, or at the log's end for the last.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// ErrStaleEpoch is wrapped by the refusal of an epoch older than the newest
// the store knows.
var ErrStaleEpoch = errors.New("stale epoch")

// ErrNoCommonEpoch is wrapped by CommonPoint's error when two logs share no
// epoch: copying either onto the other would overwrite what it holds.
var ErrNoCommonEpoch = errors.New("no common epoch")

const (
	epochFileName = "epochFileCheckpoint"
	maxEpochFile  = 16 << 20
)

func (s *Store) epochPath() string { return path.Join(s.cfg.StorePathRootDir, epochFileName) }

// Epochs returns a copy of the epoch entries, oldest first (empty in
// classic mode). Safe from any goroutine.
func (s *Store) Epochs() []EpochEntry { return slices.Clone(s.epochList()) }

// epochList is the current entries; the slice is never modified.
func (s *Store) epochList() []EpochEntry {
	if p := s.epochs.Load(); p != nil {
		return *p
	}
	return nil
}

// LastEpoch returns the newest epoch entry; ok is false if the store never
// started one (epoch 0). Safe from any goroutine.
func (s *Store) LastEpoch() (e EpochEntry, ok bool) {
	list := s.epochList()
	if len(list) == 0 {
		return EpochEntry{}, false
	}
	return list[len(list)-1], true
}

// StartEpoch records, durably, that the log's bytes from at on belong to
// epoch: a master calls it on taking an epoch, at its log's end and before
// the epoch's first append; a slave when its master's transfers name a new
// epoch, before appending their bytes. Only the log's appender calls it.
//
// Recording the same entry again changes nothing. An epoch older than the
// newest is refused (ErrStaleEpoch). An epoch that starts where the newest
// one started replaces it: the newest then holds no byte, and keeping both
// would give two epochs one start offset (RocketMQ #9689). at must not lie
// before the newest start, nor claim bytes the log already holds: it is the
// log's end, or anything at or below it while the log is empty (a new slave
// that starts at its master's offset mid-epoch).
func (s *Store) StartEpoch(epoch int32, at int64) error {
	if epoch <= 0 {
		return fmt.Errorf("storage: start epoch %d: epochs are positive", epoch)
	}
	next := slices.Clone(s.epochList())
	if last, ok := s.LastEpoch(); ok {
		switch {
		case epoch == last.Epoch && at == last.StartOffset:
			return nil
		case epoch <= last.Epoch:
			return fmt.Errorf("storage: start epoch %d at %d: %w: the store is at epoch %d (from %d)", epoch, at, ErrStaleEpoch, last.Epoch, last.StartOffset)
		case at < last.StartOffset:
			return fmt.Errorf("storage: start epoch %d at %d: before epoch %d's start %d", epoch, at, last.Epoch, last.StartOffset)
		case at == last.StartOffset:
			next = next[:len(next)-1]
		}
	}
	end := s.cl.MaxOffset()
	empty := s.cl.MinOffset() == end
	if at > end || (at < end && !empty) {
		return fmt.Errorf("storage: start epoch %d at %d: the log ends at %d; an epoch starts at the log's end", epoch, at, end)
	}
	next = append(next, EpochEntry{Epoch: epoch, StartOffset: at})
	if err := s.saveEpochs(next); err != nil {
		return fmt.Errorf("storage: start epoch %d at %d: %w", epoch, at, err)
	}
	return nil
}

// saveEpochs replaces the epoch file with entries, durably, keeping the
// previous content as the .bak (RocketMQ's CheckpointFile does the same),
// and only then adopts them.
func (s *Store) saveEpochs(entries []EpochEntry) error {
	name := s.epochPath()
	prev, ok, err := readFile(s.fs, name, maxEpochFile)
	if err == nil && ok {
		if _, derr := decodeEpochs(prev); derr == nil {
			if err := writeFileAtomic(s.fs, name+".bak", prev); err != nil {
				return fmt.Errorf("epoch file backup: %w", err)
			}
		}
	}
	if err := writeFileAtomic(s.fs, name, encodeEpochs(entries)); err != nil {
		return fmt.Errorf("epoch file: %w", err)
	}
	s.epochs.Store(&entries)
	return nil
}

// loadEpochs reads the epoch file at Open: the file, or its .bak if the
// file is missing or damaged. Neither present: no epoch (classic mode).
// Both damaged: the store does not open, since without its epochs a
// replica could not tell which of its bytes a new master shares.
func (s *Store) loadEpochs() error {
	var errs []error
	for _, name := range []string{s.epochPath(), s.epochPath() + ".bak"} {
		b, ok, err := readFile(s.fs, name, maxEpochFile)
		if err == nil && !ok {
			continue
		}
		if err == nil {
			var e []EpochEntry
			if e, err = decodeEpochs(b); err == nil {
				s.epochs.Store(&e)
				return nil
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", path.Base(name), err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("storage: %w: epoch file: %w", ErrCorrupt, errors.Join(errs...))
	}
	s.epochs.Store(nil)
	return nil
}

// dropEpochsAfter removes, durably, the entries that start beyond end: they
// name bytes the log does not hold (a crash cut its unflushed tail, or
// TruncateTo cut it). An entry starting exactly at end stays: an epoch may
// start without writes.
func (s *Store) dropEpochsAfter(end int64) error {
	list := s.epochList()
	i := len(list)
	for i > 0 && list[i-1].StartOffset > end {
		i--
	}
	if i == len(list) {
		return nil
	}
	if err := s.saveEpochs(slices.Clone(list[:i])); err != nil {
		return fmt.Errorf("storage: drop epochs after %d: %w", end, err)
	}
	return nil
}

// epochCRC is RocketMQ's UtilAll.crc32 of the entry lines: CRC-32 (IEEE)
// masked to a non-negative Java int.
func epochCRC(lines []byte) uint32 { return crc32.ChecksumIEEE(lines) & 0x7fffffff }

// encodeEpochs is RocketMQ's CheckpointFile text: the entry count, the CRC
// of the entry lines, then one "epoch-startOffset" line per entry.
func encodeEpochs(entries []EpochEntry) []byte {
	var lines []byte
	for _, e := range entries {
		lines = strconv.AppendInt(lines, int64(e.Epoch), 10)
		lines = append(lines, '-')
		lines = strconv.AppendInt(lines, e.StartOffset, 10)
		lines = append(lines, '\n')
	}
	b := strconv.AppendInt(nil, int64(len(entries)), 10)
	b = append(b, '\n')
	b = strconv.AppendUint(b, uint64(epochCRC(lines)), 10)
	b = append(b, '\n')
	return append(b, lines...)
}

var errBadEpochFile = errors.New("epoch file damaged")

// decodeEpochs parses encodeEpochs' text and checks it: the count and the
// CRC match, epochs are positive and strictly increasing, start offsets
// are not negative and never decrease.
func decodeEpochs(b []byte) ([]EpochEntry, error) {
	head, rest, ok := cutLine(b)
	sum, lines, ok2 := cutLine(rest)
	if !ok || !ok2 {
		return nil, fmt.Errorf("%w: no header", errBadEpochFile)
	}
	n, err := strconv.ParseInt(string(head), 10, 32)
	if err != nil || n < 0 || n > int64(len(lines)/4+1) {
		return nil, fmt.Errorf("%w: entry count %q", errBadEpochFile, head)
	}
	crc, err := strconv.ParseUint(string(sum), 10, 32)
	if err != nil || uint32(crc) != epochCRC(lines) {
		return nil, fmt.Errorf("%w: checksum %q does not match the entries", errBadEpochFile, sum)
	}
	entries := make([]EpochEntry, 0, n)
	for len(lines) > 0 {
		var line []byte
		line, lines, _ = cutLine(lines)
		e, err := parseEpochLine(string(line))
		if err != nil {
			return nil, err
		}
		if k := len(entries); k > 0 && (e.Epoch <= entries[k-1].Epoch || e.StartOffset < entries[k-1].StartOffset) {
			return nil, fmt.Errorf("%w: entry %d-%d after %d-%d", errBadEpochFile, e.Epoch, e.StartOffset, entries[k-1].Epoch, entries[k-1].StartOffset)
		}
		entries = append(entries, e)
	}
	if int64(len(entries)) != n {
		return nil, fmt.Errorf("%w: %d entries, the header says %d", errBadEpochFile, len(entries), n)
	}
	return entries, nil
}

func parseEpochLine(line string) (EpochEntry, error) {
	es, ss, ok := strings.Cut(line, "-")
	epoch, err1 := strconv.ParseInt(es, 10, 32)
	start, err2 := strconv.ParseInt(ss, 10, 64)
	if !ok || err1 != nil || err2 != nil || epoch <= 0 || start < 0 {
		return EpochEntry{}, fmt.Errorf("%w: entry %q", errBadEpochFile, line)
	}
	return EpochEntry{Epoch: int32(epoch), StartOffset: start}, nil
}

// cutLine splits b after its first '\n'; ok is false if there is none.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := slices.Index(b, '\n')
	if i < 0 {
		return b, nil, false
	}
	return b[:i], b[i+1:], true
}

// CommonPoint returns the log offset up to which a local log and a remote
// one hold the same bytes, as their epoch entries tell: the newest local
// epoch the remote has with the same start offset gives the lower of that
// epoch's ends on the two sides (an epoch ends where the next entry starts,
// the last at its log's end). The local log truncated there is a prefix of
// the remote one. No such epoch is an error wrapping ErrNoCommonEpoch,
// except where the local epochs hold no bytes at all (each starts at the
// local log's end) and the remote's first epoch starts at or after it: a
// master deposed before it wrote anything in its epoch, whose successor
// never saw that epoch, shares everything it holds (its end) with it.
func CommonPoint(local, remote []EpochEntry, localEnd, remoteEnd int64) (int64, error) {
	held := len(local) // local epochs with bytes: empty ones at the end say nothing about the bytes
	for held > 0 && local[held-1].StartOffset >= localEnd {
		held--
	}
	if held == 0 && len(local) > 0 && len(remote) > 0 && remote[0].StartOffset >= localEnd {
		return min(localEnd, remoteEnd), nil
	}
	for i := len(local) - 1; i >= 0; i-- {
		l := local[i]
		j := slices.IndexFunc(remote, func(r EpochEntry) bool { return r.Epoch == l.Epoch })
		if j < 0 || remote[j].StartOffset != l.StartOffset {
			continue
		}
		return min(epochEnd(local, i, localEnd), epochEnd(remote, j, remoteEnd), localEnd, remoteEnd), nil
	}
	return 0, fmt.Errorf("%w: local epochs %v (log end %d), remote %v (log end %d)", ErrNoCommonEpoch, local, localEnd, remote, remoteEnd)
}

// epochEnd is where entry i's bytes end: the next entry's start, or the
// log's end for the last.
func epochEnd(entries []EpochEntry, i int, end int64) int64 {
	if i+1 < len(entries) {
		return entries[i+1].StartOffset
	}
	return end
}
