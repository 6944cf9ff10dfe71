package runreport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// A JSONL output is read in chunks of whole lines, parsed by up to
// jsonlWorkers goroutines and taken in file order, so memory is bounded by
// the chunks in flight (never the file) whatever its size.
const (
	jsonlChunk   = 1 << 20
	jsonlWorkers = 4
)

// jsonlLine is the part of a record line the report reads.
type jsonlLine struct {
	ID string `json:"id"`
	// Tools: the conversation declares some.
	Tools      present `json:"tools"`
	Completion *struct {
		// Only the texts' lengths count: they are neither unescaped nor
		// copied (escapes make a length a little longer).
		Reasoning        strLen  `json:"reasoning"`
		Answer           strLen  `json:"answer"`
		FinishReason     string  `json:"finish_reason"`
		PromptTokens     int     `json:"prompt_tokens"`
		CompletionTokens int     `json:"completion_tokens"`
		ReasoningTokens  int     `json:"reasoning_tokens"`
		OutputIDs        idsList `json:"output_ids"`
		Request          struct {
			ThinkingForced bool `json:"thinking_forced"`
		} `json:"request"`
	} `json:"completion"`
	Tokens *struct {
		NumLossTokens int `json:"num_loss_tokens"`
	} `json:"tokens"`
	// Meta's cut_at_length marks a row validate-thinking kept though the
	// length limit stopped it (it fills the trainer's max_length).
	Meta *struct {
		CutAtLength bool `json:"cut_at_length"`
		Attempt     int  `json:"attempt"`
		Retried     int  `json:"retried_tokens"`
	} `json:"meta"`
	Reject  *record.Rejection `json:"reject"`
	Failure *record.Failure   `json:"failure"`
}

// lineOptions accept what encoding/json (which writes the lines) accepts.
var lineOptions = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// strLen is the length of a JSON string as written, without its quotes.
type strLen int

// present records whether a value is there and not empty (null, "", []
// or {}), without copying it.
type present bool

func (p *present) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	v, err := d.ReadValue()
	if err != nil {
		return err
	}
	switch string(v) {
	case "null", `""`, "[]", "{}":
		*p = false
	default:
		*p = true
	}
	return nil
}

func (s *strLen) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	v, err := d.ReadValue()
	if err != nil {
		return err
	}
	*s = 0
	if v.Kind() == '"' {
		*s = strLen(len(v) - 2)
	}
	return nil
}

// idsList is a token id list: the one the line's scan lifted out
// (stripped, its digits still in the line) or, when it was not a list of
// plain integers, the ids decoded.
type idsList struct {
	stripped bool
	ids      []int
}

// strippedMark stands for a lifted list in the line as decoded: a string,
// which a list of ids never is.
const strippedMark = `"\u0000ids"`

func (l *idsList) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	v, err := d.ReadValue()
	if err != nil {
		return err
	}
	if string(v) == strippedMark {
		l.stripped = true
		return nil
	}
	return json.Unmarshal(v, &l.ids)
}

// jsonl reads the committed lines of a commit log (lines past its last
// commit are not the output's yet), handing each to take in file order.
func (rd *reader) jsonl(path string, take func(*reader, *row)) error {
	f, size, err := rd.openCommitted(path)
	if f == nil || err != nil {
		return err
	}
	defer f.Close()
	if !rd.verdictsOnly {
		rd.tokenizer() // loaded once, before the workers share it
	}
	workers := max(1, min(jsonlWorkers, runtime.GOMAXPROCS(0)))
	cr := &chunkReader{
		r: io.LimitReader(f, size), todo: make(chan *chunk, workers), inOrder: make(chan *chunk, 2*workers),
		stop: make(chan struct{}), free: make(chan []byte, 3*workers+1), readErr: make(chan error, 1),
	}
	defer close(cr.stop)
	for range workers {
		go func() {
			p := rd.newLineParser()
			for c := range cr.todo {
				c.rows, c.err = p.chunk(path, c.data, c.line, c.rows[:0])
				close(c.ready)
			}
		}()
	}
	go cr.cut()
	for c := range cr.inOrder {
		<-c.ready
		for i := range c.rows {
			take(rd, &c.rows[i])
		}
		cr.reuse(c.data)
		if c.err != nil {
			return c.err
		}
		if err := rd.ctx.Err(); err != nil {
			return err
		}
	}
	select {
	case err := <-cr.readErr:
		return err
	default:
		return nil
	}
}

