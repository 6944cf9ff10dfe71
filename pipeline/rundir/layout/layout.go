// Package layout is the one declaration of a run directory's files and
// folders: every package that reads or writes one names them here, so
// that changing the on-disk layout is an edit of this file. It imports
// nothing of pipe's, so that any package may import it.
//
//	RUN_DIR/
//	  run.json          the settings that define the data, every start
//	  .run.json.copy    its copy, read when run.json is damaged
//	  status.json       the live figures, replaced as the run goes
//	  timeline.jsonl    one line per start and stop
//	  run.log           the run's log
//	  detached.log      what a detached run printed before its log opened
//	  lock              held by the process that runs the directory
//	  done.ids          the finished ids
//	  journal/STAGE/    an expensive stage's results, kept until committed
//	  journal-STAGE.json  its segments' listing
//	  rejected/STAGE.jsonl  rejections no stage takes
//	  failed/STAGE.jsonl    records that failed (done again by the next start)
//	  failed/.recovered.ids  the ids of those a later start finished
//	  uploads/STAGE.jsonl   an upload stage's ledger
//	  out/              outputs of a replay into the run directory
//	  report.html       pipe report's page
package layout

import "path/filepath"

// The names inside a run directory.
const (
	Run         = "run.json"
	RunCopy     = ".run.json.copy"
	Status      = "status.json"
	Timeline    = "timeline.jsonl"
	RunLog      = "run.log"
	DetachedLog = "detached.log"
	Lock        = "lock"
	Done        = "done.ids"
	Journals    = "journal"
	Uploads     = "uploads"
	Out         = "out"
	Report      = "report.html"
	// Rejected and Failed are the dead-letter folders, one per class.
	Rejected = "rejected"
	Failed   = "failed"
)

// DeadLetterClasses are the dead-letter folders' classes.
var DeadLetterClasses = []string{Rejected, Failed}

// JournalDir is the folder of every stage's journal.
func JournalDir(runDir string) string { return filepath.Join(runDir, Journals) }

// Journal is stage's journal folder (segments).
func Journal(runDir, stage string) string { return filepath.Join(runDir, Journals, stage) }

// LegacyJournal is stage's journal as one file, as older runs wrote it.
func LegacyJournal(runDir, stage string) string {
	return filepath.Join(runDir, Journals, stage+".jsonl")
}

// JournalListing is the listing of stage's journal segments.
func JournalListing(runDir, stage string) string {
	return filepath.Join(runDir, Journals+"-"+stage+".json")
}

// DeadLetterDir is the folder of class (Rejected or Failed).
func DeadLetterDir(runDir, class string) string { return filepath.Join(runDir, class) }

// Recovered is the id log of failed records that a later start finished
// (they stay in failed/, and count as failed no more).
func Recovered(runDir string) string { return filepath.Join(runDir, Failed, ".recovered.ids") }

// DeadLetters is where stage's records of class go.
func DeadLetters(runDir, class, stage string) string {
	return filepath.Join(runDir, class, stage+".jsonl")
}

// UploadLedger is an upload stage's ledger of what it uploaded.
func UploadLedger(runDir, stage string) string {
	return filepath.Join(runDir, Uploads, stage+".jsonl")
}

// OutFile is a replay's output named name inside the run directory.
func OutFile(runDir, name string) string { return filepath.Join(runDir, Out, name) }

// File is name (one of the constants) inside runDir.
func File(runDir, name string) string { return filepath.Join(runDir, name) }
