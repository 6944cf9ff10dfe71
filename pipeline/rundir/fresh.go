package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// MoveAside is --fresh: it renames the run directory dir, if it exists, to
// dir.prev-TIME and each output path that exists (file or directory) to
// PATH.prev-TIME, with its index dirname/.basename.idx, if present, to
// .basename.prev-TIME.idx (so the pair stays a commit log); TIME is UTC like 20261130T164000, the same for
// all (with -2, -3… appended if any of those names is taken). Nothing is
// deleted. It returns what it moved as "FROM → TO" lines, also on an error
// part way.
//
// It refuses, moving nothing, a directory that is not a run directory
// (entries, but no run.json or done.ids), the root or the home directory;
// and while a live process holds dir's lock (the
// error is a *BusyError); call it before Lock(dir), not while holding it.
func MoveAside(dir string, outputs []string) ([]string, error) {
	if dir == "" {
		return nil, errors.New("run directory: empty path")
	}
	var from []string
	dirExists := exists(dir)
	if dirExists {
		if err := checkFresh(dir); err != nil {
			return nil, err
		}
		l, err := Lock(dir)
		if err != nil {
			return nil, err
		}
		// Renamed while locked: no run can start in it meanwhile. The lock
		// file moves with it, marked released.
		defer l.Release()
		from = append(from, dir)
	}
	outs, indexOf := outputsToMove(dir, outputs)
	from = append(from, outs...)
	if len(from) == 0 {
		return nil, nil
	}
	suffix := freeSuffix(from, time.Now())
	var moved []string
	for _, p := range from {
		to := p + suffix
		if out, ok := indexOf[p]; ok {
			// The index follows its file: the pair stays a commit log.
			to = commitlog.IndexPath(out + suffix)
		}
		if err := os.Rename(p, to); err != nil {
			return moved, fmt.Errorf("--fresh: moving aside %s: %w", p, err)
		}
		moved = append(moved, p+" → "+to)
		if p != dir {
			if err := commitlog.SyncDir(filepath.Dir(p)); err != nil {
				return moved, fmt.Errorf("--fresh: %w", err)
			}
		}
	}
	if dirExists {
		if err := commitlog.SyncDir(filepath.Dir(dir)); err != nil {
			return moved, fmt.Errorf("--fresh: %w", err)
		}
	}
	return moved, nil
}

// outputsToMove lists the outputs (and their commit indexes) that exist
// outside dir, each once; indexOf maps each index path to its data file.
func outputsToMove(dir string, outputs []string) (from []string, indexOf map[string]string) {
	seen := map[string]bool{dir: true}
	indexOf = map[string]string{} // index path → its data file
	for _, out := range outputs {
		if out == "" {
			continue
		}
		idx := commitlog.IndexPath(out)
		indexOf[idx] = out
		for _, p := range []string{out, idx} {
			if !seen[p] && exists(p) && !within(p, dir) {
				seen[p] = true
				from = append(from, p)
			}
		}
	}
	return from, indexOf
}

// freeSuffix returns ".prev-TIME", or ".prev-TIME-N", such that no path+suffix
// exists.
func freeSuffix(paths []string, now time.Time) string {
	base := ".prev-" + now.UTC().Format("20060102T150405")
	for n := 1; ; n++ {
		suffix := base
		if n > 1 {
			suffix += "-" + strconv.Itoa(n)
		}
		free := true
		for _, p := range paths {
			if exists(p + suffix) {
				free = false
				break
			}
		}
		if free {
			return suffix
		}
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// within reports whether p is inside dir (it moves with dir).
func within(p, dir string) bool {
	ap, err1 := filepath.Abs(p)
	ad, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(ad, ap)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
