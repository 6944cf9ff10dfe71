package stages

import (
	"encoding/pem"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Servers behind HTTPS (a TLS-terminating gateway in front of SGLang) work:
// a `pipe run` process, trusting the gateway's certificate through
// SSL_CERT_FILE as a user would, generates every record through it.
func TestGenerateOverHTTPS(t *testing.T) {
	f := startTestFleet(t, quickSim(1))
	backend, err := url.Parse(f.URLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	gateway := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(backend))
	defer gateway.Close()

	dir := t.TempDir()
	ca := filepath.Join(dir, "gateway-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gateway.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(genPrompts(40)), 0o644)
	path := filepath.Join(dir, "p.toml")
	os.WriteFile(path, []byte(genPipeline(serversKey([]string{gateway.URL})+fastGenKeys+readyKey+"concurrency = 8\n")), 0o644)

	cmd := exec.Command(pipeBinary(t), "run", path)
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+ca)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pipe run over HTTPS: %v\n%s", err, out)
	}
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if len(recs) != 40 {
		t.Fatalf("%d completions over HTTPS, want 40\n%s", len(recs), out)
	}
	if recs[0].Completion == nil || recs[0].Completion.Server != gateway.URL {
		t.Fatalf("completion not served through the gateway: %+v", recs[0].Completion)
	}
}
