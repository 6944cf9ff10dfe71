package fleet

import (
	"os"
)

// rotLog is a server's log file, bounded: at max bytes it becomes
// NAME.1 (replacing the one before) and a new NAME starts.
type rotLog struct {
	path string
	max  int64
	f    *os.File
	n    int64
}

func openLog(path string, max int64) (*rotLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &rotLog{path: path, max: max, f: f, n: st.Size()}, nil
}

// WriteLine appends line; a failure to write (a full disk) loses log
// lines, never the server.
func (l *rotLog) WriteLine(line string) {
	if l.n+int64(len(line))+1 > l.max && l.n > 0 {
		l.f.Close()
		os.Rename(l.path, l.path+".1")
		f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			l.f = nil
			return
		}
		l.f, l.n = f, 0
	}
	if l.f == nil {
		return
	}
	n, _ := l.f.WriteString(line + "\n")
	l.n += int64(n)
}

func (l *rotLog) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
