package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// Plan is a checked pipeline: every stage's config decoded and validated, the
// graph wired and acyclic. Run executes it; graph views print it.
type Plan struct {
	File   *pipefile.File
	Stages []*PlanStage // in topological order
	byID   map[string]*PlanStage
}

// PlanStage is one stage of a plan.
type PlanStage struct {
	Decl   *pipefile.StageDecl
	Spec   *Spec
	Config any // pointer to the kind's config struct
	// Inputs are the edges into this stage, in the order written.
	Inputs []Edge
	// Outputs maps each output port to the edges leaving it.
	Outputs map[string][]Edge
}

// ID is the stage's id.
func (s *PlanStage) ID() string { return s.Decl.ID }

// Edge connects an output port to a stage's input.
type Edge struct {
	From *PlanStage
	Port string
	To   *PlanStage
}

// Lookup returns the plan stage with id, or nil.
func (p *Plan) Lookup(id string) *PlanStage { return p.byID[id] }

// Build checks a decoded file against the registry and wires the graph. It
// reports every problem it finds, not only the first. Input paths are
// checked to exist.
func Build(f *pipefile.File, reg *Registry) (*Plan, pipefile.Problems) {
	return build(f, reg, true)
}

// BuildGraph wires the graph as Build does without touching the file
// system: it reports only the graph's shape (ids, kinds, inputs, ports,
// cycles, unconnected outputs). Stage configs are decoded as far as they go,
// for the key settings a picture shows; their problems, and paths (made
// absolute, never looked at), are left to Build. The plan is for drawing,
// not for running.
func BuildGraph(f *pipefile.File, reg *Registry) (*Plan, pipefile.Problems) {
	p, probs := build(f, reg, false)
	return p, probs.Structural()
}

func build(f *pipefile.File, reg *Registry, checkFiles bool) (*Plan, pipefile.Problems) {
	b := &planBuilder{f: f, reg: reg, checkFiles: checkFiles, p: &Plan{File: f, byID: map[string]*PlanStage{}}}
	b.probs = replaceFrom(f, reg, checkFiles)
	for _, sd := range f.Stages {
		b.all = append(b.all, b.declare(sd))
	}
	nprobs := len(b.probs)
	for _, ps := range b.all {
		b.wire(ps)
	}
	// Skipped when an input could not be resolved: it was probably meant to
	// connect one of them, and the input's message says what to fix.
	if len(b.probs) == nprobs {
		b.checkConnected()
	}
	b.order()
	if len(b.all) == 0 {
		b.probs = append(b.probs, pipefile.Problem{Pos: pipefile.Pos{File: f.Path}, Msg: "no stages: add [[stage]] tables", Structural: true})
	}
	return b.p, b.probs
}

// planBuilder is build's state: the plan so far, its stages in file order
// and the problems found. Its methods are build's steps, in order.
type planBuilder struct {
	f          *pipefile.File
	reg        *Registry
	checkFiles bool
	p          *Plan
	all        []*PlanStage // in file order
	probs      pipefile.Problems
}

// declare makes the stage sd declares: its id (unique), its kind (known,
// and able to stand in for the file's kind when --set changed it) and its
// decoded config.
func (b *planBuilder) declare(sd *pipefile.StageDecl) *PlanStage {
	ps := &PlanStage{Decl: sd, Outputs: map[string][]Edge{}}
	if sd.ID != "" {
		if prev, dup := b.p.byID[sd.ID]; dup {
			b.probs = append(b.probs, pipefile.Problem{Pos: sd.KeyPosition("id"), Stage: sd.ID, Kind: sd.Kind, Structural: true,
				Msg: fmt.Sprintf("duplicate stage id (first defined at %s)", prev.Decl.Pos)})
		} else {
			b.p.byID[sd.ID] = ps
		}
	}
	if sd.Kind != "" {
		ps.Spec = b.reg.Lookup(sd.Kind)
		if ps.Spec == nil {
			b.probs = append(b.probs, pipefile.Problem{Pos: sd.KeyPosition("kind"), Stage: sd.ID, Structural: true,
				Msg: fmt.Sprintf("unknown kind %q%s; known kinds: %s", sd.Kind, suggest.DidYouMean(sd.Kind, b.reg.Kinds()), strings.Join(b.reg.Kinds(), ", "))})
		}
	}
	if old := b.reg.Lookup(sd.KindSetFrom); old != nil && ps.Spec != nil && old != ps.Spec {
		if msg := swapProblem(old, ps.Spec); msg != "" {
			b.probs = append(b.probs, pipefile.Problem{Pos: sd.KeyPosition("kind"), Stage: sd.ID, Structural: true, Msg: msg})
		}
	}
	if ps.Spec != nil {
		cfg, cprobs := decodeConfig(ps.Spec, sd, b.f.Dir, b.checkFiles, b.f.Shard, b.f.Trainer, b.reg)
		ps.Config = cfg
		b.probs = append(b.probs, cprobs...)
	}
	return ps
}

