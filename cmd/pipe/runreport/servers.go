package runreport

import (
	"fmt"
	"github.com/pipe-dev/pipe/internal/numfmt"
	"io"
	"slices"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// LaunchedServer is one launched server's life over every start of the
// run: how often it was started, and how often it ended unasked.
type LaunchedServer struct {
	Server     string `json:"server"`
	Starts     int    `json:"starts"`
	Crashes    int    `json:"crashes"`
	Hangs      int    `json:"hangs"`
	FatalLines int    `json:"fatal_lines"`
	NeverReady int    `json:"never_ready"`
	Breaker    int    `json:"breaker"`
	GivenUp    bool   `json:"given_up,omitempty"`
}

// serverEvents are the timeline's launched-server events worth reading
// (not starts, readiness and restarts: those are counted) and each
// server's counts.
func serverEvents(pts []Point) ([]rundir.ServerEvent, []LaunchedServer) {
	var evs []rundir.ServerEvent
	by := map[string]*LaunchedServer{}
	for _, p := range pts {
		for _, st := range p.Stages {
			for _, e := range st.ServerEvents {
				ls := by[e.Server]
				if ls == nil {
					ls = &LaunchedServer{Server: e.Server}
					by[e.Server] = ls
				}
				switch e.Kind {
				case "started":
					ls.Starts++
					continue
				case "ready", "restarting":
					continue
				case "crash":
					ls.Crashes++
				case "hang":
					ls.Hangs++
				case "fatal_line":
					ls.FatalLines++
				case "never_ready":
					ls.NeverReady++
				case "breaker":
					ls.Breaker++
				case "given_up":
					ls.GivenUp = true
				}
				evs = append(evs, e)
			}
		}
	}
	var out []LaunchedServer
	for _, ls := range by {
		out = append(out, *ls)
	}
	slices.SortFunc(out, func(a, b LaunchedServer) int { return strings.Compare(a.Server, b.Server) })
	return evs, out
}

// Summary is one line of a launched server's life.
func (l LaunchedServer) Summary() string {
	s := fmt.Sprintf("%s: %s", l.Server, numfmt.Plural(int64(l.Starts), "start"))
	for _, c := range []struct {
		n    int
		what string
	}{{l.Crashes, "crash"}, {l.Hangs, "hang"}, {l.FatalLines, "fatal log line"}, {l.NeverReady, "start never ready"}, {l.Breaker, "breaker trip"}} {
		if c.n > 0 {
			s += ", " + numfmt.Plural(int64(c.n), c.what)
		}
	}
	if l.GivenUp {
		s += ", given up"
	}
	return s
}

// writeServers prints the launched servers' lives and events.
func (r *Report) writeServers(w io.Writer) {
	if len(r.Launched) == 0 {
		return
	}
	fmt.Fprintf(w, "  launched servers:\n")
	for _, l := range r.Launched {
		fmt.Fprintf(w, "    %s\n", l.Summary())
	}
	for _, e := range r.ServerEvents {
		fmt.Fprintf(w, "    %s %s (start %d): %s\n", e.T.Local().Format("2006-01-02 15:04:05"), e.Server, e.Start, e.Text)
		for _, line := range e.Tail {
			fmt.Fprintf(w, "        | %s\n", line)
		}
	}
}
