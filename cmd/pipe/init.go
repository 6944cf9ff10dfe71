package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/stages"
)

// initFlags are pipe init's flags: the names users of one-off generation
// scripts know.
type initFlags struct {
	out             string
	prompts         string
	servers         string
	ports           string
	host            string
	outputDir       string
	maxOutputTokens int
	// maxLength, method and chatTemplate are [trainer]'s.
	maxLength    int
	method       string
	chatTemplate string
	concurrency  string // "auto" or N
	modelDir     string
	s3           string
	// from is revalidate's run directory.
	from     string
	template string
	// moreServers are server URLs typed after --servers's value, space-
	// separated as one-off scripts take them (argparse's nargs="+").
	moreServers []string
}

// takeArgs reads the arguments that are not flags: the template, and
// server URLs following --servers; any other is named.
func (f *initFlags) takeArgs(args []string) error {
	var template string
	for _, a := range args {
		switch {
		case template == "" && !looksLikeServer(a):
			template = a
		case looksLikeServer(a) && f.servers != "":
			f.moreServers = append(f.moreServers, a)
		case looksLikeServer(a):
			return usageErrorf("stray argument %q: server URLs follow --servers (--servers http://a:30000 http://b:30000, or comma-separated)", a)
		case strings.Contains(a, ":") && !strings.Contains(a, "/"):
			return usageErrorf("stray argument %q: a server? --servers takes http://HOST:PORT URLs, space- or comma-separated", a)
		default:
			return usageErrorf("stray argument %q: pipe init takes one template (regenerate) and flags; did a flag lose its value, or a value its flag?", a)
		}
	}
	if template == "" {
		return usageErrorf("usage: %s", commands["init"].UsageLine)
	}
	if template != "regenerate" && template != "revalidate" {
		return usageErrorf("unknown template %q (the templates: regenerate, revalidate)%s", template, suggest.DidYouMean(template, []string{"regenerate", "revalidate"}))
	}
	f.template = template
	return nil
}

func looksLikeServer(a string) bool {
	return strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://") || strings.HasPrefix(a, "sim:")
}

// initCmd is pipe init and its flags.
type initCmd struct {
	f initFlags
}

func init() {
	register(&command{
		Name:      "init",
		UsageLine: "pipe init regenerate --prompts FILE (--servers URL... | --ports FROM-TO) [--model-dir DIR] [flags] | pipe init revalidate --from RUN_DIR",
		Short:     "write a commented starter pipeline file from the flags of a one-off script",
		Long: `Init writes a pipeline file to start from, with a comment on every stage and
setting, from the flags a one-off generation script takes. The file passes
pipe check as written; edit it from there. It never overwrites a file.

Templates:
  regenerate   prompts → skip finished → generate on SGLang servers →
               validate thinking → tokenize with the model's chat template →
               Parquet shards (training rows and every completion), rejects
               as JSONL, optionally uploaded to S3
  revalidate   --from RUN_DIR: the run's recorded pipeline with its
               generation stage and upstream replaced by a reader of what
               it produced (as pipe run --from does), every key written
               out; -o defaults to revalidate.toml

Paths given on the command line are relative to the current directory; the
file refers to them relative to itself.`,
		New: func() runner { return &initCmd{} },
	})
}