// wire connects ps's inputs to its upstream stages' ports. A stage of
// unknown kind still takes its inputs, so the graph drawn around it is
// whole and its upstream outputs count as connected; only its own ports
// are unknown.
func (b *planBuilder) wire(ps *PlanStage) {
	sd := ps.Decl
	kind := "" // not named when unknown: its own problem says so
	if ps.Spec != nil {
		kind = ps.Spec.Kind
	}
	prob := func(format string, args ...any) {
		b.probs = append(b.probs, pipefile.Problem{Pos: sd.KeyPosition("input"), Stage: sd.ID, Kind: kind, Msg: fmt.Sprintf(format, args...), Structural: true})
	}
	switch {
	case ps.Spec == nil:
	case ps.Spec.Source && len(sd.Inputs) > 0:
		prob("a %s stage reads its own input and takes no input key", sd.Kind)
		return
	case !ps.Spec.Source && len(sd.Inputs) == 0:
		b.probs = append(b.probs, pipefile.Problem{Pos: sd.Pos, Stage: sd.ID, Kind: sd.Kind, Msg: `needs an input: add input = "STAGE" or "STAGE.PORT"`, Structural: true})
	case ps.Spec.MaxInputs > 0 && len(sd.Inputs) > ps.Spec.MaxInputs:
		prob("takes at most %d input(s), got %d", ps.Spec.MaxInputs, len(sd.Inputs))
	}
	for _, ref := range sd.Inputs {
		from, port, msg := b.resolveInput(ps, ref)
		if msg != "" {
			prob("%s", msg)
		}
		if from == nil {
			continue
		}
		e := Edge{From: from, Port: port, To: ps}
		ps.Inputs = append(ps.Inputs, e)
		from.Outputs[port] = append(from.Outputs[port], e)
	}
}

// resolveInput finds the stage and port input ref of ps names ("STAGE" is
// its first port). from is nil when there is nothing to connect: then msg
// says why, or is "" when the upstream stage's kind is unknown (its own
// problem says so).
func (b *planBuilder) resolveInput(ps *PlanStage, ref string) (from *PlanStage, port, msg string) {
	id, port, _ := strings.Cut(ref, ".")
	from = b.p.byID[id]
	switch {
	case from == nil:
		return nil, "", fmt.Sprintf("input %q: no stage %q%s", ref, id, suggest.DidYouMean(id, stageIDs(b.all)))
	case from == ps:
		return nil, "", fmt.Sprintf("input %q: a stage cannot read its own output", ref)
	case from.Spec == nil:
		return nil, "", ""
	case len(from.Spec.Outputs) == 0:
		return nil, "", fmt.Sprintf("input %q: stage %q (%s) has no output ports", ref, id, from.Spec.Kind)
	case port == "":
		return from, from.Spec.Outputs[0], ""
	case !slices.Contains(from.Spec.Outputs, port):
		return nil, "", fmt.Sprintf("input %q: stage %q (%s) has no port %q; its ports: %s%s", ref, id, from.Spec.Kind, port, strings.Join(from.Spec.Outputs, ", "), suggest.DidYouMean(port, from.Spec.Outputs))
	}
	return from, port, ""
}

// checkConnected finds the outputs that lead nowhere: every output except
// "rejected" (and a kind's optional ones) must, as records never vanish.
func (b *planBuilder) checkConnected() {
	for _, ps := range b.all {
		if ps.Spec == nil {
			continue
		}
		judged := ps.Spec.OutputsUsed != nil && ps.Config != nil
		var used []string
		if judged {
			used = ps.Spec.OutputsUsed(ps.Config)
		}
		for _, port := range ps.Spec.Outputs {
			if msg := portProblem(ps, port, judged, used); msg != "" {
				b.probs = append(b.probs, pipefile.Problem{Pos: ps.Decl.Pos, Stage: ps.Decl.ID, Kind: ps.Decl.Kind, Structural: true, Msg: msg})
			}
		}
	}
}

