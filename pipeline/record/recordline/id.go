package recordline

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// ID is the commitlog.IDFunc of a file of records (one JSON
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
func ID(line []byte) (string, error) {
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
