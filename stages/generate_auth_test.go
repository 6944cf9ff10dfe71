package stages

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// randomSecret is a distinctive value to grep for.
func randomSecret(t *testing.T, prefix string) string {
	t.Helper()
	var b [12]byte
	if _, err := crand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// genProblems is what pipe check says about a generate stage with keys.
func genProblems(t *testing.T, keys string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(genPrompts(1)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, probs := pipefile.Parse(filepath.Join(dir, "p.toml"), []byte(genPipeline(keys)), pipefile.Options{})
	if len(probs) == 0 {
		_, probs = pipeline.Build(f, pipeline.DefaultRegistry)
	}
	return fmt.Sprint(probs)
}

func TestGenerateCredentialsConfig(t *testing.T) {
	const pw = "Pw0rd7c1e"
	for _, tc := range []struct{ keys, problem string }{
		{`servers = ["http://u:` + pw + `@a:1", {url = "http://b:2", api_key_env = "OTHER"}]` + "\napi_key_env = \"KEY\"", `item 1: http://a:1 has user:password (sent as Basic auth) and an API key`},
		{`servers = [{url = "http://u:` + pw + `@a:1", api_key_env = ""}, "http://b:2"]` + "\napi_key_env = \"KEY\"", ``},
		{`servers = [{url = "http://u:` + pw + `@a:1", api_key_env = "K"}]`, `has user:password (sent as Basic auth) and an API key`},
		{`servers = ["http://a:1"]` + "\napi_key_env = \"sk-" + pw + "\"", `api_key_env must be an environment variable name`},
		{`servers = [{url = "http://a:1", api_key_env = "sk-` + pw + `"}]`, `api_key_env must be an environment variable name`},
		{`servers = [{url = "http://a:1", api_key_env = 3}]`, `api_key_env must be an environment variable name`},
		{`servers = ["http://a:1"]` + "\nheaders_env = {X-Team = \"TEAM\", X-Org = \"ORG_1\"}", ``},
		{`servers = ["http://a:1"]` + "\nheaders_env = {Authorization = \"TOKEN\"}", `use api_key_env`},
		{`servers = ["http://a:1"]` + "\nheaders_env = {Content-Length = \"N\"}", `Content-Length is set by the client itself`},
		{`servers = ["http://a:1"]` + "\nheaders_env = {\"X Team\" = \"N\"}", `"X Team" is not an HTTP header name`},
		{`servers = ["http://a:1"]` + "\nheaders_env = {X-Team = \"" + pw + "-x\"}", `X-Team: the value must be an environment variable name`},
		{`servers = ["sim:2?api_key_env=SIM_KEY"]`, ``},
		{`servers = ["sim:2?api_key_env=sk-` + pw + `"]`, `sim option api_key_env: not an environment variable name`},
		// Messages name servers without user:password, even when the URL
		// does not parse.
		{`servers = ["http://u:` + pw + `@a:1", "http://v:` + pw + `@a:1"]`, `item 2: http://a:1 is listed twice`},
		{`servers = ["http://u:` + pw + `@a:1/v1"]`, `"http://a:1/v1": give the base URL without a path (e.g. "http://a:1")`},
		{`servers = ["http://u:` + pw + `@a:x"]`, `"http://a:x" is not a server URL`},
		{`servers = ["http://u:p/` + pw + `@a:1"]`, `"http://a:1" is not a server URL`},
		{`servers = ["http://u:` + pw + `@a:1?x=1"]`, `without a query`},
	} {
		got := genProblems(t, tc.keys+"\nmax_output_tokens = 10\n")
		if tc.problem == "" && got != "" || tc.problem != "" && !strings.Contains(got, tc.problem) {
			t.Errorf("%s:\n got problems %s\nwant one with %q", tc.keys, got, tc.problem)
		}
		// A value that is no variable name may be the key itself: not
		// repeated either.
		if strings.Contains(got, pw) {
			t.Errorf("%s: the problems show the secret: %s", tc.keys, got)
		}
	}
}

// An in-process fleet that requires a key ("sim:N?api_key_env=NAME"):
// without api_key_env the run fails at start, naming the server and what to
// set; with it the run works; a variable that is not set is named.
func TestGenerateAPIKeyInProcess(t *testing.T) {
	key := randomSecret(t, "sk-")
	t.Setenv("PIPE_TEST_SIM_KEY", key)
	servers := `servers = ["sim:2?api_key_env=PIPE_TEST_SIM_KEY&speed=200&think_mean=60&answer_mean=20"]` + "\n"
	run := func(keys string, n int) (string, *engine.Summary, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return runGenPipeline(t, ctx, genPipeline(servers+fastGenKeys+"ready_timeout = \"10m\"\n"+keys), genPrompts(n), engine.Options{})
	}

	start := time.Now()
	_, _, err := run("", 5)
	if err == nil {
		t.Fatal("a run without the key succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"http://127.0.0.1:", "credentials refused", "401: Unauthorized", "no API key was sent", `set api_key_env = "VAR"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, key) {
		t.Errorf("error shows the key: %s", msg)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("failing took %v: it waited for ready_timeout", d)
	}

	dir, sum, err := run("api_key_env = \"PIPE_TEST_SIM_KEY\"\n", 30)
	if err != nil {
		t.Fatal(err)
	}
	mustAllOut(t, dir, sum, 30)

	_, _, err = run("api_key_env = \"PIPE_TEST_UNSET_KEY\"\n", 5)
	if err == nil || !strings.Contains(err.Error(), "api_key_env: environment variable PIPE_TEST_UNSET_KEY is not set") {
		t.Errorf("unset variable: %v", err)
	}
	t.Setenv("PIPE_TEST_EMPTY", " \n")
	_, _, err = run("headers_env = {X-Team = \"PIPE_TEST_EMPTY\"}\napi_key_env = \"PIPE_TEST_SIM_KEY\"\n", 5)
	if err == nil || !strings.Contains(err.Error(), "headers_env X-Team: environment variable PIPE_TEST_EMPTY is empty") {
		t.Errorf("empty variable: %v", err)
	}
	t.Setenv("PIPE_TEST_NEWLINE", "a\nX-Evil: 1")
	_, _, err = run("headers_env = {X-Team = \"PIPE_TEST_NEWLINE\"}\napi_key_env = \"PIPE_TEST_SIM_KEY\"\n", 5)
	if err == nil || !strings.Contains(err.Error(), "PIPE_TEST_NEWLINE holds a control character") || strings.Contains(err.Error(), "Evil") {
		t.Errorf("a newline in a header value: %v", err)
	}
}