// portProblem says what is wrong with the wiring of output port of ps, or
// "": an optional port connected while the settings (judged: the kind
// tells, OutputsUsed) send nothing there, or a port records go out of that
// leads nowhere. used are the optional ports the settings use.
func portProblem(ps *PlanStage, port string, judged bool, used []string) string {
	optional := slices.Contains(ps.Spec.OptionalOutputs, port)
	connected := len(ps.Outputs[port]) > 0
	if judged && optional && connected && !slices.Contains(used, port) {
		return fmt.Sprintf("output port %q is connected but this stage's settings send nothing there (see pipe stages %s)", port, ps.Decl.Kind)
	}
	if port == RejectedPort || connected || optional && !slices.Contains(used, port) {
		return ""
	}
	ref := ps.Decl.ID
	if port != ps.Spec.Outputs[0] {
		ref += "." + port
	}
	if optional {
		return fmt.Sprintf("output port %q is not connected, and this stage's settings send records there: add a stage with input = %q (see pipe stages %s)", port, ref, ps.Decl.Kind)
	}
	return fmt.Sprintf("output port %q is not connected: add a stage with input = %q (e.g. a write-jsonl)", port, ref)
}

// order puts the plan's stages in topological order and checks the fields
// records need along it; a cycle is a problem at its first stage in the
// file, and leaves the stages in file order.
func (b *planBuilder) order() {
	order, cycle := topoSort(b.all)
	if len(cycle) == 0 {
		b.p.Stages = order
		b.probs = append(b.probs, checkFields(order)...)
		return
	}
	ids := stageIDs(cycle)
	sort.Strings(ids)
	first := cycle[0]
	for _, c := range cycle {
		if c.Decl.Pos.Line < first.Decl.Pos.Line {
			first = c
		}
	}
	b.probs = append(b.probs, pipefile.Problem{Pos: first.Decl.KeyPosition("input"), Stage: first.Decl.ID, Kind: first.Decl.Kind, Structural: true,
		Msg: "cycle in the graph through stages " + strings.Join(ids, ", ")})
	b.p.Stages = b.all
}

// swapProblem says why kind to cannot stand in for kind from (--set
// STAGE.kind=…), or "": a swap keeps the graph as the file draws it, so it
// must take input as from does and have the same ports that must be
// connected (a writer for a writer); "rejected" may be left unconnected,
// and the wiring says so where one is connected that the new kind lacks.
func swapProblem(from, to *Spec) string {
	if from.Source != to.Source {
		what := map[bool]string{true: "reads its own input", false: "takes an input"}
		return fmt.Sprintf("kind %s cannot stand in for %s: %s %s and %s %s; --set STAGE.kind swaps kinds with the same ports (a writer for a writer)", to.Kind, from.Kind, from.Kind, what[from.Source], to.Kind, what[to.Source])
	}
	ports := func(s *Spec) []string {
		var out []string
		for _, p := range s.Outputs {
			if !slices.Contains(s.OptionalOutputs, p) && p != RejectedPort {
				out = append(out, p)
			}
		}
		sort.Strings(out)
		return out
	}
	a, b := ports(from), ports(to)
	if strings.Join(a, ",") == strings.Join(b, ",") {
		return ""
	}
	list := func(ps []string) string {
		if len(ps) == 0 {
			return "none"
		}
		return strings.Join(ps, ", ")
	}
	return fmt.Sprintf("kind %s cannot stand in for %s: its ports are %s, %s's are %s; --set STAGE.kind swaps kinds with the same ports (a writer for a writer)", to.Kind, from.Kind, list(b), from.Kind, list(a))
}

// topoSort orders stages so every stage follows its inputs (Kahn's
// algorithm, ties broken by file order). If there is a cycle it returns the
// stages that could not be ordered.
func topoSort(all []*PlanStage) (order, stuck []*PlanStage) {
	indeg := map[*PlanStage]int{}
	for _, ps := range all {
		indeg[ps] = len(ps.Inputs)
	}
	done := map[*PlanStage]bool{}
	for len(order) < len(all) {
		progressed := false
		for _, ps := range all {
			if done[ps] || indeg[ps] > 0 {
				continue
			}
			done[ps] = true
			order = append(order, ps)
			progressed = true
			for _, port := range slices.Sorted(maps.Keys(ps.Outputs)) {
				for _, e := range ps.Outputs[port] {
					indeg[e.To]--
				}
			}
		}
		if !progressed {
			return order, onCycles(all, done)
		}
	}
	return order, nil
}

