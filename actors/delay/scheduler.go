package delay

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/wharfmq/wharf/storage/cq"
)

// ProgressFile is the scheduler's progress file under config/.
const ProgressFile = "delayOffset.json"

const (
	// TickInterval is how often the caller calls Tick.
	TickInterval = 100 * time.Millisecond
	// ScanBatch bounds the entries of one scan and the messages of one
	// re-store batch.
	ScanBatch = 256
)

// Progress is the content of delayOffset.json: per schedule queue, the
// next queue offset whose message is not yet re-stored and flushed.
type Progress struct {
	Offsets map[int32]int64 `json:"offsetTable"`
}

// Scan asks for up to Max entries of schedule queue Queue from From; the
// caller reports them with Entries.
type Scan struct {
	Queue int32
	From  int64
	Max   int
}

// Batch names a set of due messages re-stored as one write; the caller
// hands it back with Stored.
type Batch struct {
	queue int32
	upTo  int64   // a level queue's progress once the batch is durable
	qos   []int64 // the absolute-time queue's offsets in the batch
}

// Restore asks the caller to re-store the messages the entries index in
// their real topics, as one write, and to report it with Stored.
type Restore struct {
	Entries []cq.Entry
	Batch   Batch
}

// Ready is what the caller must do after an input.
type Ready struct {
	Scans    []Scan
	Restores []Restore
	// Save, if not nil, is the progress to write to ProgressFile; report
	// the outcome with Persisted before the next input.
	Save *Progress
}

type pendingAbs struct {
	qo      int64
	deliver int64
	e       cq.Entry
}

// stored is a batch written to the log, waiting to be flushed.
type stored struct {
	Batch
	end int64 // log end of the re-stored copies
}

// Scheduler delivers delayed messages. Queues 0..levels-1 are the delay
// levels, queue levels the absolute times.
type Scheduler struct {
	levels   int32
	progress map[int32]int64 // durable: next queue offset not yet re-stored and flushed
	scan     map[int32]int64 // next queue offset to look at
	asked    map[int32]bool  // a scan of the queue is out
	abs      []pendingAbs    // absolute-time entries seen, not yet re-stored, by delivery time
	absDone  map[int64]bool  // absolute-time queue offsets re-stored and flushed, beyond progress
	commits  []stored
	inflight int // batches handed out and not yet reported
	dirty    bool
	rd       Ready
}

// New returns a scheduler for the given number of delay levels, with no
// progress.
func New(levels int) *Scheduler {
	s := &Scheduler{levels: int32(levels)}
	s.Load(Progress{})
	return s
}

// Load starts from the progress read from ProgressFile.
func (s *Scheduler) Load(p Progress) {
	s.progress = map[int32]int64{}
	maps.Copy(s.progress, p.Offsets)
	s.scan = maps.Clone(s.progress)
	s.asked, s.absDone = map[int32]bool{}, map[int64]bool{}
	s.abs, s.commits, s.inflight = nil, nil, 0
}

func (s *Scheduler) absQueue() int32 { return s.levels }

// Tick moves progress over the batches now flushed (flushed is the log's
// flushed offset), writes it if it moved, and, unless a batch is out, asks
// for the entries of every schedule queue whose end (queueMax) is past what
// was looked at, and re-stores due absolute-time messages.
func (s *Scheduler) Tick(now time.Time, flushed int64, queueMax func(queue int32) int64) {
	keep := s.commits[:0]
	for _, c := range s.commits {
		if c.end > flushed {
			keep = append(keep, c)
			continue
		}
		s.advance(c.Batch)
	}
	s.commits = keep
	s.persist()
	if s.inflight > 0 {
		return // one batch at a time keeps progress simple
	}
	for q := int32(0); q <= s.absQueue(); q++ {
		if queueMax(q) <= s.scan[q] || s.asked[q] {
			continue
		}
		s.asked[q] = true
		s.rd.Scans = append(s.rd.Scans, Scan{Queue: q, From: s.scan[q], Max: ScanBatch})
	}
	s.deliverAbs(now)
}

