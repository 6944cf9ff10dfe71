package stages

import (
	"context"
	"errors"
	"fmt"
	"github.com/pipe-dev/pipe/pipeline"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/stages/fleet"
)

// launchEntry is a servers table with launch = "COMMAND": servers pipe
// starts, watches and ends (stages/fleet) instead of a URL.
type launchEntry struct {
	Command       string
	Count         int
	GPUs          []string
	GPUsPerServer int
	Host          string
	Port          int
	Env           map[string]string
	Dir           string
	ReadyTimeout  time.Duration
	Restarts      int
	// Visible: gpus = "visible", the GPUs pipe's environment is given
	// (CUDA_VISIBLE_DEVICES; under Slurm SLURM_STEP_GPUS or
	// SLURM_JOB_GPUS), handed out when the servers start.
	Visible bool
	// ProbeEvery, ProbeTimeout: the one-token generations that tell a
	// hang (3 unanswered in a row); StopGrace: SIGTERM to SIGKILL.
	ProbeEvery, ProbeTimeout, StopGrace time.Duration
	// Backoff is the first wait before a restart.
	Backoff time.Duration
}

// launchKeys are a launch table's keys besides concurrency and api_key_env.
var launchKeys = []string{"launch", "count", "gpus", "gpus_per_server", "host", "port", "env", "dir", "ready_timeout", "restarts", "probe_every", "probe_timeout", "stop_grace", "backoff"}

// fromLaunchTable reads a servers table that launches servers.
func (e *serverEntry) fromLaunchTable(x map[string]any) error {
	l := &launchEntry{Count: 1, Host: "127.0.0.1", Port: 30000, GPUsPerServer: 1, Restarts: 10, ReadyTimeout: 30 * time.Minute}
	cmd, ok := x["launch"].(string)
	if !ok || strings.TrimSpace(cmd) == "" {
		return fmt.Errorf("launch must be the command that starts one server, with {port} where its port goes (e.g. \"python -m sglang.launch_server --model-path /models/m --port {port}\")")
	}
	if !strings.Contains(cmd, "{port}") {
		return fmt.Errorf("launch: the command has no {port}: each server is told its port there (they count up from port = %d)", l.Port)
	}
	l.Command = cmd
	for _, read := range []func(map[string]any) error{l.readInts, l.readStrings, l.readDurations, l.readEnv, l.readGPUs} {
		if err := read(x); err != nil {
			return err
		}
	}
	e.Launch = l
	e.URL = fmt.Sprintf("launch:%s:%d", l.Host, l.Port)
	return nil
}

// readInts reads count, port, gpus_per_server and restarts.
func (l *launchEntry) readInts(x map[string]any) error {
	for _, k := range []struct {
		key    string
		lo, hi int64
		dst    *int
	}{{"count", 1, 1024, &l.Count}, {"port", 1, 65535, &l.Port}, {"gpus_per_server", 1, 64, &l.GPUsPerServer}, {"restarts", 0, 10000, &l.Restarts}} {
		v, set := x[k.key]
		if !set {
			continue
		}
		n, ok := v.(int64)
		if !ok || n < k.lo || n > k.hi {
			return fmt.Errorf("%s must be %d..%d, got %v", k.key, k.lo, k.hi, v)
		}
		*k.dst = int(n)
	}
	if l.Port+l.Count-1 > 65535 {
		return fmt.Errorf("port %d + count %d runs past 65535", l.Port, l.Count)
	}
	return nil
}

// readStrings reads host and dir.
func (l *launchEntry) readStrings(x map[string]any) error {
	for _, k := range []struct {
		key, what string
		dst       *string
	}{{"host", "the address the servers listen on (default 127.0.0.1)", &l.Host}, {"dir", "the servers' working directory", &l.Dir}} {
		v, set := x[k.key]
		if !set {
			continue
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return fmt.Errorf("%s must be %s", k.key, k.what)
		}
		*k.dst = s
	}
	return nil
}

