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

// tokens are the shapes of common access tokens: Hugging Face (hf_...),
// OpenAI-style (sk-...), GitHub (ghp_..., github_pat_...), AWS access key
// ids (AKIA...).
var tokens = regexp.MustCompile(`\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16})\b`)

// Secrets returns s with URLs' userinfo removed and every access token
// of a known shape replaced by "<redacted>": for text published or kept
// where others read it (a pipeline file on the Hub).
func Secrets(s string) string {
	return tokens.ReplaceAllString(Userinfo(s), "<redacted>")
}
