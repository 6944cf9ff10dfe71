package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// DoneFile is the run directory's log of finished ids (see commitlog.IDLog).
const DoneFile = "done.ids"

// A ticket follows one record read by a source through the graph. Its count
// is the number of places the record (and its fan-out copies) still has to
// be committed; when it reaches zero the record's id is finished and goes
// into the run directory's done log. A record abandoned by a stop never
// reaches zero, so its id is redone by the next run.
type ticket struct {
	id string
	n  atomic.Int32
	// void tickets never finish their id (a duplicate of an earlier record).
	void atomic.Bool
}

func (l *ledger) newTicket(id string) *ticket {
	l.made.Add(1)
	t := &ticket{id: id}
	t.n.Store(1)
	return t
}

// unmake takes back the ticket a source's record got for a send that a
// stop cut short: the record was not read (the next run reads it).
func (l *ledger) unmake(rec *Record) {
	if rec.ticket != nil {
		l.made.Add(-1)
		rec.ticket = nil
	}
}

// unfinished is how many records the sources read this run that did not
// finish (abandoned by a stop, or still on their way).
func (l *ledger) unfinished() int64 {
	return l.made.Load() - l.added.Load() - l.alreadyDone.Load() - l.voided.Load()
}

// ledger is the run directory's record of what is finished: the done log,
// and in memory the set it held when the run started (8 bytes an id). Ids
// finished during the run are only appended to the log, so memory does not
// grow with the input.
type ledger struct {
	log     *commitlog.IDLog
	set     *commitlog.Set // read-only after open
	atStart int
	added   atomic.Int64
	// Tickets: made for records the sources read, and how they ended.
	made, alreadyDone, voided atomic.Int64
	// full is called when many finished ids wait for a commit.
	full func()
	// fresh are the hashes finished since the last commit (those done at
	// start too), for the journals: a segment goes once all its ids did.
	freshMu sync.Mutex
	fresh   []uint64
}

func openLedger(runDir string) (*ledger, error) {
	log, hashes, err := commitlog.OpenIDLog(filepath.Join(runDir, DoneFile))
	if err != nil {
		return nil, fmt.Errorf("run directory state: %w", err)
	}
	set := commitlog.NewSet(hashes)
	return &ledger{log: log, set: set, atStart: set.Len()}, nil
}

// Has reports whether id was finished when the run started (DoneSet).
func (l *ledger) Has(id string) bool { return l.set.Has(commitlog.Hash(id)) }

// Len is the number of ids finished when the run started (DoneSet).
func (l *ledger) Len() int { return l.atStart }

// finished is the number of finished ids, this run's included.
func (l *ledger) finished() int { return l.atStart + int(l.added.Load()) }

// release drops one of t's pending places; the last one finishes its id.
func (l *ledger) release(t *ticket) {
	if t == nil || t.n.Add(-1) != 0 {
		return
	}
	if t.void.Load() {
		l.voided.Add(1)
		return
	}
	h := commitlog.Hash(t.id)
	if l.set.Has(h) {
		l.alreadyDone.Add(1)
	} else {
		if l.log.Add(h) == maxPending && l.full != nil {
			l.full()
		}
		l.added.Add(1)
	}
	l.freshMu.Lock()
	l.fresh = append(l.fresh, h)
	l.freshMu.Unlock()
}

// unfinish takes hashes out of the finished set and done.ids (Env.Unfinish).
// Only while the stages open: nothing reads the set or adds to the log yet.
func (l *ledger) unfinish(hashes []uint64) error {
	if len(hashes) == 0 {
		return nil
	}
	drop := make(map[uint64]bool, len(hashes))
	for _, h := range hashes {
		drop[h] = true
	}
	path := l.log.Path()
	if err := l.log.Close(); err != nil {
		return err
	}
	if _, err := commitlog.RewriteIDLog(path, func(h uint64) bool { return drop[h] }); err != nil {
		return fmt.Errorf("run directory state: %w", err)
	}
	log, kept, err := commitlog.OpenIDLog(path)
	if err != nil {
		return fmt.Errorf("run directory state: %w", err)
	}
	l.log, l.set = log, commitlog.NewSet(kept)
	l.atStart = l.set.Len()
	return nil
}

// commit makes the finished ids durable and returns the hashes that this
// made (or that were) finished for good since the last commit. One taken
// after the commit began waits for the next.
func (l *ledger) commit() ([]uint64, error) {
	l.freshMu.Lock()
	fresh := l.fresh
	l.fresh = nil
	l.freshMu.Unlock()
	if err := l.log.Commit(); err != nil {
		return nil, err
	}
	return fresh, nil
}
func (l *ledger) close() error { return l.log.Close() }

