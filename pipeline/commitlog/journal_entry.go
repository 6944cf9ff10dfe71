package commitlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// JournalEntry is one line of an expensive stage's journal: a record the
// stage sent out, and on which port. The engine writes it; a replay
// (read-journal), pipe inspect and the engine's recovery read it.
//
// A line carries a checksum of its bytes as its first member:
//
//	{"crc":"1f2e3d4c","port":"out","record":{...}}
//
// The CRC-32C (Castagnoli) covers every byte after `{"crc":"XXXXXXXX",`.
// A line without it (written before pipe kept checksums) is read as it
// is. A line whose checksum does not match was changed after it was
// written (a bad sector, a torn page, a hand): it is damaged, even when
// it still parses.
type JournalEntry struct {
	Port   string         `json:"port"`
	Record *record.Record `json:"record"`
}

// errNotJournalEntry is a line that is not a whole journal entry with a
// record id.
var errNotJournalEntry = errors.New(`not a journal entry (want {"port", "record"} with a record id)`)

// errJournalChecksum is a line whose bytes do not match its checksum.
var errJournalChecksum = errors.New("its checksum does not match its bytes (changed after it was written)")

// crcPrefix is what a checksummed line starts with; the 8 hex digits of
// the checksum follow, then `",`, then the checksummed bytes.
const (
	crcPrefix   = `{"crc":"`
	crcHeadSize = len(crcPrefix) + 8 + 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendJournalEntry appends e's line (without a newline) to dst, its
// checksum first.
func AppendJournalEntry(dst []byte, e JournalEntry) ([]byte, error) {
	// The entry's JSON goes after a head of the checksum's size; its
	// opening brace becomes the comma after the checksum, so the line is
	// one JSON object and no byte is copied.
	head := len(dst)
	dst = append(dst, crcPrefix+`00000000"`...)
	out, err := record.AppendJSON(dst, e)
	if err != nil {
		return nil, err
	}
	if len(out) < crcHeadSize || out[crcHeadSize-1] != '{' {
		return nil, fmt.Errorf("journal entry of %q: its JSON is not an object", e.Record.ID)
	}
	out[head+crcHeadSize-1] = ','
	sum := crc32.Checksum(out[head+crcHeadSize:], castagnoli)
	var hex [9]byte
	strconv.AppendUint(hex[:0], uint64(sum)|1<<32, 16) // 9 digits: the first is the 1
	copy(out[head+len(crcPrefix):], hex[1:])
	return out, nil
}

// checkJournalLine reports whether line carries a checksum and, when it
// does, returns errJournalChecksum if the checksum does not match.
func checkJournalLine(line []byte) (checked bool, err error) {
	if len(line) < crcHeadSize || string(line[:len(crcPrefix)]) != crcPrefix {
		return false, nil
	}
	if line[crcHeadSize-2] != '"' || line[crcHeadSize-1] != ',' {
		return true, errJournalChecksum
	}
	want, perr := strconv.ParseUint(string(line[len(crcPrefix):crcHeadSize-2]), 16, 32)
	if perr != nil || uint32(want) != crc32.Checksum(line[crcHeadSize:], castagnoli) {
		return true, errJournalChecksum
	}
	return true, nil
}

// ParseJournalEntry reads a journal line, checking its checksum.
func ParseJournalEntry(line []byte) (*JournalEntry, error) {
	if _, err := checkJournalLine(line); err != nil {
		return nil, err
	}
	var e JournalEntry
	if err := json.Unmarshal(line, &e); err != nil || e.Record == nil || e.Record.ID == "" {
		return nil, errNotJournalEntry
	}
	return &e, nil
}

// JournalEntryID reads only the record id of a journal line (the
// journal's recovery reads every line's; the record is not decoded),
// checking its checksum.
func JournalEntryID(line []byte) (string, error) {
	checked, err := checkJournalLine(line)
	if err != nil {
		return "", err
	}
	if checked {
		// The bytes are the ones AppendJournalEntry wrote: the id is
		// where it put it, and the rest need not be decoded (a start
		// reads whole segments of completions through here).
		if id, ok := idAfterHead(line[crcHeadSize:]); ok {
			return id, nil
		}
	}
	var e struct {
		Record *struct {
			ID *string `json:"id"`
		} `json:"record"`
	}
	if err := json.Unmarshal(line, &e); err != nil || e.Record == nil || e.Record.ID == nil {
		return "", errNotJournalEntry
	}
	return *e.Record.ID, nil
}

// idAfterHead reads the record id of a checksummed line's body,
// `"port":"…","record":{"id":"…"…`, as AppendJournalEntry writes it; ok is
// false for any other shape (then the line is decoded in full).
func idAfterHead(body []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(body, []byte(`"port":`))
	if !ok {
		return "", false
	}
	_, rest, ok = jsonString(rest)
	if !ok {
		return "", false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"record":{"id":`)); !ok {
		return "", false
	}
	id, _, ok := jsonString(rest)
	return id, ok && id != ""
}

// jsonString reads the JSON string at the start of b and returns it and
// what follows it.
func jsonString(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	escaped := false
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++ // the escaped byte
		case '"':
			if !escaped {
				return string(b[1:i]), b[i+1:], true
			}
			var s string
			if json.Unmarshal(b[:i+1], &s) != nil {
				return "", nil, false
			}
			return s, b[i+1:], true
		}
	}
	return "", nil, false
}
