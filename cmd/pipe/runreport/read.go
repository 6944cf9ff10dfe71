package runreport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/stages/arrowrow"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// row is what the report needs of one committed record: a record line's
// projection, owned by recordline (a shard's and a record's rows are read
// into it too).
type row = recordline.Row

// reader reads outputs and dead letters into the report.
type reader struct {
	ctx     context.Context
	r       *Report
	tokDir  string
	tok     *tokenize.Tokenizer
	tokErr  error
	loaded  bool
	idp     *lineParser // counts the output ids of shards
	idClass []uint8     // recordline.Options.Classes
	// idClassOnce builds idClass.
	idClassOnce sync.Once
	rejects     map[[2]string]int64
	fails       map[[2]string]int64
	// counted holds a hash of (id, stage, reason) for each rejection or
	// failure counted, so a record kept in two places counts once.
	counted map[uint64]bool
	// recovered are the ids that failed in a start and that a later start
	// finished (layout.Recovered): their failures count no more.
	recovered *commitlog.Set
	// verdicts, if not nil, keeps each id's verdict (Options.Verdicts).
	verdicts *verdicts
	// verdictsOnly: read ids and verdicts, nothing else (Options.VerdictsOnly).
	verdictsOnly bool
	// maxLength is the trainer's (run.json); 0: none.
	maxLength int
	// econ, if not nil, counts decoded and trained tokens (economy.go).
	econ *economy
}

func newReader(ctx context.Context, r *Report, tokDir string) *reader {
	return &reader{ctx: ctx, r: r, tokDir: tokDir, rejects: map[[2]string]int64{}, fails: map[[2]string]int64{}, counted: map[uint64]bool{}}
}

// outputAcc accumulates one output's rows.
type outputAcc struct {
	out                               Output
	training                          bool // not a writer of rejects only
	prompt, thinking, answer, loss    sample
	thinkServer, thinkIDs, thinkTexts int64
}

func (rd *reader) output(w writer) {
	acc := &outputAcc{out: Output{Stage: w.id, Kind: w.kind, Path: w.path, FinishReasons: map[string]int64{}}, training: !w.rejectsOnly}
	acc.prompt.name, acc.thinking.name, acc.answer.name, acc.loss.name = DistPrompt, DistThinking, DistAnswer, DistLoss
	if err := rd.readOutput(w, acc.add); err != nil {
		rd.r.note("output %s (%s): %v", w.id, w.path, err)
	}
	for _, x := range []*sample{&acc.prompt, &acc.thinking, &acc.answer, &acc.loss} {
		if x.n > 0 {
			acc.out.Dists = append(acc.out.Dists, x.dist())
		}
	}
	for i := range acc.out.Dists {
		if acc.out.Dists[i].Name == DistThinking || acc.out.Dists[i].Name == DistAnswer {
			acc.out.Dists[i].Note = acc.splitNote()
		}
	}
	if len(acc.out.FinishReasons) == 0 {
		acc.out.FinishReasons = nil
	}
	rd.r.Outputs = append(rd.r.Outputs, acc.out)
}

// splitNote says how thinking and answer tokens were told apart.
func (acc *outputAcc) splitNote() string {
	var parts []string
	for _, p := range []struct {
		n    int64
		what string
	}{
		{acc.thinkServer, "reasoning_tokens the server reported"},
		{acc.thinkIDs, "output ids split at </think>"},
		{acc.thinkTexts, "estimated: completion tokens split in proportion to the lengths of the thinking and answer texts"},
	} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d rows: %s", p.n, p.what))
		}
	}
	if len(parts) == 1 {
		_, what, _ := strings.Cut(parts[0], ": ")
		return what
	}
	return strings.Join(parts, "; ")
}