// openCommitted opens the commit log at path and says how many bytes of it
// are committed; a missing log is nil, nil.
func (rd *reader) openCommitted(path string) (*os.File, int64, error) {
	_, size, err := commitlog.Committed(path)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if _, ierr := os.Stat(commitlog.IndexPath(path)); errors.Is(ierr, os.ErrNotExist) {
		if st, err := f.Stat(); err == nil && st.Size() > 0 {
			// Copied or restored without its hidden index: nothing in it is
			// known to be committed.
			rd.r.note("%s has %d bytes but no commit index (%s): not counted", path, st.Size(), filepath.Base(commitlog.IndexPath(path)))
		}
	}
	return f, size, nil
}

// A chunk is whole lines of a file, parsed by a worker into rows.
type chunk struct {
	data  []byte
	line  int // of data's first line
	rows  []row
	err   error
	ready chan struct{} // closed when rows and err are set
}

// chunkReader cuts a file into chunks of whole lines, handed to the
// workers (todo) and, in file order, to the taker (inOrder).
type chunkReader struct {
	r             io.Reader
	todo, inOrder chan *chunk
	stop          chan struct{} // the taker is gone
	// free holds taken chunks' buffers, used again (a fresh 1 MB a chunk
	// keeps the collector busy).
	free    chan []byte
	readErr chan error
}

func (cr *chunkReader) reuse(b []byte) {
	select {
	case cr.free <- b[:0]:
	default:
	}
}

func (cr *chunkReader) cut() {
	defer close(cr.inOrder)
	defer close(cr.todo)
	var carry []byte
	line := 1
	for {
		buf := cr.buffer(max(jsonlChunk, 2*len(carry)))
		buf = append(buf, carry...)
		n, err := io.ReadFull(cr.r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		end := len(buf)
		if err == nil {
			end = bytes.LastIndexByte(buf, '\n') + 1 // 0: a line longer than the chunk
		}
		carry = append(carry[:0:0], buf[end:]...)
		if end > 0 {
			c := &chunk{data: buf[:end], line: line, ready: make(chan struct{})}
			line += bytes.Count(c.data, []byte{'\n'})
			if !cr.send(cr.inOrder, c) || !cr.send(cr.todo, c) {
				return
			}
		}
		if err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				cr.readErr <- err
			}
			return
		}
	}
}

// buffer is an empty buffer of at least need bytes.
func (cr *chunkReader) buffer(need int) []byte {
	var buf []byte
	select {
	case buf = <-cr.free:
	default:
	}
	if cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	return buf[:0]
}

func (cr *chunkReader) send(to chan *chunk, c *chunk) bool {
	select {
	case to <- c:
		return true
	case <-cr.stop:
		return false
	}
}

// lineParser parses record lines; each worker has its own.
type lineParser struct {
	rd  *reader
	buf []byte
	// endID is the tokenizer's </think> (-1 without one); class is
	// idClass of every id of its vocabulary (shared, read only).
	endID int
	class []uint8
}

// What an output id is to the split.
const (
	idText uint8 = iota
	idSpecial
	idEnd
)

func (rd *reader) newLineParser() *lineParser {
	p := &lineParser{rd: rd, endID: -1}
	if tok := rd.tok; tok != nil && !rd.verdictsOnly {
		if end, ok := tok.TokenID("</think>"); ok {
			p.endID = end
			// Built once, whole, before any parser reads it: the workers
			// make their parsers at once, and one that took a table still
			// being filled counted </think> as text.
			rd.idClassOnce.Do(func() {
				class := make([]uint8, max(tok.VocabSize(), end+1))
				for id := range class {
					if tok.IsSpecial(id) {
						class[id] = idSpecial
					}
				}
				class[end] = idEnd
				rd.idClass = class
			})
			p.class = rd.idClass
		}
	}
	return p
}

// chunk parses the lines of data (line numbers from first) onto rows.
func (p *lineParser) chunk(path string, data []byte, first int, rows []row) ([]row, error) {
	n := first
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			rows = append(rows, row{})
			if err := p.line(line, &rows[len(rows)-1]); err != nil {
				return rows[:len(rows)-1], fmt.Errorf("%s:%d: %v", path, n, err)
			}
		}
		n++
	}
	return rows, nil
}