// onCycles returns the stages Kahn's algorithm could not order (not done)
// that lie on a cycle: stages merely downstream of one are pruned, as their
// outputs lead nowhere back.
func onCycles(all []*PlanStage, done map[*PlanStage]bool) []*PlanStage {
	left := map[*PlanStage]bool{}
	for _, ps := range all {
		if !done[ps] {
			left[ps] = true
		}
	}
	for pruned := true; pruned; {
		pruned = false
		for _, ps := range all {
			if !left[ps] {
				continue
			}
			feedsBack := false
			for _, edges := range ps.Outputs {
				for _, e := range edges {
					feedsBack = feedsBack || left[e.To]
				}
			}
			if !feedsBack {
				delete(left, ps)
				pruned = true
			}
		}
	}
	var out []*PlanStage
	for _, ps := range all {
		if left[ps] {
			out = append(out, ps)
		}
	}
	return out
}

// checkFields verifies that each stage's needed record fields are produced by
// every path into it.
func checkFields(order []*PlanStage) pipefile.Problems {
	var probs pipefile.Problems
	avail := map[*PlanStage]map[string]bool{}
	producers := fieldProducers(order)
	for _, ps := range order {
		if ps.Spec == nil {
			avail[ps] = nil
			continue
		}
		needs, produces := ps.fields()
		have := fieldsIn(ps, avail)
		for _, n := range needs {
			if have[n] {
				continue
			}
			hint := ""
			if kinds := producers[n]; len(kinds) > 0 {
				hint = " (produced here by " + strings.Join(kinds, ", ") + ", but not upstream of this stage)"
			}
			probs = append(probs, pipefile.Problem{Pos: ps.Decl.KeyPosition("input"), Stage: ps.Decl.ID, Kind: ps.Decl.Kind,
				Msg: fmt.Sprintf("needs record field %q, which no stage upstream produces%s", n, hint)})
		}
		for _, f := range produces {
			have[f] = true
		}
		avail[ps] = have
	}
	return probs
}

// fieldProducers maps each record field to the kinds in the plan that
// produce it, for the hint of a missing one.
func fieldProducers(order []*PlanStage) map[string][]string {
	producers := map[string][]string{}
	for _, ps := range order {
		if ps.Spec == nil {
			continue
		}
		_, produces := ps.fields()
		for _, f := range produces {
			if !slices.Contains(producers[f], ps.Spec.Kind) {
				producers[f] = append(producers[f], ps.Spec.Kind)
			}
		}
	}
	return producers
}

// fieldsIn is the set of fields every record reaching ps has: those
// available on all its inputs (avail, by upstream stage), and the id.
func fieldsIn(ps *PlanStage, avail map[*PlanStage]map[string]bool) map[string]bool {
	var have map[string]bool
	for i, e := range ps.Inputs {
		up := avail[e.From]
		if i == 0 {
			have = map[string]bool{}
			for k := range up {
				have[k] = true
			}
			continue
		}
		for k := range have {
			if !up[k] {
				delete(have, k)
			}
		}
	}
	if have == nil {
		have = map[string]bool{}
	}
	have[record.FieldID] = true
	return have
}

func (ps *PlanStage) fields() (needs, produces []string) {
	needs, produces = ps.Spec.Needs, ps.Spec.Produces
	if ps.Spec.Fields != nil && ps.Config != nil {
		needs, produces = ps.Spec.Fields(ps.Config)
	}
	return needs, produces
}

