package sim

import (
	"strings"
	"testing"
	"time"
)

// The "sim:N?…" grammar of a pipeline file's servers.
func TestParseURL(t *testing.T) {
	n, q, ok, err := ParseURL("sim:3?speed=60&max_running=128&faults=503:0.1,die@1h+5m#0,1")
	if !ok || err != nil || n != 3 {
		t.Fatalf("ParseURL: %d %v %v", n, ok, err)
	}
	cfg, err := ConfigFromQuery(n, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Count != 3 || cfg.Speed != 60 || cfg.MaxRunning != 128 || len(cfg.Faults) != 2 ||
		cfg.Faults[1].Kind != FaultDie || cfg.Faults[1].At != time.Hour || cfg.Faults[1].For != 5*time.Minute || len(cfg.Faults[1].Servers) != 2 {
		t.Errorf("config %+v", cfg)
	}
	if _, _, ok, _ := ParseURL("http://a:1"); ok {
		t.Error("an http URL read as sim")
	}
	for in, want := range map[string]string{
		"sim:0":                       `want "sim:N" with N in 1..64`,
		"sim:2?speed=fast":            `sim option speed="fast"`,
		"sim:2?colour=red":            `unknown sim option "colour"`,
		"sim:2?api_key_env=sk-secret": `"sim:2": sim option api_key_env: not an environment variable name`,
	} {
		_, _, ok, err := ParseURL(in)
		if !ok || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "sk-secret") {
			t.Errorf("%s: the error repeats the value: %v", in, err)
		}
	}
	q2 := map[string][]string{"api_key_env": {"KEY_VAR"}}
	cfg, err = ConfigFromQuery(1, q2, func(name string) (string, error) { return "k-" + name, nil })
	if err != nil || cfg.APIKey != "k-KEY_VAR" {
		t.Errorf("api_key_env: %q, %v", cfg.APIKey, err)
	}
}