func (c *initCmd) setFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.f.out, "o", "regenerate.toml", "the pipeline `FILE` to write (never overwritten)")
	fs.StringVar(&c.f.prompts, "prompts", "", "the prompts, a JSONL `FILE` (messages, conversations or prompt per line); required")
	// Repeated, --servers adds to the list: a user who types it once per
	// server means all of them.
	fs.Func("servers", "SGLang server `URLs`, comma- or space-separated, or --servers once per server (--servers http://a:30000 http://b:30000; or sim:N for simulated ones)", func(v string) error {
		if c.f.servers != "" {
			v = c.f.servers + "," + v
		}
		c.f.servers = v
		return nil
	})
	fs.StringVar(&c.f.ports, "ports", "", "instead of --servers: local server ports, `FROM-TO` or comma-separated (e.g. 30000-30006)")
	fs.StringVar(&c.f.host, "host", "localhost", "the host of the --ports servers")
	fs.StringVar(&c.f.outputDir, "output-dir", "runs/regenerate", "`DIR` for the run's state and its outputs")
	fs.IntVar(&c.f.maxOutputTokens, "max-output-tokens", 16384, "at most `N` tokens generated per prompt, thinking and answer together")
	fs.IntVar(&c.f.maxLength, "max-length", 4096, "the trainer's `N` tokens per row ([trainer] max_length, SpecForge's data.max_length): no request decodes past it")
	fs.StringVar(&c.f.method, "method", "dflash", "the trainer's `METHOD`: dflash or eagle3 ([trainer] method)")
	fs.StringVar(&c.f.chatTemplate, "chat-template", "", "SpecForge's `NAME` for the model's chat template, e.g. qwen3.5 ([trainer] chat_template; default: not written, fill it in)")
	// "auto" measured at >= 95% of the best fixed setting on pipe
	// sim servers of capacity 128 and 32 (bench/adaptive.sh).
	fs.StringVar(&c.f.concurrency, "concurrency", "auto", "`N` requests in flight per server, or auto: each server's adapts to what it runs at once")
	fs.StringVar(&c.f.modelDir, "model-dir", "", "the model `DIR` with tokenizer.json and the chat template (default: the tokenizer_path the servers report, if it is on this machine)")
	fs.StringVar(&c.f.from, "from", "", "revalidate: the `RUN_DIR` whose completions to re-validate")
	fs.StringVar(&c.f.s3, "s3", "", "upload the training shards to `s3://BUCKET/PREFIX` as they are committed")
}

func (c *initCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if err := c.f.takeArgs(fs.Args()); err != nil {
		return err
	}
	if c.f.template == "revalidate" {
		return initRevalidate(std, c.f)
	}
	return initRegenerate(ctx, std, c.f)
}

