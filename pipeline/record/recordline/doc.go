// Package recordline owns pipe's record line: one JSON record per line,
// as write-jsonl, the rejected/failed files and a journal's entries hold
// it. pipe writes it through encoding/json (record.Record); every reader
// that does not decode it whole reads it here: its id (ID, a commit log's
// IDFunc), what the report and inspect count of it (Parser, Row), a
// trainer row's input ids (EachInputID), a journal entry's record
// (JournalRecord), and the meta keys pipe's stages set (Meta*).
package recordline