// RecordLineID is the commitlog.IDFunc of a file of records (one JSON
// record per line, as write-jsonl and the rejected/failed files hold).
//
// It accepts exactly the lines encoding/json's Unmarshal into
// struct{ ID *string `json:"id"` } accepts with a non-nil id, and gives the
// same id (the last member named "id" in any case; invalid UTF-8 as
// U+FFFD), in one pass over the line that decodes nothing but the id: the
// end-of-run verification reads every line of a run's outputs, and
// Unmarshal's validation pass plus its decoding pass over the token id
// lists were a tenth of the CPU of a whole rehearsal.
//
// The decoder reads the line with its lists of plain integers emptied
// (liftInts): a row's thousands of token ids were most of its cost.
func RecordLineID(line []byte) (string, error) {
	ld := lineDecoders.Get().(*lineDecoder)
	defer lineDecoders.Put(ld)
	ld.buf = liftInts(ld.buf[:0], line)
	d := &ld.dec
	d.Reset(bytes.NewReader(ld.buf), lineOpts...)
	id, ok := recordLineID(d)
	d.Reset(bytes.NewReader(nil), lineOpts...) // drop the line
	if cap(ld.buf) > 1<<20 {
		ld.buf = nil
	}
	if !ok {
		return "", errors.New("not a whole record")
	}
	return id, nil
}

type lineDecoder struct {
	dec jsontext.Decoder
	buf []byte // the line, lifted
}

var (
	lineOpts     = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}
	lineDecoders = sync.Pool{New: func() any {
		ld := new(lineDecoder)
		ld.dec.Reset(bytes.NewReader(nil), lineOpts...)
		return ld
	}}
)

// liftInts appends line to dst with every list of plain integers outside
// a string written as [] instead: `[`, then JSON integers (-?(0|[1-9]\d*))
// joined by commas, `]`, without spaces (as encoding/json writes them).
// A JSON decoder accepts the result exactly when it accepts line, and
// reads the same strings from it: a string is never changed (the scan
// knows where strings are as a decoder's lexer does: every quote outside
// one opens one, a backslash inside escapes the next byte), and such a
// list is a complete array wherever it stands, as [] is. Up to a
// syntax error the scan and a decoder agree on what is a string, and a
// decoder fails at that error either way. Anything else is left as it is
// for the decoder to judge.
func liftInts(dst, line []byte) []byte {
	from := 0 // line[from:] is not copied yet
	for i := 0; i < len(line); {
		switch line[i] {
		case '"':
			i = closingQuote(line, i+1)
		case '[':
			if end := intsListEnd(line[i+1:]); end > 0 {
				dst = append(dst, line[from:i+1]...)
				from = i + 1 + end // the ']'
				i = from + 1
				continue
			}
			i++
		default:
			i++
		}
	}
	return append(dst, line[from:]...)
}

// closingQuote is the index after the quote that closes the string whose
// body starts at line[i] (len(line) when none does).
func closingQuote(line []byte, i int) int {
	for {
		q := bytes.IndexByte(line[i:], '"')
		if q < 0 {
			return len(line)
		}
		q += i
		bs := 0 // backslashes right before the quote
		for bs < q-i && line[q-1-bs] == '\\' {
			bs++
		}
		if bs%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// intsListEnd is the index in b (what follows a '[') of the ']' that ends
// a non-empty list of JSON integers with no spaces, or -1.
func intsListEnd(b []byte) int {
	i := 0
	for {
		if i < len(b) && b[i] == '-' {
			i++
		}
		switch {
		case i >= len(b):
			return -1
		case b[i] == '0':
			i++
		case b[i] >= '1' && b[i] <= '9':
			i++
			for i < len(b) && b[i] >= '0' && b[i] <= '9' {
				i++
			}
		default:
			return -1
		}
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			return i
		default:
			return -1
		}
	}
}

func recordLineID(d *jsontext.Decoder) (id string, ok bool) {
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return "", false
	}
	has := false
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return "", false
		}
		if !strings.EqualFold(name.String(), "id") {
			if d.SkipValue() != nil {
				return "", false
			}
			continue
		}
		v, err := d.ReadToken()
		switch {
		case err != nil:
			return "", false
		case v.Kind() == 'n':
			has = false // null leaves the pointer nil
		case v.Kind() == '"':
			id, has = v.String(), true
		default:
			return "", false // a number, bool or composite is not an id
		}
	}
	if _, err := d.ReadToken(); err != nil { // the closing '}'
		return "", false
	}
	if _, err := d.ReadToken(); err != io.EOF { // nothing after the record
		return "", false
	}
	return id, has
}

// journalLineID is the commitlog.IDFunc of a journal.
func journalLineID(line []byte) (string, error) {
	var e struct {
		Record *struct {
			ID *string `json:"id"`
		} `json:"record"`
	}
	if err := json.Unmarshal(line, &e); err != nil || e.Record == nil || e.Record.ID == nil {
		return "", errors.New("not a whole journal entry")
	}
	return *e.Record.ID, nil
}
