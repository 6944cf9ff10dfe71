package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// ReadIDLog returns the hashes an id log (done.ids, a shard directory's
// .ids) holds, without opening it for writing: a torn last hash is left
// out, not cut. A missing log holds none.
func ReadIDLog(path string) ([]uint64, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(raw) < len(idsMagic) || string(raw[:len(idsMagic)]) != idsMagic {
		return nil, fmt.Errorf("%s: not an id log (bad header)", path)
	}
	body := raw[len(idsMagic):]
	out := make([]uint64, len(body)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(body[i*8:])
	}
	return out, nil
}

// Committed returns how many lines of the log at path are committed and
// the bytes they take from the start of the file (what a reader may use;
// anything after is an uncommitted tail). A log without an index has none.
func Committed(path string) (rows int, bytes int64, err error) {
	raw, err := os.ReadFile(IndexPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if len(raw) < len(indexMagic) || string(raw[:len(indexMagic)]) != indexMagic {
		return 0, 0, fmt.Errorf("%s: not a commit index", IndexPath(path))
	}
	body := raw[len(indexMagic):]
	rows = len(body) / entrySize
	if rows > 0 {
		bytes = int64(binary.LittleEndian.Uint64(body[(rows-1)*entrySize+8:]))
	}
	return rows, bytes, nil
}
