package sim

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// With an API key a server answers like SGLang's add_api_key_middleware:
// 401 {"error": "Unauthorized"} for everything but OPTIONS, /health… and
// /metrics… unless "Authorization: Bearer KEY" exactly.
func TestAPIKey(t *testing.T) {
	const key = "sim-test-key-7f3a"
	cfg := fast()
	cfg.APIKey = key
	base := startFleet(t, cfg).URLs()[0]
	c := client(t)
	send := func(method, path, auth string) (int, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"text":"Hi","sampling_params":{"max_new_tokens":4}}`)
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if x, ok := strings.CutPrefix(auth, "x-api-key: "); ok {
			req.Header.Set("X-Api-Key", x)
		} else if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		method, path, auth string
		refused            bool
	}{
		{"POST", "/generate", "", true},
		{"POST", "/generate", "Bearer " + key + "x", true},
		// utils/auth.py (SGLang 2026): the scheme in any case, or x-api-key.
		{"POST", "/generate", "bearer " + key, false},
		{"POST", "/generate", "x-api-key: " + key, false},
		{"POST", "/generate", "x-api-key: " + key + "x", true},
		{"POST", "/generate", "x-api-key: Bearer " + key, true},
		{"POST", "/generate", key, true},
		{"POST", "/generate", "Bearer " + key, false},
		{"POST", "/v1/chat/completions", "", true},
		{"GET", "/get_server_info", "", true},
		{"GET", "/v1/models", "Basic dTpw", true},
		{"GET", "/v1/models", "Bearer " + key, false},
		{"GET", "/nowhere", "", true},
		{"GET", "/health", "", false},
		{"GET", "/health_generate", "", false},
		{"GET", "/metrics", "", false},
		{"OPTIONS", "/generate", "", false},
	} {
		status, body := send(tc.method, tc.path, tc.auth)
		if tc.refused != (status == http.StatusUnauthorized) {
			t.Errorf("%s %s with %q: %d %s", tc.method, tc.path, tc.auth, status, body)
		}
		if tc.refused && body != `{"error":"Unauthorized"}` {
			t.Errorf("%s %s: body %s", tc.method, tc.path, body)
		}
	}
}