// readDurations reads ready_timeout, probe_every, probe_timeout,
// stop_grace and backoff.
func (l *launchEntry) readDurations(x map[string]any) error {
	for _, k := range []struct {
		key, what string
		dst       *time.Duration
	}{
		{"ready_timeout", "how long a start may take to answer a generation", &l.ReadyTimeout},
		{"probe_every", "how often a ready server is asked for one token", &l.ProbeEvery},
		{"probe_timeout", "how long a probe waits; 3 unanswered in a row are a hang", &l.ProbeTimeout},
		{"stop_grace", "how long a server has between SIGTERM and SIGKILL", &l.StopGrace},
		{"backoff", "the first wait before a restart, doubled each time up to 5m", &l.Backoff},
	} {
		v, set := x[k.key]
		if !set {
			continue
		}
		s, _ := v.(string)
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s must be a duration such as \"30s\" (%s), got %v", k.key, k.what, v)
		}
		*k.dst = d
	}
	return nil
}

// readEnv reads env, a table of variables.
func (l *launchEntry) readEnv(x map[string]any) error {
	v, set := x["env"]
	if !set {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("env must be a table of variables, e.g. env = { SGLANG_ENABLE_JIT_DEEPGEMM = \"0\" }")
	}
	l.Env = map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[k].(string)
		if !ok || !envNameRe.MatchString(k) {
			return fmt.Errorf("env.%s must be a variable name with a string value", k)
		}
		l.Env[k] = s
	}
	return nil
}

// readGPUs reads gpus: ids, or "visible".
func (l *launchEntry) readGPUs(x map[string]any) error {
	v, set := x["gpus"]
	switch {
	case !set:
		return nil
	case v == "visible":
		l.Visible = true
		return nil
	}
	gpus, err := parseGPUs(v)
	if err != nil {
		return fmt.Errorf("gpus: %v", err)
	}
	if need := l.Count * l.GPUsPerServer; len(gpus) < need {
		return fmt.Errorf("gpus: %d servers × %d GPUs need %d, %d given", l.Count, l.GPUsPerServer, need, len(gpus))
	}
	l.GPUs = gpus
	return nil
}

