package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/stages/fleet"
)

// A fleet kept up between commands (pipe fleet up): loading a 27B model
// takes minutes, and pipe plan then pipe run, or a run resumed after a
// fix, must not load it twice. A holder process launches the launch
// tables' servers as a run would, supervises them, and describes them in
// RUN_DIR/servers/fleet.json; a generate stage whose launch table the
// holder runs uses those servers and leaves them up at its end.

// HeldFleetFile is the holder's description, in RUN_DIR/servers.
const HeldFleetFile = "fleet.json"

// HeldFleet is fleet.json.
type HeldFleet struct {
	PID      int           `json:"pid"`
	Pipeline string        `json:"pipeline"`
	Started  time.Time     `json:"started"`
	Tables   []HeldTable   `json:"tables"`
	Servers  []fleet.Stats `json:"servers"`
}

// HeldTable is one launch table the holder runs.
type HeldTable struct {
	Stage   string `json:"stage"`
	Item    int    `json:"item"` // index in the stage's servers list
	Command string `json:"command"`
	Count   int    `json:"count"`
	Port    int    `json:"port"`
	Host    string `json:"host"`
}

func heldPath(runDir string) string { return filepath.Join(runDir, "servers", HeldFleetFile) }

// ReadHeldFleet is the fleet held for runDir, nil when none is (no file,
// or its holder is gone).
func ReadHeldFleet(runDir string) *HeldFleet {
	b, err := os.ReadFile(heldPath(runDir))
	if err != nil {
		return nil
	}
	var h HeldFleet
	if json.Unmarshal(b, &h) != nil || h.PID <= 0 {
		return nil
	}
	if !holderAlive(h.PID) {
		return nil
	}
	return &h
}

// holderAlive says whether pid is a live process (not a zombie no one
// has reaped: a holder killed after its parent ended) running pipe fleet.
func holderAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: the signal's answer is all there is
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z") {
		return false
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Contains(string(cmdline), "fleet\x00hold")
}

// HolderAlive is holderAlive for pipe fleet down's wait.
func HolderAlive(pid int) bool { return holderAlive(pid) }

// table is the held table of stage's servers item, if the holder runs it.
func (h *HeldFleet) table(stage string, item int) (HeldTable, bool) {
	if h == nil {
		return HeldTable{}, false
	}
	for _, t := range h.Tables {
		if t.Stage == stage && t.Item == item {
			return t, true
		}
	}
	return HeldTable{}, false
}

// launchTables are the plan's launch tables.
func launchTables(plan *pipeline.Plan) []HeldTable {
	var out []HeldTable
	for _, st := range plan.Stages {
		c, ok := st.Config.(*generateConfig)
		if !ok {
			continue
		}
		for i, s := range c.Servers.Items {
			if l := s.Launch; l != nil {
				out = append(out, HeldTable{Stage: st.ID(), Item: i, Command: l.Command, Count: l.Count, Port: l.Port, Host: l.Host})
			}
		}
	}
	return out
}

// HoldFleet launches every launch table of plan's generate stages, keeps
// them up until ctx ends, and keeps fleet.json current; event tells of
// each server's events. It returns once the servers are ended.
func HoldFleet(ctx context.Context, plan *pipeline.Plan, event func(server, text string)) error {
	runDir := plan.File.RunDir
	tables := launchTables(plan)
	if len(tables) == 0 {
		return errors.New("the pipeline launches no servers: fleet up holds the servers of generate's launch tables (servers = [{launch = \"…\"}])")
	}
	if h := ReadHeldFleet(runDir); h != nil {
		return fmt.Errorf("a fleet is already up for %s (pid %d): pipe fleet down first", runDir, h.PID)
	}
	if err := os.MkdirAll(filepath.Join(runDir, "servers"), 0o755); err != nil {
		return err
	}
	h := &HeldFleet{PID: os.Getpid(), Pipeline: plan.File.Path, Started: time.Now().UTC(), Tables: tables}
	var (
		mu     sync.Mutex
		fleets []*fleet.Fleet
	)
	write := func() {
		mu.Lock()
		defer mu.Unlock()
		h.Servers = nil
		for _, f := range fleets {
			h.Servers = append(h.Servers, f.Stats()...)
		}
		b, _ := json.MarshalIndent(h, "", "  ")
		tmp := heldPath(runDir) + ".tmp"
		if os.WriteFile(tmp, b, 0o644) == nil {
			os.Rename(tmp, heldPath(runDir))
		}
	}
	for _, t := range tables {
		st := plan.Lookup(t.Stage)
		c := st.Config.(*generateConfig)
		l := c.Servers.Items[t.Item].Launch
		g := &generate{cfg: *c, id: t.Stage}
		header, err := g.serverHeader(c.Servers.Items[t.Item])
		if err != nil {
			return err
		}
		if err := l.resolveGPUs(t.Item); err != nil {
			return err
		}
		f, err := fleet.Start(ctx, fleetConfig(t.Stage, t.Item, l, runDir, header, func(_, server, text string) {
			event(server, text)
			go write()
		}))
		if err != nil {
			for _, f := range fleets {
				f.Close()
			}
			return err
		}
		mu.Lock()
		fleets = append(fleets, f)
		mu.Unlock()
	}
	write()
	<-ctx.Done()
	for _, f := range fleets {
		f.Close()
	}
	os.Remove(heldPath(runDir))
	return nil
}

// HeldReady says whether every server of the held fleet answers, and the
// ones given up.
func (h *HeldFleet) HeldReady() (ready bool, givenUp []string) {
	ready = len(h.Servers) > 0
	for _, s := range h.Servers {
		if s.State == fleet.StateGivenUp {
			givenUp = append(givenUp, s.Name)
		}
		if s.State != fleet.StateReady {
			ready = false
		}
	}
	return ready, givenUp
}

// Summary lines of the held fleet, one per server.
func (h *HeldFleet) Summary() string {
	var b strings.Builder
	for _, s := range h.Servers {
		fmt.Fprintf(&b, "  %s  %s  %s, %d starts", s.Name, s.URL, s.State, s.Starts)
		if n := s.Crashes + s.Hangs + s.Fatal + s.NeverReady + s.Breaker; n > 0 {
			fmt.Fprintf(&b, ", %d ended unasked", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// LaunchReadyTimeout is the longest ready_timeout of the plan's launch
// tables.
func LaunchReadyTimeout(plan *pipeline.Plan) time.Duration {
	var d time.Duration
	for _, st := range plan.Stages {
		if c, ok := st.Config.(*generateConfig); ok {
			for _, s := range c.Servers.Items {
				if s.Launch != nil {
					d = max(d, s.Launch.ReadyTimeout)
				}
			}
		}
	}
	return d
}
