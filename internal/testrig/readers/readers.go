// Package readers reads Parquet and Arrow IPC files back in tests with
// readers that are not ours: DuckDB (npm @duckdb/node-api) for Parquet and
// npm apache-arrow for Arrow IPC files, run by node on the scripts beside this
// file (duckdb_rows.mjs, arrow_rows.mjs). scripts/setup-readers.sh installs
// the exact versions of scripts/readers/package-lock.json into .cache/readers;
// without them (or without node) a test skips, or fails under PIPE_CI=1.
//
// A row is a map from column name to value as decoded from JSON with
// UseNumber: integers and floats are json.Number (an integer beyond ±2^53 is
// its decimal string instead, as JavaScript numbers cannot hold it), strings
// are string, lists are []any, structs are map[string]any, binary values are
// base64 strings, and NULL is nil. Int64, Int64s and String convert them.
package readers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// SetupHint is the script that installs the readers.
const SetupHint = "scripts/setup-readers.sh"

// Field is one column of the schema a reader reports: its name and the
// reader's name for its type — DuckDB's (INTEGER[], UTINYINT[], VARCHAR,
// BIGINT, ...) for Parquet, apache-arrow's (List<Int32>, List<Uint8>, Utf8,
// Int64, ...) for Arrow IPC.
type Field struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Parquet reads every row of the Parquet file at path with DuckDB's
// read_parquet. path may also be a glob or a directory (its *.parquet files,
// in name order, rows concatenated).
func Parquet(t testing.TB, path string) (schema []Field, rows []map[string]any) {
	t.Helper()
	schema = ParquetEach(t, path, func(row map[string]any) { rows = append(rows, row) })
	return schema, rows
}

// ArrowIPC reads every row of the Arrow IPC file (not stream) at path with
// apache-arrow's tableFromIPC.
func ArrowIPC(t testing.TB, path string) (schema []Field, rows []map[string]any) {
	t.Helper()
	schema = ArrowIPCEach(t, path, func(row map[string]any) { rows = append(rows, row) })
	return schema, rows
}

// ParquetEach is Parquet calling fn on each row in order instead of keeping
// them all, for files too large to hold decoded.
func ParquetEach(t testing.TB, path string, fn func(row map[string]any)) []Field {
	t.Helper()
	return run(t, "duckdb_rows.mjs", "@duckdb/node-api", path, fn)
}

// ArrowIPCEach is ArrowIPC calling fn on each row in order.
func ArrowIPCEach(t testing.TB, path string, fn func(row map[string]any)) []Field {
	t.Helper()
	return run(t, "arrow_rows.mjs", "apache-arrow", path, fn)
}

// Dirs returns the directory of the node scripts (internal/testrig/readers) and the
// one the packages are installed in (.cache/readers, or $PIPE_READERS_DIR),
// after checking that node is on PATH and that the packages installed there
// are those of scripts/readers/package-lock.json; if not, the test skips (or
// fails under PIPE_CI=1) with the setup hint.
func Dirs(t testing.TB) (scripts, installed string) {
	t.Helper()
	root := testenv.RepoRoot(t)
	scripts = filepath.Join(root, "internal", "testrig", "readers")
	installed = os.Getenv("PIPE_READERS_DIR")
	if installed == "" {
		installed = filepath.Join(root, ".cache", "readers")
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, "node is not on PATH", SetupHint)
	}
	lock, err := os.ReadFile(filepath.Join(root, "scripts", "readers", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	stamp, _ := os.ReadFile(filepath.Join(installed, ".lock-sha256"))
	if strings.TrimSpace(string(stamp)) != hex.EncodeToString(sum[:]) {
		testenv.Missing(t, "the shard readers (@duckdb/node-api, apache-arrow) of scripts/readers/package-lock.json are not installed in "+installed, SetupHint)
	}
	return scripts, installed
}

// run runs node on script with path and decodes its output: a schema line,
// then one JSON object per row.
func run(t testing.TB, script, pkg, path string, fn func(map[string]any)) []Field {
	t.Helper()
	scripts, installed := Dirs(t)
	if _, err := os.Stat(filepath.Join(installed, "node_modules", pkg, "package.json")); err != nil {
		testenv.Missing(t, "npm "+pkg+" is not in "+installed, SetupHint)
	}
	cmd := exec.CommandContext(t.Context(), "node", filepath.Join(scripts, script), path)
	cmd.Env = append(os.Environ(), "PIPE_READERS_DIR="+installed)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	schema, decodeErr := decode(stdout, fn)
	if decodeErr != nil {
		io.Copy(io.Discard, stdout)
	}
	waitErr := cmd.Wait()
	if waitErr != nil {
		var exit *exec.ExitError
		if errors.As(waitErr, &exit) && exit.ExitCode() == 3 {
			testenv.Missing(t, strings.TrimSpace(stderr.String()), SetupHint)
		}
		t.Fatalf("%s %s: %v: %s", script, path, waitErr, strings.TrimSpace(stderr.String()))
	}
	if decodeErr != nil {
		t.Fatalf("%s %s: output: %v", script, path, decodeErr)
	}
	return schema
}

func decode(r io.Reader, fn func(map[string]any)) ([]Field, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var head struct {
		Schema *[]Field `json:"schema"`
	}
	if err := dec.Decode(&head); err != nil {
		return nil, fmt.Errorf("schema line: %w", err)
	}
	if head.Schema == nil {
		return nil, errors.New("first line has no schema")
	}
	for {
		var row map[string]any
		if err := dec.Decode(&row); err == io.EOF {
			return *head.Schema, nil
		} else if err != nil {
			return nil, err
		}
		fn(row)
	}
}

// Int64 is the integer v, a value read by Parquet or ArrowIPC: a json.Number,
// or the decimal string of an integer beyond ±2^53.
func Int64(t testing.TB, v any) int64 {
	t.Helper()
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
	default:
		t.Fatalf("not an integer: %#v", v)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("not an int64: %#v", v)
	}
	return n
}

// Int64s is the list of integers v (a []any of what Int64 takes).
func Int64s(t testing.TB, v any) []int64 {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("not a list: %#v", v)
	}
	out := make([]int64, len(list))
	for i, x := range list {
		out[i] = Int64(t, x)
	}
	return out
}

// String is the string v.
func String(t testing.TB, v any) string {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("not a string: %#v", v)
	}
	return s
}
