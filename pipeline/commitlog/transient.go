package commitlog

import (
	"errors"
	"syscall"
)

// noRoom reports whether err is a full disk or an exhausted quota: a
// fault that goes once room is made, after which the same command goes on.
func noRoom(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// TransientIO reports whether err is a fault of the machine rather than of
// the run's files or settings: no room, or an I/O error of the device. A
// run that meets one fails with the exit code that says "retry" (1),
// wherever it meets it, at its start as in its middle.
func TransientIO(err error) bool {
	return noRoom(err) || errors.Is(err, syscall.EIO)
}
