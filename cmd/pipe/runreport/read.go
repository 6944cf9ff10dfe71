package runreport

import (
	"context"
	"encoding/json"
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
	"github.com/pipe-dev/pipe/stages/arrowrow"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// row is what the report needs of one committed record.
type row struct {
	id               string
	hasCompletion    bool
	hasTools         bool // the conversation declares tools
	finishReason     string
	promptTokens     int
	completionTokens int
	reasoningTokens  int
	reasoningBytes   int
	answerBytes      int
	// ids counts the output ids around </think> (with a tokenizer, when
	// the server reported no reasoning_tokens); outputIDs, if set, are
	// counted into it by split.
	ids       idCount
	outputIDs []int
	// thinkingForced: the template forced thinking (the request recorded
	// thinking_forced), so the output started inside the reasoning.
	thinkingForced bool
	hasTokens      bool
	lossTokens     int
	// mask counts the loss mask's ones, when the row's mask was read.
	mask maskCount
	// cutAtLength: kept though the length limit stopped it (meta.cut_at_length).
	cutAtLength bool
	// attempt is meta.attempt: 2 and up for a row a second chance made
	// (validate-thinking's or filter's second_chance), 0 otherwise.
	attempt int
	// retriedTokens is meta.retried_tokens: what the attempts before
	// this row's decoded and no row keeps.
	retriedTokens     int
	rejectStage       string
	rejectReason      string
	failStage, failed string
}

// cutAtLengthKey is the meta key validate-thinking sets on a row it kept
// though the length limit stopped it.
const cutAtLengthKey = "cut_at_length"

// attemptKey is the meta key a second chance sets: the attempt a record
// is on (stages.MetaAttempt).
const attemptKey = "attempt"

// retriedTokensKey is the meta key a second chance sums the dropped
// completions' output tokens in (stages.MetaRetriedTokens).
const retriedTokensKey = "retried_tokens"

// metaInt is a meta value as an int (meta.attempt, meta.retried_tokens): set in the run (an int)
// or read back from JSON (a float64).
func metaInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	}
	return 0
}

// countMask counts mask's nonzero values, all and within its first max
// (0: all).
func countMask(mask []uint8, max int) maskCount {
	m := maskCount{known: true}
	for i, v := range mask {
		if v != 0 {
			m.all++
			if max == 0 || i < max {
				m.in++
			}
		}
	}
	return m
}

// maskCount is a loss mask's nonzero values: all, and those within the
// trainer's max_length (in); known: the mask was read.
type maskCount struct {
	known   bool
	all, in int
}

// idCount is what the split needs of a completion's output ids: n
// counts the ids that are neither special nor </think>, before those of
// them ahead of its last </think> (end: there is one); any: there are ids.
type idCount struct {
	any, end  bool
	n, before int
}

