package pipefile

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/pipe-dev/pipe/internal/redact"
	"github.com/pipe-dev/pipe/internal/suggest"
)

// File is a decoded pipeline file: strings interpolated, overrides applied,
// positions kept; stage configs are not decoded yet (that is pipeline.Build's job).
type File struct {
	Path        string // as given; used in messages
	Dir         string // absolute directory of the file; relative paths resolve here
	Name        string
	Description string
	// RunDir is absolute; empty in the file means Dir/runs/NAME.
	RunDir    string
	RunDirPos Pos
	// MaxFailed is [pipeline] max_failed (default DefaultFailLimit).
	MaxFailed FailLimit
	// Notify is [pipeline] notify: where pipe run says that the run warns,
	// stops, fails or finishes; each an http(s) URL (a JSON POST) or a
	// shell command (the JSON on its stdin). Checked by ParseNotify.
	Notify    []string
	NotifyPos Pos
	// MaxRejected is [pipeline] max_rejected (default DefaultRejectLimit).
	MaxRejected RejectLimit
	// Budget is [pipeline] budget (zero: none).
	Budget Budget
	// KeepJournal is [pipeline] keep_journal: keep journal segments after
	// every output committed their records (default false: delete them).
	KeepJournal bool
	Vars        map[string]string
	Stages      []*StageDecl
	// Trainer is [trainer], nil when the file has none.
	Trainer *Trainer

	// Shard, if set ([pipeline] shard or --shard), is the part of the input
	// this run takes; RunDir and outputs then name it (see Shard.Name).
	Shard    *Shard
	ShardPos Pos

	// From, if set (pipe run --from STAGE=RUN_DIR), replays what STAGE
	// produced in another run: pipeline.Build replaces STAGE and its upstream.
	From *From
}

// StageDecl is one [[stage]] table as written.
type StageDecl struct {
	ID, Kind string
	Inputs   []string // "stage" or "stage.port", as written
	Pos      Pos      // the [[stage]] header
	// Raw holds the kind's own keys (not id, kind, input), interpolated.
	Raw    map[string]any
	KeyPos map[string]Pos
	// ElemPos are where the inline tables of a key's array value open.
	ElemPos map[string][]Pos
	// BadKeys are keys whose ${...} could not be expanded (already reported).
	BadKeys map[string]bool
	// EmptyEnv lists, per key, the references it used (directly or through
	// [vars]) that expanded to nothing, so an empty path can say why:
	// "env:NAME" for an environment variable set but empty, "NAME" for a
	// var defined as "".
	EmptyEnv map[string][]string
	// KindSetFrom is the kind the file gives when --set STAGE.kind=…
	// swapped it; pipeline.Build allows only a kind with the same ports.
	KindSetFrom string
	// SetDir maps keys given by --set to the directory their relative paths
	// resolve against (the working directory); other keys use File.Dir.
	SetDir map[string]string
}

// PathDir is the directory key's relative paths resolve against: the
// working directory for a value given on the command line, else fileDir.
func (s *StageDecl) PathDir(key, fileDir string) string {
	if d, ok := s.SetDir[key]; ok {
		return d
	}
	return fileDir
}

// ElemPosition returns where item i (from 0) of key's array value opens,
// when it is an inline table the file wrote; else where key is set.
func (s *StageDecl) ElemPosition(key string, i int) Pos {
	if ps := s.ElemPos[key]; i >= 0 && i < len(ps) {
		return ps[i]
	}
	return s.KeyPosition(key)
}

// KeyPosition returns where key is set, or the stage header.
func (s *StageDecl) KeyPosition(key string) Pos {
	if p, ok := s.KeyPos[key]; ok {
		return p
	}
	return s.Pos
}

// Options adjust how a file is read.
type Options struct {
	// Set are --set overrides, "STAGE.KEY=VALUE", "pipeline.KEY=VALUE" or
	// "vars.NAME=VALUE"; VALUE is a TOML value, or a bare string. A
	// relative path given this way resolves against SetDir.
	Set []string
	// SetDir is the directory relative paths in Set (and a run_dir given
	// there) resolve against; "" means the working directory, as a shell
	// user expects of a path typed on the command line.
	SetDir string
	// Getenv looks up ${env:NAME}; nil means os.LookupEnv.
	Getenv func(string) (string, bool)
	// Shard is --shard "I/N"; it takes the place of [pipeline] shard.
	Shard string
	// From is --from "STAGE=RUN_DIR" (see From); RUN_DIR resolves as a
	// path in Set does.
	From string
}