// add counts one row of an output.
func (acc *outputAcc) add(rd *reader, x *row) {
	acc.out.Rows++
	if x.RejectReason == "" && x.FailStage == "" {
		rd.verdicts.accept(x.ID)
	}
	if x.RejectReason != "" {
		acc.out.RejectedRows++
		if rd.countReject(x.ID, x.RejectStage, x.RejectReason) {
			if rd.econ != nil {
				rd.econ.reject(x)
			}
			if x.Attempt > 1 {
				rd.r.secondChances().LostAfter[x.Attempt]++
			}
		}
	}
	if acc.training && x.Attempt > 1 && x.RejectReason == "" && x.FailStage == "" {
		rd.r.secondChances().Recovered[x.Attempt]++
	}
	if x.FailStage != "" {
		rd.countFailure(x.ID, x.FailStage, x.Failed)
	}
	if rd.verdictsOnly {
		return
	}
	if x.Tools {
		acc.out.ToolRows++
	}
	if acc.training && x.RejectReason == "" && x.FailStage == "" && rd.econ != nil {
		rd.econ.keep(x)
	}
	if x.Completion {
		if x.FinishReason != "" {
			acc.out.FinishReasons[x.FinishReason]++
		}
		acc.prompt.add(x.PromptTokens)
		think, answer, how := rd.split(x)
		acc.thinking.add(think)
		acc.answer.add(answer)
		switch how {
		case "server":
			acc.thinkServer++
		case "ids":
			acc.thinkIDs++
		default:
			acc.thinkTexts++
		}
	}
	if x.Tokens {
		acc.loss.add(x.LossTokens)
	}
}

// split tells a completion's thinking tokens from its answer tokens: the
// server's reasoning_tokens if it reported them, else the output ids split
// at </think> (with a tokenizer; a forced-thinking output without one is
// all thinking), else the completion tokens split in proportion to the
// texts' lengths.
func (rd *reader) split(x *row) (think, answer int, how string) {
	if x.ReasoningTokens > 0 {
		return x.ReasoningTokens, max(0, x.CompletionTokens-x.ReasoningTokens), "server"
	}
	if len(x.OutputIDs) > 0 && !x.IDs.Any && rd.tokenizer() != nil {
		if rd.idp == nil {
			rd.idp = rd.newLineParser()
		}
		if rd.idp.counting {
			rd.idp.CountIDs(x.OutputIDs, &x.IDs)
		}
	}
	if c := x.IDs; c.Any {
		switch {
		// Before the last </think> is thinking; with none, a forced-thinking
		// output (it started inside the reasoning) or one with no answer
		// text is all thinking.
		case c.End:
			return c.Before, c.N - c.Before, "ids"
		case x.ThinkingForced || x.AnswerBytes == 0:
			return c.N, 0, "ids"
		}
		return 0, c.N, "ids"
	}
	if total := x.ReasoningBytes + x.AnswerBytes; total > 0 {
		think = int(float64(x.CompletionTokens)*float64(x.ReasoningBytes)/float64(total) + 0.5)
	}
	return think, max(0, x.CompletionTokens-think), "text"
}

func (rd *reader) tokenizer() *tokenize.Tokenizer {
	if !rd.loaded {
		rd.loaded = true
		if rd.tokDir != "" {
			rd.tok, rd.tokErr = tokenize.Load(rd.tokDir)
			if rd.tokErr != nil {
				rd.r.note("tokenizer %s: %v (thinking and answer tokens estimated from text lengths)", rd.tokDir, rd.tokErr)
			}
		}
	}
	return rd.tok
}

// countReject counts a rejection and reports whether it was not counted
// before (a record kept in two places counts once).
func (rd *reader) countReject(id, stage, reason string) bool {
	rd.verdicts.set(id, VerdictRejected+" "+reason)
	h := commitlog.Hash("r\x00" + id + "\x00" + stage + "\x00" + reason)
	if rd.counted[h] {
		return false
	}
	rd.counted[h] = true
	rd.rejects[[2]string{stage, reason}]++
	return true
}

func (rd *reader) countFailure(id, stage, msg string) {
	if rd.recovered != nil && rd.recovered.Has(commitlog.Hash(id)) {
		return // redone since, and finished: it is where it ended
	}
	rd.verdicts.set(id, VerdictFailed)
	if r := []rune(msg); len(r) > 80 {
		msg = string(r[:80]) + "…"
	}
	h := commitlog.Hash("f\x00" + id + "\x00" + stage)
	if !rd.counted[h] {
		rd.counted[h] = true
		rd.fails[[2]string{stage, msg}]++
	}
}

