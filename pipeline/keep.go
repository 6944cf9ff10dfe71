package pipeline

import (
	"os"
	"time"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// KeepAside renames path (and its commit index, if any) to PATH.prev-TIME so
// that a file which days of work may have produced is never overwritten. It
// returns the new name.
func KeepAside(path string) (string, error) {
	prev := path + ".prev-" + time.Now().UTC().Format("20060102T150405.000")
	if err := os.Rename(path, prev); err != nil {
		return "", err
	}
	if idx := commitlog.IndexPath(path); fileExists(idx) {
		if err := os.Rename(idx, commitlog.IndexPath(prev)); err != nil {
			return prev, err
		}
	}
	return prev, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