// Load reads and decodes the pipeline file at path.
func Load(path string, opts Options) (*File, Problems) {
	src, err := readPipelineFile(path)
	if err != nil {
		return nil, Problems{{Pos: Pos{File: path}, Msg: DescribeReadError(err)}}
	}
	return Parse(path, src, opts)
}

// DescribeReadError is what a failed read of a file says: the cause
// alone where the error repeats the path.
func DescribeReadError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

var (
	stageIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	interpRe  = regexp.MustCompile(`\$\$\{|\$\{([^}]*)\}`)
)

// Parse decodes a pipeline file's source. path is used for messages and to
// resolve relative paths.
func Parse(path string, src []byte, opts Options) (*File, Problems) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	if line, col, msg, ok := checkTOMLShape(src); !ok {
		return nil, Problems{{Pos: Pos{File: path, Line: line, Col: col}, Msg: msg}}
	}
	var doc map[string]any
	if _, err := toml.Decode(string(src), &doc); err != nil {
		return nil, Problems{syntaxProblem(path, src, err)}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, Problems{{Pos: Pos{File: path}, Msg: err.Error()}}
	}
	fp := &fileParser{doc: doc, pos: scanPositions(path, src), f: &File{Path: path, Dir: filepath.Dir(abs), Vars: map[string]string{}}}
	fp.in = &interpolator{raw: map[string]string{}, done: fp.f.Vars, getenv: getenv, varEmpty: map[string][]string{}}
	fp.checkTopKeys()
	// [vars] first: everything else may use them.
	rawVars := fp.readVars()
	varPos, sets := fp.setVars(opts.Set)
	// The shard first: ${shard} may be used anywhere else, [vars] included.
	fp.f.parseShard(opts.Shard, header(doc), fp.pos, fp.in, fp.at)
	fp.resolveVars(rawVars, varPos)
	fp.parseHeader()
	fp.parseTrainer()
	fp.parseStages()
	if probs := fp.applyFlags(sets, opts); probs != nil {
		return nil, probs
	}
	fp.f.defaultNames(path)
	return fp.f, fp.probs
}

// fileParser is Parse's state: the decoded document, where its keys are,
// the file so far, the vars and the problems found. Its methods are
// Parse's steps, in order.
type fileParser struct {
	doc   map[string]any
	pos   *positions
	f     *File
	in    *interpolator
	probs Problems
}

// at is a problem at p.
func (fp *fileParser) at(p Pos, format string, args ...any) {
	fp.probs = append(fp.probs, Problem{Pos: p, Msg: fmt.Sprintf(format, args...)})
}

// interp interpolates the vars into v, a problem at p if one fails.
func (fp *fileParser) interp(p Pos, v any) any {
	out, err := fp.in.value(v)
	if err != nil {
		fp.at(p, "%v", err)
	}
	return out
}

func (fp *fileParser) checkTopKeys() {
	for _, k := range slices.Sorted(maps.Keys(fp.doc)) {
		switch k {
		case "pipeline", "vars", "stage", "trainer":
		default:
			fp.at(fp.pos.top(k), "unknown top-level key %q: a pipeline file has [pipeline], [vars], [trainer] and [[stage]] tables%s", k, suggest.DidYouMean(k, []string{"pipeline", "vars", "trainer", "stage"}))
		}
	}
}

// readVars takes [vars]'s strings as the interpolator's raw vars.
func (fp *fileParser) readVars() map[string]any {
	rawVars, _ := fp.doc["vars"].(map[string]any)
	if v, ok := fp.doc["vars"]; ok && rawVars == nil {
		fp.at(fp.pos.table("vars", ""), "[vars] must be a table, got %s", DescribeValue(v))
	}
	for k, v := range rawVars {
		s, ok := v.(string)
		if !ok {
			fp.at(fp.pos.table("vars", k), "var %q must be a string, got %s", k, DescribeValue(v))
			continue
		}
		fp.in.raw[k] = s
	}
	return rawVars
}

