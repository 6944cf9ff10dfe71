package pipeline

import (
	"errors"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// permanentError is a refusal no retry mends: wrong credentials, a bucket
// that does not exist, access denied, a damaged manifest. pipe exits 2 on
// one, so a scheduler does not run the same command again.
type permanentError struct{ Err error }

func (e *permanentError) Error() string { return e.Err.Error() }
func (e *permanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{Err: err}
}

// IsPermanent reports whether err (or one it wraps) is permanent: marked by
// Permanent, or a damaged file of pipe's own (commitlog.DamagedError).
func IsPermanent(err error) bool {
	var p *permanentError
	var d *commitlog.DamagedError
	return errors.As(err, &p) || errors.As(err, &d)
}
