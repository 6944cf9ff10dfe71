package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// --dry-run probes real servers and shows them as a table (model, version,
// context length, state), generating nothing; a dead server is listed with
// its reason.
func TestDryRunShowsServerTable(t *testing.T) {
	fleet, err := sim.Start(context.Background(), sim.Config{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	urls := fleet.URLs()
	fleet.Servers()[1].Kill()
	path, outPath := genPipelineFile(t, fmt.Sprintf("servers = [%q, %q]\nmax_output_tokens = 1024", urls[0], urls[1]))
	var out, errb bytes.Buffer
	if code := run([]string{"run", "--dry-run", path}, &stdio{Out: &out, Err: &errb}); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	got := out.String()
	for _, want := range []string{
		urls[0] + "  ready  Qwen/Qwen3-32B",
		"40960",
		urls[1] + "  down",
		"1 of 2 server(s) ready",
		"dry run: nothing was done",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("dry run output lacks %q:\n%s", want, got)
		}
	}
	if st := fleet.Servers()[0].Stats(); st.Requests != 0 {
		t.Fatalf("dry run sent %d generation requests", st.Requests)
	}
	if _, err := os.Stat(outPath); err == nil {
		t.Fatal("dry run wrote output")
	}
}