// setVars applies each --set vars.NAME=VALUE, which replaces a var before
// anything uses it: varPos is where each replaced var was set; sets are
// the other --set flags, applied after the file.
func (fp *fileParser) setVars(set []string) (varPos map[string]Pos, sets []string) {
	varPos = map[string]Pos{}
	for _, s := range set {
		lhs, value, hasValue := strings.Cut(s, "=")
		name, isVar := strings.CutPrefix(lhs, "vars.")
		if !isVar {
			sets = append(sets, s)
			continue
		}
		p := Pos{File: "--set " + redact.Userinfo(s)}
		if !hasValue {
			fp.probs = append(fp.probs, Problem{Pos: p, Msg: "want vars.NAME=VALUE", Structural: true})
			continue
		}
		if _, ok := fp.in.raw[name]; !ok {
			fp.probs = append(fp.probs, Problem{Pos: p, Msg: fmt.Sprintf("no variable %q to override%s", name, fp.in.known(name)), Structural: true})
			continue
		}
		fp.in.raw[name] = setVarValue(value)
		varPos[name] = p
	}
	return varPos, sets
}

// resolveVars interpolates every var, a problem where it was set.
func (fp *fileParser) resolveVars(rawVars map[string]any, varPos map[string]Pos) {
	for _, k := range slices.Sorted(maps.Keys(rawVars)) {
		if _, ok := fp.in.raw[k]; !ok {
			continue
		}
		if _, err := fp.in.resolveVar(k, nil); err != nil {
			p, ok := varPos[k]
			if !ok {
				p = fp.pos.table("vars", k)
			}
			fp.at(p, "%v", err)
		}
	}
}

var pipelineKeys = []string{"name", "run_dir", "description", "max_failed", "max_rejected", "budget", "keep_journal", "notify", "shard"}

// parseHeader reads [pipeline] (but its shard, read first by parseShard).
func (fp *fileParser) parseHeader() {
	header := header(fp.doc)
	if v, ok := fp.doc["pipeline"]; ok && header == nil {
		fp.at(fp.pos.table("pipeline", ""), "[pipeline] must be a table, got %s", DescribeValue(v))
	}
	fp.f.MaxFailed = DefaultFailLimit
	fp.f.MaxRejected = DefaultRejectLimit
	for _, k := range slices.Sorted(maps.Keys(header)) {
		if k == "shard" {
			continue // read first, by parseShard
		}
		p := fp.pos.table("pipeline", k)
		fp.headerKey(p, k, fp.interp(p, header[k]))
	}
}

// headerKey sets [pipeline]'s key k to v, given at p.
func (fp *fileParser) headerKey(p Pos, k string, v any) {
	f := fp.f
	var err error
	switch k {
	case "max_failed":
		f.MaxFailed, err = ParseFailLimit(v)
	case "notify":
		f.Notify, err = notifyTargets(v)
		f.NotifyPos = p
	case "max_rejected":
		f.MaxRejected, err = ParseRejectLimit(v)
	case "budget":
		f.Budget, err = ParseBudget(v)
	case "keep_journal":
		b, ok := v.(bool)
		if !ok {
			fp.at(p, "[pipeline]: keep_journal must be true or false, got %s", DescribeValue(v))
		}
		f.KeepJournal = b
	case "name", "run_dir", "description":
		s, isStr := v.(string)
		if !isStr {
			fp.at(p, "[pipeline]: %s must be a string, got %s", k, DescribeValue(v))
		}
		switch k {
		case "name":
			f.Name = s
		case "run_dir":
			f.RunDir, f.RunDirPos = s, p
		default:
			f.Description = s
		}
	default:
		fp.at(p, "[pipeline]: unknown key %q; allowed: %s%s", k, strings.Join(pipelineKeys, ", "), suggest.DidYouMean(k, pipelineKeys))
	}
	if err != nil {
		fp.at(p, "[pipeline]: %v", err)
	}
}

// parseStages reads the [[stage]] tables.
func (fp *fileParser) parseStages() {
	var stages []map[string]any
	switch x := fp.doc["stage"].(type) {
	case nil:
	case []map[string]any:
		stages = x
	default:
		fp.probs = append(fp.probs, Problem{Pos: fp.pos.top("stage"), Msg: fmt.Sprintf("stage must be an array of tables ([[stage]]), got %s", DescribeValue(x)), Structural: true})
	}
	for i, raw := range stages {
		fp.f.Stages = append(fp.f.Stages, fp.parseStage(i, raw))
	}
}