// deadLetters counts the rejections and failures of RUN_DIR/{rejected,failed}/STAGE.jsonl.
func (rd *reader) deadLetters(path string) {
	err := rd.jsonl(path, func(rd *reader, x *row) {
		if x.RejectReason != "" && rd.countReject(x.ID, x.RejectStage, x.RejectReason) && rd.econ != nil {
			rd.econ.reject(x)
		}
		if x.FailStage != "" {
			rd.countFailure(x.ID, x.FailStage, x.Failed)
		}
	})
	if err != nil {
		rd.r.note("%s: %v", path, err)
	}
}

// readOutput reads what w committed through what its kind declares
// (output.Spec, never its name or whether its path is a directory): the
// format of its committed files picks the report's fast readers (Parquet
// and Arrow shards by column, through arrowrow; pipe's record lines), and
// an output in any other format is read record by record (Spec.Each), so
// a new writer kind's rows count like the others'.
func (rd *reader) readOutput(w writer, take func(*reader, *row)) error {
	spec, c, err := committedOf(w)
	if err != nil {
		return err
	}
	if c == nil {
		// Nothing committed by the writer's own record; a file there was
		// copied or restored without it (a JSONL file without its index).
		if st, err := os.Stat(w.path); err == nil && !st.IsDir() && st.Size() > 0 {
			rd.r.note("%s has %d bytes but its writer recorded no commit of them (for a JSONL file, its index %s): not counted",
				w.path, st.Size(), filepath.Base(commitlog.IndexPath(w.path)))
		}
		return nil
	}
	switch c.Format {
	case arrowrow.FormatParquet, arrowrow.FormatArrow:
		return rd.shards(c.Files, take)
	case "jsonl":
		return rd.jsonl(w.path, take)
	}
	if spec.Each == nil {
		return fmt.Errorf("kind %s declares no way to read its %s rows", w.kind, c.Format)
	}
	return spec.Each(rd.ctx, w.path, func(rec *record.Record) error {
		take(rd, rd.rowOf(rec))
		return rd.ctx.Err()
	})
}

// errNoReader: w's kind declares no way to read its output back.
var errNoReader = errors.New("declares no way to read its output back")

// committedOf is what w's kind declares of its output (output.Spec) and
// what it committed there (nil when nothing yet): the figures and the
// samples both read an output through these, never by its name or path.
func committedOf(w writer) (*output.Spec, *output.Committed, error) {
	spec := pipeline.DefaultRegistry.Output(w.kind)
	if spec == nil || spec.Committed == nil {
		return nil, nil, fmt.Errorf("kind %s %w", w.kind, errNoReader)
	}
	c, err := spec.Committed(w.path)
	return spec, c, err
}

// rowOf is what the report reads of a record.
func (rd *reader) rowOf(rec *record.Record) *row {
	x := &row{ID: rec.ID, Tools: len(rec.Tools) > 0}
	if c := rec.Completion; c != nil {
		x.Completion, x.FinishReason = true, c.FinishReason
		x.PromptTokens, x.CompletionTokens, x.ReasoningTokens = c.PromptTokens, c.CompletionTokens, c.ReasoningTokens
		x.ReasoningBytes, x.AnswerBytes = len(c.Reasoning), len(c.Answer)
		x.ThinkingForced, _ = c.Request["thinking_forced"].(bool)
		if x.ReasoningTokens <= 0 && len(c.OutputIDs) > 0 {
			x.OutputIDs = c.OutputIDs
		}
	}
	if t := rec.Tokens; t != nil {
		x.Tokens, x.LossTokens = true, t.NumLossTokens
		if rd.maxLength > 0 {
			x.Mask = recordline.CountMask(t.LossMask, rd.maxLength)
		}
	}
	x.Marks = recordline.MarksOf(rec.Meta)
	x.SetVerdict(rec.Reject, rec.Failure)
	return x
}

