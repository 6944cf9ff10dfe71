package commitlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FileMode is the mode of a file written through a temporary one: 0644
// less the process's umask, as os.OpenFile would give it (umask 077 gives
// 0600). The umask is read once, at start-up, before any goroutine could
// create a file while it is briefly 0.
var FileMode = func() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return 0o644 &^ os.FileMode(m)
}()

// WriteFileAtomic replaces path with data: a hidden temporary file beside
// it, fsynced, renamed over it, the directory fsynced. A reader sees the old
// file or the new one, never a part; a crash leaves one of the two.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	err = errors.Join(werr, f.Chmod(FileMode), f.Sync(), f.Close()) // CreateTemp makes it 0600
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, so the names created or renamed in it last.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