// parseStage reads the i-th [[stage]] table: its id, kind and input, and
// its other keys, interpolated, for decodeConfig.
func (fp *fileParser) parseStage(i int, raw map[string]any) *StageDecl {
	sd := &StageDecl{Pos: fp.pos.stageHeader(i), Raw: map[string]any{}, KeyPos: fp.pos.stageKeys(i), ElemPos: fp.pos.stageElems(i), BadKeys: map[string]bool{}, EmptyEnv: map[string][]string{}}
	// Problems with a stage's id, kind or input are the graph's shape.
	sprob := func(p Pos, format string, args ...any) {
		fp.probs = append(fp.probs, Problem{Pos: p, Stage: sd.ID, Msg: fmt.Sprintf(format, args...), Structural: true})
	}
	if id, ok := raw["id"].(string); ok {
		sd.ID = id
		if !stageIDRe.MatchString(id) {
			sprob(sd.KeyPosition("id"), "id must be letters, digits, '-' or '_' (used in inputs as id.port)")
		}
	} else if v, present := raw["id"]; present {
		sprob(sd.KeyPosition("id"), "id must be a string, got %s", DescribeValue(v))
	} else {
		sprob(sd.Pos, "stage has no id")
	}
	if kind, ok := raw["kind"].(string); ok {
		sd.Kind = kind
	} else if v, present := raw["kind"]; present {
		sprob(sd.KeyPosition("kind"), "kind must be a string, got %s", DescribeValue(v))
	} else {
		sprob(sd.Pos, "stage has no kind")
	}
	for k, v := range raw {
		fp.in.empty = nil
		switch k {
		case "id", "kind":
		case "input":
			sd.Inputs = inputsOf(fp.interp(sd.KeyPosition(k), v), func(msg string) { sprob(sd.KeyPosition(k), "%s", msg) })
		default:
			n := len(fp.probs)
			sd.Raw[k] = fp.interp(sd.KeyPosition(k), v)
			if len(fp.probs) > n {
				sd.BadKeys[k] = true
			}
			if len(fp.in.empty) > 0 {
				sd.EmptyEnv[k] = fp.in.empty
			}
		}
	}
	return sd
}

// applyFlags applies the other --set flags and --from, whose relative
// paths resolve against opts.SetDir or the working directory. It returns
// problems only when the working directory cannot be found (then Parse
// fails with them); the flags' own problems are fp's.
func (fp *fileParser) applyFlags(sets []string, opts Options) Problems {
	setDir := opts.SetDir
	var err error
	if setDir == "" && len(sets) > 0 {
		if setDir, err = os.Getwd(); err != nil {
			return Problems{{Pos: Pos{File: "--set " + redact.Userinfo(sets[0])}, Msg: err.Error()}}
		}
	}
	for _, s := range sets {
		if err := fp.f.applySet(s, fp.in, setDir); err != nil {
			fp.probs = append(fp.probs, Problem{Pos: Pos{File: "--set " + redact.Userinfo(s)}, Msg: err.Error(), Structural: true})
		}
	}
	if opts.From == "" {
		return nil
	}
	dir := setDir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return Problems{{Pos: Pos{File: "--from " + opts.From}, Msg: err.Error()}}
		}
	}
	fr, err := ParseFrom(opts.From, dir)
	if err != nil {
		fp.probs = append(fp.probs, Problem{Pos: Pos{File: "--from " + opts.From}, Msg: err.Error(), Structural: true})
	}
	fp.f.From = fr
	return nil
}