// decodeConfig decodes a stage's raw keys into a new value of its kind's config
// struct, checking every key; paths are resolved against dir (or, for a key
// given by --set, the working directory) and, with checkFiles, input paths
// are checked to exist. With a shard, output paths and shard prefixes get
// the shard's name where they do not have it yet (Shard.ShardPath,
// Shard.ShardPrefix).
func decodeConfig(spec *Spec, sd *pipefile.StageDecl, dir string, checkFiles bool, shard *pipefile.Shard, trainer *pipefile.Trainer, reg *Registry) (any, pipefile.Problems) {
	d := &configDecoder{sd: sd, dir: dir, checkFiles: checkFiles, shard: shard, trainer: trainer, reg: reg}
	t := reflect.TypeOf(spec.Config)
	fields, _ := fieldsOf(t) // checked at Register
	ptr := reflect.New(t)
	v := ptr.Elem()
	keys := []string{"id", "kind", "input"}
	for _, f := range fields {
		keys = append(keys, f.Key)
		if f.HasDef {
			_ = setFromDefault(v.Field(f.Index), f.Default)
		}
	}
	d.unknownKeys(keys)
	for i := range fields {
		d.field(&fields[i], v.Field(fields[i].Index))
	}
	d.trainerKeys(ptr.Interface(), fields, v)
	d.validate(ptr.Interface())
	// The constructor has no side effects, so what only it can judge is
	// found here, by pipe check, and not when the run starts.
	if len(d.probs) == 0 {
		if _, err := spec.New.Stage(ptr.Interface()); err != nil {
			d.stageError(err)
		}
	}
	return ptr.Interface(), d.probs
}

// trainerKeys sets the fields of cfg (its value v) that the stage does not
// set from [trainer], unless the config does not use it, and lets the
// config set its defaults knowing whether there is a [trainer].
func (d *configDecoder) trainerKeys(cfg any, fields []fieldInfo, v reflect.Value) {
	if u, ok := cfg.(config.TrainerUser); !ok || u.UsesTrainer() {
		for i := range fields {
			if _, set := d.sd.Raw[fields[i].Key]; !set {
				d.fromTrainer(&fields[i], v.Field(fields[i].Index))
			}
		}
	}
	if td, ok := cfg.(config.TrainerDefaulter); ok {
		td.TrainerDefaults(d.trainer != nil)
	}
}

// validate reports the errors of cfg's Validate, if it has one: an error
// of a list's item at the item, of a key at the key, else at the stage.
func (d *configDecoder) validate(cfg any) {
	val, ok := cfg.(config.Validator)
	if !ok {
		return
	}
	for _, err := range val.Validate() {
		if fe, ok := err.(*config.FieldError); ok && fe.Item > 0 {
			d.probs = append(d.probs, pipefile.Problem{Pos: d.sd.ElemPosition(fe.Key, fe.Item-1), Stage: d.sd.ID, Kind: d.sd.Kind, Msg: fmt.Sprintf("%s %s", fe.Key, fe.Msg)})
		} else if ok {
			d.prob(fe.Key, "%s %s", fe.Key, fe.Msg)
		} else {
			d.atStage(err)
		}
	}
}

// configDecoder is decodeConfig's state: the stage declared, where its
// paths resolve, and the problems found.
type configDecoder struct {
	sd         *pipefile.StageDecl
	dir        string
	checkFiles bool
	shard      *pipefile.Shard
	trainer    *pipefile.Trainer
	probs      pipefile.Problems
	// reg, when set, names the kinds that take a key this kind does not.
	reg *Registry
	// fromTrainerAt is where [trainer] sets each key the stage took from
	// it: a problem with such a key is shown there.
	fromTrainerAt map[string]pipefile.Pos
}

// prob is a problem at key: where the stage sets it, or where [trainer]
// does when the stage took it from there.
func (d *configDecoder) prob(key, format string, args ...any) {
	pos, ok := d.fromTrainerAt[key]
	if !ok {
		pos = d.sd.KeyPosition(key)
	}
	d.probs = append(d.probs, pipefile.Problem{Pos: pos, Stage: d.sd.ID, Kind: d.sd.Kind, Msg: fmt.Sprintf(format, args...)})
}

// probEach reports err about key, or each error it joins (one per bad
// item of a list) as a problem of its own.
func (d *configDecoder) probEach(key string, err error) {
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		d.prob(key, "%s %v", key, e)
	}
}

// stageError reports an error of Validate or the constructor: at its key
// for a *config.FieldError, else at the stage.
func (d *configDecoder) stageError(err error) {
	if fe := (*config.FieldError)(nil); errors.As(err, &fe) {
		d.prob(fe.Key, "%s %s", fe.Key, fe.Msg)
		return
	}
	d.atStage(err)
}

// atStage is a problem at the stage's table.
func (d *configDecoder) atStage(err error) {
	d.probs = append(d.probs, pipefile.Problem{Pos: d.sd.Pos, Stage: d.sd.ID, Kind: d.sd.Kind, Msg: err.Error()})
}

