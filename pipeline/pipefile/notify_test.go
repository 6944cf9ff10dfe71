package pipefile_test

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// [pipeline] notify takes a target or a list of them; a bad one is an
// error at its position that never repeats a webhook's path.
func TestPipelineNotify(t *testing.T) {
	for _, tc := range []struct {
		src  string
		set  []string
		want []string
		err  string
	}{
		{src: `notify = "https://hooks.slack.com/services/T/B/K"`, want: []string{"https://hooks.slack.com/services/T/B/K"}},
		{src: `notify = ["cat >> notes", "http://127.0.0.1:9/x"]`, want: []string{"cat >> notes", "http://127.0.0.1:9/x"}},
		{set: []string{`pipeline.notify=["echo hi"]`}, want: []string{"echo hi"}},
		{src: `notify = 3`, err: `test.toml:2:1: [pipeline]: notify must be a string or a list of strings (an http(s) URL or a shell command), got integer`},
		{src: `notify = [" "]`, err: `test.toml:2:1: [pipeline]: notify: empty target`},
		{src: `notify = "https:///services/SECRET"`, err: `test.toml:2:1: [pipeline]: notify: https://…: not a URL with a host`},
	} {
		f, probs := pipefile.Parse("test.toml", []byte("[pipeline]\n"+tc.src+"\n[[stage]]\nid = \"s\"\nkind = \"count\"\n"), pipefile.Options{Set: tc.set, SetDir: "/"})
		if tc.err != "" {
			if len(probs) == 0 || !strings.HasPrefix(probs.Error(), tc.err) || strings.Contains(probs.Error(), "SECRET") {
				t.Errorf("%s: got %v, want %q", tc.src, probs, tc.err)
			}
			continue
		}
		if len(probs) > 0 || strings.Join(f.Notify, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s %v: notify %q (%v), want %q", tc.src, tc.set, f.Notify, probs, tc.want)
		}
	}
}
