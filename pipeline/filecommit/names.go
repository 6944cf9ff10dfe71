package filecommit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// MetaDir holds a shard directory's own files — its manifest, its id log,
// the shards being written — so that the directory itself holds nothing but
// committed shards. Tools that read "every file of D" then read only data:
// DuckDB's read_parquet('D/*') lists files, hidden ones too, but not
// directories; HF datasets passes over hidden directories unless a pattern
// names them (src/datasets/data_files.py resolve_pattern,
// _is_unrequested_hidden_file_or_is_inside_unrequested_hidden_dir), and
// would otherwise hand a manifest.json to the Parquet reader (it is not in
// FILES_TO_IGNORE).
const MetaDir = ".pipe"

// ManifestName is the manifest's path in a shard directory (and under an
// S3 prefix upload-s3 wrote).
const ManifestName = MetaDir + "/manifest.json"

// ManifestCopyName is the manifest's copy, written with it, read when the
// manifest is damaged.
const ManifestCopyName = MetaDir + "/manifest.json.copy"

// IDLogName is the id log's path in a shard directory.
const IDLogName = MetaDir + "/ids"

// LegacyManifestName and legacyIDLog are where directories written before
// MetaDir (pipe-row-1) keep them. They are read wherever a manifest is, and
// Open moves them into MetaDir.
const (
	LegacyManifestName = "manifest.json"
	legacyIDLog        = ".ids"
)

// ManifestNames are the paths a manifest may have, the current one first:
// for stores ReadManifest does not reach (S3), which try them in order.
var ManifestNames = []string{ManifestName, LegacyManifestName}

// ManifestPath is the file of dir's manifest, at either path (the current
// one if both are there); ok is false when there is none.
func ManifestPath(dir string) (path string, ok bool) {
	for _, n := range ManifestNames {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return filepath.Join(dir, ManifestName), false
}

// ManifestDir is the shard directory of a manifest's path (as a user may
// name it instead of the directory); ok is false when path is not one.
func ManifestDir(path string) (dir string, ok bool) {
	clean := filepath.ToSlash(filepath.Clean(path))
	if rest, found := strings.CutSuffix(clean, "/"+ManifestName); found || clean == ManifestName {
		if !found {
			rest = "."
		}
		return filepath.FromSlash(rest), true
	}
	if filepath.Base(path) == LegacyManifestName {
		return filepath.Dir(path), true
	}
	return "", false
}

// IDLogPath is the id log of dir, at the legacy path if only that exists.
func IDLogPath(dir string) string {
	p := filepath.Join(dir, IDLogName)
	if _, err := os.Stat(p); err != nil {
		if _, lerr := os.Stat(filepath.Join(dir, legacyIDLog)); lerr == nil {
			return filepath.Join(dir, legacyIDLog)
		}
	}
	return p
}

// isTemp reports whether a file name is one of WriteFileAtomic's or
// Create's temporary files.
func isTemp(n string) bool { return len(n) > 6 && n[0] == '.' && filepath.Ext(n) == ".tmp" }

// migrateMeta creates dir's MetaDir and moves a legacy id log and manifest
// into it: the id log first, then the manifest, each by one rename, so a
// crash between leaves files that are read where they are, and the next
// open finishes the move. A file already at the new path wins; the legacy
// one is then left as it was.
func migrateMeta(dir string) error {
	moved := false
	for _, m := range [][2]string{{legacyIDLog, IDLogName}, {LegacyManifestName, ManifestName}} {
		from, to := filepath.Join(dir, m[0]), filepath.Join(dir, m[1])
		if _, err := os.Stat(from); err != nil {
			continue
		}
		if _, err := os.Stat(to); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.Rename(from, to); err != nil {
			return fmt.Errorf("moving %s into %s: %w", from, filepath.Join(dir, MetaDir), err)
		}
		moved = true
	}
	if !moved {
		return nil
	}
	if err := commitlog.SyncDir(filepath.Join(dir, MetaDir)); err != nil {
		return err
	}
	return commitlog.SyncDir(dir)
}

// idLogNext is the id log being replaced by a Drop (see Set.Drop).
const idLogNext = IDLogName + ".next"