func initRegenerate(ctx context.Context, std *stdio, f initFlags) error {
	servers, err := f.serverList()
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if f.modelDir == "" && f.prompts != "" {
		if f.modelDir, err = modelDirFromServers(ctx, std, servers); err != nil {
			return err
		}
	}
	if err := f.check(); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	fileDir, err := filepath.Abs(filepath.Dir(f.out))
	if err != nil {
		return err
	}
	if st, err := os.Stat(fileDir); err != nil || !st.IsDir() {
		return usageErrorf("-o %s: no directory %s to write it in", f.out, filepath.Dir(f.out))
	}
	rel := func(p string) string { // as the file must say it: relative to itself
		if filepath.IsAbs(p) {
			return p
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		if r, err := filepath.Rel(fileDir, abs); err == nil {
			return filepath.ToSlash(r)
		}
		return abs
	}
	outDir := rel(f.outputDir)
	templateGuessed := false
	if f.chatTemplate == "" {
		// SpecForge's name for the model's template, found as pipe check
		// holds [trainer] chat_template to it.
		f.chatTemplate = stages.TrainerTemplateFor(f.modelDir)
		templateGuessed = f.chatTemplate != ""
	}
	var buf bytes.Buffer
	err = regenerateTemplate.Execute(&buf, map[string]any{
		"Command":   cmdline.Join(cmdline.Redacted(append([]string{"pipe"}, std.Args...))),
		"File":      cmdline.Join([]string{f.out}),
		"OutDirArg": cmdline.Join([]string{f.outputDir}),
		"Prompts":   rel(f.prompts),
		"ModelDir":  rel(f.modelDir),
		"Servers":   servers,
		"Fleet":     describeFleet(servers),
		"Conc":      concurrencyValue(f.concurrency),
		"MaxOut":    f.maxOutputTokens,
		"MaxLength": f.maxLength,
		"Method":    f.method,
		"Template":  f.chatTemplate,
		"Guessed":   templateGuessed,
		"OutDir":    outDir,
		"S3":        f.s3,
	})
	if err != nil {
		return err
	}
	if err := writeNewFile(f.out, buf.Bytes()); err != nil {
		return err
	}
	if _, probs := loadPlan(f.out, nil, ""); len(probs) > 0 {
		os.Remove(f.out) // so that the same command can be tried again
		return &exitError{code: exitUsage, err: fmt.Errorf("%s failed pipe check, so it was not kept (please report this):\n%v", f.out, probs)}
	}
	fmt.Fprintf(std.Out, "wrote %s (it passes pipe check). Next:\n  pipe run --dry-run %s   # probes the servers\n  pipe run --detach %s    # runs in the background; pipe status / pipe stop / pipe report %s\n",
		f.out, cmdline.Join([]string{f.out}), cmdline.Join([]string{f.out}), cmdline.Join([]string{f.outputDir}))
	return nil
}

// modelDirFromServers is the model directory the servers report, for a
// missing --model-dir, if it has tokenizer.json here.
func modelDirFromServers(ctx context.Context, std *stdio, servers []string) (string, error) {
	dir, from, err := serversTokenizer(ctx, servers)
	if err != nil {
		return "", &exitError{code: exitUsage, err: fmt.Errorf("--model-dir is required: the model directory with tokenizer.json (its chat template makes the training rows); %v", err)}
	}
	fmt.Fprintf(std.Err, "pipe init: no --model-dir: using %s, the tokenizer path %s reports (it has tokenizer.json here)\n", dir, from)
	return dir, nil
}

// writeNewFile writes data to path, which must not exist: O_EXCL, so a
// file that is there, even one created a moment ago, stays.
func writeNewFile(path string, data []byte) error {
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s already exists; not overwriting it (give another file with -o, or remove it)", path)}
	}
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// serverList is --servers or --ports as server URLs.
func (f initFlags) serverList() ([]string, error) {
	switch {
	case f.servers != "" && f.ports != "":
		return nil, errors.New("give --servers or --ports, not both")
	case f.servers == "" && f.ports == "":
		return nil, errors.New("no servers: give --servers http://host:30000,http://host:30001 or --ports 30000-30006 (or --servers sim:2 to rehearse)")
	case f.servers != "":
		return f.serverURLs()
	}
	ports, err := parsePorts(f.ports)
	if err != nil {
		return nil, fmt.Errorf("--ports %q: %v", f.ports, err)
	}
	if f.host == "" || strings.ContainsAny(f.host, "/:@ ") {
		return nil, fmt.Errorf("--host %q: want a host name or address, no scheme or port", f.host)
	}
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = fmt.Sprintf("http://%s:%d", f.host, p)
	}
	return out, nil
}

// serverURLs is --servers (and the servers after it) as server URLs: each
// http(s)://HOST:PORT, without credentials, or sim:N.
func (f initFlags) serverURLs() ([]string, error) {
	var out []string
	all := strings.Join(append([]string{f.servers}, f.moreServers...), ",")
	for _, s := range strings.FieldsFunc(all, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, "sim:") {
			out = append(out, s)
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--servers %q: want http://HOST:PORT or https://HOST:PORT (or sim:N), comma-separated", s)
		}
		if u.User != nil {
			return nil, fmt.Errorf("--servers %q: no credentials in the file; servers that want a key get it from the environment (api_key_env, see docs/fleet.md)", u.Redacted())
		}
		out = append(out, strings.TrimRight(s, "/"))
	}
	return out, nil
}

// describeFleet says what the servers are: "7 SGLang servers".
func describeFleet(servers []string) string {
	n, sim := 0, false
	for _, s := range servers {
		if k, ok := strings.CutPrefix(s, "sim:"); ok {
			c, _ := strconv.Atoi(strings.SplitN(k, "?", 2)[0])
			n, sim = n+max(c, 1), true
			continue
		}
		n++
	}
	what := "SGLang server"
	if sim {
		what = "simulated SGLang server"
	}
	if n != 1 {
		what += "s"
	}
	return fmt.Sprintf("%d %s", n, what)
}

// parsePorts reads "30000-30006" or "30000,30002".
func parsePorts(s string) ([]int, error) {
	const want = "want FROM-TO or comma-separated ports, e.g. 30000-30006"
	var out []int
	for _, part := range strings.Split(s, ",") {
		from, to, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err1 := strconv.Atoi(from)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(to)
		}
		if err1 != nil || err2 != nil || a < 1 || b > 65535 || b < a {
			return nil, errors.New(want)
		}
		if b-a >= 1024 {
			return nil, fmt.Errorf("%d ports: %s", b-a+1, want)
		}
		for p := a; p <= b; p++ {
			out = append(out, p)
		}
	}
	return out, nil
}

