package commitlog

import (
	"bufio"
	"errors"
	"io"
)

// eachLine calls fn with every line of r (without its newline) and the
// offset where it starts; whole is false for a last line without a
// newline. A line longer than the reader's buffer is gathered whole. An
// error from fn stops the reading and is returned as is.
func eachLine(r io.Reader, fn func(off int64, line []byte, whole bool) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var off int64
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF {
			if len(line) > 0 {
				return fn(off, line, false)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(off, line[:len(line)-1], true); err != nil {
			return err
		}
		off += int64(len(line))
	}
}
