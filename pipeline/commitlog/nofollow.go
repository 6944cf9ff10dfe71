package commitlog

import (
	"errors"
	"os"
	"syscall"
)

// errSymlink is the error of OpenFile on a symbolic link.
var errSymlink = errors.New("is a symbolic link: pipe does not write through one (remove it)")

// OpenFile is os.OpenFile for a file pipe owns (a run directory's lock,
// logs, journal, id log; a commit log and its index): it does not follow a
// symbolic link in the last element of path (O_NOFOLLOW), so a link planted
// there by another user makes the open fail instead of pipe writing into
// the link's target. The error then names path and says so.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &os.PathError{Op: "open", Path: path, Err: errSymlink}
	}
	return f, err
}