// shards reads the committed shard files (a shard the manifest does not
// list was never committed), reading only the columns the report needs.
func (rd *reader) shards(files []output.File, take func(*reader, *row)) error {
	cols := []string{arrowrow.ColID, arrowrow.ColRejectStage, arrowrow.ColRejectReason}
	if !rd.verdictsOnly {
		cols = append(cols, arrowrow.ColFinishReason, arrowrow.ColPromptTokens, arrowrow.ColCompletionTokens,
			arrowrow.ColReasoningTokens, arrowrow.ColReasoning, arrowrow.ColAnswer, arrowrow.ColNumLossTokens, arrowrow.ColMeta, arrowrow.ColTools)
	}
	if !rd.verdictsOnly && rd.maxLength > 0 {
		// Loss tokens past max_length are not trained: only the mask says
		// where they are.
		cols = append(cols, arrowrow.ColLossMask)
	}
	if !rd.verdictsOnly && rd.tokenizer() != nil {
		// Only a tokenizer tells </think> in them; the request says whether
		// the template forced thinking.
		cols = append(cols, arrowrow.ColOutputIDs, arrowrow.ColRequest)
	}
	for _, f := range files {
		err := arrowrow.ReadColumns(rd.ctx, f.Path, cols, memory.DefaultAllocator, func(b arrow.RecordBatch) error {
			rd.batch(b, take)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (rd *reader) batch(b arrow.RecordBatch, take func(*reader, *row)) {
	cols := map[string]arrow.Array{}
	for i, f := range b.Schema().Fields() {
		cols[f.Name] = b.Column(i)
	}
	str := func(name string, i int) (string, bool) {
		a, ok := cols[name].(*array.String)
		if !ok || a.IsNull(i) {
			return "", false
		}
		return a.Value(i), true
	}
	num := func(name string, i int) (int, bool) {
		a, ok := cols[name].(*array.Int32)
		if !ok || a.IsNull(i) {
			return 0, false
		}
		return int(a.Value(i)), true
	}
	outIDs, _ := cols[arrowrow.ColOutputIDs].(*array.List)
	masks, _ := cols[arrowrow.ColLossMask].(*array.List)
	var ids []int
	for i := range int(b.NumRows()) {
		id, _ := str(arrowrow.ColID, i)
		x := &row{ID: id}
		if fr, ok := str(arrowrow.ColFinishReason, i); ok {
			x.Completion, x.FinishReason = true, fr
		}
		if _, ok := num(arrowrow.ColCompletionTokens, i); ok {
			x.Completion = true
		}
		x.PromptTokens, _ = num(arrowrow.ColPromptTokens, i)
		x.CompletionTokens, _ = num(arrowrow.ColCompletionTokens, i)
		x.ReasoningTokens, _ = num(arrowrow.ColReasoningTokens, i)
		reasoning, _ := str(arrowrow.ColReasoning, i)
		answer, _ := str(arrowrow.ColAnswer, i)
		x.ReasoningBytes, x.AnswerBytes = len(reasoning), len(answer)
		if tools, ok := str(arrowrow.ColTools, i); ok && tools != "" && tools != "[]" {
			x.Tools = true
		}
		if outIDs != nil && !outIDs.IsNull(i) {
			if vals, ok := outIDs.ListValues().(*array.Int32); ok {
				lo, hi := outIDs.ValueOffsets(i)
				ids = ids[:0]
				for j := lo; j < hi; j++ {
					ids = append(ids, int(vals.Value(int(j))))
				}
				x.OutputIDs = ids
			}
			if req, ok := str(arrowrow.ColRequest, i); ok && req != "" {
				var r struct {
					ThinkingForced bool `json:"thinking_forced"`
				}
				_ = json.Unmarshal([]byte(req), &r) // a bad request column only loses the hint
				x.ThinkingForced = r.ThinkingForced
			}
		}
		x.LossTokens, x.Tokens = num(arrowrow.ColNumLossTokens, i)
		if masks != nil && !masks.IsNull(i) {
			if vals, ok := masks.ListValues().(*array.Uint8); ok {
				lo, hi := masks.ValueOffsets(i)
				x.Mask = recordline.CountMask(vals.Uint8Values()[lo:hi], rd.maxLength)
			}
		}
		if meta, ok := str(arrowrow.ColMeta, i); ok {
			x.Marks = recordline.ParseMarks([]byte(meta))
		}
		x.RejectStage, _ = str(arrowrow.ColRejectStage, i)
		x.RejectReason, _ = str(arrowrow.ColRejectReason, i)
		take(rd, x)
	}
}
