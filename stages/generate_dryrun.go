package stages

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/stages/sglang"
)

var _ pipeline.DryRunner = (*generate)(nil)

// ConfigTypeName names the servers key's shape in `pipe stages generate`.
func (*serverList) ConfigTypeName() string {
	return `array of URLs, {url, concurrency, api_key_env} tables or "sim:N"`
}

// dryRunProbeTimeout bounds each server's probe in a dry run: a dry run
// answers in seconds, it does not wait for servers to warm up.
const dryRunProbeTimeout = 5 * time.Second

// DryRun probes the configured servers (health and info, no generation) and
// returns them as a table: what `pipe run --dry-run` shows. Simulated servers
// start only at run time and are listed as such. Servers get their
// credentials (api_key_env, headers_env, URL user:password) as in a run, and
// are shown without user:password. It fails when an API key or header
// variable is unset, when a server refuses the credentials, or when no real
// server is ready, since the run would then fail.
func (g *generate) DryRun(ctx context.Context, _ *pipeline.Env) (string, error) {
	var specs []sglang.ServerSpec
	var b strings.Builder
	sims := 0
	var launched []string
	for _, s := range g.cfg.Servers.Items {
		header, err := g.serverHeader(s)
		if err != nil {
			return "", err
		}
		if s.Sim > 0 {
			sims += s.Sim
			continue
		}
		if l := s.Launch; l != nil {
			launched = append(launched, fmt.Sprintf("%d launched by the run (ports %d-%d%s): %s", l.Count, l.Port, l.Port+l.Count-1, gpuNote(l), l.Command))
			continue
		}
		specs = append(specs, sglang.ServerSpec{URL: s.dial, Header: header})
	}
	fmt.Fprintf(&b, "api %s, %s per server, max_output_tokens %d\n", g.cfg.API, g.cfg.Concurrency, g.cfg.MaxOutputTokens)
	for _, l := range launched {
		fmt.Fprintf(&b, "%s\n", l)
	}
	if sims > 0 {
		fmt.Fprintf(&b, "%d simulated server(s), started in-process when the run starts\n", sims)
	}
	if len(specs) == 0 {
		return b.String(), nil
	}
	infos := sglang.Probe(ctx, specs, dryRunProbeTimeout)
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSTATE\tMODEL\tVERSION\tCONTEXT\tREASON")
	ready, refused := 0, 0
	models := map[string]bool{}
	for _, in := range infos {
		if in.AuthFailed {
			refused++
		}
		ctxLen := "-"
		if in.ContextLength > 0 {
			ctxLen = fmt.Sprint(in.ContextLength)
		}
		if in.State == sglang.StateReady {
			ready++
			if in.Model != "" {
				models[in.Model] = true
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.URL, in.State, dash(in.Model), dash(in.Version), ctxLen, in.Reason)
	}
	tw.Flush()
	fmt.Fprintf(&b, "%d of %d server(s) ready\n", ready, len(specs))
	if refused > 0 {
		return b.String(), fmt.Errorf("%d server(s) refused the credentials; the run would fail at start", refused)
	}
	if len(models) > 1 {
		return b.String(), fmt.Errorf("servers serve different models (%d); the run would refuse to start", len(models))
	}
	if ready == 0 && sims == 0 {
		return b.String(), fmt.Errorf("no server is ready; the run would wait ready_timeout (%s) and fail", g.cfg.ReadyTimeout.Duration)
	}
	return b.String(), nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
