package storage

import (
	"errors"
	"fmt"
	"maps"
	"path"

	"github.com/wharfmq/wharf/storage/vfs"
)

// DeletedTopicsFile is the config file (under ${storePathRootDir}/config)
// that holds the watermarks of deleted topics.
const DeletedTopicsFile = "deletedTopics.json"

// Deleted maps each deleted topic to its watermark: the log offset at its
// deletion. A record of the topic below its watermark belongs to the
// deleted topic: it is never dispatched to a ConsumeQueue again, never
// counted in the topic-queue offset table, never found by a query by key,
// and stays in the log only until retention removes its segment. Records
// at or above the watermark belong to a topic re-created with the same
// name, whose queues start again at queue offset 0.
//
// A Deleted value is an immutable snapshot: the store replaces it whole.
type Deleted map[string]int64

// Covers reports whether the record of topic at log offset off belongs to
// a deleted topic.
func (d Deleted) Covers(topic []byte, off int64) bool {
	if len(d) == 0 {
		return false
	}
	w, ok := d[string(topic)] // no allocation: the conversion is in the index
	return ok && off < w
}

// deletedFile is the content of deletedTopics.json.
type deletedFile struct {
	Topics map[string]int64 `json:"deletedTopics"`
}

func (s *Store) deletedPath() string { return s.ConfigPath(DeletedTopicsFile) }

// loadDeleted reads the watermarks at Open. Without them the records of
// deleted topics would come back, so a file that cannot be read (and has
// no readable backup) stops the store from opening.
func (s *Store) loadDeleted() error {
	var f deletedFile
	if _, err := LoadJSON(s.fs, s.deletedPath(), &f); err != nil {
		return fmt.Errorf("storage: deleted topics: %w", err)
	}
	s.cl.setDeleted(f.Topics)
	return nil
}

func (c *CommitLog) setDeleted(d Deleted) {
	c.deleted.Store(&d)
	c.deletedMax = 0
	for _, w := range d {
		c.deletedMax = max(c.deletedMax, w)
	}
}

// clampDeleted lowers every watermark beyond the log's end to the end,
// durably, before the broker appends on its own. A watermark is the log's
// end at the deletion; a crash may have cut that end's unflushed tail, and
// a promoted slave may never have received it. Records of the topic below
// the end are all the deleted topic's, and the next ones, written here
// from the end on, belong to the re-created topic: left beyond the end, the
// watermark would swallow them.
func (s *Store) clampDeleted() error {
	end := s.cl.MaxOffset()
	if s.cl.deletedMax <= end {
		return nil
	}
	next := Deleted{}
	for t, w := range s.cl.Deleted() {
		next[t] = min(w, end)
	}
	if err := SaveJSON(s.fs, s.deletedPath(), deletedFile{Topics: maps.Clone(next)}); err != nil {
		return fmt.Errorf("storage: lower the watermarks of deleted topics to the log's end %d: %w", end, err)
	}
	s.cl.setDeleted(next)
	return nil
}

// Deleted returns the watermarks of deleted topics (a snapshot; safe from
// any goroutine).
func (s *Store) Deleted() Deleted { return s.cl.Deleted() }

// Deleted returns the watermarks of deleted topics.
func (c *CommitLog) Deleted() Deleted {
	if p := c.deleted.Load(); p != nil {
		return *p
	}
	return nil
}