// unknownKeys reports each key of the stage not in keys (the kind's, after
// id, kind and input).
func (d *configDecoder) unknownKeys(keys []string) {
	sd := d.sd
	for _, k := range slices.Sorted(maps.Keys(sd.Raw)) {
		if slices.Contains(keys, k) {
			continue
		}
		if inner := tableKeyOf(sd.Raw[k], keys); inner != "" {
			// `gen.concurrency = 0` inside gen's [[stage]] makes a table "gen".
			d.prob(k, "unknown key \"%s.%s\": a dotted key makes a table %q; did you mean %s = …?", k, inner, k, inner)
			continue
		}
		if others := d.kindsTaking(k); len(others) > 0 && suggest.DidYouMean(k, keys) == "" {
			d.prob(k, "unknown key %q: it is a key of %s, not of %s; %s takes: %s", k, strings.Join(others, ", "), sd.Kind, sd.Kind, strings.Join(keys[3:], ", "))
			continue
		}
		d.prob(k, "unknown key %q%s; %s takes: %s", k, suggest.DidYouMean(k, keys), sd.Kind, strings.Join(keys[3:], ", "))
	}
}

// kindsTaking lists the other kinds whose configs have key (e.g. samples
// given to generate is read-prompts' key).
func (d *configDecoder) kindsTaking(key string) []string {
	if d.reg == nil {
		return nil
	}
	var out []string
	for _, kind := range d.reg.Kinds() {
		spec := d.reg.Lookup(kind)
		if kind == d.sd.Kind || spec == nil || spec.Config == nil {
			continue
		}
		fields, _ := fieldsOf(reflect.TypeOf(spec.Config))
		for _, f := range fields {
			if f.Key == key {
				out = append(out, kind)
				break
			}
		}
	}
	return out
}

// field decodes field f into fv: required, in range, a path resolved (and
// checked), then given the shard's name where it is an output or a prefix.
func (d *configDecoder) field(f *fieldInfo, fv reflect.Value) {
	sd := d.sd
	raw, set := sd.Raw[f.Key]
	if sd.BadKeys[f.Key] {
		return // its interpolation failed and was reported
	}
	if !set {
		if f.Required {
			d.probs = append(d.probs, pipefile.Problem{Pos: sd.Pos, Stage: sd.ID, Kind: sd.Kind, Msg: fmt.Sprintf("missing required key %q (%s)", f.Key, strings.TrimSuffix(f.Doc, "."))})
		}
		return
	}
	if err := setFromRaw(fv, raw); err != nil {
		d.probEach(f.Key, err)
		return
	}
	if err := f.checkRange(fv); err != nil {
		d.prob(f.Key, "%s %v", f.Key, err)
		return
	}
	d.checkTrainer(f, fv)
	if r, ok := fv.Addr().Interface().(config.DirResolver); ok {
		r.ResolveDir(sd.PathDir(f.Key, d.dir))
	}
	if f.Path != "" && !d.resolvePath(f, fv) {
		return
	}
	d.shardName(f, fv)
}

// resolvePath resolves the path (or paths) of field f against the
// stage's directory, checking them; false when it is empty, which stops
// the field there.
func (d *configDecoder) resolvePath(f *fieldInfo, fv reflect.Value) bool {
	if msgs := emptyPath(fv, f, d.sd.EmptyEnv[f.Key]); len(msgs) > 0 {
		for _, m := range msgs {
			d.prob(f.Key, "%s", m)
		}
		return false
	}
	if err := resolvePaths(fv, d.sd.PathDir(f.Key, d.dir), f.Path, f.Contains, d.checkFiles); err != nil {
		d.probEach(f.Key, err)
	}
	return true
}

// shardName gives a string field that is an output path or a prefix the
// shard's name, when the run is a shard.
func (d *configDecoder) shardName(f *fieldInfo, fv reflect.Value) {
	if d.shard == nil || fv.Kind() != reflect.String {
		return
	}
	switch {
	case f.Path == "out" || f.Path == "dir":
		fv.SetString(d.shard.ShardPath(fv.String()))
	case f.ShardPrefix:
		fv.SetString(d.shard.ShardPrefix(fv.String()))
	}
}

