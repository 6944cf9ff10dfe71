package sglang

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

func TestProbeShowsEveryServer(t *testing.T) {
	cfg := fastSim(1)
	cfg.Model, cfg.Version, cfg.ContextLength = "Qwen/Qwen3-8B", "0.4.9", 32768
	live := startSim(t, cfg)
	warming := fastSim(1)
	warming.WarmUp = time.Hour
	warm := startSim(t, warming)
	dead := startSim(t, fastSim(1))
	deadURL := dead.URLs()[0]
	dead.Close()

	got := Probe(context.Background(), specsOf([]string{live.URLs()[0] + "/", warm.URLs()[0], deadURL}, 1), 2*time.Second)
	if len(got) != 3 {
		t.Fatalf("%d infos", len(got))
	}
	if g := got[0]; g.URL != live.URLs()[0] || g.State != StateReady || g.Model != "Qwen/Qwen3-8B" || g.Version != "0.4.9" || g.ContextLength != 32768 {
		t.Errorf("live server: %+v", g)
	}
	if g := got[1]; g.State != StateDown || !strings.Contains(g.Reason, "starting up") {
		t.Errorf("warming server: %+v", g)
	}
	if g := got[2]; g.State != StateDown || !strings.Contains(g.Reason, "unreachable") || !strings.Contains(g.Reason, "refused") {
		t.Errorf("dead server: %+v", g)
	}
	if live.Servers()[0].Stats().Requests != 0 {
		t.Errorf("Probe generated something")
	}
}

func TestWarmingServerJoinsLater(t *testing.T) {
	ready := startSim(t, fastSim(1))
	wcfg := fastSim(1)
	wcfg.WarmUp = 20 * time.Second // 100 ms of wall time at speed 200
	warming := startSim(t, wcfg)
	opts := testOptions(APIGenerate)
	c := startClient(t, specsOf([]string{ready.URLs()[0], warming.URLs()[0]}, 4), opts)
	st := c.Stats()
	if st.Servers[0].State != StateReady || st.Servers[1].State != StateDown || !strings.Contains(st.Servers[1].Reason, "starting up") {
		t.Fatalf("after Start: %+v", st.Servers)
	}
	d := driveAll(t, c, 600, nil)
	d.mustAllComplete(t)
	st = c.Stats()
	if st.Servers[1].State != StateReady || st.Servers[1].Completions == 0 {
		t.Errorf("the warmed-up server never joined: %+v", st.Servers[1])
	}
}

func TestModelsMustMatch(t *testing.T) {
	a := fastSim(1)
	a.Model = "Qwen/Qwen3-32B"
	b := fastSim(1)
	b.Model = "Qwen/Qwen3-8B"
	fa, fb := startSim(t, a), startSim(t, b)
	c := New(specsOf([]string{fa.URLs()[0], fb.URLs()[0]}, 2), testOptions(APIChat))
	defer c.Close()
	err := c.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "different models") || !strings.Contains(err.Error(), `"Qwen/Qwen3-8B" on `+fb.URLs()[0]) {
		t.Fatalf("Start: %v", err)
	}
}

func TestChatModelDefaultsToTheServers(t *testing.T) {
	cfg := fastSim(1)
	cfg.Model = "my-model"
	f := startSim(t, cfg)
	c := startClient(t, specsOf(f.URLs(), 1), testOptions(APIChat))
	if c.Settings()["model"] != "my-model" {
		t.Errorf("settings %v", c.Settings())
	}
}

func TestOneTokenProbeBeforeAdmission(t *testing.T) {
	// Server 1 answers /health but fails every generation: it must not be
	// admitted, and no record may be sent to it.
	cfg := fastSim(2)
	cfg.Faults = []sim.Fault{{Kind: sim.FaultServerError, Rate: 1, Servers: []int{1}}}
	f := startSim(t, cfg)
	c := startClient(t, specsOf(f.URLs(), 4), testOptions(APIGenerate))
	st := c.Stats()
	if st.Servers[1].State != StateDown || !strings.Contains(st.Servers[1].Reason, "1-token probe: HTTP 500") {
		t.Fatalf("server 1 after Start: %+v", st.Servers[1])
	}
	d := driveAll(t, c, 50, nil)
	d.mustAllComplete(t)
	for _, r := range d.results {
		if r.Server != f.URLs()[0] || r.Attempts != 1 {
			t.Fatalf("a record went to the failing server or was retried: %+v", r)
		}
	}
}
