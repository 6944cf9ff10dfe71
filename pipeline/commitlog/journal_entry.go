package commitlog

import (
	"encoding/json"
	"errors"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// JournalEntry is one line of an expensive stage's journal: a record the
// stage sent out, and on which port. The engine writes it; a replay
// (read-journal), pipe inspect and the engine's recovery read it.
type JournalEntry struct {
	Port   string         `json:"port"`
	Record *record.Record `json:"record"`
}

// ErrNotJournalEntry is a line that is not a whole journal entry with a
// record id.
var ErrNotJournalEntry = errors.New(`not a journal entry (want {"port", "record"} with a record id)`)

// ParseJournalEntry reads a journal line.
func ParseJournalEntry(line []byte) (*JournalEntry, error) {
	var e JournalEntry
	if err := json.Unmarshal(line, &e); err != nil || e.Record == nil || e.Record.ID == "" {
		return nil, ErrNotJournalEntry
	}
	return &e, nil
}

// JournalEntryID reads only the record id of a journal line (the
// journal's recovery reads every line's; the record is not decoded).
func JournalEntryID(line []byte) (string, error) {
	var e struct {
		Record *struct {
			ID *string `json:"id"`
		} `json:"record"`
	}
	if err := json.Unmarshal(line, &e); err != nil || e.Record == nil || e.Record.ID == nil {
		return "", ErrNotJournalEntry
	}
	return *e.Record.ID, nil
}
