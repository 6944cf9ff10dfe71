package output

// ReplaySpec marks a source kind that pipe run --from STAGE=RUN_DIR puts
// in place of STAGE: it reads what STAGE produced in the original run,
// either STAGE's journal or the committed output of a writer fed by STAGE
// alone (read with its kind's Spec). The surgery (pipeline.replaceFrom)
// finds the reader here, so it names no kind.
type ReplaySpec struct {
	// Reads is ReplaysJournal or ReplaysOutput.
	Reads string
	// Config is the reader's keys to read, in runDir, the journal of
	// stage (ReplaysJournal), or the output at path written by a stage of
	// kind writer (ReplaysOutput).
	Config func(runDir, stage, writer, path string) map[string]any
}

// What a ReplaySpec reads.
const (
	ReplaysJournal = "journal"
	ReplaysOutput  = "output"
)
