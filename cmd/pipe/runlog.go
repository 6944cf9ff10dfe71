package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// runLogFile is the run log's name inside the run directory.
const runLogFile = layout.RunLog

// runLog is RUN_DIR/run.log: one log/slog record a line, as text
// (key=value) or JSON (--log-format json), appended across the run
// directory's starts.
type runLog struct {
	f *os.File
	*slog.Logger
}

func openRunLog(path, format string) (*runLog, error) {
	// 0600: log lines can quote what servers and S3 answered.
	f, err := commitlog.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run log: %w", err)
	}
	// One lock for every writer of the file, so records never interleave.
	w := &lockedWriter{w: f}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, nil)
	default:
		h = slog.NewTextHandler(w, nil)
	}
	return &runLog{f: f, Logger: slog.New(h)}, nil
}

func (l *runLog) Close() error { return l.f.Close() }

// Writer is the log as an io.Writer for the stages (Env.Log) and the
// summary: each line written becomes one record at level, with attrs.
func (l *runLog) Writer(level slog.Level, attrs ...any) io.Writer {
	lg := l.Logger.With(attrs...)
	return writerFunc(func(p []byte) (int, error) {
		for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			if strings.TrimSpace(line) != "" {
				lg.Log(context.Background(), level, line)
			}
		}
		return len(p), nil
	})
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
