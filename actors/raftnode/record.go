package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Record types of the log's segments.
const (
	recHardState byte = 1
	recEntry     byte = 2
	recSnapshot  byte = 3
)

// recHeader is a record's length (u32, of the payload), CRC (u32, Castagnoli,
// over the type byte and the payload) and type (u8).
const recHeader = 9

// maxRecord bounds one record's payload: a damaged length must not make
// recovery allocate gigabytes. Snapshots of the controller's state are far
// smaller.
const maxRecord = 256 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errTorn marks bytes that are not a whole valid record: a torn or
// unwritten tail, or damage.
var errTorn = errors.New("torn or damaged record")

// appendRecord frames payload as one record of type typ.
func appendRecord(buf []byte, typ byte, payload []byte) []byte {
	var h [recHeader]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	crc := crc32.Update(crc32.Update(0, crcTable, []byte{typ}), crcTable, payload)
	binary.LittleEndian.PutUint32(h[4:8], crc)
	h[8] = typ
	buf = append(buf, h[:]...)
	return append(buf, payload...)
}

// readRecord decodes the record at the start of b. n is the bytes it spans.
// Any incomplete, oversized or CRC-failing record is errTorn.
func readRecord(b []byte) (typ byte, payload []byte, n int, err error) {
	if len(b) < recHeader {
		return 0, nil, 0, errTorn
	}
	size := binary.LittleEndian.Uint32(b[0:4])
	if size > maxRecord || uint64(len(b)-recHeader) < uint64(size) {
		return 0, nil, 0, errTorn
	}
	typ = b[8]
	payload = b[recHeader : recHeader+int(size)]
	crc := crc32.Update(crc32.Update(0, crcTable, []byte{typ}), crcTable, payload)
	if crc != binary.LittleEndian.Uint32(b[4:8]) {
		return 0, nil, 0, errTorn
	}
	return typ, payload, recHeader + int(size), nil
}

// A decoder reads the uvarint fields of one payload, remembering the first
// error so that callers check once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// ids reads a counted list of node ids; the count is bounded by the bytes
// left (each id takes at least one), so a damaged count cannot allocate.
func (d *decoder) ids() []uint64 {
	n := d.uvarint()
	if d.err != nil || n == 0 {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errors.New("id count past the payload")
		return nil
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = d.uvarint()
	}
	return out
}

func encodeHardState(hs *pb.HardState) []byte {
	b := binary.AppendUvarint(nil, hs.GetTerm())
	b = binary.AppendUvarint(b, hs.GetVote())
	return binary.AppendUvarint(b, hs.GetCommit())
}

func decodeHardState(p []byte) (*pb.HardState, error) {
	d := decoder{b: p}
	hs := &pb.HardState{Term: new(d.uvarint()), Vote: new(d.uvarint()), Commit: new(d.uvarint())}
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("hard state: %w", d.err)
	}
	return hs, nil
}

func encodeEntry(e *pb.Entry) []byte {
	b := binary.AppendUvarint(nil, e.GetTerm())
	b = binary.AppendUvarint(b, e.GetIndex())
	b = binary.AppendUvarint(b, uint64(e.GetType()))
	return append(b, e.GetData()...)
}

func decodeEntry(p []byte) (*pb.Entry, error) {
	d := decoder{b: p}
	term, index, typ := d.uvarint(), d.uvarint(), d.uvarint()
	if d.err == nil && typ > uint64(pb.EntryConfChangeV2) {
		d.err = fmt.Errorf("unknown entry type %d", typ)
	}
	if d.err != nil {
		return nil, fmt.Errorf("entry: %w", d.err)
	}
	e := &pb.Entry{Term: new(term), Index: new(index), Type: pb.EntryType(typ).Enum()}
	if len(d.b) > 0 {
		e.Data = append([]byte(nil), d.b...)
	}
	return e, nil
}

func encodeSnapshot(s *pb.Snapshot) []byte {
	m := s.GetMetadata()
	b := binary.AppendUvarint(nil, m.GetIndex())
	b = binary.AppendUvarint(b, m.GetTerm())
	cs := m.GetConfState()
	for _, l := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, id := range l {
			b = binary.AppendUvarint(b, id)
		}
	}
	auto := uint64(0)
	if cs.GetAutoLeave() {
		auto = 1
	}
	b = binary.AppendUvarint(b, auto)
	return append(b, s.GetData()...)
}

func decodeSnapshot(p []byte) (*pb.Snapshot, error) {
	d := decoder{b: p}
	index, term := d.uvarint(), d.uvarint()
	cs := &pb.ConfState{Voters: d.ids(), Learners: d.ids(), VotersOutgoing: d.ids(), LearnersNext: d.ids()}
	auto := d.uvarint()
	if d.err == nil && auto > 1 {
		d.err = errors.New("bad auto-leave flag")
	}
	if d.err != nil {
		return nil, fmt.Errorf("snapshot: %w", d.err)
	}
	cs.AutoLeave = new(auto == 1)
	s := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: cs, Index: new(index), Term: new(term)}}
	if len(d.b) > 0 {
		s.Data = append([]byte(nil), d.b...)
	}
	return s, nil
}
