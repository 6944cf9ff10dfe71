package recordline

// The meta keys pipe's stages set on a record, read back by the report.
const (
	// MetaCutAtLength marks a completion cut by the length limit where
	// its row fills the trainer's max_length: kept (validate-thinking),
	// its row ending at its last generated token (tokenize-and-mask).
	MetaCutAtLength = "cut_at_length"
	// MetaAttempt is the attempt a record is on: 2 and up once a second
	// chance sent it on (validate-thinking's or filter's second_chance).
	MetaAttempt = "attempt"
	// MetaRetriedAfter lists the reasons of the attempts dropped before.
	MetaRetriedAfter = "retried_after"
	// MetaRetriedTokens sums the output tokens of the completions
	// dropped: decoded, and no row keeps them.
	MetaRetriedTokens = "retried_tokens"
)

// Marks are the meta keys the report counts.
type Marks struct {
	CutAtLength   bool
	Attempt       int
	RetriedTokens int
}

// MarksOf reads the marks of a record's meta, as set in a run (ints) or
// read back from JSON (float64s).
func MarksOf(meta map[string]any) Marks {
	cut, _ := meta[MetaCutAtLength].(bool)
	return Marks{CutAtLength: cut, Attempt: metaInt(meta[MetaAttempt]), RetriedTokens: metaInt(meta[MetaRetriedTokens])}
}

func metaInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	}
	return 0
}
