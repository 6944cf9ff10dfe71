package pipeline

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/pipe-dev/pipe/pipeline/output"
)

// Spec describes a stage kind: one source for decoding, checking, `pipe
// stages` documentation and construction. Each kind registers its Spec from
// its own file's init().
type Spec struct {
	Kind    string // e.g. "read-prompts"
	Summary string // one line
	// Description is longer help for `pipe stages KIND`; optional.
	Description string
	// Config is a zero value of the kind's config struct (not a pointer),
	// set by Register from New's type: a spec leaves it unset. Its
	// exported fields carry `toml:"key"` tags and optionally `default:"…"`,
	// `doc:"…"`, `min:"…"`, `max:"…"`, `enum:"a|b"`, `required:"true"`,
	// `path:"in|indir|inany|rundir|out|dir"` (resolved against the pipeline
	// file; "in" is an existing file, "indir" an existing directory, "inany"
	// either, "rundir" an existing run directory with journals, "out" a file
	// and "dir" a directory the run creates); with "indir", `contains:"a.json,b"`
	// names files the directory must hold; `op:"true"` marks an operational
	// key (servers, timeouts, input limits: how the run goes, not what data
	// it makes), which a resume may change (see PlanStage.Settings). A config
	// type may implement config.Validator for checks across fields.
	Config any
	// Source is true for kinds that take no input (New is a NewSource), set
	// by Register: a spec leaves it unset. Every other kind needs at least
	// one input. MaxInputs limits how many (0: any number, merged in
	// arrival order).
	Source    bool
	MaxInputs int
	// Outputs are the output ports, the first being the default. A port named
	// "rejected" may be left unconnected: rejections then go to the run dir.
	Outputs []string
	// OptionalOutputs are ports that may be left unconnected; what is sent
	// on one that is not connected is dropped (write-arrow's "shards").
	OptionalOutputs []string
	// OutputsUsed, when set, says which optional ports the decoded config
	// sends records on: pipe check requires those connected (records never
	// vanish) and the others unconnected (nothing would arrive there).
	// validate-thinking's "retry" is used only with second_chance.
	OutputsUsed func(config any) []string
	// PortBuffers sets the capacity of a port's edges where the run's
	// default (engine.Options.EdgeBuffer) would hold too much: write-arrow's
	// "shards" holds one, so shards waiting for an upload stay few and a
	// slow upload slows the writer instead of filling the disk.
	PortBuffers map[string]int
	// Needs and Produces are record fields (Field* constants). Fields is an
	// optional refinement computed from the decoded config, e.g. output_ids
	// only with the native API; FieldsFor types it.
	Needs, Produces []string
	Fields          func(config any) (needs, produces []string)
	// Expensive marks kinds whose work is costly to redo (generate: minutes
	// of GPU time per record). On a drain (first Ctrl-C), records that have
	// not yet entered an expensive stage are dropped and will be redone on
	// resume — they were cheap to read — while records already past one are
	// all processed and committed.
	Expensive bool
	// SimSettings, for kinds that call servers, is what points a stage of
	// the kind at n simulated servers: KEY=VALUE settings as --set takes
	// them, without the stage's id (pipe run --sim N). Nil: --sim leaves
	// the kind alone.
	SimSettings func(n int) []string
	// DropsFinished marks kinds that drop records whose id the run directory
	// had finished (dedupe-against-progress). When such a stage is the only
	// reader of a source, the source may skip finished records before even
	// parsing them (Emitter.SkipFinished): a resume streams past 900,000
	// finished prompts in a fraction of a second.
	DropsFinished bool
	// KeySettings returns a short summary of the settings that matter, for
	// graph views ("7 servers × 48"); SettingsFor types it.
	KeySettings func(config any) string
	// Example is a complete pipeline file using this kind; the tests check
	// that it passes `pipe check`.
	Example string
	// Verify, for writers and uploads, checks what the stage committed
	// against its own record of it (a manifest): pipe verify and the end
	// of a run call it (VerifyFor types it). Nil: the kind keeps no output
	// of its own.
	Verify output.VerifyFunc
	// Publish, for outputs published with a description of how they were
	// made (a Hub dataset card), gives them the run's card at the end of
	// a run whose outputs verified. Nil: nothing to publish.
	Publish output.PublishFunc
	// Output, for writers and uploads, reads back what the stage
	// committed (see output.Spec); nil: it keeps no output of its own.
	Output *output.Spec
	// Replay, for a source that pipe run --from puts in place of a stage,
	// says what it reads of the original run (see ReplaySpec).
	Replay *output.ReplaySpec
	// New builds the stage from a decoded, validated config: NewSource or
	// NewProcessor, whose type parameter is the config struct.
	New Constructor
}

// Registry maps kinds to specs. Tests build their own; stages register into
// DefaultRegistry.
type Registry struct {
	specs map[string]*Spec
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{specs: map[string]*Spec{}} }

// DefaultRegistry is where stage kinds register themselves from init().
var DefaultRegistry = NewRegistry()

// Register adds a kind to the default registry; it panics on a malformed or
// duplicate spec, which is a programming error found by any test.
func Register(s Spec) { DefaultRegistry.Register(s) }

// Register adds a kind; it panics on a malformed or duplicate spec.
func (r *Registry) Register(s Spec) {
	if s.Kind == "" || s.New.config == nil {
		panic(fmt.Sprintf("pipeline: spec %q needs Kind and New (NewSource or NewProcessor)", s.Kind))
	}
	// A spec taken from another registry has them already, the same.
	if (s.Config != nil && reflect.TypeOf(s.Config) != s.New.config) || (s.Source && !s.New.IsSource()) {
		panic(fmt.Sprintf("pipeline: spec %q: Config and Source are set from New", s.Kind))
	}
	s.Config = reflect.Zero(s.New.config).Interface()
	s.Source = s.New.IsSource()
	if s.New.config.Kind() != reflect.Struct {
		panic(fmt.Sprintf("pipeline: spec %q: Config must be a struct value", s.Kind))
	}
	if _, err := fieldsOf(reflect.TypeOf(s.Config)); err != nil {
		panic(fmt.Sprintf("pipeline: spec %q: %v", s.Kind, err))
	}
	if _, dup := r.specs[s.Kind]; dup {
		panic("pipeline: kind registered twice: " + s.Kind)
	}
	r.specs[s.Kind] = &s
}

// Lookup returns the spec of kind, or nil.
func (r *Registry) Lookup(kind string) *Spec { return r.specs[kind] }

// Kinds returns the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	out := make([]string, 0, len(r.specs))
	for k := range r.specs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
