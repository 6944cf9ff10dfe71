package pipefile

import (
	"fmt"
	"net/url"
	"strings"
)

// notifyTargets reads [pipeline] notify: one target or a list of them.
func notifyTargets(v any) ([]string, error) {
	var raw []any
	switch x := v.(type) {
	case string:
		raw = []any{x}
	case []any:
		raw = x
	default:
		return nil, fmt.Errorf("notify must be a string or a list of strings (an http(s) URL or a shell command), got %s", DescribeValue(v))
	}
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		s, ok := r.(string)
		if !ok {
			return nil, fmt.Errorf("notify must be a string or a list of strings (an http(s) URL or a shell command), got a %s in the list", DescribeValue(r))
		}
		if err := ParseNotify(s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// IsNotifyURL reports whether a notify target is a URL to POST to (else it
// is a shell command).
func IsNotifyURL(target string) bool {
	return strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://")
}

// ParseNotify checks one notify target: an http:// or https:// URL with a
// host, or a non-empty shell command. Its errors never repeat a URL's path
// or query, which for a Slack webhook is the secret.
func ParseNotify(target string) error {
	if strings.TrimSpace(target) == "" {
		return fmt.Errorf("notify: empty target; want an http(s) URL (JSON is POSTed to it) or a shell command (the JSON is on its stdin)")
	}
	if !IsNotifyURL(target) {
		return nil
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return fmt.Errorf("notify: %s…: not a URL with a host", target[:strings.Index(target, "//")+2])
	}
	return nil
}
