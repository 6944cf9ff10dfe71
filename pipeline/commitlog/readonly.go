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