// fromTrainer sets fv, a key the stage does not set, from [trainer] when
// the key repeats one of its keys.
func (d *configDecoder) fromTrainer(f *fieldInfo, fv reflect.Value) {
	v, ok := d.trainer.Value(f.Trainer)
	if f.Trainer == "" || !ok {
		return
	}
	if n, isInt := v.(int); isInt {
		v = int64(n) // as TOML decodes an integer
	}
	if err := setFromRaw(fv, v); err != nil {
		d.prob(f.Key, "%s from [trainer] %s (%s): %v", f.Key, f.Trainer, d.trainer.KeyPosition(f.Trainer), err)
		return
	}
	if d.fromTrainerAt == nil {
		d.fromTrainerAt = map[string]pipefile.Pos{}
	}
	d.fromTrainerAt[f.Key] = d.trainer.KeyPosition(f.Trainer)
}

// checkTrainer names a conflict between a key the stage sets and the
// [trainer] key it repeats: the trainer is declared once.
func (d *configDecoder) checkTrainer(f *fieldInfo, fv reflect.Value) {
	v, ok := d.trainer.Value(f.Trainer)
	if f.Trainer == "" || !ok {
		return
	}
	if n, isInt := v.(int); isInt && fv.CanInt() && fv.Int() == int64(n) {
		return
	}
	if s, isStr := v.(string); isStr && fv.Kind() == reflect.String && fv.String() == s {
		return
	}
	d.prob(f.Key, "%s = %v conflicts with [trainer] %s = %v (%s): the trainer is declared once; remove %s here (it is read from [trainer]) or change [trainer]",
		f.Key, fv.Interface(), f.Trainer, v, d.trainer.KeyPosition(f.Trainer), f.Key)
}

// tableKeyOf returns the first known key inside v, if v is a table: what
// the user meant by a dotted key such as stage.concurrency.
func tableKeyOf(v any, known []string) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if slices.Contains(known[3:], k) {
			return k
		}
	}
	return ""
}

// resolvePaths makes a path field absolute against dir and, for inputs
// when check is set, checks that the file exists; empty strings are left
// alone (emptyPath reports those that matter). Outputs are checked by
// CheckOutputs and CheckPathConflicts at plan time. For a list, every item
// is resolved and the error joins one per bad item.
func resolvePaths(v reflect.Value, dir, mode string, contains []string, check bool) error {
	if v.Kind() == reflect.Slice {
		var errs []error
		for i := 0; i < v.Len(); i++ {
			if err := resolvePaths(v.Index(i), dir, mode, contains, check); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	if v.Kind() != reflect.String || v.String() == "" {
		return nil
	}
	p := v.String()
	if mode == "inany" && strings.HasPrefix(p, "s3://") {
		return nil // read from object storage, checked when the run opens it
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	v.SetString(p)
	if !check || !IsInputMode(mode) {
		return nil
	}
	return checkInputPath(p, mode, contains)
}

// IsInputMode says whether a `path:"…"` mode names a path the run reads
// (in, indir, inany, rundir), which must exist before it starts.
func IsInputMode(mode string) bool {
	switch mode {
	case "in", "indir", "inany", "rundir":
		return true
	}
	return false
}

// checkInputPath checks that input path p exists and is what mode wants
// (in: a file, indir: a directory holding each of contains, inany: either,
// rundir: a run directory that kept journals).
func checkInputPath(p, mode string, contains []string) error {
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %s", p, pipefile.DescribeReadError(err))
	case mode == "inany":
		return nil
	case mode == "in" && st.IsDir():
		return fmt.Errorf("%s is a directory, want a file", p)
	case (mode == "indir" || mode == "rundir") && !st.IsDir():
		return fmt.Errorf("%s is a file, want a directory", p)
	case mode == "rundir":
		journals := layout.JournalDir(p)
		if _, err := os.Stat(journals); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s is not a run directory with journals: it has no %s", p, filepath.Base(journals))
		} else if err != nil {
			return fmt.Errorf("%s: %s", journals, pipefile.DescribeReadError(err))
		}
	}
	for _, name := range contains {
		if _, err := os.Stat(filepath.Join(p, name)); err != nil {
			return fmt.Errorf("%s has no %s", p, name)
		}
	}
	return nil
}

func stageIDs(ss []*PlanStage) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s.Decl.ID != "" {
			out = append(out, s.Decl.ID)
		}
	}
	return out
}
