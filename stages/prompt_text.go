package stages

import (
	"strings"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// The text of a prompt that the prompt hygiene kinds (near duplicates,
// benchmark overlap) compare: which turns, and the system prompt or not.

// promptText is rec's turns that which names ("user", "last-user" or
// "all"), and its system prompt first with system, one turn a line.
func promptText(rec *record.Record, which string, system bool) string {
	var b strings.Builder
	last := -1
	if which == "last-user" {
		for i, m := range rec.Messages {
			if m.Role == "user" {
				last = i
			}
		}
	}
	for i, m := range rec.Messages {
		take := false
		switch {
		case m.Role == "system":
			take = system
		case which == "all":
			take = true
		case which == "user":
			take = m.Role == "user"
		case which == "last-user":
			take = i == last
		}
		if take {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(m.Content)
		}
	}
	return b.String()
}
