package stages

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
)

// TestOperationalKeys pins which keys are `op:"true"`: how a run goes, not
// what data it makes. A resume may change these; any other key change is
// refused (pipeline/rundir). A new key of a kind pinned here is
// data-defining unless listed here. A kind not pinned here decides in its
// own file: each of its keys says op:"true" or op:"false", so a new kind
// is its file and its test, and no key of it is data-defining by default.
func TestOperationalKeys(t *testing.T) {
	want := map[string][]string{
		// Credentials (api_key_env, headers_env) say how servers are reached.
		"generate": {"api_key_env", "backoff_max", "backoff_min", "breaker_failures", "concurrency", "headers_env", "max_attempts", "max_concurrency",
			"probe_interval", "ready_timeout", "request_timeout", "servers", "stall_timeout"},
		"read-prompts":     {"allow_empty", "limit", "on_bad_line", "path"},
		"read-completions": {"endpoint", "force_path_style", "limit", "on_bad_line", "path", "region"},
		// Where the journal lies, not what it holds.
		"read-journal":      {"run_dir"},
		"tokenize-and-mask": {"workers"},
		"validate-thinking": nil,
		"write-jsonl":       nil,
		// Shard boundaries change files, not rows.
		"write-arrow": {"max_age", "max_bytes", "max_rows", "row_group_rows"},
		// Where and how shards are uploaded; a resume re-sends every shard.
		"upload-s3": {"allow_insecure", "delete_local_after_upload", "endpoint", "force_path_style", "max_attempts", "part_concurrency", "part_size", "region", "shard_concurrency", "upload_timeout", "uri"},
		// against decides which prompts the run makes: data.
		"dedupe-against-progress": nil,
	}
	for kind, keys := range want {
		spec := pipeline.DefaultRegistry.Lookup(kind)
		if spec == nil {
			t.Errorf("kind %s is pinned here but not registered: a kind removed takes its line here with it", kind)
			continue
		}
		if got := spec.OperationalKeys(); !reflect.DeepEqual(got, keys) {
			t.Errorf("%s: operational keys %q, want %q", kind, got, keys)
		}
	}
	for _, kind := range pipeline.DefaultRegistry.Kinds() {
		if _, ok := want[kind]; ok {
			continue
		}
		if keys := opUndecided(pipeline.DefaultRegistry.Lookup(kind).Config); len(keys) > 0 {
			t.Errorf("kind %s: keys %q have no op tag: say op:\"true\" (a resume may change it) or op:\"false\" (it defines the data) on each", kind, keys)
		}
	}
}

// opUndecided lists the keys of a config (a struct, its embedded structs'
// keys included) without an op tag.
func opUndecided(config any) []string {
	var out []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if !f.IsExported() || key == "" || key == "-" {
				continue
			}
			if _, ok := f.Tag.Lookup("op"); !ok {
				out = append(out, key)
			}
		}
	}
	if config != nil {
		walk(reflect.TypeOf(config))
	}
	return out
}

// A kind outside the pinned list passes when every key states its op
// tag, and names the keys that do not.
func TestOpUndecided(t *testing.T) {
	type inner struct {
		Workers int    `toml:"workers" op:"true"`
		Unit    string `toml:"unit"`
	}
	type config struct {
		inner
		Max    int    `toml:"max" op:"false"`
		Reason string `toml:"reason"`
		Note   string `toml:"-"`
		hidden int
	}
	_ = config{}.hidden
	if got := opUndecided(config{}); !reflect.DeepEqual(got, []string{"unit", "reason"}) {
		t.Errorf("opUndecided = %q, want unit and reason", got)
	}
	type decided struct {
		Max  int    `toml:"max" op:"false"`
		Path string `toml:"path" op:"true"`
	}
	if got := opUndecided(decided{}); len(got) != 0 {
		t.Errorf("opUndecided = %q, want none", got)
	}
}
