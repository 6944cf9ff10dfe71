package stages

import (
	"reflect"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
)

// TestOperationalKeys pins which keys are `op:"true"`: how a run goes, not
// what data it makes. A resume may change these; any other key change is
// refused (pipeline/rundir). A new key is data-defining unless listed here.
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
			t.Logf("kind %s not registered (yet)", kind)
			continue
		}
		if got := spec.OperationalKeys(); !reflect.DeepEqual(got, keys) {
			t.Errorf("%s: operational keys %q, want %q", kind, got, keys)
		}
	}
	for _, kind := range pipeline.DefaultRegistry.Kinds() {
		if _, ok := want[kind]; !ok {
			t.Errorf("kind %s: decide which of its keys are operational and list them here", kind)
		}
	}
}
