package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
)

// maxMessageEntries bounds the entries of one decoded message, so a damaged
// count cannot allocate without bound before the bytes run out.
const maxMessageEntries = 1 << 16

// EncodeMessage is the wire form of a raft message between controller nodes:
// uvarint fields, then the context, the entries and the snapshot, each
// length-prefixed. It is this package's own, like the log's records, so
// that the same encoders serve both and no protobuf runtime is needed.
func EncodeMessage(m *pb.Message) []byte {
	b := make([]byte, 0, 64)
	for _, v := range []uint64{uint64(m.GetType()), m.GetTo(), m.GetFrom(), m.GetTerm(), m.GetLogTerm(),
		m.GetIndex(), m.GetCommit(), m.GetVote(), boolBit(m.GetReject()), m.GetRejectHint()} {
		b = binary.AppendUvarint(b, v)
	}
	b = appendBytes(b, m.GetContext())
	b = binary.AppendUvarint(b, uint64(len(m.GetEntries())))
	for _, e := range m.GetEntries() {
		b = appendBytes(b, encodeEntry(e))
	}
	if s := m.GetSnapshot(); s != nil {
		b = binary.AppendUvarint(b, 1)
		b = appendBytes(b, encodeSnapshot(s))
	} else {
		b = binary.AppendUvarint(b, 0)
	}
	return b
}

// DecodeMessage reads what EncodeMessage wrote. The bytes come from the
// network: every count and length is checked against what is left. The
// message's byte slices do not alias b.
func DecodeMessage(b []byte) (*pb.Message, error) {
	d := decoder{b: b}
	var f [10]uint64
	for i := range f {
		f[i] = d.uvarint()
	}
	if d.err == nil && (f[0] > uint64(pb.MsgForgetLeader) || f[8] > 1) {
		d.err = fmt.Errorf("bad type %d or reject flag %d", f[0], f[8])
	}
	m := &pb.Message{Type: pb.MessageType(f[0]).Enum(), To: new(f[1]), From: new(f[2]), Term: new(f[3]),
		LogTerm: new(f[4]), Index: new(f[5]), Commit: new(f[6]), Vote: new(f[7]), Reject: new(f[8] == 1),
		RejectHint: new(f[9])}
	if ctx := d.bytes(); len(ctx) > 0 {
		m.Context = append([]byte(nil), ctx...)
	}
	n := d.uvarint()
	if d.err == nil && (n > maxMessageEntries || n > uint64(len(d.b))) {
		d.err = fmt.Errorf("%d entries", n)
	}
	for i := uint64(0); d.err == nil && i < n; i++ {
		e, err := decodeEntry(d.bytes())
		if d.err == nil && err != nil {
			d.err = err
		}
		m.Entries = append(m.Entries, e)
	}
	if d.uvarint() == 1 && d.err == nil {
		s, err := decodeSnapshot(d.bytes())
		if d.err == nil && err != nil {
			d.err = err
		}
		m.Snapshot = s
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("raft message: %w", d.err)
	}
	return m, nil
}

func boolBit(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// bytes reads a length-prefixed byte string (aliasing the input).
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errors.New("length past the payload")
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}