// advance moves progress over a durable batch. The absolute-time queue
// moves only over a contiguous run of durable offsets, as its messages are
// re-stored out of queue order.
func (s *Scheduler) advance(c Batch) {
	if c.queue == s.absQueue() {
		for _, qo := range c.qos {
			s.absDone[qo] = true
		}
		p := s.progress[c.queue]
		for s.absDone[p] {
			delete(s.absDone, p)
			p++
		}
		s.progress[c.queue] = p
	} else if c.upTo > s.progress[c.queue] {
		s.progress[c.queue] = c.upTo
	}
	s.dirty = true
}

// Stop writes progress that moved.
func (s *Scheduler) Stop() { s.persist() }

func (s *Scheduler) persist() {
	if !s.dirty {
		return
	}
	s.dirty = false
	s.rd.Save = &Progress{Offsets: maps.Clone(s.progress)}
}

// Persisted reports the outcome of the Save Ready handed out; a failed
// write is tried again at the next Tick.
func (s *Scheduler) Persisted(err error) {
	if err != nil {
		s.dirty = true
	}
}

// Entries reports a Scan: entries of queue from queue offset from (later
// than asked if retention removed the first ones).
func (s *Scheduler) Entries(now time.Time, queue int32, from int64, entries []cq.Entry) {
	s.asked[queue] = false
	if from != s.scan[queue] {
		if from < s.scan[queue] {
			return // a stale answer
		}
		s.scan[queue] = from // retention removed the entries before
	}
	if queue == s.absQueue() {
		for i, e := range entries {
			qo := from + int64(i)
			if e.Valid() && !s.absDone[qo] {
				s.abs = append(s.abs, pendingAbs{qo: qo, deliver: e.TagsCode, e: e})
			}
		}
		s.scan[queue] = from + int64(len(entries))
		sort.Slice(s.abs, func(i, j int) bool { return s.abs[i].deliver < s.abs[j].deliver })
		return
	}
	nowMs := now.UnixMilli()
	var due []cq.Entry
	for _, e := range entries {
		if e.TagsCode > nowMs {
			break // a level's queue is in delivery order
		}
		due = append(due, e)
	}
	if len(due) == 0 {
		return
	}
	c := Batch{queue: queue, upTo: from + int64(len(due))}
	s.restore(due, c)
	s.scan[queue] = c.upTo
}

func (s *Scheduler) deliverAbs(now time.Time) {
	if s.inflight > 0 || len(s.abs) == 0 {
		return
	}
	nowMs := now.UnixMilli()
	n := 0
	for n < len(s.abs) && s.abs[n].deliver <= nowMs && n < ScanBatch {
		n++
	}
	if n == 0 {
		return
	}
	c := Batch{queue: s.absQueue()}
	due := make([]cq.Entry, n)
	for i := range n {
		due[i] = s.abs[i].e
		c.qos = append(c.qos, s.abs[i].qo)
	}
	s.restore(due, c)
	s.abs = slices.Delete(s.abs, 0, n)
}

func (s *Scheduler) restore(due []cq.Entry, c Batch) {
	s.inflight++
	s.rd.Restores = append(s.rd.Restores, Restore{Entries: due, Batch: c})
}

// Stored reports a Restore: end is the log end after the re-stored copies
// (0 if none of them was readable, so there is nothing to wait for), err
// that they were not stored, and are looked at again.
func (s *Scheduler) Stored(c Batch, end int64, err error) {
	s.inflight--
	if err != nil {
		s.rewind(c)
		return
	}
	s.commits = append(s.commits, stored{Batch: c, end: end})
}

func (s *Scheduler) rewind(c Batch) {
	if c.queue == s.absQueue() {
		for _, qo := range c.qos {
			delete(s.absDone, qo)
		}
		s.abs = nil // rescan; the durable ones are skipped
	}
	s.scan[c.queue] = s.progress[c.queue]
}

// Ready returns the outputs collected since the last call.
func (s *Scheduler) Ready() Ready {
	rd := s.rd
	s.rd = Ready{}
	return rd
}
