package storage

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/wharfmq/wharf/storage/vfs"
)

// TestReplicaIsBytePrefix: a slave appending what ReadRecords streams ends
// with a byte-identical log, its own ConsumeQueues and index; a slave that
// starts empty at the master's earliest segment does too.
func TestReplicaIsBytePrefix(t *testing.T) {
	master, _ := mustOpen(t, vfs.NewMem(), testConfig("/m"))
	defer master.Close()
	fill(t, master, 1, 400)
	slave, _ := mustOpen(t, vfs.NewMem(), testConfig("/s"))
	defer slave.Close()
	copyLog := func(from int64) {
		rng := rand.New(rand.NewSource(from))
		for off := from; off < master.CommitLog().MaxOffset(); {
			chunk, err := master.CommitLog().ReadRecords(off, 1+rng.Intn(5000))
			if err != nil || len(chunk) == 0 {
				t.Fatalf("read records at %d: %v", off, err)
			}
			if err := slave.CommitLog().AppendRaw(off, chunk); err != nil {
				t.Fatalf("append raw at %d: %v", off, err)
			}
			off += int64(len(chunk))
		}
	}
	copyLog(0)
	if _, err := slave.Dispatch(slave.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	m, s := master.CommitLog(), slave.CommitLog()
	if s.MaxOffset() != m.MaxOffset() {
		t.Fatalf("slave ends at %d, master at %d", s.MaxOffset(), m.MaxOffset())
	}
	for off := int64(0); off < m.MaxOffset(); off += m.SegmentSize() {
		n := int(min(m.SegmentSize(), m.MaxOffset()-off))
		a, _ := m.Read(off, n)
		b, _ := s.Read(off, n)
		if !bytes.Equal(a, b) {
			t.Fatalf("segment at %d differs", off)
		}
	}
	checkStore(t, slave, nil)
	if crcM, nM := m.TailCRC(4096); true {
		crcS, nS := s.TailCRC(4096)
		if crcM != crcS || nM != nS {
			t.Fatalf("tail CRCs differ: %x/%d vs %x/%d", crcM, nM, crcS, nS)
		}
	}

	// Wrong offset, damaged bytes: refused, nothing published.
	chunk, _ := m.ReadRecords(0, 100)
	if err := s.AppendRaw(0, chunk); err == nil {
		t.Fatal("append at a wrong offset accepted")
	}
	late, _ := mustOpen(t, vfs.NewMem(), testConfig("/late"))
	defer late.Close()
	seg := m.SegmentSize() * 2
	if err := late.StartAt(seg); err != nil {
		t.Fatal(err)
	}
	bad, _ := m.ReadRecords(seg, 3000)
	bad = bytes.Clone(bad)
	bad[100] ^= 1
	if err := late.CommitLog().AppendRaw(seg, bad); !errors.Is(err, ErrCorrupt) || late.CommitLog().MaxOffset() != seg {
		t.Fatalf("damaged bytes: %v, log end %d", err, late.CommitLog().MaxOffset())
	}
	slave = late
	copyLog(seg)
	if _, err := late.Dispatch(late.CommitLog().MaxOffset(), nil); err != nil {
		t.Fatal(err)
	}
	checkStore(t, late, nil)
}

// TestStartAtDropsPreparedSegment: an empty log that prepared its first
// segment (a new master does at once) and then starts mid-log as a slave
// does not keep that segment: the store opens again after catching up.
func TestStartAtDropsPreparedSegment(t *testing.T) {
	master, _ := mustOpen(t, vfs.NewMem(), testConfig("/m"))
	defer master.Close()
	fill(t, master, 1, 400)
	m := master.CommitLog()
	fsys := vfs.NewMem()
	late, _ := mustOpen(t, fsys, testConfig("/late"))
	if err := late.CommitLog().Prepare(); err != nil {
		t.Fatal(err)
	}
	seg := m.SegmentSize() * 2
	if err := late.StartAt(seg); err != nil {
		t.Fatal(err)
	}
	for off := seg; off < m.MaxOffset(); {
		chunk, err := m.ReadRecords(off, 5000)
		if err != nil || len(chunk) == 0 {
			t.Fatalf("read records at %d: %v", off, err)
		}
		if err := late.CommitLog().AppendRaw(off, chunk); err != nil {
			t.Fatalf("append raw at %d: %v", off, err)
		}
		off += int64(len(chunk))
	}
	if _, err := late.Flush(late.CommitLog().MaxOffset()); err != nil {
		t.Fatal(err)
	}
	if err := late.Close(); err != nil {
		t.Fatal(err)
	}
	re, _ := mustOpen(t, fsys, testConfig("/late"))
	defer re.Close()
	if cl := re.CommitLog(); cl.MinOffset() != seg || cl.MaxOffset() != m.MaxOffset() {
		t.Fatalf("reopened log [%d, %d), want [%d, %d)", cl.MinOffset(), cl.MaxOffset(), seg, m.MaxOffset())
	}
}
