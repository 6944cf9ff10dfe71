package runreport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"github.com/pipe-dev/pipe/stages/arrowrow"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// Sample rows, to look at as curator's and distilabel's viewers show them:
// a few accepted rows of each output, and a few rejected rows of each
// reject reason, with the prompt, the thinking, the answer and (for a
// training row, with a tokenizer) the text it is trained on marked.

// Samples of each kind kept.
const (
	samplesAccepted  = 3
	samplesPerReason = 2
	// sampleScanBytes bounds what is read of one file for samples: a
	// reason rarer than that reads as having none (a two-day run's rejects
	// file can be GBs; the report must stay quick).
	sampleScanBytes = 64 << 20
	// sampleBatchRows is the rows read from a shard at a time.
	sampleBatchRows = 32
	// sampleTextRunes bounds each text shown.
	sampleTextRunes = 1500
)

// Sample is one row shown in the report.
type Sample struct {
	ID     string `json:"id"`
	Output string `json:"output"` // the stage that wrote it, or the dead-letter file
	// Stage and Reason are the rejection's; empty for an accepted row.
	Stage    string `json:"stage,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Prompt   string `json:"prompt"`
	Thinking string `json:"thinking"`
	Answer   string `json:"answer"`
	// Tools are the names of the conversation's declared tools;
	// ToolSteps the calls and results after the last user message and
	// the completion's own calls.
	Tools     []string          `json:"tools,omitempty"`
	ToolSteps []record.ToolStep `json:"tool_steps,omitempty"`
	// Trained is the training row's text in order, split where the loss
	// mask changes: the parts with Loss set are what the model is trained
	// on. Empty without tokens or a tokenizer.
	Trained []Span `json:"trained,omitempty"`
}

// Span is a piece of a training row's text, in or out of the loss.
type Span struct {
	Text string `json:"text"`
	Loss bool   `json:"loss"`
}

// sampler collects samples until it has enough of each kind.
type sampler struct {
	ctx     context.Context
	tok     func() *tokenize.Tokenizer
	want    map[[2]string]int    // reject (stage, reason) → samples still wanted
	needle  map[[2]string][]byte // the reason as a JSON string
	wantAll int
	r       *Report
}

// addSamples reads samples from the run's outputs (ws) and dead letters:
// accepted rows from each output, rejected rows for each reason Build
// counted. tok gives the tokenizer that decodes training rows (nil: none).
func (r *Report) addSamples(ctx context.Context, ws []writer, tok func() *tokenize.Tokenizer) {
	s := &sampler{ctx: ctx, tok: tok, want: map[[2]string]int{}, needle: map[[2]string][]byte{}, r: r}
	for _, x := range r.Rejected {
		k := [2]string{x.Stage, x.Reason}
		s.want[k] = samplesPerReason
		s.needle[k] = []byte(`"` + x.Reason + `"`)
		s.wantAll += samplesPerReason
	}
	for _, w := range ws {
		s.fromOutput(w)
	}
	s.fromDeadLetters()
}

// fromOutput reads samples from the output of w: its first accepted rows,
// and the rejected ones still wanted when it takes rejects.
func (s *sampler) fromOutput(w writer) {
	accepted := samplesAccepted
	if w.rejectsOnly {
		accepted = 0
	}
	// An output of training rows alone is read for its accepted
	// samples only: its first rows.
	forRejects := w.takesRejects
	take := func(rec *record.Record) bool {
		switch {
		case rec.Reject != nil:
			s.rejected(w.id, rec)
		case rec.Failure == nil && accepted > 0:
			accepted--
			s.r.Samples = append(s.r.Samples, s.sample(w.id, rec))
		}
		return accepted == 0 && (s.wantAll == 0 || !forRejects)
	}
	err := s.read(w, func(line []byte) bool { return accepted > 0 || (forRejects && s.wanted(line)) }, take)
	if err != nil && !errors.Is(err, errEnough) {
		s.r.note("samples of %s: %v", w.id, err)
	}
}

// read reads w's committed records through what its kind declares
// (output.Spec, as the figures read them: reader.readOutput) until take
// says enough: shards by row batch, pipe's record lines (only those may
// says may matter decoded), any other format record by record.
func (s *sampler) read(w writer, may func([]byte) bool, take func(*record.Record) bool) error {
	spec, c, err := committedOf(w)
	if errors.Is(err, errNoReader) {
		return nil // the figures' read (readOutput) notes it
	}
	if err != nil || c == nil {
		return err
	}
	switch c.Format {
	case arrowrow.FormatParquet, arrowrow.FormatArrow:
		return s.shards(c.Files, take)
	case "jsonl":
		return s.jsonl(w.path, may, take)
	}
	if spec.Each == nil {
		return fmt.Errorf("kind %s declares no way to read its %s rows", w.kind, c.Format)
	}
	return spec.Each(s.ctx, w.path, func(rec *record.Record) error {
		if take(rec) {
			return errEnough
		}
		return s.ctx.Err()
	})
}

// fromDeadLetters reads the rejected samples still wanted from the run
// directory's rejected/ files.
func (s *sampler) fromDeadLetters() {
	files, _ := filepath.Glob(layout.DeadLetters(s.r.RunDir, layout.Rejected, "*"))
	sort.Strings(files)
	for _, p := range files {
		if s.wantAll == 0 {
			break
		}
		err := s.jsonl(p, s.wanted, func(rec *record.Record) bool {
			if rec.Reject != nil {
				s.rejected(filepath.Join(layout.Rejected, filepath.Base(p)), rec)
			}
			return s.wantAll == 0
		})
		if err != nil && !errors.Is(err, errEnough) {
			s.r.note("samples of %s: %v", p, err)
		}
	}
}

func (s *sampler) rejected(output string, rec *record.Record) {
	k := [2]string{rec.Reject.Stage, rec.Reject.Reason}
	if s.want[k] == 0 {
		return
	}
	s.want[k]--
	s.wantAll--
	s.r.Samples = append(s.r.Samples, s.sample(output, rec))
}

// wanted reports whether a line may be a rejected record of a reason that
// still wants samples: it holds the reason as a JSON string. Only such
// lines are decoded (decoding is the cost: ~15 MB/s of whole records, a
// substring search GB/s).
func (s *sampler) wanted(line []byte) bool {
	if s.wantAll == 0 {
		return false
	}
	for k, n := range s.want {
		if n > 0 && bytes.Contains(line, s.needle[k]) {
			return true
		}
	}
	return false
}

// errEnough ends a read that has all the samples it wants.
var errEnough = errors.New("enough samples")

func (s *sampler) sample(output string, rec *record.Record) Sample {
	x := Sample{ID: rec.ID, Output: output}
	for _, m := range rec.Messages {
		if m.Role == "user" {
			x.Prompt = m.Content // the last user turn: what was asked
		}
	}
	if c := rec.Completion; c != nil {
		x.Thinking, x.Answer = c.Reasoning, c.Answer
	}
	if j := rec.Reject; j != nil {
		x.Stage, x.Reason, x.Detail = j.Stage, j.Reason, j.Detail
	}
	x.Prompt, x.Thinking, x.Answer, x.Detail = clip(x.Prompt), clip(x.Thinking), clip(x.Answer), clip(x.Detail)
	x.Tools = rec.ToolNames()
	x.ToolSteps = rec.ToolSteps()
	for i := range x.ToolSteps {
		x.ToolSteps[i].Name, x.ToolSteps[i].Text = clip(x.ToolSteps[i].Name), clip(x.ToolSteps[i].Text)
	}
	if t := rec.Tokens; t != nil && len(t.InputIDs) == len(t.LossMask) && s.tok != nil {
		if tok := s.tok(); tok != nil {
			x.Trained = trainedSpans(tok, t)
		}
	}
	return x
}

// trainedSpans decodes a training row and splits its text where the loss
// mask changes (tokenize.Tokenizer.DecodeOffsets gives each token's text).
func trainedSpans(tok *tokenize.Tokenizer, t *record.Tokens) []Span {
	ids := make([]int, len(t.InputIDs))
	for i, id := range t.InputIDs {
		ids[i] = int(id)
	}
	text, offs := tok.DecodeOffsets(ids)
	var out []Span
	for i, o := range offs {
		loss := t.LossMask[i] != 0
		piece := text[min(o[0], len(text)):min(o[1], len(text))]
		if n := len(out); n > 0 && out[n-1].Loss == loss {
			out[n-1].Text += piece
		} else {
			out = append(out, Span{Text: piece, Loss: loss})
		}
	}
	for i := range out {
		out[i].Text = clipMiddle(out[i].Text)
	}
	return out
}

// clipMiddle keeps a long span's start and end (where the turn's markers
// are: <think>, </think>, <|im_end|>) and says what it left out.
func clipMiddle(s string) string {
	r := []rune(s)
	if len(r) <= sampleTextRunes {
		return s
	}
	half := sampleTextRunes / 2
	return string(r[:half]) + " [… " + num(float64(len(r)-2*half)) + " more characters …] " + string(r[len(r)-half:])
}

func clip(s string) string {
	if r := []rune(s); len(r) > sampleTextRunes {
		return string(r[:sampleTextRunes]) + " [… " + num(float64(len(r)-sampleTextRunes)) + " more characters]"
	}
	return s
}

// jsonl reads a commit log's committed records until take says enough;
// only the lines that may matter (may) are decoded.
func (s *sampler) jsonl(path string, may func([]byte) bool, take func(*record.Record) bool) error {
	_, size, err := commitlog.Committed(path)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(io.LimitReader(f, min(size, sampleScanBytes)), 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 1 && line[len(line)-1] == '\n' && may(line) {
			var rec record.Record
			if json.Unmarshal(line, &rec) == nil && take(&rec) {
				return errEnough
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if cerr := s.ctx.Err(); cerr != nil {
			return cerr
		}
	}
}

// shards reads an output's committed shards (its writer's record of
// them) until take says enough.
func (s *sampler) shards(files []output.File, take func(*record.Record) bool) error {
	var read int64
	for _, sh := range files {
		if read > sampleScanBytes {
			return nil
		}
		read += sh.Bytes
		// Small batches: the first rows are often all that is wanted.
		err := arrowrow.ReadFileRows(s.ctx, sh.Path, sampleBatchRows, memory.DefaultAllocator, func(b arrow.RecordBatch) error {
			recs, err := arrowrow.Records(b)
			if err != nil {
				return err
			}
			for _, rec := range recs {
				if take(rec) {
					return errEnough
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
