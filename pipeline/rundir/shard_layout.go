package rundir

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

var shardDirName = regexp.MustCompile(`^shard-(\d{4})-of-(\d{4})$`)

// CheckShardLayout refuses to change how an existing run is split: a
// shard's run directory is BASE/shard-IIII-of-NNNN, so a start with
// another N (or unsharded, in BASE itself) would take again ids the other
// split's shards took. runDir is the run's directory as planned, shard
// its shard (nil: not sharded). Run directories placed with ${shard}
// elsewhere in the path are checked by run.json alone (Check).
func CheckShardLayout(runDir string, shard *pipefile.Shard) error {
	base := runDir
	if shard != nil {
		if filepath.Base(runDir) != shard.Name() {
			return nil
		}
		base = filepath.Dir(runDir)
		if shard.Count > 1 {
			if r, err := ReadRun(base); err == nil && r != nil {
				return fmt.Errorf("%s holds an unsharded run (%s); it cannot continue as %d shards: use another run_dir, or run it without --shard", base, RunFile, shard.Count)
			}
		}
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil // nothing there yet
	}
	var other []string
	for _, e := range entries {
		m := shardDirName.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(base, e.Name(), RunFile)); err != nil {
			continue
		}
		if n, _ := strconv.Atoi(m[2]); shard == nil || n != shard.Count {
			other = append(other, e.Name())
		}
	}
	if len(other) == 0 {
		return nil
	}
	sort.Strings(other)
	now := "unsharded"
	if shard != nil {
		now = fmt.Sprintf("shard %s", shard)
	}
	return fmt.Errorf("%s holds the shards of a run split another way (%s); this run would be %s: the number of shards of an existing run cannot change (its shards took their ids); use another run_dir, or finish it as it was split",
		base, strings.Join(other, ", "), now)
}
