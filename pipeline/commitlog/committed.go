package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// CommittedSize is how many bytes at the start of the log at path are
// committed: the end of its last committed line, from the index, read
// without opening the log for writing. Bytes past it are pending or torn
// and are not the log's yet. A log without an index has none (0, nil).
func CommittedSize(path string) (int64, error) {
	f, err := os.Open(IndexPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var head [len(indexMagic)]byte
	if _, err := io.ReadFull(f, head[:]); err != nil || string(head[:]) != indexMagic {
		return 0, fmt.Errorf("%s: not a commit index", IndexPath(path))
	}
	entries := (st.Size() - int64(len(indexMagic))) / entrySize
	if entries == 0 {
		return 0, nil
	}
	var e [entrySize]byte
	if _, err := f.ReadAt(e[:], int64(len(indexMagic))+(entries-1)*entrySize); err != nil {
		return 0, fmt.Errorf("%s: %w", IndexPath(path), err)
	}
	return int64(binary.LittleEndian.Uint64(e[8:])), nil
}