// reader reads outputs and dead letters into the report.
type reader struct {
	ctx     context.Context
	r       *Report
	tokDir  string
	tok     *tokenize.Tokenizer
	tokErr  error
	loaded  bool
	idp     *lineParser // counts the output ids of shards
	idClass []uint8     // lineParser.class
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
	if x.rejectReason == "" && x.failStage == "" {
		rd.verdicts.accept(x.id)
	}
	if x.rejectReason != "" {
		acc.out.RejectedRows++
		if rd.countReject(x.id, x.rejectStage, x.rejectReason) {
			if rd.econ != nil {
				rd.econ.reject(x)
			}
			if x.attempt > 1 {
				rd.r.secondChances().LostAfter[x.attempt]++
			}
		}
	}
	if acc.training && x.attempt > 1 && x.rejectReason == "" && x.failStage == "" {
		rd.r.secondChances().Recovered[x.attempt]++
	}
	if x.failStage != "" {
		rd.countFailure(x.id, x.failStage, x.failed)
	}
	if rd.verdictsOnly {
		return
	}
	if x.hasTools {
		acc.out.ToolRows++
	}
	if acc.training && x.rejectReason == "" && x.failStage == "" && rd.econ != nil {
		rd.econ.keep(x)
	}
	if x.hasCompletion {
		if x.finishReason != "" {
			acc.out.FinishReasons[x.finishReason]++
		}
		acc.prompt.add(x.promptTokens)
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
	if x.hasTokens {
		acc.loss.add(x.lossTokens)
	}
}

// split tells a completion's thinking tokens from its answer tokens: the
// server's reasoning_tokens if it reported them, else the output ids split
// at </think> (with a tokenizer; a forced-thinking output without one is
// all thinking), else the completion tokens split in proportion to the
// texts' lengths.
func (rd *reader) split(x *row) (think, answer int, how string) {
	if x.reasoningTokens > 0 {
		return x.reasoningTokens, max(0, x.completionTokens-x.reasoningTokens), "server"
	}
	if len(x.outputIDs) > 0 && !x.ids.any && rd.tokenizer() != nil {
		if rd.idp == nil {
			rd.idp = rd.newLineParser()
		}
		if rd.idp.endID >= 0 {
			for _, id := range x.outputIDs {
				rd.idp.count(id, &x.ids)
			}
		}
	}
	if c := x.ids; c.any {
		switch {
		// Before the last </think> is thinking; with none, a forced-thinking
		// output (it started inside the reasoning) or one with no answer
		// text is all thinking.
		case c.end:
			return c.before, c.n - c.before, "ids"
		case x.thinkingForced || x.answerBytes == 0:
			return c.n, 0, "ids"
		}
		return 0, c.n, "ids"
	}
	if total := x.reasoningBytes + x.answerBytes; total > 0 {
		think = int(float64(x.completionTokens)*float64(x.reasoningBytes)/float64(total) + 0.5)
	}
	return think, max(0, x.completionTokens-think), "text"
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
		if x.rejectReason != "" && rd.countReject(x.id, x.rejectStage, x.rejectReason) && rd.econ != nil {
			rd.econ.reject(x)
		}
		if x.failStage != "" {
			rd.countFailure(x.id, x.failStage, x.failed)
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
	spec := pipeline.DefaultRegistry.Output(w.kind)
	if spec == nil || spec.Committed == nil {
		return fmt.Errorf("kind %s declares no way to read its output back", w.kind)
	}
	c, err := spec.Committed(w.path)
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

// rowOf is what the report reads of a record.
func (rd *reader) rowOf(rec *record.Record) *row {
	x := &row{id: rec.ID, hasTools: len(rec.Tools) > 0}
	if c := rec.Completion; c != nil {
		x.hasCompletion, x.finishReason = true, c.FinishReason
		x.promptTokens, x.completionTokens, x.reasoningTokens = c.PromptTokens, c.CompletionTokens, c.ReasoningTokens
		x.reasoningBytes, x.answerBytes = len(c.Reasoning), len(c.Answer)
		x.thinkingForced, _ = c.Request["thinking_forced"].(bool)
		if x.reasoningTokens <= 0 && len(c.OutputIDs) > 0 {
			x.outputIDs = c.OutputIDs
		}
	}
	if t := rec.Tokens; t != nil {
		x.hasTokens, x.lossTokens = true, t.NumLossTokens
		if rd.maxLength > 0 {
			x.mask = countMask(t.LossMask, rd.maxLength)
		}
	}
	x.cutAtLength, _ = rec.Meta[cutAtLengthKey].(bool)
	x.attempt = metaInt(rec.Meta[attemptKey])
	x.retriedTokens = metaInt(rec.Meta[retriedTokensKey])
	x.setVerdict(rec.Reject, rec.Failure)
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
		x := &row{id: id}
		if fr, ok := str(arrowrow.ColFinishReason, i); ok {
			x.hasCompletion, x.finishReason = true, fr
		}
		if _, ok := num(arrowrow.ColCompletionTokens, i); ok {
			x.hasCompletion = true
		}
		x.promptTokens, _ = num(arrowrow.ColPromptTokens, i)
		x.completionTokens, _ = num(arrowrow.ColCompletionTokens, i)
		x.reasoningTokens, _ = num(arrowrow.ColReasoningTokens, i)
		reasoning, _ := str(arrowrow.ColReasoning, i)
		answer, _ := str(arrowrow.ColAnswer, i)
		x.reasoningBytes, x.answerBytes = len(reasoning), len(answer)
		if tools, ok := str(arrowrow.ColTools, i); ok && tools != "" && tools != "[]" {
			x.hasTools = true
		}
		if outIDs != nil && !outIDs.IsNull(i) {
			if vals, ok := outIDs.ListValues().(*array.Int32); ok {
				lo, hi := outIDs.ValueOffsets(i)
				ids = ids[:0]
				for j := lo; j < hi; j++ {
					ids = append(ids, int(vals.Value(int(j))))
				}
				x.outputIDs = ids
			}
			if req, ok := str(arrowrow.ColRequest, i); ok && req != "" {
				var r struct {
					ThinkingForced bool `json:"thinking_forced"`
				}
				_ = json.Unmarshal([]byte(req), &r) // a bad request column only loses the hint
				x.thinkingForced = r.ThinkingForced
			}
		}
		x.lossTokens, x.hasTokens = num(arrowrow.ColNumLossTokens, i)
		if masks != nil && !masks.IsNull(i) {
			if vals, ok := masks.ListValues().(*array.Uint8); ok {
				lo, hi := masks.ValueOffsets(i)
				x.mask = countMask(vals.Uint8Values()[lo:hi], rd.maxLength)
			}
		}
		if meta, ok := str(arrowrow.ColMeta, i); ok && (strings.Contains(meta, cutAtLengthKey) || strings.Contains(meta, attemptKey)) {
			var m struct {
				CutAtLength bool `json:"cut_at_length"`
				Attempt     int  `json:"attempt"`
				Retried     int  `json:"retried_tokens"`
			}
			_ = json.Unmarshal([]byte(meta), &m) // a bad meta column only loses the marks
			x.cutAtLength, x.attempt, x.retriedTokens = m.CutAtLength, m.Attempt, m.Retried
		}
		x.rejectStage, _ = str(arrowrow.ColRejectStage, i)
		x.rejectReason, _ = str(arrowrow.ColRejectReason, i)
		take(rd, x)
	}
}
