//go:build e2e

package readers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
)

// The fixtures are written by the readers' own libraries (DuckDB's COPY TO
// and apache-arrow's tableToIPC, testdata/write_fixtures.mjs), not by pipe, so
// these tests check the helpers alone.

type fixtureRow struct {
	ID       string
	InputIDs []int32
	LossMask []uint8
	Text     *string
	N        int64
}

// nonASCII has CJK, Hangul, emoji with a skin-tone modifier (a surrogate pair
// in JavaScript), combining text and JSON/SQL metacharacters.
const nonASCII = "训练数据 日本語のテキスト 한국어 🙂👍🏽 naïve e\u0301 — \"q\" \\ 'single' \t end"

func fixtureRows() []fixtureRow {
	ids := make([]int32, 5000)
	mask := make([]uint8, 5000)
	x := uint32(2463534242)
	for i := range ids {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		ids[i] = int32(x)
		mask[i] = uint8(x >> 8)
	}
	ids[0], ids[1], ids[4999] = math.MinInt32, math.MaxInt32, 0
	mask[0], mask[1] = 0, 255
	text, empty := nonASCII, ""
	return []fixtureRow{
		{ID: "row-0", InputIDs: ids, LossMask: mask, Text: &text, N: 1<<53 + 1},
		{ID: "row-1", InputIDs: []int32{}, LossMask: []uint8{}, Text: nil, N: math.MinInt64},
		{ID: "row-2", InputIDs: []int32{151643}, LossMask: []uint8{1}, Text: &empty, N: 151643},
	}
}

var fixtures struct {
	once           sync.Once
	dir            string
	parquet, arrow string
	err            error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtures.dir != "" {
		os.RemoveAll(fixtures.dir)
	}
	os.Exit(code)
}

// writeFixtures writes fixtureRows as fixture.parquet and fixture.arrow in a
// temporary directory, once for all the tests.
func writeFixtures(t *testing.T) (parquet, arrow string) {
	t.Helper()
	scripts, installed := Dirs(t)
	fixtures.once.Do(func() {
		fixtures.dir, fixtures.err = os.MkdirTemp("", "readers-fixtures-")
		if fixtures.err == nil {
			fixtures.parquet, fixtures.arrow, fixtures.err = runWriteFixtures(scripts, installed, fixtures.dir)
		}
	})
	if fixtures.err != nil {
		t.Fatal(fixtures.err)
	}
	return fixtures.parquet, fixtures.arrow
}

func runWriteFixtures(scripts, installed, dir string) (parquet, arrow string, err error) {
	var rows []map[string]any
	for _, r := range fixtureRows() {
		mask := make([]int, len(r.LossMask)) // not []uint8, which JSON writes as base64
		for i, v := range r.LossMask {
			mask[i] = int(v)
		}
		rows = append(rows, map[string]any{"id": r.ID, "input_ids": r.InputIDs, "loss_mask": mask, "text": r.Text, "n": strconv.FormatInt(r.N, 10)})
	}
	spec, err := json.Marshal(map[string]any{"rows": rows})
	if err != nil {
		return "", "", err
	}
	specPath := filepath.Join(dir, "rows.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		return "", "", err
	}
	parquet, arrow = filepath.Join(dir, "fixture.parquet"), filepath.Join(dir, "fixture.arrow")
	cmd := exec.Command("node", filepath.Join(scripts, "testdata", "write_fixtures.mjs"), specPath, parquet, arrow)
	cmd.Env = append(os.Environ(), "PIPE_READERS_DIR="+installed)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("write_fixtures.mjs: %v\n%s", err, out)
	}
	return parquet, arrow, nil
}