// defaultNames gives the file its name (the file's base name) and run
// directory (runs/NAME beside it) where it states none, resolves a relative
// run directory against the file's, and names it after the shard.
func (f *File) defaultNames(path string) {
	if f.Name == "" {
		f.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	switch {
	case f.RunDir == "":
		f.RunDir = filepath.Join(f.Dir, "runs", f.Name)
	case !filepath.IsAbs(f.RunDir):
		f.RunDir = filepath.Join(f.Dir, f.RunDir)
	}
	if f.Shard != nil {
		f.RunDir = filepath.Clean(f.Shard.ShardPrefix(f.RunDir))
	}
}

func inputsOf(v any, bad func(string)) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, it := range x {
			s, ok := it.(string)
			if !ok {
				bad(fmt.Sprintf("input must be a string or an array of strings (\"stage\" or \"stage.port\"), got an item %s", DescribeValue(it)))
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	bad(fmt.Sprintf("input must be a string or an array of strings (\"stage\" or \"stage.port\"), got %s", DescribeValue(v)))
	return nil
}

// setVarValue is the text of --set vars.NAME=VALUE: a TOML string is
// unquoted; anything else (64, a/b.jsonl) is taken as written, since a var
// is text.
func setVarValue(value string) string {
	var tmp map[string]any
	if _, _, _, ok := checkTOMLShape([]byte(value)); !ok {
		return value
	}
	if _, err := toml.Decode("v = "+value, &tmp); err == nil {
		if s, ok := tmp["v"].(string); ok {
			return s
		}
	}
	return value
}

// applySet applies one --set STAGE.KEY=VALUE or pipeline.KEY=VALUE; a
// relative path in it resolves against dir.
func (f *File) applySet(s string, in *interpolator, dir string) error {
	lhs, value, ok := strings.Cut(s, "=")
	target, key, ok2 := strings.Cut(lhs, ".")
	if !ok || !ok2 || target == "" || key == "" {
		return fmt.Errorf("want STAGE.KEY=VALUE, pipeline.KEY=VALUE, trainer.KEY=VALUE or vars.NAME=VALUE (e.g. gen.concurrency=64)")
	}
	var v any = value
	var tmp map[string]any
	if _, col, msg, ok := checkTOMLShape([]byte(value)); !ok {
		return fmt.Errorf("the value, at its character %d: %s", col, msg)
	}
	if _, err := toml.Decode("v = "+value, &tmp); err == nil {
		v = tmp["v"]
	}
	in.empty = nil
	v, err := in.value(v)
	if err != nil {
		return err
	}
	p := Pos{File: "--set " + redact.Userinfo(s)}
	switch target {
	case "pipeline":
		return f.setPipelineKey(key, v, p, dir)
	case "trainer":
		return f.setTrainerKey(key, v, p)
	}
	return f.setStageKey(target, key, v, p, in, dir)
}

// setPipelineKey applies --set pipeline.KEY=v, given at p; a relative
// run_dir resolves against dir.
func (f *File) setPipelineKey(key string, v any, p Pos, dir string) error {
	switch key {
	case "name", "run_dir":
		return f.setPipelineString(key, v, p, dir)
	case "max_failed":
		l, err := ParseFailLimit(v)
		if err != nil {
			return err
		}
		f.MaxFailed = l
		return nil
	case "notify":
		n, err := notifyTargets(v)
		if err != nil {
			return err
		}
		f.Notify, f.NotifyPos = n, p
		return nil
	case "max_rejected":
		l, err := ParseRejectLimit(v)
		if err != nil {
			return err
		}
		f.MaxRejected = l
		return nil
	case "keep_journal":
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("pipeline.keep_journal must be true or false")
		}
		f.KeepJournal = b
		return nil
	case "shard":
		return fmt.Errorf("the shard is chosen before anything else is read: use --shard I/N, not --set")
	case "budget":
		return fmt.Errorf("set one budget key: pipeline.budget.output_tokens, pipeline.budget.wall or pipeline.budget.gpu_hours")
	default:
		if k, ok := strings.CutPrefix(key, "budget."); ok {
			return f.Budget.set(k, v)
		}
		return fmt.Errorf("[pipeline] has no key %q; allowed: name, run_dir, max_failed, max_rejected, budget.KEY, keep_journal, notify (and --shard)", key)
	}
}

// setPipelineString applies --set pipeline.name or pipeline.run_dir=v,
// which must be a string; a relative run_dir resolves against dir.
func (f *File) setPipelineString(key string, v any, p Pos, dir string) error {
	str, isStr := v.(string)
	switch key {
	case "name":
		f.Name = str
	case "run_dir":
		if str != "" && !filepath.IsAbs(str) {
			str = filepath.Join(dir, str)
		}
		f.RunDir, f.RunDirPos = str, p
	}
	if !isStr {
		return fmt.Errorf("pipeline.%s must be a string", key)
	}
	return nil
}

// setStageKey applies --set TARGET.KEY=v, given at p, to the stage whose
// id is target; a relative path in v resolves against dir.
func (f *File) setStageKey(target, key string, v any, p Pos, in *interpolator, dir string) error {
	var ids []string
	for _, sd := range f.Stages {
		ids = append(ids, sd.ID)
		if sd.ID != target {
			continue
		}
		switch key {
		case "id":
			return fmt.Errorf("stage %q: id cannot be overridden", target)
		case "kind":
			// Build checks that the new kind has the old one's ports.
			kind, ok := v.(string)
			if !ok || kind == "" {
				return fmt.Errorf("stage %q: kind must be a kind's name (pipe stages lists them)", target)
			}
			if sd.KindSetFrom == "" {
				sd.KindSetFrom = sd.Kind
			}
			sd.Kind = kind
		case "input":
			var bad error
			ins := inputsOf(v, func(m string) { bad = errors.New(m) })
			if bad != nil {
				return fmt.Errorf("stage %q: %v", target, bad)
			}
			sd.Inputs = ins
		default:
			sd.Raw[key] = v
			sd.EmptyEnv[key] = in.empty
			if sd.SetDir == nil {
				sd.SetDir = map[string]string{}
			}
			sd.SetDir[key] = dir
		}
		sd.KeyPos[key] = p
		delete(sd.ElemPos, key) // the file's items are not the --set value's
		return nil
	}
	return fmt.Errorf("no stage %q%s", target, suggest.DidYouMean(target, ids))
}

// syntaxProblem turns a TOML decode error into a positioned problem with the
// offending line and a caret. The position is computed from the error's
// byte offset: the decoder counts a line's newline as the next line, so an
// error found at the end of line 1 (`[[stage]` unclosed) would otherwise
// be reported on line 2.
func syntaxProblem(path string, src []byte, err error) Problem {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return Problem{Pos: Pos{File: path}, Msg: "TOML: " + err.Error()}
	}
	line, col := pe.Position.Line, pe.Position.Col
	if off := pe.Position.Start; off >= 0 && off <= len(src) {
		lineStart := strings.LastIndexByte(string(src[:off]), '\n') + 1
		line = strings.Count(string(src[:off]), "\n") + 1
		col = off - lineStart + 1
	}
	lines := strings.Split(string(src), "\n")
	extra := ""
	if line >= 1 && line <= len(lines) {
		text := strings.TrimRight(lines[line-1], "\r")
		col = max(col, 1)
		pad := strings.Map(func(r rune) rune {
			if r == '\t' {
				return '\t'
			}
			return ' '
		}, text[:min(col-1, len(text))])
		extra = "    " + text + "\n    " + pad + "^"
	}
	return Problem{Pos: Pos{File: path, Line: line, Col: col}, Msg: "TOML syntax error: " + pe.Message, Extra: extra}
}

