package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// MayLackAckedFile marks a store whose log may lack messages the broker
// had acknowledged: it was opened after an unclean stop, and whatever had
// been acknowledged from memory (a slave's copy under ASYNC_FLUSH, say)
// may have been lost with the page cache. It stays, across clean restarts
// too, until the broker knows its log holds everything acknowledged
// again (ClearMayLackAcked): a controller must not elect such a replica
// while a replica that holds everything may come back.
const MayLackAckedFile = "may_lack_acked"

func (s *Store) mayLackAckedPath() string {
	return filepath.Join(s.cfg.StorePathRootDir, MayLackAckedFile)
}

// markAfterRecovery writes the marker after an unclean stop, or learns
// whether an earlier open left it.
func (s *Store) markAfterRecovery(abnormal bool) error {
	if abnormal {
		if err := s.writeMarker(); err != nil {
			return err
		}
		s.mayLackAcked.Store(true)
		return nil
	}
	_, err := s.fs.Stat(s.mayLackAckedPath())
	switch {
	case err == nil:
		s.mayLackAcked.Store(true)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("storage: stat %s: %w", MayLackAckedFile, err)
	}
	return nil
}

func (s *Store) writeMarker() error {
	f, err := s.fs.Create(s.mayLackAckedPath(), 0)
	if errors.Is(err, fs.ErrExist) {
		return nil // an earlier open's, not yet cleared
	}
	if err == nil {
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = s.fs.SyncDir(s.cfg.StorePathRootDir)
	}
	if err != nil {
		return fmt.Errorf("storage: write %s: %w", MayLackAckedFile, err)
	}
	return nil
}

// MayLackAcked reports whether the log may lack messages this broker had
// acknowledged (MayLackAckedFile).
func (s *Store) MayLackAcked() bool { return s.mayLackAcked.Load() }

// ClearMayLackAcked removes the marker, durably: the broker knows its log
// holds everything acknowledged (it caught up with its master's confirm
// offset, it became the master of an epoch, or its writes are fsynced
// before they are acknowledged). Clearing a store without the marker
// does nothing.
func (s *Store) ClearMayLackAcked() error {
	if !s.mayLackAcked.Load() {
		return nil
	}
	if err := s.fs.Remove(s.mayLackAckedPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("storage: remove %s: %w", MayLackAckedFile, err)
	}
	if err := s.fs.SyncDir(s.cfg.StorePathRootDir); err != nil {
		return fmt.Errorf("storage: sync root after removing %s: %w", MayLackAckedFile, err)
	}
	s.mayLackAcked.Store(false)
	return nil
}
