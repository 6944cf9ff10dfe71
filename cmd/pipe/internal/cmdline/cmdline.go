// Package cmdline handles pipe's own command lines: quoting one for a shell,
// the one that continues a run, one without secrets, and run directory
// globs a shell left unexpanded.
package cmdline

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/internal/redact"
)

// Resume is the command line that continues a run: the same one,
// without the flags that only make sense once.
func Resume(args []string) []string {
	var out []string
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case "fresh", "force-new-config", "fresh=true", "force-new-config=true":
			if strings.HasPrefix(a, "-") {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// Join quotes args for a POSIX shell where needed.
func Join(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, needsShellQuote) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// needsShellQuote reports a rune outside the letters, digits and
// punctuation a POSIX shell takes literally in a word.
func needsShellQuote(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("-_./=:,@+", r)
}

// Redacted is args without the userinfo of URLs in them.
func Redacted(args []string) []string {
	out, _ := redact.Args(args)
	return out
}

// ExpandGlobs expands glob patterns among args (quoted globs reach us
// unexpanded, e.g. from a Kubernetes command line).
func ExpandGlobs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if !strings.ContainsAny(a, "*?[") {
			out = append(out, a)
			continue
		}
		m, err := filepath.Glob(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", a, err)
		}
		if len(m) == 0 {
			return nil, errors.New(a + ": matches no run directory")
		}
		out = append(out, m...)
	}
	return out, nil
}