// interpolator expands ${name} (from [vars]), ${env:NAME} and
// ${env:NAME:-DEFAULT} (DEFAULT when NAME is unset or empty, as in the
// shell); $${ is a literal ${.
type interpolator struct {
	raw    map[string]string
	done   map[string]string
	getenv func(string) (string, bool)
	// empty collects the references that expanded to nothing since the
	// caller last reset it: "env:NAME" for a variable set but empty, "NAME"
	// for a var defined as "" (not a default chosen by ":-"); varEmpty is
	// the same per resolved var.
	empty    []string
	varEmpty map[string][]string
	// shard is what ${shard} expands to (Shard.Name; for an unsharded run
	// that of shard 0 of 1); empty while the shard itself is being read.
	shard string
}

// noteEmpty adds env names to in.empty, each once.
func (in *interpolator) noteEmpty(names ...string) {
	for _, n := range names {
		if !slices.Contains(in.empty, n) {
			in.empty = append(in.empty, n)
		}
	}
}

func (in *interpolator) resolveVar(name string, stack []string) (string, error) {
	if v, ok := in.done[name]; ok {
		in.noteEmpty(in.varEmpty[name]...)
		return v, nil
	}
	for _, s := range stack {
		if s == name {
			return "", fmt.Errorf("var %q refers to itself (%s)", name, strings.Join(append(stack, name), " -> "))
		}
	}
	raw, ok := in.raw[name]
	if !ok {
		return "", fmt.Errorf("unknown variable ${%s}%s", name, in.known(name))
	}
	outer := in.empty
	in.empty = nil
	v, err := in.expand(raw, append(stack, name))
	if raw == "" {
		in.noteEmpty(name)
	}
	mine := in.empty
	in.empty = outer
	in.noteEmpty(mine...)
	if err != nil {
		return "", err
	}
	in.done[name] = v
	in.varEmpty[name] = mine
	return v, nil
}

