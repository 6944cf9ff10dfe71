package stages

// Text helpers for the stages' details and messages.

import (
	"encoding/json"
	"errors"
	"fmt"
)

// jsonErrText is a JSON error as a bad line's detail, with its byte offset
// where it has one.
func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	return err.Error()
}
