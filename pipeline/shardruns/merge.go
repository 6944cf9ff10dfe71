package shardruns

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// MergedName is the file pipe merge writes into its --out directory or prefix.
const MergedName = "merged.json"

// MergedFormat names the layout of merged.json.
const MergedFormat = "pipe-merged/1"

// Merged is one manifest over the committed outputs of a sharded run's
// shards. It copies no data: it names each shard's committed files.
type Merged struct {
	Format    string    `json:"format"`
	Created   time.Time `json:"created"`
	Shards    int       `json:"shards"` // N
	ShardHash string    `json:"shard_hash"`
	// Complete is true when every shard 0..N-1 was given and is done.
	Complete   bool     `json:"complete"`
	Missing    []string `json:"missing,omitempty"`    // "I/N" of shards not given
	Unfinished []string `json:"unfinished,omitempty"` // "I/N (state)"
	Runs       []RunRef `json:"runs"`
	Outputs    []Output `json:"outputs"`
	// Settings are the data-defining settings every shard shares, with
	// each shard's own name written ${shard}.
	Settings map[string]any `json:"settings"`
}

// RunRef is one shard's run directory.
type RunRef struct {
	Shard    string `json:"shard"` // "I/N"
	Dir      string `json:"dir"`
	State    string `json:"state"`
	Finished int64  `json:"finished"` // ids done.ids holds
}

// Output is one writer stage's committed data over every shard.
type Output struct {
	Stage  string `json:"stage"`
	Kind   string `json:"kind"`
	Format string `json:"format"` // jsonl, parquet, arrow
	Rows   int64  `json:"rows"`
	Tokens int64  `json:"tokens,omitempty"`
	Bytes  int64  `json:"bytes"`
	Files  []File `json:"files"`
}

// File is one committed file of one shard. A JSONL log's committed part is
// its first Bytes bytes (a live run may have appended an uncommitted tail).
type File struct {
	Shard  int    `json:"shard"`
	Path   string `json:"path"`
	URL    string `json:"url,omitempty"` // where an upload-s3 stage put it
	Rows   int64  `json:"rows"`
	Tokens int64  `json:"tokens,omitempty"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256,omitempty"`
}

// MergeError lists why shards cannot be merged: they were not made with
// the same settings or shard count, or an id is in two of them.
type MergeError struct{ Problems []string }

func (e *MergeError) Error() string {
	return "cannot merge these shards:\n  " + strings.Join(e.Problems, "\n  ")
}

// Merge checks that runs are shards of one run (same shard count, same
// data-defining settings, no id in two shards) and returns the manifest
// over their committed outputs; missing and unfinished shards are listed in
// it, not errors. Problems are returned as a *MergeError.
func Merge(runs []*Run) (*Merged, error) {
	if len(runs) == 0 {
		return nil, &MergeError{Problems: []string{"no run directories given"}}
	}
	first := runs[0]
	n := first.Shard.Count
	mg := &merger{
		m:      &Merged{Format: MergedFormat, Created: time.Now().UTC(), Shards: n, ShardHash: pipefile.ShardHash, Outputs: []Output{}},
		owners: map[string][]owned{},
		outs:   map[string]*Output{},
	}
	mg.m.Settings = shardFree(first)
	byIndex := mg.index(runs)
	mg.listAbsent(byIndex)
	// Every output, and done.ids, must hold each id in one shard at most.
	for i := 0; i < n; i++ {
		if r, ok := byIndex[i]; ok {
			mg.addShard(i, r)
		}
	}
	for _, where := range slices.Sorted(maps.Keys(mg.owners)) {
		if p := overlap(mg.owners[where], n); p != "" {
			mg.probs = append(mg.probs, where+": "+p)
		}
	}
	if len(mg.probs) > 0 {
		return nil, &MergeError{Problems: mg.probs}
	}
	for _, s := range mg.order {
		mg.m.Outputs = append(mg.m.Outputs, *mg.outs[s])
	}
	return mg.m, nil
}

// merger is the state of one Merge: the manifest being built, the
// problems found, and who holds which ids.
type merger struct {
	m      *Merged
	probs  []string
	owners map[string][]owned // by where: done.ids or "stage S"
	outs   map[string]*Output // by stage
	order  []string           // stages of outs, as first met
}

// index maps the runs by shard index, noting a run of another shard
// count, a shard given twice, or settings other than the first run's.
func (mg *merger) index(runs []*Run) map[int]*Run {
	first, n, base := runs[0], runs[0].Shard.Count, mg.m.Settings
	byIndex := map[int]*Run{}
	for _, r := range runs {
		who := fmt.Sprintf("shard %s (%s)", r.Shard, r.Dir)
		if r.Shard.Count != n {
			mg.probs = append(mg.probs, fmt.Sprintf("%s is one of %d shards, %s one of %d: all must be shards of one run", who, r.Shard.Count, first.Shard, n))
			continue
		}
		if prev, dup := byIndex[r.Shard.Index]; dup {
			mg.probs = append(mg.probs, fmt.Sprintf("%s: shard %s is also %s", who, r.Shard, prev.Dir))
			continue
		}
		byIndex[r.Shard.Index] = r
		if r != first {
			if diffs := rundir.Compare(base, shardFree(r)); len(diffs) > 0 {
				mg.probs = append(mg.probs, fmt.Sprintf("%s has other data-defining settings than shard %s: %s", who, first.Shard, strings.Join(diffs, "; ")))
			}
		}
	}
	return byIndex
}