func (in *interpolator) known(name string) string {
	names := make([]string, 0, len(in.raw))
	for k := range in.raw {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "; [vars] defines none"
	}
	return "; [vars] defines " + strings.Join(names, ", ") + suggest.DidYouMean(name, names)
}

func (in *interpolator) expand(s string, stack []string) (string, error) {
	var firstErr error
	out := interpRe.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$${" {
			return "${"
		}
		ref := m[2 : len(m)-1]
		if rest, ok := strings.CutPrefix(ref, "env:"); ok {
			v, err := in.env(ref, rest)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			return v
		}
		if ref == "shard" {
			if in.shard == "" && firstErr == nil {
				firstErr = fmt.Errorf("${shard} cannot be used in the shard itself; write \"I/N\", e.g. \"${env:SLURM_ARRAY_TASK_ID}/16\"")
			}
			return in.shard
		}
		v, err := in.resolveVar(ref, stack)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	})
	return out, firstErr
}

// env expands ${env:NAME} or ${env:NAME:-DEFAULT} (ref, rest after
// "env:"): the variable's value, the default where it is unset or empty;
// an empty value is noted. The error is for a variable unset without a
// default, or a default with ${...} in it.
func (in *interpolator) env(ref, rest string) (string, error) {
	name, def, hasDef := strings.Cut(rest, ":-")
	v, set := in.getenv(name)
	switch {
	case hasDef && strings.Contains(def, "${"):
		return v, fmt.Errorf("${%s}: a default is plain text; ${...} inside it is not expanded", ref)
	case hasDef && v == "":
		return def, nil
	case !set:
		return v, fmt.Errorf("environment variable %s is not set (used as ${env:%s}; ${env:%s:-DEFAULT} gives a default)", name, name, name)
	case v == "":
		in.noteEmpty("env:" + name)
	}
	return v, nil
}

// value interpolates every string inside a decoded TOML value.
func (in *interpolator) value(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return in.expand(x, nil)
	case []any:
		out := make([]any, len(x))
		var first error
		for i, it := range x {
			var err error
			out[i], err = in.value(it)
			if first == nil {
				first = err
			}
		}
		return out, first
	case []map[string]any:
		items := make([]any, len(x))
		for i, m := range x {
			items[i] = m
		}
		return in.value(items)
	case map[string]any:
		out := make(map[string]any, len(x))
		var first error
		for k, it := range x {
			var err error
			out[k], err = in.value(it)
			if first == nil {
				first = err
			}
		}
		return out, first
	}
	return v, nil
}

// header is the [pipeline] table, or nil.
func header(doc map[string]any) map[string]any {
	h, _ := doc["pipeline"].(map[string]any)
	return h
}

// parseShard sets f.Shard from --shard (flag) or else [pipeline] shard, and
// what ${shard} expands to. It runs before [vars] are resolved.
func (f *File) parseShard(flag string, header map[string]any, pos *positions, in *interpolator, at func(Pos, string, ...any)) {
	text, p := flag, Pos{File: "--shard " + flag}
	defer func() {
		if in.shard == "" { // none, or a bad one (reported)
			in.shard = Shard{Index: 0, Count: 1}.Name()
		}
	}()
	if flag == "" {
		raw, ok := header["shard"]
		if !ok {
			return
		}
		p = pos.table("pipeline", "shard")
		v, err := in.value(raw)
		if err != nil {
			at(p, "[pipeline]: shard: %v", err)
			return
		}
		s, isStr := v.(string)
		if !isStr {
			at(p, "[pipeline]: shard must be a string \"I/N\", got %s", DescribeValue(raw))
			return
		}
		text = s
	}
	sh, err := ParseShard(text)
	if err != nil {
		if flag == "" {
			at(p, "[pipeline]: %v", err)
		} else {
			at(p, "%v", err)
		}
		return
	}
	if sh.Count == 1 {
		// One shard is the whole input: an unsharded run, in the same
		// directories (a one-task array continues it, and it the array).
		return
	}
	f.Shard, f.ShardPos = &sh, p
	in.shard = sh.Name()
}
