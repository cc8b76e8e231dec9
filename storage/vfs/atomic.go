package vfs

import (
	"fmt"
	"path"
)

// WriteFileAtomic replaces name with data durably: it writes a temp file
// beside it, syncs it, renames it over name and syncs the directory, so a
// crash leaves either the old content or the new, never a mix. Every small
// file that must survive a crash whole (checkpoints, config tables, epoch
// files, the controller's log state) is written through it.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	tmp := name + ".tmp"
	_ = fsys.Remove(tmp) // a leftover of a crash mid-write, if any
	f, err := fsys.Create(tmp, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", name, err)
	}
	if err := fsys.SyncDir(path.Dir(name)); err != nil {
		return fmt.Errorf("sync dir of %s: %w", name, err)
	}
	return nil
}
