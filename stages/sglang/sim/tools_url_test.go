package sim

import (
	"strings"
	"testing"
)

// tool_calls= and tool_call_parser= in a sim URL: 0 means no calls (the
// config's own 0 is the default share, 0.5), a share outside 0..1 or an
// unknown parser is an error, and the fault bad-tool-call parses.
func TestToolURLOptions(t *testing.T) {
	for in, want := range map[string]float64{"sim:1": DefaultToolCalls, "sim:1?tool_calls=0": 0, "sim:1?tool_calls=0.25": 0.25, "sim:1?tool_calls=1": 1} {
		n, q, _, err := ParseURL(in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		cfg, _ := ConfigFromQuery(n, q, nil)
		if got := cfg.toolCallShare(); got != want {
			t.Errorf("%s: share %g, want %g", in, got, want)
		}
	}
	n, q, _, err := ParseURL("sim:1?tool_call_parser=qwen25&faults=bad-tool-call:0.5")
	cfg, _ := ConfigFromQuery(n, q, nil)
	if err != nil || cfg.ToolCallParser != "qwen25" || len(cfg.Faults) != 1 || cfg.Faults[0].Kind != FaultBadToolCall {
		t.Errorf("config %+v, %v", cfg, err)
	}
	for in, want := range map[string]string{
		"sim:1?tool_calls=2":            "sim option tool_calls",
		"sim:1?tool_calls=-0.5":         "sim option tool_calls",
		"sim:1?tool_call_parser=hermes": "sim option tool_call_parser",
	} {
		if _, _, _, err := ParseURL(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// pyDumps writes JSON as Python's json.dumps does, keys in their order.
func TestPyDumps(t *testing.T) {
	for in, want := range map[string]string{
		`{"b":1,"a":[true,null,"x\"y\u00e9\n"],"c":{}}`: `{"b": 1, "a": [true, null, "x\"yé\n"], "c": {}}`,
		`[]`:   `[]`,
		`"s"`:  `"s"`,
		`{"a"`: ``,
	} {
		if got := pyDumps([]byte(in)); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
