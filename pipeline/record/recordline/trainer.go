package recordline

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// EachInputID calls each for the input ids of a trainer row (the
// specforge layout: {"id", "input_ids", "loss_mask"}), the first max of
// them (0: all), with whether the loss mask trains it; a row with a mask
// gives as many ids as its mask has values. ok is false for a line
// without a list of plain integers under input_ids.
func EachInputID(line []byte, max int, each func(id int, loss bool)) (ok bool) {
	ids, mask := listAt(line, "input_ids"), listAt(line, "loss_mask")
	if ids < 0 {
		return false
	}
	var train []bool
	hasMask := mask >= 0 && eachInt(line[mask:], func(v int) { train = append(train, v == 1) }) >= 0
	n := 0
	end := eachInt(line[ids:], func(id int) {
		if (max > 0 && n >= max) || (hasMask && n >= len(train)) {
			return
		}
		each(id, hasMask && train[n])
		n++
	})
	return end >= 0
}

// listAt is the index past the '[' of the first list under key in line,
// or -1.
func listAt(line []byte, key string) int {
	for pos := 0; ; {
		i := bytes.IndexByte(line[pos:], '[')
		if i < 0 {
			return -1
		}
		at := pos + i
		pos = at + 1
		if name, ok := keyBefore(line, at); ok && string(name) == key {
			return at + 1
		}
	}
}

// JournalRecord is the record of a journal entry's line
// ({"crc":…,"port":…,"record":{…}}, as commitlog.AppendJournalEntry
// writes it; {"port":…,"record":{…}} before checksums) as a record line,
// and whether line is one. The checksum is the journal's to check
// (commitlog.ParseJournalEntry).
func JournalRecord(line []byte) ([]byte, bool) {
	d := jsontext.NewDecoder(bytes.NewReader(line), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return nil, false
	}
	for first := true; d.PeekKind() == '"'; first = false {
		name, err := d.ReadToken()
		if err != nil {
			return nil, false
		}
		switch k := name.String(); {
		case k == "record":
			v, err := d.ReadValue()
			if err != nil || v.Kind() != '{' {
				return nil, false
			}
			return bytes.Clone(v), true
		case first && k != "crc" && k != "port":
			return nil, false // a record line, or something else
		}
		if d.SkipValue() != nil {
			return nil, false
		}
	}
	return nil, false
}
