package s3up

import (
	"strings"
	"testing"
)

func TestCheckInsecure(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		allow    bool
		refused  bool
	}{
		{"", false, false},
		{"https://s3.example.com", false, false},
		{"http://127.0.0.1:7070", false, false},
		{"http://localhost:9000", false, false},
		{"http://[::1]:9000", false, false},
		{"http://s3.example.com:9000", false, true},
		{"HTTP://10.0.0.5", false, true},
		{"http://s3.example.com:9000", true, false},
	} {
		err := CheckInsecure(tc.endpoint, tc.allow)
		if (err != nil) != tc.refused || (err != nil && !strings.Contains(err.Error(), "allow_insecure = true")) {
			t.Errorf("CheckInsecure(%q, %v) = %v", tc.endpoint, tc.allow, err)
		}
	}
}
