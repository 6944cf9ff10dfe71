package stages

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// jsonlSource is what read-prompts and read-completions share: stream a
// JSONL file line by line (never loading it), judge each non-blank line,
// make records of the good ones, and apply the bad-line policy. The reader,
// the pass that judges the whole file ahead of it, and pipe check --data
// make the same judgement (lineJudge).
type jsonlSource struct {
	Path      string
	OnBadLine string // "fail" stops with file:line; "skip" rejects the line as bad_line
	Limit     int64  // records to emit; 0 means all
	// Sample, when set, takes every Sample.Every-th record not finished
	// yet (not in Done), at most Sample.Max (pipeline.Env.Sample).
	Sample pipeline.Sample
	Done   pipeline.DoneSet
	// Parse judges one non-blank line of valid UTF-8: its id (with needID
	// or build) and, with build, its record; or what is wrong with it — a
	// bad_line, or a reason that rejects the record (returned with it when
	// building).
	Parse func(line []byte, build, needID bool) (rec *record.Record, id string, prob *lineProblem)
	// QuickID, if set, finds a line's id without parsing it all (false when
	// it cannot tell), so finished records are skipped cheaply on resume.
	QuickID func(line []byte) (string, bool)
	// AllowEmpty lets a file without any record end the read quietly;
	// otherwise that is an error (a wrong or truncated input).
	AllowEmpty bool
	// Dedupe rejects a line whose id an earlier line has as duplicate_id
	// (the first one wins); for when no dedupe-against-progress stage reads
	// the output (pipeline.Env.DuplicatesHandled).
	Dedupe bool
	// Halt, if set (pipeline.Env.Halt), is how a line that stops the run
	// stops it: like a stop request, so requests in flight finish and are
	// committed. Without it Read returns the error.
	Halt func(error)
	// Pos, if set, follows how far the read is into the file.
	Pos *inputPos
	// Samples, above 1, makes each good line that many records, ID#1 …
	// ID#N (sampleRecords); each is a record of its own for exactly-once,
	// so every existing guarantee (done log, journal, resume) holds per
	// sample.
	Samples int
}

// inputPos is how far a source is into its input file, for the progress
// display: the file's size gives a total before the records are counted.
type inputPos struct {
	read, size atomic.Int64
	// lines is the file's lines to read, once the pass ahead of the
	// reader counted them (0 until then).
	lines atomic.Int64
}

// advance counts line, read with error err, as read (with its newline
// unless it was the last); p may be nil (nothing to count).
func (p *inputPos) advance(line []byte, err error) {
	if p == nil {
		return
	}
	n := int64(len(line))
	if err == nil {
		n++ // its newline
	}
	p.read.Add(n)
}

// figures reports the position as input_bytes_read of input_bytes, and
// input_lines once counted.
func (p *inputPos) figures() []figure.Figure {
	figs := []figure.Figure{
		figure.NewCounter("input_bytes_read", p.read.Load()).In(figure.UnitBytes),
		figure.NewGauge("input_bytes", float64(p.size.Load())).In(figure.UnitBytes),
	}
	if n := p.lines.Load(); n > 0 {
		figs = append(figs, figure.NewGauge("input_lines", float64(n)))
	}
	return figs
}

// lineProblem is what is wrong with one input line: a reason code and what
// to tell the user.
type lineProblem struct {
	Reason, Detail string
}

// reasonBadLine is a line that makes no record: it stops the run under
// on_bad_line = "fail", or is rejected under "skip".
const reasonBadLine = "bad_line"

// maxLine bounds one JSONL line; a longer line is a bad line, not an OOM.
const maxLine = 256 << 20

// lineJudge judges the lines of one input in order; it remembers the ids
// read when repeated ones are its to reject (about 10 bytes an id, as
// dedupe-against-progress keeps).
type lineJudge struct {
	src  *jsonlSource
	seen *commitlog.SeenSet // hashes of the ids read; nil unless Dedupe
}

