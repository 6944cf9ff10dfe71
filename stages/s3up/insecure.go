package s3up

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// CheckInsecure refuses a plain http:// endpoint whose host is not
// loopback unless allow is set: requests would carry the credentials'
// session token (X-Amz-Security-Token) and signatures, and the shards,
// unencrypted over the network. Loopback (a local versitygw or MinIO) never
// leaves the machine.
func CheckInsecure(endpoint string, allow bool) error {
	u, err := url.Parse(endpoint)
	if err != nil || !strings.EqualFold(u.Scheme, "http") || allow {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("%s is plain http beyond this machine: S3 credentials (session token, signatures) and the data would cross the network unencrypted; use https://, or set allow_insecure = true", u.Redacted())
}
