package pipefile

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a position in a pipeline file. Line 0 means the whole file; File
// may also name a command-line override ("--set gen.concurrency").
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Problem is one thing wrong with a pipeline file, reported with its position.
type Problem struct {
	Pos   Pos
	Stage string // stage id, if the problem is inside a stage
	Kind  string // that stage's kind, if known
	Msg   string
	// Extra lines shown under the message (a TOML syntax error's caret).
	Extra string
	// Structural marks a problem with the graph's shape (ids, kinds,
	// inputs, ports, cycles, a --set that does not apply): the only kind
	// pipe graph reports.
	Structural bool
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Pos.String())
	b.WriteString(": ")
	if p.Stage != "" {
		fmt.Fprintf(&b, "stage %q", p.Stage)
		if p.Kind != "" {
			fmt.Fprintf(&b, " (%s)", p.Kind)
		}
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	if p.Extra != "" {
		b.WriteString("\n")
		b.WriteString(p.Extra)
	}
	return b.String()
}

// Problems is every problem found in a file; as an error it prints one per line,
// in file order.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Sort orders problems by file and position, keeping the order of problems at
// the same position.
func (ps Problems) Sort() {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i].Pos, ps[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// Structural returns the problems with the graph's shape.
func (ps Problems) Structural() Problems {
	var out Problems
	for _, p := range ps {
		if p.Structural {
			out = append(out, p)
		}
	}
	return out
}

// Err returns ps as an error, or nil when empty.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	ps.Sort()
	return ps
}