func (s *jsonlSource) judge() *lineJudge {
	j := &lineJudge{src: s}
	if s.Dedupe {
		j.seen = &commitlog.SeenSet{}
	}
	return j
}

// line judges one non-blank line; with build it also makes the record.
func (j *lineJudge) line(lineNo int, line []byte, build bool) (*record.Record, *lineProblem) {
	if !utf8.Valid(line) {
		return nil, &lineProblem{reasonBadLine, fmt.Sprintf("invalid UTF-8 at byte %d of the line", invalidUTF8At(line))}
	}
	rec, id, prob := j.src.Parse(line, build, j.seen != nil)
	if prob != nil && prob.Reason == reasonBadLine {
		return nil, prob
	}
	if j.seen != nil {
		if !j.seen.Add(commitlog.Hash(id)) {
			return rec, &lineProblem{pipeline.ReasonDuplicate, fmt.Sprintf("id %q was already read earlier in this input; the first one is kept", id)}
		}
	}
	return rec, prob
}

// badLineError is bad data: running again meets the same line, so it is
// permanent (exit 2: fix the file, or set the bad lines aside).
func (s *jsonlSource) badLineError(lineNo int, p *lineProblem) error {
	return pipeline.Permanent(fmt.Errorf("%s:%d: %s (set on_bad_line = \"skip\" to set bad lines aside)", s.Path, lineNo, p.Detail))
}

func (s *jsonlSource) emptyError() error {
	return fmt.Errorf("%s: no records in it (an empty or truncated input?); set allow_empty = true if that is expected", s.Path)
}

// eachLine calls fn with each non-blank line (trimmed; a leading UTF-8 BOM
// dropped) and its number, until fn returns false or an error, the file
// ends, or ctx is done. The line is valid until fn returns.
func (s *jsonlSource) eachLine(ctx context.Context, fn func(lineNo int, line []byte) (bool, error)) error {
	f, err := os.Open(s.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	if s.Pos != nil {
		if st, err := f.Stat(); err == nil {
			s.Pos.size.Store(st.Size())
		}
	}
	br := bufio.NewReaderSize(f, 1<<20)
	for lineNo := 1; ; lineNo++ {
		if lineNo&255 == 1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := readLine(br)
		s.Pos.advance(line, err)
		if err == io.EOF && len(line) == 0 {
			return nil
		}
		if lineNo == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // a UTF-8 BOM
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s:%d: %w", s.Path, lineNo, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if more, err := fn(lineNo, line); err != nil || !more {
			return err
		}
	}
}