// idLists are the token id lists of a record line the report does not
// decode: their thousands of numbers per row are skipped (prompt_ids,
// input_ids, loss_mask) or counted in place (output_ids, with a tokenizer).
var idLists = [...]string{"prompt_ids", "output_ids", "input_ids", "loss_mask"}

// idLists[outputIDsList] is output_ids, idLists[lossMaskList] loss_mask.
const (
	outputIDsList = 1
	lossMaskList  = 3
)

// line parses one record line into x. The id lists are lifted out first
// (the first occurrence of each key, written `"key":[`, when it holds only
// plain integers), so that decoding the rest does not scan thousands of
// numbers per row. One scan from '[' to '[' finds them: a key is the
// string before `":[`, whose opening quote no `\` precedes (a quote inside
// a string is escaped; a key-like text in a string is part of a key then,
// and only lists are lifted, so the line stays valid JSON whatever it
// holds, with a string in each lifted list's place). The output ids are
// counted in the same pass.
func (p *lineParser) line(line []byte, x *row) error {
	dec := p.lift(line, x)
	if p.rd.verdictsOnly {
		var l verdictLine
		if err := json.Unmarshal(dec, &l, lineOptions); err != nil {
			return err
		}
		x.id = l.ID
		x.setVerdict(l.Reject, l.Failure)
		return nil
	}
	var l jsonlLine
	if err := json.Unmarshal(dec, &l, lineOptions); err != nil {
		return err
	}
	x.id = l.ID
	x.hasTools = bool(l.Tools)
	if c := l.Completion; c != nil {
		x.hasCompletion, x.finishReason = true, c.FinishReason
		x.promptTokens, x.completionTokens, x.reasoningTokens = c.PromptTokens, c.CompletionTokens, c.ReasoningTokens
		x.reasoningBytes, x.answerBytes = int(c.Reasoning), int(c.Answer)
		x.thinkingForced = c.Request.ThinkingForced
		// Only a completion without the server's reasoning_tokens needs its
		// output ids, and only with a tokenizer to find </think> in them.
		if x.reasoningTokens <= 0 && p.endID >= 0 {
			if !c.OutputIDs.stripped {
				x.ids = idCount{}
				for _, id := range c.OutputIDs.ids {
					p.count(id, &x.ids)
				}
			}
		}
	}
	if t := l.Tokens; t != nil {
		x.hasTokens, x.lossTokens = true, t.NumLossTokens
	} else if x.mask.known {
		// A trainer layout's row (input_ids, loss_mask at the top): its
		// mask is its loss tokens.
		x.hasTokens, x.lossTokens = true, x.mask.all
	}
	x.cutAtLength = l.Meta != nil && l.Meta.CutAtLength
	if l.Meta != nil {
		x.attempt, x.retriedTokens = l.Meta.Attempt, l.Meta.Retried
	}
	x.setVerdict(l.Reject, l.Failure)
	return nil
}

// verdictLine is what Options.VerdictsOnly reads of a record line.
type verdictLine struct {
	ID      string            `json:"id"`
	Reject  *record.Rejection `json:"reject"`
	Failure *record.Failure   `json:"failure"`
}

func (x *row) setVerdict(j *record.Rejection, fl *record.Failure) {
	if j != nil {
		x.rejectStage, x.rejectReason = j.Stage, j.Reason
	}
	if fl != nil {
		x.failStage, x.failed = fl.Stage, fl.Error
	}
}

