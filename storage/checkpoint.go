package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"sort"

	"github.com/wharfmq/wharf/storage/vfs"
)

// checkpoint is what the store knows to be durable, written atomically
// (temp file, sync, rename, sync dir) after the parts it describes were
// flushed. Recovery starts from it; a missing or damaged checkpoint only
// makes recovery slower (it scans from the start of the log).
type checkpoint struct {
	Clean            bool  // written by a clean shutdown after everything was flushed
	CLFlushed        int64 // every CommitLog byte below is durable
	CLMax            int64 // end of the log when written (== CLFlushed when clean)
	Dispatched       int64 // every ConsumeQueue entry of records below is durable
	Indexed          int64 // the index's MaxPhyOffset after its last flush
	PhysicMsgTime    int64 // store time of the last flushed record, ms
	LogicsMsgTime    int64 // store time of the last dispatched record, ms
	IndexMsgTime     int64
	Queues           []queueMark // per queue, what its durable ConsumeQueue held
	ConsumeQueueSize int64       // entries per ConsumeQueue file (checked at open)
}

// queueMark records a ConsumeQueue's durable extent, so recovery can tell a
// ConsumeQueue damaged or deleted by hand (rebuild it from the log) from one
// that merely lost entries along with the log's torn tail.
type queueMark struct {
	Key     QueueKey
	Max     int64 // next queue offset
	LastPhy int64 // log offset of its last entry
}

const (
	checkpointName  = "checkpoint"
	checkpointMagic = 0x57434b31 // "WCK1"
	maxCheckpoint   = 64 << 20
)

func (c *checkpoint) encode() []byte {
	be := binary.BigEndian
	b := make([]byte, 0, 128+len(c.Queues)*40)
	b = be.AppendUint32(b, checkpointMagic)
	var flags uint32
	if c.Clean {
		flags |= 1
	}
	b = be.AppendUint32(b, flags)
	for _, v := range []int64{c.CLFlushed, c.CLMax, c.Dispatched, c.Indexed, c.PhysicMsgTime, c.LogicsMsgTime, c.IndexMsgTime, c.ConsumeQueueSize} {
		b = be.AppendUint64(b, uint64(v))
	}
	b = be.AppendUint32(b, uint32(len(c.Queues)))
	for _, q := range c.Queues {
		b = be.AppendUint16(b, uint16(len(q.Key.Topic)))
		b = append(b, q.Key.Topic...)
		b = be.AppendUint32(b, uint32(q.Key.QueueID))
		b = be.AppendUint64(b, uint64(q.Max))
		b = be.AppendUint64(b, uint64(q.LastPhy))
	}
	return be.AppendUint32(b, crc32.ChecksumIEEE(b))
}

var errBadCheckpoint = errors.New("checkpoint damaged")

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	be := binary.BigEndian
	if len(b) < 8+8*8+4+4 {
		return nil, fmt.Errorf("%w: %d bytes", errBadCheckpoint, len(b))
	}
	body, sum := b[:len(b)-4], be.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", errBadCheckpoint)
	}
	if be.Uint32(body) != checkpointMagic {
		return nil, fmt.Errorf("%w: bad magic", errBadCheckpoint)
	}
	c := &checkpoint{Clean: be.Uint32(body[4:])&1 != 0}
	p := 8
	for _, v := range []*int64{&c.CLFlushed, &c.CLMax, &c.Dispatched, &c.Indexed, &c.PhysicMsgTime, &c.LogicsMsgTime, &c.IndexMsgTime, &c.ConsumeQueueSize} {
		*v = int64(be.Uint64(body[p:]))
		p += 8
	}
	n := int(be.Uint32(body[p:]))
	p += 4
	if n > (len(body)-p)/22 { // each queue mark takes at least 22 bytes
		return nil, fmt.Errorf("%w: %d queues in %d bytes", errBadCheckpoint, n, len(body)-p)
	}
	c.Queues = make([]queueMark, 0, n)
	for range n {
		if len(body)-p < 2 {
			return nil, fmt.Errorf("%w: truncated queue table", errBadCheckpoint)
		}
		tl := int(be.Uint16(body[p:]))
		p += 2
		if len(body)-p < tl+20 {
			return nil, fmt.Errorf("%w: truncated queue table", errBadCheckpoint)
		}
		var q queueMark
		q.Key.Topic = string(body[p : p+tl])
		p += tl
		q.Key.QueueID = int32(be.Uint32(body[p:]))
		q.Max = int64(be.Uint64(body[p+4:]))
		q.LastPhy = int64(be.Uint64(body[p+12:]))
		p += 20
		c.Queues = append(c.Queues, q)
	}
	if p != len(body) {
		return nil, fmt.Errorf("%w: %d trailing bytes", errBadCheckpoint, len(body)-p)
	}
	return c, nil
}

func sortQueueMarks(q []queueMark) {
	sort.Slice(q, func(i, j int) bool {
		if q[i].Key.Topic != q[j].Key.Topic {
			return q[i].Key.Topic < q[j].Key.Topic
		}
		return q[i].Key.QueueID < q[j].Key.QueueID
	})
}

// writeFileAtomic is vfs.WriteFileAtomic.
func writeFileAtomic(fsys vfs.FS, name string, data []byte) error {
	return vfs.WriteFileAtomic(fsys, name, data)
}

// readFile reads a whole file of at most limit bytes. ok is false if it
// does not exist.
func readFile(fsys vfs.FS, name string, limit int64) (data []byte, ok bool, err error) {
	f, err := fsys.Open(name)
	if err != nil {
		if errors.Is(err, vfs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, err
	}
	defer f.Close()
	if f.Size() > limit {
		return nil, true, fmt.Errorf("%s is %d bytes, more than the %d allowed", name, f.Size(), limit)
	}
	data = make([]byte, f.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, true, fmt.Errorf("read %s: %w", name, err)
	}
	return data, true, nil
}

func loadCheckpoint(fsys vfs.FS, root string) (*checkpoint, error) {
	b, ok, err := readFile(fsys, path.Join(root, checkpointName), maxCheckpoint)
	if err != nil || !ok {
		return nil, err
	}
	return decodeCheckpoint(b)
}
