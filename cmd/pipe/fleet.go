package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/stages"
)

// fleetCmd is pipe fleet up|down|status and its flags.
type fleetCmd struct {
	sets    setFlags
	timeout time.Duration
}

func init() {
	register(&command{
		Name:      "fleet",
		UsageLine: "pipe fleet up|down|status FILE [--set …]",
		Short:     "keep the servers a pipeline launches up between commands",
		Long: `Fleet keeps the servers of a pipeline's launch tables (generate's servers =
[{launch = "…"}]) up between commands, so that loading the model is paid
once: pipe plan then pipe run, or a run resumed after a fix, use them as
they are and leave them up at their end.

  up      launches them in a holder process of its own session (a closed
          terminal or SSH session does not end it), which supervises them
          as a run does (restarts after a crash, a hang or a fatal log
          line); returns once every server answers a generation, or names
          the ones that did not. Its log: RUN_DIR/servers/fleet.log.
  down    ends the holder and every process of every server.
  status  each server's state and starts.

The run directory is the file's [pipeline] run_dir; the servers' logs and
RUN_DIR/servers/fleet.json, which a run reads to find them, are there.`,
		New: func() runner { return &fleetCmd{} },
	})
}

func (c *fleetCmd) setFlags(fs *flag.FlagSet) {
	addSetFlag(fs, &c.sets)
	fs.DurationVar(&c.timeout, "timeout", 0, "up: how long to wait for every server to answer (default: the launch tables' ready_timeout, plus a minute)")
}

func (c *fleetCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if fs.NArg() != 2 {
		return usageErrorf("usage: pipe fleet up|down|status FILE")
	}
	what, file := fs.Arg(0), fs.Arg(1)
	plan, probs := loadPlan(file, c.sets, "")
	if plan == nil || len(probs) > 0 {
		return &exitError{code: exitUsage, err: errors.New(probs.Error())}
	}
	runDir := plan.File.RunDir
	switch what {
	case "up":
		return c.up(ctx, std, file, plan)
	case "hold":
		return c.hold(std, plan)
	case "down":
		return fleetDown(std, runDir)
	case "status":
		h := stages.ReadHeldFleet(runDir)
		if h == nil {
			fmt.Fprintf(std.Out, "no fleet is up for %s\n", pipeline.DisplayPath(runDir))
			return nil
		}
		fmt.Fprintf(std.Out, "fleet of %s: holder pid %d, up since %s\n%s", pipeline.DisplayPath(runDir), h.PID, h.Started.Local().Format(time.DateTime), h.Summary())
		return nil
	}
	return usageErrorf("pipe fleet: %q is not up, down or status", what)
}

// up starts the holder and waits for every server to answer.
func (c *fleetCmd) up(ctx context.Context, std *stdio, file string, plan *pipeline.Plan) error {
	runDir := plan.File.RunDir
	if h := stages.ReadHeldFleet(runDir); h != nil {
		fmt.Fprintf(std.Out, "a fleet is already up for %s (holder pid %d):\n%s", pipeline.DisplayPath(runDir), h.PID, h.Summary())
		return nil
	}
	limit := c.timeout
	if limit <= 0 {
		limit = stages.LaunchReadyTimeout(plan) + time.Minute
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(runDir, "servers", "fleet.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	start, _ := log.Seek(0, 2)
	args := []string{"fleet", "hold", file}
	for _, s := range c.sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(std.Err, "pipe fleet: launching the servers of %s (holder pid %d; log %s)\n", file, cmd.Process.Pid, pipeline.DisplayPath(logPath))
	shown := start
	show := func() {
		f, err := os.Open(logPath)
		if err != nil {
			return
		}
		defer f.Close()
		f.Seek(shown, 0)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fmt.Fprintf(std.Err, "  %s\n", sc.Text())
			shown += int64(len(sc.Bytes())) + 1
		}
	}
	deadline := time.Now().Add(limit)
	for {
		show()
		select {
		case err := <-exited:
			show()
			return fmt.Errorf("the fleet's holder ended (%v) before every server answered; its log: %s", err, pipeline.DisplayPath(logPath))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		h := stages.ReadHeldFleet(runDir)
		if h == nil || h.PID != cmd.Process.Pid {
			continue
		}
		ready, givenUp := h.HeldReady()
		switch {
		case ready:
			show()
			fmt.Fprintf(std.Out, "fleet up for %s (holder pid %d); pipe run %s uses it, pipe fleet down %s ends it:\n%s", pipeline.DisplayPath(runDir), h.PID, file, file, h.Summary())
			return nil
		case len(givenUp) > 0:
			show()
			return fmt.Errorf("servers given up: %s (the others stay up; pipe fleet down %s ends them):\n%s", strings.Join(givenUp, ", "), file, h.Summary())
		case time.Now().After(deadline):
			return fmt.Errorf("not every server answered within %s (they stay up; pipe fleet status %s, pipe fleet down %s):\n%s", limit, file, file, h.Summary())
		}
	}
}

// hold is the holder process: it keeps the servers up until SIGTERM.
func (c *fleetCmd) hold(std *stdio, plan *pipeline.Plan) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	signal.Ignore(syscall.SIGHUP)
	return stages.HoldFleet(ctx, plan, func(server, text string) {
		fmt.Fprintf(std.Out, "%s %s: %s\n", time.Now().Format("15:04:05"), server, text)
	})
}

// fleetDown ends the fleet held for runDir and waits for its holder.
func fleetDown(std *stdio, runDir string) error {
	h := stages.ReadHeldFleet(runDir)
	if h == nil {
		fmt.Fprintf(std.Out, "no fleet is up for %s\n", pipeline.DisplayPath(runDir))
		return nil
	}
	if err := syscall.Kill(h.PID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("ending the fleet's holder (pid %d): %w", h.PID, err)
	}
	for deadline := time.Now().Add(3 * time.Minute); stages.HolderAlive(h.PID); {
		if time.Now().After(deadline) {
			return fmt.Errorf("the fleet's holder (pid %d) has not ended after 3 minutes", h.PID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(std.Out, "fleet down for %s: %d servers ended\n", pipeline.DisplayPath(runDir), len(h.Servers))
	return nil
}