// listAbsent lists the shards not given and those not done, and so
// whether the merge is complete.
func (mg *merger) listAbsent(byIndex map[int]*Run) {
	m := mg.m
	for i := 0; i < m.Shards; i++ {
		r, ok := byIndex[i]
		if !ok {
			m.Missing = append(m.Missing, fmt.Sprintf("%d/%d", i, m.Shards))
			continue
		}
		if !r.Done() {
			m.Unfinished = append(m.Unfinished, fmt.Sprintf("%s (%s)", r.Shard, r.State()))
		}
	}
	m.Complete = len(m.Missing) == 0 && len(m.Unfinished) == 0
}

// addShard adds shard i's run: its done ids and its committed outputs.
func (mg *merger) addShard(i int, r *Run) {
	done, err := commitlog.ReadIDLog(filepath.Join(r.Dir, pipeline.DoneFile))
	if err != nil {
		mg.probs = append(mg.probs, err.Error())
	}
	mg.owners[pipeline.DoneFile] = append(mg.owners[pipeline.DoneFile], owned{i, done})
	mg.m.Runs = append(mg.m.Runs, RunRef{Shard: r.Shard.String(), Dir: r.Dir, State: r.State(), Finished: int64(len(done))})
	if len(r.Run.Outputs) == 0 {
		mg.probs = append(mg.probs, fmt.Sprintf("shard %s (%s): %s lists no outputs (written by an older pipe? one more pipe run of it records them)", r.Shard, r.Dir, rundir.RunFile))
	}
	for _, o := range r.Run.Outputs {
		mg.addOutput(i, r, o)
	}
}

// addOutput adds what output o of shard i committed to its stage's Output.
func (mg *merger) addOutput(i int, r *Run, o rundir.Output) {
	files, ids, format, data, err := committed(o, i)
	if err != nil {
		mg.probs = append(mg.probs, fmt.Sprintf("shard %s: stage %q: %v", r.Shard, o.Stage, err))
		return
	}
	if !data {
		return // not data of its own (an upload)
	}
	uploaded(files, o, r.Run.Outputs)
	out := mg.outs[o.Stage]
	if out == nil {
		out = &Output{Stage: o.Stage, Kind: o.Kind}
		mg.outs[o.Stage] = out
		mg.order = append(mg.order, o.Stage)
	}
	if out.Format == "" {
		out.Format = format // "" while the shard committed nothing
	}
	for _, f := range files {
		out.Rows += f.Rows
		out.Tokens += f.Tokens
		out.Bytes += f.Bytes
	}
	out.Files = append(out.Files, files...)
	mg.owners["stage "+o.Stage] = append(mg.owners["stage "+o.Stage], owned{i, ids})
}

// shardFree is a run's settings with its shard's name written ${shard}, so
// the shards of one run compare equal.
func shardFree(r *Run) map[string]any {
	b, _ := json.Marshal(r.Run.Settings)
	b = bytes.ReplaceAll(b, []byte(r.Shard.Name()), []byte("${shard}"))
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

// committed lists what an output of shard i has committed, with the hashes
// of its ids, as the output's kind reads it (output.Spec); data is
// false for an output that is not data of its own (an upload, a kind that
// keeps no output).
func committed(o rundir.Output, i int) (files []File, ids []uint64, format string, data bool, err error) {
	spec := pipeline.OutputOf(o.Kind)
	if spec == nil || spec.Committed == nil {
		return nil, nil, "", false, nil
	}
	c, err := spec.Committed(o.Path)
	if err != nil || c == nil {
		return nil, nil, "", err == nil, err // nil: nothing committed yet
	}
	for _, f := range c.Files {
		files = append(files, File{Shard: i, Path: f.Path, Rows: f.Rows, Tokens: f.Tokens, Bytes: f.Bytes, SHA256: f.SHA256})
	}
	if spec.IDs != nil {
		if ids, err = spec.IDs(o.Path); err != nil {
			return nil, nil, "", false, err
		}
	}
	return files, ids, c.Format, true, nil
}

// uploaded sets the URL of files an upload of the same run took from o
// (an output whose kind copies its inputs' files: output.Spec.CopyOf).
func uploaded(files []File, o rundir.Output, all []rundir.Output) {
	for _, up := range all {
		spec := pipeline.OutputOf(up.Kind)
		if spec == nil || spec.CopyOf == nil || !slices.Contains(up.From, o.Stage) {
			continue
		}
		for k := range files {
			files[k].URL = spec.CopyOf(up.Path, o.Path, files[k].Path)
		}
	}
}

type owned struct {
	shard int
	ids   []uint64
}

// overlap names an id hash held by two shards, if any.
func overlap(sets []owned, n int) string {
	type tagged struct {
		h     uint64
		shard int
	}
	var all []tagged
	for _, s := range sets {
		for _, h := range s.ids {
			all = append(all, tagged{h, s.shard})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].h < all[j].h || (all[i].h == all[j].h && all[i].shard < all[j].shard)
	})
	var count int
	var example string
	for k := 1; k < len(all); k++ {
		if all[k].h == all[k-1].h && all[k].shard != all[k-1].shard {
			count++
			if example == "" {
				example = fmt.Sprintf("id hash %016x is in shards %d/%d and %d/%d", all[k].h, all[k-1].shard, n, all[k].shard, n)
			}
		}
	}
	if count == 0 {
		return ""
	}
	return fmt.Sprintf("%d ids are in two shards (%s): were these shards made from one split?", count, example)
}
