package runreport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
)

// A JSONL output is read in chunks of whole lines, parsed by up to
// jsonlWorkers goroutines and taken in file order, so memory is bounded by
// the chunks in flight (never the file) whatever its size.
const (
	jsonlChunk   = 1 << 20
	jsonlWorkers = 4
)

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

// lineParser parses record lines (recordline.Parser); each worker has
// its own.
type lineParser struct {
	*recordline.Parser
	// counting: output ids are counted (a tokenizer with </think>).
	counting bool
}

func (rd *reader) newLineParser() *lineParser {
	o := recordline.Options{VerdictsOnly: rd.verdictsOnly, MaxLength: rd.maxLength}
	if tok := rd.tok; tok != nil && !rd.verdictsOnly {
		if end, ok := tok.TokenID("</think>"); ok {
			// Built once, whole, before any parser reads it: the workers
			// make their parsers at once, and one that took a table still
			// being filled counted </think> as text.
			rd.idClassOnce.Do(func() {
				class := make([]uint8, max(tok.VocabSize(), end+1))
				for id := range class {
					if tok.IsSpecial(id) {
						class[id] = recordline.ClassSpecial
					}
				}
				class[end] = recordline.ClassEnd
				rd.idClass = class
			})
			o.Classes, o.Special = rd.idClass, tok.IsSpecial
		}
	}
	return &lineParser{Parser: recordline.NewParser(o), counting: o.Classes != nil}
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
			if err := p.Parse(line, &rows[len(rows)-1]); err != nil {
				return rows[:len(rows)-1], fmt.Errorf("%s:%d: %v", path, n, err)
			}
		}
		n++
	}
	return rows, nil
}