// lift returns line with its id lists lifted (p.buf, or line itself when
// none is), the output ids counted into x.ids (with a tokenizer) and the
// loss mask's ones into x.mask.
func (p *lineParser) lift(line []byte, x *row) []byte {
	var lifted [len(idLists)][2]int // [ and past ], by idLists index
	var got [len(idLists)]bool
	var cuts [len(idLists)]int
	ncut := 0
	ids := &x.ids
	for pos := 0; ncut < len(idLists); {
		i := bytes.IndexByte(line[pos:], '[')
		if i < 0 {
			break
		}
		at := pos + i
		pos = at + 1
		k := p.listKey(line, at)
		if k < 0 || got[k] {
			continue
		}
		got[k] = true
		var end int
		switch {
		case k == outputIDsList && p.endID >= 0:
			end = p.countIDs(line[at+1:], ids)
		case k == lossMaskList:
			end = maskEnd(line[at+1:], p.rd.maxLength, &x.mask)
		default:
			end = intsEnd(line[at+1:])
		}
		if end < 0 {
			continue // not plain integers: decoded as they are
		}
		lifted[k] = [2]int{at, at + 1 + end + 1}
		cuts[ncut] = k
		ncut++
		pos = lifted[k][1]
	}
	if ncut == 0 {
		return line
	}
	// The scan found the lists in line order.
	b, prev := p.buf[:0], 0
	for _, k := range cuts[:ncut] {
		b = append(b, line[prev:lifted[k][0]]...)
		b = append(b, strippedMark...)
		prev = lifted[k][1]
	}
	p.buf = append(b, line[prev:]...)
	return p.buf
}

// listKey is the idLists index of the key whose list opens at line[at]
// (`"output_ids":[`), or -1.
func (p *lineParser) listKey(line []byte, at int) int {
	if at < 3 || line[at-1] != ':' || line[at-2] != '"' {
		return -1
	}
	q := bytes.LastIndexByte(line[:at-2], '"')
	if q < 0 || (q > 0 && line[q-1] == '\\') {
		return -1
	}
	name := line[q+1 : at-2]
	for k, n := range idLists {
		if string(name) == n {
			return k
		}
	}
	return -1
}

// intByte: what a list of plain integers holds before its ']'.
var intByte = func() (t [256]bool) {
	for _, c := range []byte("0123456789,- ") {
		t[c] = true
	}
	return t
}()

// intsEnd is the index of the ']' that ends a list of plain integers
// starting at b (after its '['), or -1 when something else comes first.
func intsEnd(b []byte) int {
	for i, c := range b {
		if !intByte[c] {
			if c == ']' {
				return i
			}
			return -1
		}
	}
	return -1
}

// maskEnd is intsEnd over a loss mask, counting its ones into m: all of
// them, and those of its first max values (max 0: all). A mask holds 0
// and 1 (record.LossMask), so its ones are its '1' bytes, counted with
// bytes.Count at memory speed; only a row longer than max is walked to its
// max-th value.
func maskEnd(b []byte, max int, m *maskCount) int {
	end := intsEnd(b)
	if end < 0 {
		return -1
	}
	list := b[:end]
	m.known, m.all = true, bytes.Count(list, one)
	m.in = m.all
	if max == 0 || bytes.Count(list, comma) < max {
		return end
	}
	at := 0
	for range max {
		i := bytes.IndexByte(list[at:], ',')
		if i < 0 {
			return end
		}
		at += i + 1
	}
	m.in = bytes.Count(list[:at], one)
	return end
}

var one, comma = []byte{'1'}, []byte{','}

// countIDs is intsEnd, counting the ids into c as it goes (c is
// meaningful only when it returns >= 0).
func (p *lineParser) countIDs(b []byte, c *idCount) int {
	id, neg, digits := 0, false, false
	for i := 0; i < len(b); i++ {
		ch := b[i]
		switch {
		case ch >= '0' && ch <= '9':
			// The rest of the number in a tight loop: the ids' digits are
			// most of an output's bytes.
			id, digits = id*10+int(ch-'0'), true
			for i+1 < len(b) && b[i+1]-'0' < 10 {
				i++
				id = id*10 + int(b[i]-'0')
			}
			continue
		case ch == '-':
			neg = true
			continue
		case ch == ' ':
			continue
		case ch != ',' && ch != ']':
			return -1
		}
		if digits {
			if neg {
				id = -id
			}
			p.count(id, c)
		}
		if ch == ']' {
			return i
		}
		id, neg, digits = 0, false, false
	}
	return -1
}

// count adds one output id to c.
func (p *lineParser) count(id int, c *idCount) {
	c.any = true
	class := idText
	if uint(id) < uint(len(p.class)) {
		class = p.class[id]
	} else if p.rd.tok.IsSpecial(id) {
		class = idSpecial
	}
	switch class {
	case idText:
		c.n++
	case idEnd:
		c.before, c.end = c.n, true
	}
}