// check refuses flags the file could not use, naming the flag.
func (f initFlags) check() error {
	switch {
	case f.prompts == "":
		return errors.New("--prompts is required: the prompts file (JSONL)")
	case f.modelDir == "":
		return errors.New("--model-dir is required: the model directory with tokenizer.json (its chat template makes the training rows)")
	case f.maxOutputTokens < 1:
		return fmt.Errorf("--max-output-tokens must be at least 1, got %d", f.maxOutputTokens)
	case f.maxLength < 16:
		return fmt.Errorf("--max-length must be the trainer's tokens per row, at least 16, got %d", f.maxLength)
	case f.method != "dflash" && f.method != "eagle3":
		return fmt.Errorf("--method must be dflash or eagle3, got %q", f.method)
	case !validConcurrency(f.concurrency):
		return fmt.Errorf("--concurrency must be auto or 1..4096 (requests in flight per server), got %s", f.concurrency)
	case f.outputDir == "":
		return errors.New("--output-dir must not be empty")
	}
	if st, err := os.Stat(f.prompts); err != nil || st.IsDir() {
		return fmt.Errorf("--prompts %s: no such file", f.prompts)
	}
	if _, err := os.Stat(filepath.Join(f.modelDir, "tokenizer.json")); err != nil {
		return fmt.Errorf("--model-dir %s: no tokenizer.json in it (give the model's directory)", f.modelDir)
	}
	if f.s3 != "" {
		u, err := url.Parse(f.s3)
		if err != nil || u.Scheme != "s3" || u.Host == "" {
			return fmt.Errorf("--s3 %q: want s3://BUCKET/PREFIX", f.s3)
		}
	}
	return nil
}

