package stages

// A shard directory's files, as write-arrow's output and read-completions
// find them.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/filecommit"
)

// shardFiles lists the shard files path names, in order, or nil when path
// is a JSONL file.
func shardFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir := path
	mdir, isManifest := filecommit.ManifestDir(path)
	switch {
	case st.IsDir():
	case isManifest:
		dir = mdir
	case slices.Contains([]string{".parquet", ".arrow"}, strings.ToLower(filepath.Ext(path))):
		return []string{path}, nil
	default:
		return nil, nil
	}
	m, err := filecommit.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	if m != nil {
		for _, s := range m.Shards {
			files = append(files, filepath.Join(dir, s.Name))
		}
		return files, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".parquet" || ext == ".arrow") && !strings.HasPrefix(e.Name(), ".") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no %s and no .parquet or .arrow shards in it", dir, filecommit.ManifestName)
	}
	return files, nil // ReadDir sorts by name
}
