package pipeline

import (
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// emptyPath reports a path key that is set but empty after interpolation,
// which would fail only when the run opens it, or silently read nothing: a
// required or output key that is "", an empty item of a list of paths, or
// any path key whose ${...} expanded to nothing (an environment variable
// set but empty, a var defined as ""). A literal "" in an optional input
// key means none. refs are the references that expanded to nothing
// (StageDecl.EmptyEnv). It returns one message per empty value, none when
// nothing is empty.
func emptyPath(v reflect.Value, f *fieldInfo, refs []string) []string {
	why := emptyWhy(refs)
	var msgs []string
	switch v.Kind() {
	case reflect.String:
		if v.String() != "" {
			return nil
		}
		switch {
		case f.Required || f.Path == "out" || f.Path == "dir":
			msgs = append(msgs, f.Key+" is empty"+why)
		case len(refs) > 0:
			msgs = append(msgs, f.Key+" is empty"+why+"; give a path, or leave "+f.Key+" out for none")
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if v.Index(i).Kind() == reflect.String && v.Index(i).String() == "" {
				msgs = append(msgs, fmt.Sprintf("%s item %d is empty%s", f.Key, i+1, why))
			}
		}
	}
	return msgs
}

// emptyWhy says which references made a value empty:
// " (environment variable MODEL_DIR is set but empty)".
func emptyWhy(refs []string) string {
	var env, vars []string
	for _, r := range refs {
		if name, ok := strings.CutPrefix(r, "env:"); ok {
			env = append(env, name)
		} else {
			vars = append(vars, r)
		}
	}
	var parts []string
	switch len(env) {
	case 0:
	case 1:
		parts = append(parts, "environment variable "+env[0]+" is set but empty")
	default:
		parts = append(parts, "environment variables "+strings.Join(env, ", ")+" are set but empty")
	}
	switch len(vars) {
	case 0:
	case 1:
		parts = append(parts, "[vars] "+vars[0]+" is empty")
	default:
		parts = append(parts, "[vars] "+strings.Join(vars, ", ")+" are empty")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// CheckPathConflicts reports what would lose data when the run ends: an
// output written by two stages (or two keys), an output that is also an
// input, and an output that is the run directory. Paths are compared cleaned
// and with symlinks resolved as far as they exist. Each conflict is reported
// once, at the later output in the file (or at the output, against an
// input), naming the other use and its position. It creates nothing.
func (p *Plan) CheckPathConflicts() pipefile.Problems {
	uses := p.Paths()
	sort.SliceStable(uses, func(i, j int) bool { return posBefore(p.File.Path, uses[i].Pos, uses[j].Pos) })
	var runDir PathUse
	canon := make([]string, len(uses))
	for i, u := range uses {
		canon[i] = canonical(u.Path)
		if u.Stage == "" && u.Key == "run_dir" {
			runDir = u
		}
	}
	runCanon := canonical(runDir.Path)

	var probs pipefile.Problems
	prob := func(u PathUse, format string, args ...any) {
		probs = append(probs, pipefile.Problem{Pos: u.Pos, Stage: u.Stage, Kind: u.Kind, Msg: fmt.Sprintf(format, args...)})
	}
	isOut := func(u PathUse) bool { return u.Mode == "out" || u.Mode == "dir" }
	written := map[string]PathUse{} // canonical path -> first output there
	for i, u := range uses {
		if !isOut(u) {
			continue
		}
		c := canon[i]
		isRunDir := u.Stage == "" && u.Key == "run_dir"
		switch first, dup := written[c]; {
		case !isRunDir && c == runCanon:
			prob(u, "%s %s is the run directory: an output needs a path of its own", u.Key, u.Path)
		case dup:
			prob(u, "%s %s is also written by %s: two writers on one path would overwrite each other", u.Key, u.Path, describeUse(first))
		default:
			written[c] = u
		}
		for j, in := range uses {
			if !isOut(in) && canon[j] == c {
				prob(u, "%s %s is also read by %s: the run would overwrite its own input", u.Key, u.Path, describeUse(in))
			}
		}
	}
	return probs
}

// describeUse names a path use for messages: `stage "a" (path at f.toml:4:1)`.
func describeUse(u PathUse) string {
	who := "the pipeline"
	if u.Stage != "" {
		who = fmt.Sprintf("stage %q", u.Stage)
	}
	return fmt.Sprintf("%s (%s at %s)", who, u.Key, u.Pos)
}

// posBefore orders positions as the file is read: positions in file (by
// line and column) before --set overrides and other files, which keep their
// order.
func posBefore(file string, a, b pipefile.Pos) bool {
	ina, inb := a.File == file, b.File == file
	if ina != inb {
		return ina
	}
	if !ina {
		return false
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Col < b.Col
}

// canonical is path cleaned, with symlinks resolved in its longest existing
// prefix, so that two spellings of one file (or a file and a link to it)
// compare equal even before the file exists.
func canonical(path string) string {
	path = filepath.Clean(path)
	rest := ""
	for dir := path; ; {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return path
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}
