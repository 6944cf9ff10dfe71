package sglang

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
)

// Credentials: a server's ServerSpec.Header is sent with every request to it
// (generations, health, info and probes, on both of the client's HTTP
// paths). A URL's user:password is taken out of the URL and sent as Basic
// auth. The server is then named by its URL without the userinfo everywhere
// (results, live figures, errors, log lines), and header values never
// appear in any message: at most "an API key was sent".

// Redact returns rawURL without its userinfo ("http://user:pw@host:30000"
// → "http://host:30000"), for naming a server in messages. A URL that does
// not parse loses everything up to its last "@" after the scheme, so a
// password never shows even when it broke the parse.
func Redact(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		if u.User == nil && !strings.Contains(rawURL, "@") {
			return rawURL
		}
		if u.User != nil {
			u.User = nil
			return u.String()
		}
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		scheme, rest = "", rawURL
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if scheme == "" {
		return rest
	}
	return scheme + "://" + rest
}

// splitUserinfo returns the base URL without userinfo (and without trailing
// slashes), and the headers to send: h, plus "Authorization: Basic …" from
// the userinfo unless h sets Authorization itself.
func splitUserinfo(raw string, h http.Header) (string, http.Header) {
	raw = strings.TrimRight(raw, "/")
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return Redact(raw), h
	}
	if h.Get("Authorization") == "" {
		pw, _ := u.User.Password()
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw)))
	}
	u.User = nil
	return strings.TrimRight(u.String(), "/"), h
}

// reservedHeaders are set by the client itself; Header may not set them.
var reservedHeaders = []string{"Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection",
	"Keep-Alive", "Te", "Trailer", "Upgrade", "Expect", "User-Agent"}

// ReservedHeader reports whether the client writes header name itself, so
// a configuration may not set it.
func ReservedHeader(name string) bool {
	return slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(name))
}

// ValidHeaderName reports whether name is an HTTP field name (a token).
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := range len(name) {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether v can be sent as a header value: no
// control characters (a newline would end the header) and no surrounding
// spaces (HTTP drops them, so the server would see another value).
func ValidHeaderValue(v string) bool {
	if strings.TrimSpace(v) != v {
		return false
	}
	for i := range len(v) {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// checkHeader says what is wrong with h, naming headers but never values.
func checkHeader(h http.Header) error {
	for name, vs := range h {
		if !ValidHeaderName(name) {
			return fmt.Errorf("header name %q is not a valid HTTP field name", name)
		}
		if ReservedHeader(name) {
			return fmt.Errorf("header %s is set by the client itself", name)
		}
		for _, v := range vs {
			if !ValidHeaderValue(v) {
				return fmt.Errorf("header %s: its value has a control character or surrounding spaces", name)
			}
		}
	}
	return nil
}

// authRefused reports whether status is a refusal of the credentials.
func authRefused(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// authNote says what credentials were sent with a refused request, without
// their values.
func authNote(h http.Header) string {
	a := h.Get("Authorization")
	switch {
	case a == "":
		return "no API key was sent"
	case strings.HasPrefix(a, "Bearer "):
		return "the API key sent was refused"
	case strings.HasPrefix(a, "Basic "):
		return "the URL's user:password, sent as Basic auth, was refused"
	}
	return "the Authorization header sent was refused"
}

// AuthError is returned by Start when servers refused the client's
// credentials (HTTP 401 or 403): a configuration mistake that waiting would
// not mend. Servers lists them, each Reason saying what was sent (never the
// credentials themselves).
type AuthError struct {
	Servers []ServerInfo
}

func (e *AuthError) Error() string {
	var parts []string
	for _, s := range e.Servers {
		parts = append(parts, fmt.Sprintf("%s: %s", s.URL, s.Reason))
	}
	return "credentials refused: " + strings.Join(parts, "; ")
}