// parseGPUs reads "0-6", "0,2,4", or a list of ids.
func parseGPUs(v any) ([]string, error) {
	var parts []string
	switch x := v.(type) {
	case string:
		parts = strings.Split(x, ",")
	case []any:
		for _, it := range x {
			switch n := it.(type) {
			case int64:
				parts = append(parts, strconv.FormatInt(n, 10))
			case string:
				parts = append(parts, n)
			default:
				return nil, fmt.Errorf("want GPU ids, got %v", it)
			}
		}
	default:
		return nil, fmt.Errorf(`want "0-6", "0,2,4", a list of ids, or "visible" (the GPUs pipe is given: CUDA_VISIBLE_DEVICES, Slurm's allocation), got %v`, v)
	}
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if a, b, ok := strings.Cut(p, "-"); ok {
			lo, err1 := strconv.Atoi(a)
			hi, err2 := strconv.Atoi(b)
			if err1 != nil || err2 != nil || lo > hi {
				return nil, fmt.Errorf("%q is not a range of GPU ids", p)
			}
			for i := lo; i <= hi; i++ {
				out = append(out, strconv.Itoa(i))
			}
			continue
		}
		if _, err := strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("%q is not a GPU id", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// launchURLs are the servers a launch table starts, in order.
func (l *launchEntry) urls() []string {
	var out []string
	for i := range l.Count {
		out = append(out, fmt.Sprintf("http://%s:%d", hostForURL(l.Host), l.Port+i))
	}
	return out
}

func hostForURL(h string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}

// launchFleets starts the stage's launched servers (once per run: the
// run's resources end them at its end), before the client waits for one
// to be ready.
func (g *generate) launchFleets(ctx context.Context) error {
	client := g.client
	for i, s := range g.cfg.Servers.Items {
		l := s.Launch
		if l == nil {
			continue
		}
		if t, held := ReadHeldFleet(g.env.RunDir).table(g.id, i); held {
			if t.Command != l.Command || t.Count != l.Count || t.Port != l.Port || t.Host != l.Host {
				return fmt.Errorf("servers item %d: the fleet kept up for %s (pipe fleet up) runs another launch table (%d × %q from port %d): pipe fleet down, then up again with this file", i+1, g.env.RunDir, t.Count, t.Command, t.Port)
			}
			g.logf("servers item %d: the %d servers kept up by pipe fleet up (%s) are used as they are, and stay up at the end", i+1, l.Count, filepath.Join(g.env.RunDir, "servers", HeldFleetFile))
			g.noticef("using the %d servers kept up by pipe fleet up (pipe fleet down %s ends them)", l.Count, g.env.RunDir)
			continue
		}
		if err := l.resolveGPUs(i); err != nil {
			return err
		}
		key := fmt.Sprintf("fleet:%s:%d", g.id, i)
		v, err := g.env.Resources.Get(key, func() (any, func() error, error) {
			header, err := g.serverHeader(s)
			if err != nil {
				return nil, nil, err
			}
			cfg := fleetConfig(g.id, i, l, g.env.RunDir, header, g.fleetEvent)
			// A start that answered its launcher's generation is probed by
			// the client at once, not at its next tick (up to
			// probe_interval of a ready GPU left idle).
			cfg.Ready = client.ProbeNow
			f, err := fleet.Start(ctx, cfg)
			if err != nil {
				return nil, nil, err
			}
			return f, f.Close, nil
		})
		if err != nil {
			return fmt.Errorf("launching servers (servers item %d): %w", i+1, err)
		}
		g.fleets = append(g.fleets, v.(*fleet.Fleet))
	}
	return nil
}

// fleetEvent tells of a launched server's start and readiness on the
// terminal and in the log, and of its crashes, hangs and restarts as
// warnings too (status.json, notifications, the report).
func (g *generate) fleetEvent(kind, server, text string) {
	if kind == fleet.EventStarted || kind == fleet.EventReady || kind == fleet.EventRestarting {
		g.noticef("server %s: %s", server, text)
		return
	}
	g.warnf("server_restarted", fmt.Sprintf("server %s: %s", server, text))
}

// fleetFigures are the launched servers' events, summed and per server.
func (g *generate) fleetFigures(out []figure.Figure) []figure.Figure {
	var total fleet.Stats
	var each []fleet.Stats
	for _, f := range g.fleets {
		for _, s := range f.Stats() {
			total.Starts += s.Starts
			total.Crashes += s.Crashes
			total.Hangs += s.Hangs
			total.Fatal += s.Fatal
			total.NeverReady += s.NeverReady
			total.Breaker += s.Breaker
			each = append(each, s)
		}
	}
	if len(each) == 0 {
		return out
	}
	out = append(out,
		figure.NewCounter("launched_starts", int64(total.Starts)),
		figure.NewCounter("launched_crashes", int64(total.Crashes)),
		figure.NewCounter("launched_hangs", int64(total.Hangs)),
		figure.NewCounter("launched_fatal_lines", int64(total.Fatal)),
		figure.NewCounter("launched_never_ready", int64(total.NeverReady)),
		figure.NewCounter("launched_breaker_trips", int64(total.Breaker)))
	for _, s := range each {
		out = append(out, figure.NewState("launched_state", s.State, fmt.Sprintf("%d starts", s.Starts), "server", s.Name))
	}
	return out
}

// count is how many servers the item stands for.
func (e serverEntry) count() int {
	switch {
	case e.Launch != nil:
		return e.Launch.Count
	case e.Sim > 0:
		return e.Sim
	}
	return 1
}

// readyTimeout is how long the client waits for a first ready server:
// the stage's, or a launch table's when longer (a model takes minutes to
// load).
func (g *generate) readyTimeout() time.Duration {
	d := g.cfg.ReadyTimeout.Duration
	for _, s := range g.cfg.Servers.Items {
		if s.Launch != nil {
			d = max(d, s.Launch.ReadyTimeout)
		}
	}
	return d
}

// gpuNote is ", GPUs 0-6 (1 each)" for a launch table with GPUs.
func gpuNote(l *launchEntry) string {
	if len(l.GPUs) == 0 {
		return ""
	}
	return fmt.Sprintf(", GPUs %s, %d each", strings.Join(l.GPUs, ","), l.GPUsPerServer)
}

// fleetConfig is the fleet of the launch table l, item i of stage's
// servers.
func fleetConfig(stage string, i int, l *launchEntry, runDir string, header http.Header, event func(kind, server, text string)) fleet.Config {
	return fleet.Config{
		Name: fmt.Sprintf("%s-%d", stage, i), Command: l.Command, Count: l.Count,
		GPUs: l.GPUs, GPUsPerServer: l.GPUsPerServer, Host: l.Host, Port: l.Port,
		Env: l.Env, Dir: l.Dir, LogDir: filepath.Join(runDir, "servers"),
		ReadyTimeout: l.ReadyTimeout, Restarts: l.Restarts, Header: header,
		ProbeEvery: l.ProbeEvery, ProbeTimeout: l.ProbeTimeout, StopGrace: l.StopGrace,
		Backoff: l.Backoff, Event: event,
	}
}

// visibleGPUs are the GPUs pipe's environment is given: CUDA_VISIBLE_DEVICES,
// else Slurm's SLURM_STEP_GPUS or SLURM_JOB_GPUS (a node's allocation),
// else as many as Kubernetes' NVIDIA_VISIBLE_DEVICES names.
func visibleGPUs(lookup func(string) (string, bool)) ([]string, error) {
	for _, name := range []string{"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"} {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			gpus, err := parseGPUs(v)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: %v", name, v, err)
			}
			return gpus, nil
		}
	}
	// Kubernetes' NVIDIA device plugin names the pod's GPUs by UUID in
	// NVIDIA_VISIBLE_DEVICES; inside the container they are 0..N-1.
	if v, ok := lookup("NVIDIA_VISIBLE_DEVICES"); ok && v != "" && v != "all" && v != "none" && v != "void" {
		n := len(strings.Split(v, ","))
		gpus := make([]string, n)
		for i := range gpus {
			gpus[i] = strconv.Itoa(i)
		}
		return gpus, nil
	}
	return nil, fmt.Errorf("no GPUs visible: none of CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS, SLURM_JOB_GPUS, NVIDIA_VISIBLE_DEVICES is set (on Slurm, ask for them: #SBATCH --gres=gpu:N, which pipe deploy slurm writes; on Kubernetes, resources.limits nvidia.com/gpu: N)")
}

