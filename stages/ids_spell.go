package stages

import (
	"fmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// ReasonIDsTextMismatch rejects a completion whose output ids do not
// spell its text (generate, validate-thinking, tokenize-and-mask).
const ReasonIDsTextMismatch = "ids_text_mismatch"

// idsMisspell says which part of c's text ("answer" or "thinking") its
// output ids, decoded, do not hold; "" when they hold both. Ids from
// another tokenizer than the server's (or another record's) would put
// garbage into training silently. generate watches the first completions
// of each server with it, validate-thinking and tokenize-and-mask judge
// every record with it.
func idsMisspell(decoded string, c *record.Completion) string {
	for _, part := range []struct{ name, text string }{{"answer", c.Answer}, {"thinking", c.Reasoning}} {
		if !strings.Contains(decoded, strings.TrimSpace(part.text)) {
			return part.name
		}
	}
	return ""
}

// idsMismatchDetail is the reject detail of an ids_text_mismatch.
func idsMismatchDetail(part, decoded string) string {
	return fmt.Sprintf("the output ids do not spell the completion's %s (they decode to %q); a different tokenizer than the server's?", part, termsafe.Cut(decoded, 120))
}
