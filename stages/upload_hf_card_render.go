package stages

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"sigs.k8s.io/yaml"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/stages/arrowrow"
	"github.com/pipe-dev/pipe/stages/hfhub"
)

// renderCard is the dataset card: the YAML header the Hub and datasets
// read (the keys datasets' push_to_hub writes, arrow_dataset.py
// _get_updated_dataset_card: dataset_info, configs; and the card's
// license, task_categories, size_categories and tags,
// huggingface_hub repocard_data.py DatasetCardData), then what the run
// knew of how it made the rows.
func renderCard(c *uploadHFConfig, client *hfhub.Client, m *filecommit.Manifest, dir string, card *output.Card) ([]byte, error) {
	shards := sortedShards(m)
	var features []any
	if len(shards) > 0 {
		var err error
		if features, err = parquetFeatures(filepath.Join(dir, shards[0].Name)); err != nil {
			return nil, err
		}
	}
	header := map[string]any{
		"license":         c.License,
		"task_categories": []string{"text-generation"},
		"size_categories": []string{sizeCategory(m.Rows)},
		"tags":            []string{"synthetic", "speculative-decoding", "pipe"},
		"configs": []any{map[string]any{"config_name": "default",
			"data_files": []any{map[string]any{"split": c.Split, "path": "data/" + c.Split + "-*"}}}},
		// num_bytes is the Parquet bytes: pipe does not decompress the
		// shards to measure them in memory, as datasets would.
		"dataset_info": map[string]any{"features": features,
			"splits":        []any{map[string]any{"name": c.Split, "num_bytes": m.Bytes, "num_examples": m.Rows}},
			"download_size": m.Bytes, "dataset_size": m.Bytes},
	}
	y, err := yaml.Marshal(header)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "---\n%s---\n\n# %s\n\n", y, c.Repo)
	fmt.Fprintf(&b, "%s training rows in %d Parquet shards (%s), made by [pipe](https://github.com/pipe-dev/pipe) from the pipeline %q.\n\n",
		numfmt.Count(float64(m.Rows)), len(shards), numfmt.Bytes(m.Bytes), card.Pipeline)
	fmt.Fprintf(&b, "```python\nfrom datasets import load_dataset\n\nds = load_dataset(%q, split=%q)\n```\n\n", c.Repo, c.Split)
	b.WriteString("## How it was made\n\n| | |\n| --- | --- |\n")
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, strings.ReplaceAll(v, "|", "\\|")) }
	if len(shards) > 0 {
		first := firstRow(filepath.Join(dir, shards[0].Name))
		if model := first[arrowrow.ColModel]; model != "" {
			row("model, as the servers named it", "`"+model+"`")
			row("model revision", modelRevision(model))
		}
		var sent []string
		for _, col := range []string{arrowrow.ColTemperature, arrowrow.ColTopP, arrowrow.ColTopK, arrowrow.ColMinP, arrowrow.ColMaxNewTokens, arrowrow.ColEnableThinking} {
			if v, ok := first[col]; ok {
				sent = append(sent, col+" "+v)
			}
		}
		if len(sent) > 0 {
			row("sampling sent", strings.Join(sent, ", ")+" (the first row's request; a field not listed was left to the servers)")
		}
	}
	for _, s := range card.Generation {
		row(s.Stage+"."+s.Key, "`"+s.Value+"`")
	}
	if card.Trainer != "" {
		row("trainer", card.Trainer)
	}
	row("prompts finished", fmt.Sprint(card.Finished))
	row("rows in this dataset", fmt.Sprint(m.Rows))
	var rejected int64
	var reasons []string
	for _, r := range card.Rejected {
		rejected += r.N
		reasons = append(reasons, fmt.Sprintf("%s %s %d", r.Stage, r.Reason, r.N))
	}
	if rejected > 0 {
		row("rejected", fmt.Sprintf("%d: %s", rejected, strings.Join(reasons, ", ")))
	}
	if card.Spared != "" {
		row("before generation", card.Spared)
	}
	if card.Trained > 0 {
		row("decoded tokens per trained token", fmt.Sprintf("%.2f (%d decoded, %d trained)", float64(card.Decoded)/float64(card.Trained), card.Decoded, card.Trained))
	}
	if card.Acceptance > 0 {
		row("speculative accept length", fmt.Sprintf("%.2f", card.Acceptance))
	}
	b.WriteString("\n## Reproduce or re-validate\n\n")
	b.WriteString("`pipe/pipeline.toml` is the pipeline file the run used (credentials taken out), `pipe/manifest.json` every shard's rows, bytes and SHA-256. ")
	b.WriteString("With its inputs and servers in place, `pipe run pipe/pipeline.toml` makes the run again; ")
	b.WriteString("a pipeline reading these shards with `read-completions` re-validates them without a GPU.\n")
	if card.Command != "" {
		fmt.Fprintf(&b, "\nThe run: `%s`\n", card.Command)
	}
	return []byte(b.String()), nil
}

