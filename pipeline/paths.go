package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"golang.org/x/sys/unix"
)

// PathUse is one path a plan reads or writes, for checks and the dry-run plan.
type PathUse struct {
	Stage, Key string
	Kind       string // the stage's kind; "" for the run directory
	Mode       string // "in", "indir", "inany", "rundir", "out", "dir", or "run_dir"
	Path       string // absolute
	Pos        pipefile.Pos
}

// Paths lists every path the plan uses: the run directory, then each stage's
// path keys, stages in plan order. Empty paths are left out (Build reports
// those that matter).
func (p *Plan) Paths() []PathUse {
	out := []PathUse{{Key: "run_dir", Mode: "dir", Path: p.File.RunDir, Pos: p.File.RunDirPos}}
	if out[0].Pos.File == "" {
		out[0].Pos = pipefile.Pos{File: p.File.Path}
	}
	for _, s := range p.Stages {
		if s.Spec == nil || s.Config == nil {
			continue
		}
		v := reflect.ValueOf(s.Config).Elem()
		fields, _ := fieldsOf(v.Type())
		for _, f := range fields {
			if f.Path == "" {
				continue
			}
			fv := v.Field(f.Index)
			var paths []string
			switch fv.Kind() {
			case reflect.String:
				paths = []string{fv.String()}
			case reflect.Slice:
				for i := 0; i < fv.Len(); i++ {
					paths = append(paths, fv.Index(i).String())
				}
			}
			for _, path := range paths {
				if path != "" {
					out = append(out, PathUse{Stage: s.ID(), Key: f.Key, Kind: s.kind(), Mode: f.Path, Path: path, Pos: s.Decl.KeyPosition(f.Key)})
				}
			}
		}
	}
	return out
}

// CheckOutputs verifies that every output file and directory can be created:
// its nearest existing ancestor is a writable directory, and nothing in the
// way is a file. It creates nothing.
func (p *Plan) CheckOutputs() pipefile.Problems {
	var probs pipefile.Problems
	for _, u := range p.Paths() {
		if u.Mode != "out" && u.Mode != "dir" {
			continue
		}
		if err := creatable(u.Path, u.Mode == "dir"); err != nil {
			pr := pipefile.Problem{Pos: u.Pos, Msg: fmt.Sprintf("%s %v", u.Key, err)}
			if s := p.Lookup(u.Stage); s != nil && u.Stage != "" {
				pr.Stage, pr.Kind = s.ID(), s.kind()
			}
			probs = append(probs, pr)
		}
	}
	return probs
}

func creatable(path string, isDir bool) error {
	st, err := os.Stat(path)
	if err == nil {
		switch {
		case isDir && !st.IsDir():
			return fmt.Errorf("%s exists and is not a directory", path)
		case !isDir && st.IsDir():
			return fmt.Errorf("%s is a directory, want a file path", path)
		}
		target := path
		if !isDir {
			target = filepath.Dir(path)
		}
		if unix.Access(target, unix.W_OK) != nil {
			return fmt.Errorf("%s is not writable", target)
		}
		return nil
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s cannot be created: %s is a file", path, dir)
			}
			if unix.Access(dir, unix.W_OK) != nil {
				return fmt.Errorf("%s cannot be created: %s is not writable", path, dir)
			}
			return nil
		}
		if filepath.Dir(dir) == dir {
			return fmt.Errorf("%s cannot be created", path)
		}
	}
}