// Read emits one record per good line. A line counts as taken (out.Took) once
// it has gone out on either port: one whose send is cut short by a stop was
// not taken, and is read again on resume.
func (s *jsonlSource) Read(ctx context.Context, out pipeline.Emitter) error {
	r := &jsonlRead{s: s, j: s.judge(), out: out}
	err := s.eachLine(ctx, func(lineNo int, line []byte) (bool, error) {
		if r.full() {
			return false, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		r.seen++
		if r.skipFinished(line) || !r.inSample() {
			return true, nil
		}
		return r.take(lineNo, line)
	})
	if err == nil && r.seen == 0 && !s.AllowEmpty {
		return s.emptyError()
	}
	return err
}

// jsonlRead is one Read of the file: where it sends, and its counts.
type jsonlRead struct {
	s   *jsonlSource
	j   *lineJudge
	out pipeline.Emitter
	// emitted counts lines taken, seen the non-blank lines, candidates
	// those a sample chooses from, sampled those it chose.
	emitted, seen, sampled, candidates int64
}

// full says whether the read has taken limit lines, or its sample is
// complete.
func (r *jsonlRead) full() bool {
	return r.s.Limit > 0 && r.emitted >= r.s.Limit || r.s.Sample.Max > 0 && r.sampled >= r.s.Sample.Max
}

// skipFinished says whether line is passed over for its id alone (read
// without parsing the line): a finished line is taken as skipped, or, in
// a sample, not read.
func (r *jsonlRead) skipFinished(line []byte) bool {
	if r.s.QuickID == nil {
		return false
	}
	id, ok := r.s.QuickID(line)
	if !ok {
		return false
	}
	if r.s.Sample.Max > 0 && r.s.Done != nil && r.s.Done.Has(id) {
		return true // a sample is of the work left: a finished line is not read in it
	}
	if r.out.SkipFinished(id) {
		r.out.Took(1)
		r.emitted++
		return true
	}
	return false
}

// inSample says whether the line is read in this start: every line, or
// with a sample one in Sample.Every of the candidates.
func (r *jsonlRead) inSample() bool {
	if r.s.Sample.Max <= 0 {
		return true
	}
	r.candidates++
	if (r.candidates-1)%max(r.s.Sample.Every, 1) != 0 {
		return false // not in the sample: not read in this start
	}
	r.sampled++
	return true
}

// take makes the line's record and sends it on (as Samples records), or
// rejects it, and counts the line taken. It returns what Read's line
// function does.
func (r *jsonlRead) take(lineNo int, line []byte) (bool, error) {
	s, out := r.s, r.out
	rec, prob := r.j.line(lineNo, line, true)
	switch {
	case prob == nil && s.Samples > 1:
		if err := emitSamples(rec, s.Samples, out); err != nil {
			return false, err
		}
		r.emitted++
		return true, nil
	case prob == nil:
		if err := out.Emit("", rec); err != nil {
			return false, err
		}
	case prob.Reason == reasonBadLine:
		return s.badLine(lineNo, line, prob, out)
	default:
		if err := out.Reject(rec, prob.Reason, fmt.Sprintf("%s:%d: %s", s.Path, lineNo, prob.Detail)); err != nil {
			return false, err
		}
	}
	out.Took(1)
	r.emitted++
	return true, nil
}

// badLine handles a line that makes no record: it stops the run (by
// s.Halt where set), or with on_bad_line = "skip" is rejected, as a record
// naming the line, and taken. It returns what Read's line function does.
func (s *jsonlSource) badLine(lineNo int, line []byte, prob *lineProblem, out pipeline.Emitter) (bool, error) {
	if s.OnBadLine != "skip" {
		if s.Halt != nil {
			s.Halt(s.badLineError(lineNo, prob))
			return false, nil
		}
		return false, s.badLineError(lineNo, prob)
	}
	bad := &record.Record{ID: fmt.Sprintf("%s:%d", s.Path, lineNo), Meta: map[string]any{"line": lineNo, "text": termsafe.Cut(string(line), 2000)}}
	if err := out.Reject(bad, reasonBadLine, fmt.Sprintf("%s:%d: %s", s.Path, lineNo, prob.Detail)); err != nil {
		return false, err
	}
	out.Took(1)
	return true, nil
}

// checkAll judges every line the reader would take, without making
// records. With stop set it ends at the first problem that would stop the
// run, and calls stop with the error the reader would give.
func (s *jsonlSource) checkAll(ctx context.Context, stop func(error)) (*pipeline.InputReport, error) {
	rep := &pipeline.InputReport{Path: s.Path}
	j := s.judge()
	var taken int64
	err := s.eachLine(ctx, func(lineNo int, line []byte) (bool, error) {
		if s.Limit > 0 && taken >= s.Limit {
			return false, nil
		}
		rep.Lines++
		_, prob := j.line(lineNo, line, false)
		if prob == nil {
			rep.Records++
			taken++
			return true, nil
		}
		fatal := prob.Reason == reasonBadLine && s.OnBadLine != "skip"
		rep.Add(prob.Reason, fatal, fmt.Sprintf("%s:%d: %s", s.Path, lineNo, prob.Detail))
		if prob.Reason != reasonBadLine {
			taken++
		}
		if fatal && stop != nil {
			stop(s.badLineError(lineNo, prob))
			return false, nil
		}
		return true, nil
	})
	if err == nil && rep.Lines == 0 && !s.AllowEmpty {
		rep.Add("empty_input", true, s.emptyError().Error())
	}
	return rep, err
}

// ahead judges the whole file in a goroutine of its own while the reader
// goes, so that a line that would stop the run stops it in the first
// seconds — through env.Halt, which commits what was done and lets requests
// in flight finish — instead of when the reader gets there, hours of GPU
// time later. The reader does not wait for it. Other problems are only
// counted, for the log; repeated ids are left to the reader, so the set of
// ids read is not kept twice. The returned func stops the pass and waits.
func (s *jsonlSource) ahead(ctx context.Context, env *pipeline.Env) func() {
	pass := *s
	pass.Dedupe = false
	pos := pass.Pos
	pass.Pos = nil // the reader's position, not this pass's
	s = &pass
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		halted := false
		rep, err := s.checkAll(ctx, func(err error) {
			halted = true
			fmt.Fprintf(env.Notice, "stage %q: %v\n  found ahead of the reader: stopping the run (what was done is committed; requests in flight finish first)\n", env.StageID, err)
			if env.Halt != nil {
				env.Halt(err)
			}
		})
		switch {
		case halted || ctx.Err() != nil:
		case err != nil:
			// The reader meets the same error when it gets there.
			fmt.Fprintf(env.Log, "stage %q: checking ahead: %v\n", env.StageID, err)
		default:
			if pos != nil {
				n := rep.Lines
				if s.Limit > 0 {
					n = min(n, s.Limit)
				}
				pos.lines.Store(n)
			}
			w := env.Log
			if len(rep.Problems) > 0 { // an early word on what will be set aside
				w = env.Notice
			}
			fmt.Fprintf(w, "stage %q: checked %s ahead of the reader in %s: %s\n", env.StageID, s.Path, time.Since(start).Round(time.Millisecond), rep.Text())
		}
	}()
	return func() { cancel(); <-done }
}