// sizeCategory is the Hub's size_categories value for rows.
func sizeCategory(rows int64) string {
	bounds := []struct {
		below int64
		cat   string
	}{{1e3, "n<1K"}, {1e4, "1K<n<10K"}, {1e5, "10K<n<100K"}, {1e6, "100K<n<1M"}, {1e7, "1M<n<10M"}, {1e8, "10M<n<100M"}, {1e9, "100M<n<1B"}}
	for _, b := range bounds {
		if rows < b.below {
			return b.cat
		}
	}
	return "1B<n<10B"
}

// parquetFeatures is a Parquet file's schema as datasets' features in
// YAML (features.py Features._to_yaml_list): {name, dtype} for a value,
// {name, list: dtype or fields} for a list, {name, struct: fields}.
func parquetFeatures(path string) ([]any, error) {
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer pf.Close()
	schema, err := pqarrow.FromParquet(pf.MetaData().Schema, nil, pf.MetaData().KeyValueMetadata())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]any, 0, schema.NumFields())
	for _, f := range schema.Fields() {
		feat := featureOf(f.Type)
		feat["name"] = f.Name
		out = append(out, feat)
	}
	return out, nil
}

// featureOf is a feature's type part: {dtype}, {list}, {struct}.
func featureOf(t arrow.DataType) map[string]any {
	switch t := t.(type) {
	case *arrow.ListType:
		return map[string]any{"list": inner(t.Elem())}
	case *arrow.LargeListType:
		return map[string]any{"large_list": inner(t.Elem())}
	case *arrow.StructType:
		return map[string]any{"struct": fields(t)}
	}
	return map[string]any{"dtype": dtypeOf(t)}
}

// inner is a list's element: a dtype, or a struct's fields, as
// Features._to_yaml_list simplifies them.
func inner(t arrow.DataType) any {
	switch t := t.(type) {
	case *arrow.StructType:
		return fields(t)
	case *arrow.ListType, *arrow.LargeListType:
		return featureOf(t)
	}
	return dtypeOf(t)
}

func fields(t *arrow.StructType) []any {
	out := make([]any, 0, t.NumFields())
	for _, f := range t.Fields() {
		feat := featureOf(f.Type)
		feat["name"] = f.Name
		out = append(out, feat)
	}
	return out
}

// dtypeOf is datasets' dtype of an Arrow value type (features.py
// _arrow_to_datasets_dtype): its Arrow name, "string" and "bool" as
// datasets spells them.
func dtypeOf(t arrow.DataType) string {
	switch t.ID() {
	case arrow.STRING:
		return "string"
	case arrow.LARGE_STRING:
		return "large_string"
	case arrow.BOOL:
		return "bool"
	case arrow.FLOAT32:
		return "float32"
	case arrow.FLOAT64:
		return "float64"
	}
	return t.Name()
}

// firstRow is the first row's values of a Parquet file's value columns,
// by name, as text; a null value is left out (not sent: the server's
// default).
func firstRow(path string) map[string]string {
	out := map[string]string{}
	arrowrow.ReadFileRows(context.Background(), path, 1, memory.DefaultAllocator, func(b arrow.RecordBatch) error {
		if b.NumRows() == 0 {
			return errStopReading
		}
		for i, f := range b.Schema().Fields() {
			col := b.Column(i)
			if !col.IsValid(0) {
				continue
			}
			switch c := col.(type) {
			case *array.String:
				out[f.Name] = termsafe.Line(termsafe.Cut(c.Value(0), 200))
			case *array.Float64:
				out[f.Name] = strconv.FormatFloat(c.Value(0), 'g', -1, 64)
			case *array.Int32:
				out[f.Name] = strconv.Itoa(int(c.Value(0)))
			case *array.Boolean:
				out[f.Name] = strconv.FormatBool(c.Value(0))
			}
		}
		return errStopReading
	})
	return out
}

// snapshotRevision is the revision in a model path of the Hub's cache:
// .../snapshots/COMMIT/..., or a name@REVISION.
var snapshotRevision = regexp.MustCompile(`(?:/snapshots/|@)([0-9a-f]{7,40})\b`)

// modelRevision is what the model's name says of its revision.
func modelRevision(model string) string {
	if m := snapshotRevision.FindStringSubmatch(model); m != nil {
		return "`" + m[1] + "` (from the served path)"
	}
	return "not known: the servers name the model without its revision (serve a path under the Hub cache's snapshots/ to record it)"
}

// errStopReading ends a read once what was wanted is read.
var errStopReading = errors.New("read enough")
