package stages

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/pipe-dev/pipe/pipeline"
)

// jsonlSource is what read-prompts and read-completions share: stream a
// JSONL file line by line (never loading it), parse each non-blank line into
// a record, and apply the bad-line policy.
type jsonlSource struct {
	Path      string
	OnBadLine string // "fail" stops with file:line; "skip" rejects the line as bad_line
	Limit     int64  // records to emit; 0 means all
	Parse     func(line []byte) (*pipeline.Record, error)
	// QuickID, if set, finds a line's id without parsing it all (false when
	// it cannot tell), so finished records are skipped cheaply on resume.
	QuickID func(line []byte) (string, bool)
	// Check, if set, judges a parsed record: a non-empty reason rejects it
	// (e.g. "empty_prompt") with the detail.
	Check func(rec *pipeline.Record) (reason, detail string)
	// AllowEmpty lets a file without any record end the read quietly;
	// otherwise that is an error (a wrong or truncated input).
	AllowEmpty bool
}

// maxLine bounds one JSONL line; a longer line is a bad line, not an OOM.
const maxLine = 256 << 20

// Read emits one record per good line. A line counts as taken (out.Took) once
// it has gone out on either port: one whose send is cut short by a stop was
// not taken, and is read again on resume.
func (s *jsonlSource) Read(ctx context.Context, out pipeline.Emitter) error {
	f, err := os.Open(s.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var emitted, seen int64
	for lineNo := 1; ; lineNo++ {
		if s.Limit > 0 && emitted >= s.Limit {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := readLine(br)
		if err == io.EOF && len(line) == 0 {
			if seen == 0 && !s.AllowEmpty {
				return fmt.Errorf("%s: no records in it (an empty or truncated input?); set allow_empty = true if that is expected", s.Path)
			}
			return nil
		}
		if lineNo == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // a UTF-8 BOM
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s:%d: %w", s.Path, lineNo, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		seen++
		if s.QuickID != nil {
			if id, ok := s.QuickID(line); ok && out.SkipFinished(id) {
				out.Took(1)
				emitted++
				continue
			}
		}
		var rec *pipeline.Record
		var perr error
		if !utf8.Valid(line) {
			perr = fmt.Errorf("invalid UTF-8 at byte %d of the line", invalidUTF8At(line))
		} else {
			rec, perr = s.Parse(line)
		}
		if perr != nil {
			if s.OnBadLine != "skip" {
				return fmt.Errorf("%s:%d: %v (set on_bad_line = \"skip\" to set bad lines aside)", s.Path, lineNo, perr)
			}
			bad := &pipeline.Record{ID: fmt.Sprintf("%s:%d", s.Path, lineNo), Meta: map[string]any{"line": lineNo, "text": truncate(string(line), 2000)}}
			if err := out.Reject(bad, "bad_line", fmt.Sprintf("%s:%d: %v", s.Path, lineNo, perr)); err != nil {
				return err
			}
			out.Took(1)
			continue
		}
		if s.Check != nil {
			if reason, detail := s.Check(rec); reason != "" {
				if err := out.Reject(rec, reason, fmt.Sprintf("%s:%d: %s", s.Path, lineNo, detail)); err != nil {
					return err
				}
				out.Took(1)
				emitted++
				continue
			}
		}
		if err := out.Emit("", rec); err != nil {
			return err
		}
		out.Took(1)
		emitted++
	}
}

// invalidUTF8At is the offset of the first byte of line that is not valid
// UTF-8.
func invalidUTF8At(line []byte) int {
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRune(line[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(line)
}

// readLine returns the next line without its newline; lines longer than
// maxLine are an error.
//
// The line may be the reader's own buffer, valid until the next read:
// callers copy what they keep (a parse does).
func readLine(br *bufio.Reader) ([]byte, error) {
	chunk, err := br.ReadSlice('\n')
	switch {
	case err == nil:
		return chunk[:len(chunk)-1], nil
	case err != bufio.ErrBufferFull:
		return chunk, err
	}
	buf := append([]byte(nil), chunk...)
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("line longer than %d MiB", maxLine>>20)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return buf, err
		}
		return buf[:len(buf)-1], nil
	}
}
