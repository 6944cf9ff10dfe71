package record

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// LineID is the commitlog.IDFunc of a file of records (one JSON
// record per line, as write-jsonl and the rejected/failed files hold).
//
// It accepts exactly the lines encoding/json's Unmarshal into
// struct{ ID *string `json:"id"` } accepts with a non-nil id, and gives the
// same id (the last member named "id" in any case; invalid UTF-8 as
// U+FFFD), in one pass over the line that decodes nothing but the id: the
// end-of-run verification reads every line of a run's outputs, and
// Unmarshal's validation pass plus its decoding pass over the token id
// lists were a tenth of the CPU of a whole rehearsal.
func LineID(line []byte) (string, error) {
	d := lineDecoders.Get().(*jsontext.Decoder)
	defer lineDecoders.Put(d)
	d.Reset(bytes.NewReader(line), lineOpts...)
	id, ok := recordLineID(d)
	d.Reset(bytes.NewReader(nil), lineOpts...) // drop the line
	if !ok {
		return "", errors.New("not a whole record")
	}
	return id, nil
}

var (
	lineOpts     = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}
	lineDecoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewReader(nil), lineOpts...) }}
)

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