// invalidUTF8At is the offset of the first byte of line that is not valid
// UTF-8.
func invalidUTF8At(line []byte) int {
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRune(line[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(line)
}

// readLine returns the next line without its newline; lines longer than
// maxLine are an error.
//
// The line may be the reader's own buffer, valid until the next read:
// callers copy what they keep (a parse does).
func readLine(br *bufio.Reader) ([]byte, error) {
	chunk, err := br.ReadSlice('\n')
	switch {
	case err == nil:
		return chunk[:len(chunk)-1], nil
	case err != bufio.ErrBufferFull:
		return chunk, err
	}
	buf := append([]byte(nil), chunk...)
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("line longer than %d MiB", maxLine>>20)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return buf, err
		}
		return buf[:len(buf)-1], nil
	}
}

// Meta keys of a sample: its number (1…N) and the id of its prompt.
const (
	MetaSample   = "sample"
	MetaPromptID = "prompt_id"
)

// sampleID is the id of sample k of the prompt with id id. The sample
// number after the last '#' makes it one-to-one, '#' in ids or not.
func sampleID(id string, k int) string { return id + "#" + strconv.Itoa(k) }

// emitSamples sends n records for rec, ids ID#1 … ID#N with meta.sample
// and meta.prompt_id, each taken once sent or skipped as finished. The messages are copied per sample, so a
// stage that changes one sample's prompt leaves the others' alone.
func emitSamples(rec *record.Record, n int, out pipeline.Emitter) error {
	for k := 1; k <= n; k++ {
		id := sampleID(rec.ID, k)
		if out.SkipFinished(id) {
			out.Took(1)
			continue
		}
		r := *rec
		r.ID = id
		r.Messages = slices.Clone(rec.Messages)
		r.Meta = maps.Clone(rec.Meta)
		if r.Meta == nil {
			r.Meta = map[string]any{}
		}
		r.Meta[MetaSample], r.Meta[MetaPromptID] = k, rec.ID
		if err := out.Emit("", &r); err != nil {
			return err
		}
		out.Took(1)
	}
	return nil
}