// LaunchedGPUs is how many GPUs the plan's launch tables take at once
// (count × gpus_per_server, summed), for a scheduler's request; 0 when
// they name none.
func LaunchedGPUs(plan *pipeline.Plan) int {
	n := 0
	for _, st := range plan.Stages {
		if c, ok := st.Config.(*generateConfig); ok {
			for _, s := range c.Servers.Items {
				if l := s.Launch; l != nil && (l.Visible || len(l.GPUs) > 0) {
					n += l.Count * l.GPUsPerServer
				}
			}
		}
	}
	return n
}

// resolveGPUs hands out the visible GPUs of a gpus = "visible" table, item
// i of its stage's servers.
func (l *launchEntry) resolveGPUs(i int) error {
	if !l.Visible {
		return nil
	}
	gpus, err := visibleGPUs(os.LookupEnv)
	if err == nil && len(gpus) < l.Count*l.GPUsPerServer {
		err = fmt.Errorf("%d servers × %d GPUs need %d, %d visible (%s)", l.Count, l.GPUsPerServer, l.Count*l.GPUsPerServer, len(gpus), strings.Join(gpus, ","))
	}
	if err != nil {
		return fmt.Errorf("servers item %d: gpus = \"visible\": %w", i+1, err)
	}
	l.GPUs = gpus
	return nil
}

// errAllGivenUp marks the start's failure when every server is a
// launched one and each was given up.
var errAllGivenUp = errors.New("every launched server was given up")

// watchGivenUp is ctx, cancelled with errAllGivenUp (and each server's
// last end) once every server of the stage is launched and given up: the
// client's wait for a ready server would otherwise last ready_timeout.
func (g *generate) watchGivenUp(ctx context.Context) (context.Context, func()) {
	launched := 0
	for _, s := range g.cfg.Servers.Items {
		if s.Launch == nil {
			return ctx, func() {}
		}
		launched += s.Launch.Count
	}
	if len(g.fleets) == 0 {
		return ctx, func() {} // kept up by pipe fleet up: its holder's to judge
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var ends []string
			for _, f := range g.fleets {
				last := map[string]string{}
				for _, e := range f.Events() {
					if e.Kind != fleet.EventStarted && e.Kind != fleet.EventRestarting && e.Kind != fleet.EventGivenUp {
						last[e.Server] = e.Text
						if len(e.Tail) > 0 {
							last[e.Server] += "; its last line: " + e.Tail[len(e.Tail)-1]
						}
					}
				}
				for _, st := range f.Stats() {
					if st.State == fleet.StateGivenUp {
						ends = append(ends, fmt.Sprintf("%s: %s", st.Name, last[st.Name]))
					}
				}
			}
			if len(ends) == launched {
				cancel(fmt.Errorf("%w (their logs are in %s): %s", errAllGivenUp, filepath.Join(g.env.RunDir, "servers"), strings.Join(ends, "; ")))
				return
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}