// checkRows checks that rows are exactly fixtureRows, in order.
func checkRows(t *testing.T, rows []map[string]any) {
	t.Helper()
	want := fixtureRows()
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		if len(r) != 5 {
			t.Errorf("row %d has columns %v, want id, input_ids, loss_mask, text, n", i, keys(r))
		}
		if got := String(t, r["id"]); got != w.ID {
			t.Errorf("row %d id = %q, want %q", i, got, w.ID)
		}
		ids := Int64s(t, r["input_ids"])
		wantIDs := make([]int64, len(w.InputIDs))
		for j, v := range w.InputIDs {
			wantIDs[j] = int64(v)
		}
		if !reflect.DeepEqual(ids, wantIDs) {
			t.Errorf("row %d input_ids: %d values, want %d; first difference %s", i, len(ids), len(wantIDs), firstDiff(ids, wantIDs))
		}
		mask := Int64s(t, r["loss_mask"])
		wantMask := make([]int64, len(w.LossMask))
		for j, v := range w.LossMask {
			wantMask[j] = int64(v)
		}
		if !reflect.DeepEqual(mask, wantMask) {
			t.Errorf("row %d loss_mask: %d values, want %d; first difference %s", i, len(mask), len(wantMask), firstDiff(mask, wantMask))
		}
		if w.Text == nil {
			if r["text"] != nil {
				t.Errorf("row %d text = %#v, want null", i, r["text"])
			}
		} else if got := String(t, r["text"]); got != *w.Text {
			t.Errorf("row %d text = %q, want %q", i, got, *w.Text)
		}
		if got := Int64(t, r["n"]); got != w.N {
			t.Errorf("row %d n = %d, want %d", i, got, w.N)
		}
		// Exact JSON forms: numbers within ±2^53 are json.Number, beyond it
		// decimal strings.
		if _, ok := r["n"].(json.Number); ok != (w.N >= -(1<<53) && w.N <= 1<<53) {
			t.Errorf("row %d n is %T (%v)", i, r["n"], r["n"])
		}
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func firstDiff(got, want []int64) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			b, _ := json.Marshal(map[string]any{"index": i, "got": got[i], "want": want[i]})
			return string(b)
		}
	}
	return "none (lengths differ)"
}

func TestParquet(t *testing.T) {
	t.Parallel()
	parquet, _ := writeFixtures(t)
	_, rows := Parquet(t, parquet)
	checkRows(t, rows)
}

func TestArrowIPC(t *testing.T) {
	t.Parallel()
	_, arrow := writeFixtures(t)
	b, err := os.ReadFile(arrow)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("ARROW1")) || !bytes.HasSuffix(b, []byte("ARROW1")) {
		t.Fatal("the fixture is not an Arrow IPC file")
	}
	_, rows := ArrowIPC(t, arrow)
	checkRows(t, rows)
}

func TestSchemaReportsListTypes(t *testing.T) {
	t.Parallel()
	parquet, arrow := writeFixtures(t)
	pq, _ := Parquet(t, parquet)
	want := []Field{{"id", "VARCHAR"}, {"input_ids", "INTEGER[]"}, {"loss_mask", "UTINYINT[]"}, {"text", "VARCHAR"}, {"n", "BIGINT"}}
	if !reflect.DeepEqual(pq, want) {
		t.Errorf("Parquet schema = %v, want %v", pq, want)
	}
	ar, _ := ArrowIPC(t, arrow)
	want = []Field{{"id", "Utf8"}, {"input_ids", "List<Int32>"}, {"loss_mask", "List<Uint8>"}, {"text", "Utf8"}, {"n", "Int64"}}
	if !reflect.DeepEqual(ar, want) {
		t.Errorf("Arrow IPC schema = %v, want %v", ar, want)
	}
}

// A directory of shards reads as their rows in name order.
func TestParquetDirectory(t *testing.T) {
	t.Parallel()
	parquet, _ := writeFixtures(t)
	b, err := os.ReadFile(parquet)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"part-00001.parquet", "part-00000.parquet"} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var n int
	ParquetEach(t, dir, func(row map[string]any) {
		want := fixtureRows()[n%3].ID
		if got := String(t, row["id"]); got != want {
			t.Errorf("row %d id = %q, want %q", n, got, want)
		}
		n++
	})
	if n != 6 {
		t.Errorf("%d rows from two shards of 3, want 6", n)
	}
}

// Without the packages the helpers skip with the setup hint (outside CI).
func TestMissingReadersSkip(t *testing.T) {
	t.Setenv("PIPE_CI", "")
	t.Setenv("PIPE_READERS_DIR", t.TempDir())
	var skipped bool
	t.Run("parquet", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Parquet(t, "nothing.parquet")
	})
	if !skipped {
		t.Error("Parquet without the readers installed did not skip")
	}
}
