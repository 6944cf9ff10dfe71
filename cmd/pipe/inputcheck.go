package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
)

// checkInputs judges the input of every stage that can (pipeline.InputChecker)
// and prints what it found; it returns one line for each input with a
// problem that would stop the run.
func checkInputs(ctx context.Context, w io.Writer, plan *pipeline.Plan) (fatal []string, err error) {
	for _, ps := range plan.Stages {
		st, err := ps.Spec.New.Stage(ps.Config)
		if err != nil {
			return nil, &engine.StageError{Stage: ps.ID(), Kind: ps.Spec.Kind, Err: err}
		}
		ic, ok := st.(pipeline.InputChecker)
		if !ok {
			continue
		}
		who := fmt.Sprintf("stage %s (%s)", ps.ID(), ps.Spec.Kind)
		rep, err := ic.CheckInput(ctx, &pipeline.Env{StageID: ps.ID(), DuplicatesHandled: pipeline.DuplicatesHandled(ps)})
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n", who, err)
			fatal = append(fatal, fmt.Sprintf("stage %q (%s): %v", ps.ID(), ps.Spec.Kind, err))
			continue
		}
		if rep == nil {
			continue
		}
		writeInputReport(w, who, rep)
		if p := rep.Fatal(); p != nil {
			fatal = append(fatal, fmt.Sprintf("stage %q (%s): %s on %s would stop the run; the first: %s", ps.ID(), ps.Spec.Kind, p.Reason, numfmt.Plural(int(p.Count), "line"), shortPaths(p.Examples[0], rep.Path)))
		}
	}
	return fatal, nil
}

// writeInputReport prints one input's problems with their first examples:
//
//	stage prompts (read-prompts): in.jsonl: 6 lines, 2 records go on
//	  bad_line      1  stops the run
//	    in.jsonl:4: invalid UTF-8 at byte 24 of the line
func writeInputReport(w io.Writer, who string, rep *pipeline.InputReport) {
	path := pipeline.DisplayPath(rep.Path)
	if len(rep.Problems) == 0 {
		fmt.Fprintf(w, "%s: %s: %d lines, all good\n", who, path, rep.Lines)
		return
	}
	fmt.Fprintf(w, "%s: %s: %d lines, %d records go on\n", who, path, rep.Lines, rep.Records)
	width := 0
	for _, p := range rep.Problems {
		width = max(width, len(p.Reason))
	}
	for _, p := range rep.Problems {
		what := "set aside (rejected)"
		if p.Fatal {
			what = "stops the run"
			switch p.Reason {
			case "bad_line":
				what += ` (on_bad_line = "fail")`
			case "empty_input":
				what += " (allow_empty = false)"
			}
		}
		fmt.Fprintf(w, "  %-*s  %d  %s\n", width, p.Reason, p.Count, what)
		for _, ex := range p.Examples {
			fmt.Fprintf(w, "    %s\n", shortPaths(ex, rep.Path))
		}
	}
}

// shortPaths shows the input's path in s as the user would type it.
func shortPaths(s, path string) string {
	return strings.ReplaceAll(s, path, pipeline.DisplayPath(path))
}
