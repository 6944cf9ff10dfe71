// Package redact takes credentials out of text that is logged or echoed:
// the user:password of URLs typed on a command line (--set
// 'gen.servers=["http://bob:PW@host:30000"]'), before argv reaches
// detached.log, run.json, run.log or an error message.
package redact

import "regexp"

// userinfo is a URL's "user:password@": everything after "://" up to the
// last "@" before the host's end (a "/" or a quote), so an unescaped "@" or
// a space in the password is taken too.
var userinfo = regexp.MustCompile(`(://)[^/"']*@`)

// Userinfo returns s with the userinfo of every URL in it removed
// ("http://bob:pw@host" → "http://host").
func Userinfo(s string) string { return userinfo.ReplaceAllString(s, "$1") }

// Args returns args with Userinfo applied to each, and whether any changed.
func Args(args []string) ([]string, bool) {
	out := make([]string, len(args))
	changed := false
	for i, a := range args {
		out[i] = Userinfo(a)
		changed = changed || out[i] != a
	}
	return out, changed
}
