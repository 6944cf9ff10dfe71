package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Committed returns how many lines of the log at path are committed and
// the bytes they take from the start of the file (what a reader may use;
// bytes past them are pending or torn, not the log's yet). It reads only the
// index's header and last entry, without opening the log for writing. A log
// without an index has none (0, 0, nil).
func Committed(path string) (rows int, bytes int64, err error) {
	f, err := os.Open(IndexPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	var head [len(indexMagic)]byte
	if _, err := io.ReadFull(f, head[:]); err != nil || string(head[:]) != indexMagic {
		return 0, 0, fmt.Errorf("%s: not a commit index", IndexPath(path))
	}
	entries := (st.Size() - int64(len(indexMagic))) / entrySize
	if entries == 0 {
		return 0, 0, nil
	}
	var e [entrySize]byte
	if _, err := f.ReadAt(e[:], int64(len(indexMagic))+(entries-1)*entrySize); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", IndexPath(path), err)
	}
	return int(entries), int64(binary.LittleEndian.Uint64(e[8:])), nil
}