// DeleteTopic deletes topic's records in the log below at (at < 0: the
// log's end, which is what a master deletes): it records the watermark
// durably, then drops the topic's entries from the topic-queue offset
// table, so that the next record of each of its queues gets queue offset
// 0. A slave passes its master's watermark; its log may already hold
// records of the re-created topic beyond it, and the table keeps counting
// those. A watermark at or below the topic's current one changes nothing.
// It returns the topic's watermark.
//
// Only the log's appender (the writer) calls it. The ConsumeQueues of the
// topic are their owners' to drop (DropConsumeQueue); recovery drops the
// ones a crash left behind.
func (s *Store) DeleteTopic(topic string, at int64) (int64, error) {
	if err := ValidateTopic(topic); err != nil {
		return 0, err
	}
	if at < 0 {
		at = s.cl.MaxOffset()
	}
	cur := s.cl.Deleted()
	if w, ok := cur[topic]; ok && w >= at {
		return w, nil
	}
	next := Deleted{topic: at}
	for t, w := range cur {
		// Watermarks below the log's start protect nothing any more.
		if t != topic && w > s.cl.MinOffset() {
			next[t] = w
		}
	}
	if err := SaveJSON(s.fs, s.deletedPath(), deletedFile{Topics: maps.Clone(next)}); err != nil {
		return 0, fmt.Errorf("storage: delete topic %s: %w", topic, err)
	}
	s.cl.setDeleted(next)
	if err := s.recountTopic(topic, at); err != nil {
		return at, fmt.Errorf("storage: delete topic %s: %w", topic, err)
	}
	return at, nil
}

// recountTopic rebuilds the topic-queue offset table entries of topic from
// its records at or beyond its watermark at.
func (s *Store) recountTopic(topic string, at int64) error {
	for k := range s.cl.queueOffsets {
		if k.Topic == topic {
			delete(s.cl.queueOffsets, k)
		}
	}
	from, to := max(at, s.cl.MinOffset()), s.cl.MaxOffset()
	if from >= to {
		return nil
	}
	_, err := s.ForEachRecord(from, to, false, func(_ int64, r *Record) error {
		if string(r.Topic) == topic {
			s.cl.queueOffsets[QueueKey{topic, r.QueueID}] = r.QueueOffset + 1
		}
		return nil
	})
	return err
}

// DropConsumeQueue closes the ConsumeQueue of k and removes its files
// durably (a topic was deleted). Only the owner of the queue calls it, with
// no flush job of the queue running.
func (s *Store) DropConsumeQueue(k QueueKey) error {
	s.mu.Lock()
	q := s.cqs[k]
	delete(s.cqs, k)
	s.mu.Unlock()
	if q != nil {
		if err := q.Close(); err != nil {
			return fmt.Errorf("storage: drop consume queue %s: %w", k, err)
		}
	}
	return s.removeQueueFiles(k)
}

// removeQueueFiles removes the directory of queue k, and its topic's if
// that is left empty, and makes the removal durable.
func (s *Store) removeQueueFiles(k QueueKey) error {
	if err := s.fs.RemoveAll(s.cqDir(k)); err != nil {
		return fmt.Errorf("storage: remove consume queue %s: %w", k, err)
	}
	topicDir := path.Dir(s.cqDir(k))
	syncDir := topicDir
	// The topic's directory goes too when it is empty, by a remove that
	// fails on a directory that is not: the owners of its other queues
	// drop theirs, and those of a re-created topic create theirs, at the
	// same time. Listing it and then removing it whole took away a queue
	// directory made in between (a slave's pulls then saw nothing).
	switch err := s.fs.Remove(topicDir); {
	case err == nil:
		syncDir = s.consumeQueueDir()
	case errors.Is(err, vfs.ErrNotEmpty), errors.Is(err, vfs.ErrNotExist):
	default:
		return fmt.Errorf("storage: remove consume queues of %s: %w", k.Topic, err)
	}
	if err := s.fs.SyncDir(syncDir); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return fmt.Errorf("storage: sync after removing consume queue %s: %w", k, err)
	}
	return nil
}

// dropDeletedQueues removes, at recovery, the ConsumeQueues of deleted
// topics that a crash left behind: a queue whose last entry points below
// its topic's watermark (or that has no entry) holds nothing of a
// re-created topic, whose records are dispatched again from the log.
func (s *Store) dropDeletedQueues(rep *RecoveryReport) error {
	del := s.cl.Deleted()
	if len(del) == 0 {
		return nil
	}
	for _, k := range s.Queues() {
		w, ok := del[k.Topic]
		if !ok {
			continue
		}
		if e, has := s.cqs[k].LastEntry(); has && e.Offset >= w {
			continue
		}
		if err := s.DropConsumeQueue(k); err != nil {
			return err
		}
		rep.DeletedQueues = append(rep.DeletedQueues, k)
	}
	return nil
}
