package chat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
	"github.com/go-json-experiment/json/jsontext"
)

// valueOpts read JSON as Python's json.loads does: a repeated key is read
// again (the last value wins), and invalid UTF-8 becomes U+FFFD (as
// Hugging Face's Python side would never see it). The library's nesting
// limit (10,000) bounds a hostile message's depth.
var valueOpts = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// fromJSON decodes JSON into a template value the way Python's json.loads
// does: objects keep key order (jinja.NewDict), integers stay ints and
// numbers with a fraction or exponent become floats. It reads tokens with
// jsontext; the values are built as it goes, with no tree in between.
func fromJSON(b []byte) (jinja.Value, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b), valueOpts...)
	v, err := readValue(dec)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the JSON value")
		}
		return jinja.Undefined(), err
	}
	return v, nil
}

// readValue reads one value from dec.
func readValue(dec *jsontext.Decoder) (jinja.Value, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch tok.Kind() {
	case '{':
		return readObject(dec)
	case '[':
		return readList(dec)
	case '"':
		return jinja.NewString(tok.String()), nil
	case 't', 'f':
		return jinja.NewBool(tok.Bool()), nil
	case 'n':
		return jinja.None(), nil
	}
	return number(tok.String())
}

// readObject reads the members of an object whose '{' was read.
func readObject(dec *jsontext.Decoder) (jinja.Value, error) {
	d := jinja.NewDict()
	dict := d.AsDict()
	for dec.PeekKind() != '}' {
		k, err := dec.ReadToken()
		if err != nil {
			return jinja.Undefined(), err
		}
		key := k.String() // before the next read voids k
		v, err := readValue(dec)
		if err != nil {
			return jinja.Undefined(), err
		}
		dict.Set(key, v)
	}
	_, err := dec.ReadToken()
	return d, err
}

// readList reads the elements of an array whose '[' was read.
func readList(dec *jsontext.Decoder) (jinja.Value, error) {
	var items []jinja.Value
	for dec.PeekKind() != ']' {
		v, err := readValue(dec)
		if err != nil {
			return jinja.Undefined(), err
		}
		items = append(items, v)
	}
	_, err := dec.ReadToken()
	return jinja.NewList(items), err
}

// number is an int when it has no fraction or exponent, else a float
// (jsontext has checked its syntax). An int beyond int64 is an error:
// Python keeps it exact and prints every digit, the template engine has no
// such value, and a float would print other digits.
func number(raw string) (jinja.Value, error) {
	if !strings.ContainsAny(raw, ".eE") {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("the integer %s does not fit in 64 bits, so it cannot be rendered as Python prints it", raw)
		}
		return jinja.NewInt(n), nil
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewFloat(f), nil
}