// tomlString quotes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var regenerateTemplate = template.Must(template.New("regenerate").Funcs(template.FuncMap{
	"q": tomlString,
	// pad lines a value up with the comments after it.
	"pad": func(s string, n int) string { return s + strings.Repeat(" ", max(1, n-len(s))) },
	"servers": func(s []string) string {
		q := make([]string, len(s))
		for i, x := range s {
			q[i] = tomlString(x)
		}
		if len(s) <= 2 {
			return "[" + strings.Join(q, ", ") + "]"
		}
		var b strings.Builder
		b.WriteString("[\n")
		for i := 0; i < len(q); i += 3 {
			b.WriteString("  " + strings.Join(q[i:min(i+3, len(q))], ", ") + ",\n")
		}
		b.WriteString("]")
		return b.String()
	},
}).Parse(`# Regenerate the prompts of {{.Prompts}} with the model on {{.Fleet}},
# keep the good completions and turn them into training rows.
# Written by: {{.Command}}
#
#   {{pad (print "pipe check " .File) 36}}# checks everything without running, in milliseconds
#   {{pad (print "pipe run --dry-run " .File) 36}}# also probes the servers: model, context length, state
#   {{pad (print "pipe run --detach " .File) 36}}# runs in the background; survives closing the SSH session
#   {{pad (print "pipe status " .OutDirArg) 36}}# how it goes ("pipe stop" commits and stops it)
#   {{pad (print "pipe report " .OutDirArg) 36}}# counts, throughput, rejects, tokens per row (report.html)
#
# Every completion is fsynced to the run directory's journal within a second
# of arriving; outputs commit every minute, at once on Ctrl-C or pipe stop,
# and at the end. Running the same command again continues the run: finished
# prompts are skipped and generated completions are never generated again.

[pipeline]
name    = "regenerate"
{{pad (print "run_dir = " (q .OutDir)) 38}}# state: journal, done.ids, run.log, status.json, report.html

# The trainer that reads the output, declared once: generate asks each
# request for no more than its row can train (max_length minus the prompt),
# validate-thinking keeps completions cut where their row is full, and the
# rows are cut and judged by its rules.
[trainer]
name          = "specforge"
{{pad (print "method        = " (q .Method)) 38}}# dflash or eagle3
{{pad (print "max_length    = " .MaxLength) 38}}# tokens per row: SpecForge's data.max_length
{{if .Template}}chat_template = {{q .Template}}{{if .Guessed}}   # SpecForge's name for the model's template (pipe check holds it to it){{end}}{{else}}# chat_template = "qwen3.5"            # SpecForge's data.chat_template for this model{{end}}

[vars]
{{pad (print "model_dir = " (q .ModelDir)) 38}}# tokenizer.json and the chat template

[[stage]]
id   = "prompts"
kind = "read-prompts"                 # JSONL: messages, conversations or prompt; ids given or hashed
path = {{q .Prompts}}

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"     # skips what this run directory already finished
input = "prompts"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "todo"
servers           = {{servers .Servers}}
{{if eq .Conc "\"auto\""}}concurrency       = "auto"            # per server: adapts to what each runs at once (max_concurrency = 256 bounds it)
{{- else}}{{pad (print "concurrency       = " .Conc) 38}}# requests in flight per server{{end}}
api               = "generate"        # native /generate with our own input_ids: exact training tokens
tokenizer         = "${model_dir}"
{{pad (print "max_output_tokens = " .MaxOut) 38}}# thinking + answer; the server's default (128) truncates
enable_thinking   = true
request_timeout   = "60m"             # a long answer at a loaded server's pace
max_attempts      = 5                 # per prompt, with backoff; then it is kept in failed/
# Sampling: the server's defaults unless set. Qwen3's advice for thinking mode:
# temperature = 0.6
# top_p       = 0.95
# top_k       = 20

[[stage]]
id        = "check"
kind      = "validate-thinking"       # rejects empty, truncated or malformed completions, with a reason
input     = "gen"
tokenizer = "${model_dir}"

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"       # input_ids + loss_mask, with the model's own chat template
input     = "check.accepted"
tokenizer = "${model_dir}"

[[stage]]
id    = "completions"
kind  = "write-arrow"                 # every completion as Parquet, to re-validate later
input = "gen"
path  = {{q (print .OutDir "/completions")}}

[[stage]]
id    = "train"
kind  = "write-arrow"                 # the training rows: Parquet shards + .pipe/manifest.json
input = "tok"
path  = {{q (print .OutDir "/train")}}

# The file SpecForge trains on as it is: data.train_data_path, one
# {"id", "conversations"} line per row, rows its trainer would drop
# rejected here with a reason ([trainer] decides). A finished run writes
# the data: block that loads it beside it ({{print .OutDir "/specforge.specforge.yaml"}}).
[[stage]]
id     = "specforge"
kind   = "write-jsonl"
input  = "tok"
path   = {{q (print .OutDir "/specforge.jsonl")}}
layout = "conversations"              # trainer and max_length: from [trainer]
{{if .S3}}
# Uploads each training shard as it is committed (.pipe/manifest.json last).
# Credentials come only from the AWS chain (AWS_ACCESS_KEY_ID and
# AWS_SECRET_ACCESS_KEY, ~/.aws, AWS_PROFILE), never from this file.
[[stage]]
id    = "upload"
kind  = "upload-s3"
input = "train.shards"
uri   = {{q .S3}}
{{else}}
# To upload the training shards to S3 as they are committed:
# [[stage]]
# id    = "upload"
# kind  = "upload-s3"
# input = "train.shards"
# uri   = "s3://my-bucket/regenerate"
{{end}}
[[stage]]
id    = "rejects"
kind  = "write-jsonl"                 # rejected records with their reason, to read by eye
input = ["gen.rejected", "check.rejected", "tok.rejected"]
path  = {{q (print .OutDir "/rejected.jsonl")}}
`))

// validConcurrency reports whether --concurrency is "auto" or 1..4096.
func validConcurrency(v string) bool {
	if v == "auto" {
		return true
	}
	n, err := strconv.Atoi(v)
	return err == nil && n >= 1 && n <= 4096
}

// concurrencyValue is --concurrency as a TOML value.
func concurrencyValue(v string) string {
	if v == "auto" {
		return `"auto"`
	}
	return v
}
