//go:build e2e

package stages

import (
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

// tlsGateway is a TLS-terminating gateway in front of backend that offers
// HTTP/2, as cloud load balancers do; it counts the requests that came over
// HTTP/2. Its certificate is trusted through the returned CA file.
func tlsGateway(t *testing.T, backend string) (gw *httptest.Server, ca string, h2 *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	h2 = new(atomic.Int64)
	gw = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			h2.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	gw.EnableHTTP2 = true
	gw.StartTLS()
	t.Cleanup(gw.Close)
	ca = filepath.Join(t.TempDir(), "gateway-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gw.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return gw, ca, h2
}

// connectProxy is an HTTPS proxy (HTTP CONNECT) that sends every tunnel to
// the address route gives for the requested host:port, and records the
// requested ones.
func connectProxy(t *testing.T, route func(hostport string) string) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var asked []string
	var wg sync.WaitGroup
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "this proxy only tunnels", http.StatusMethodNotAllowed)
			return
		}
		mu.Lock()
		asked = append(asked, r.Host)
		mu.Unlock()
		up, err := net.Dial("tcp", route(r.Host))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		down, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			up.Close()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.Copy(up, buf)
			up.Close()
		}()
		io.Copy(down, up)
		down.Close()
	}))
	t.Cleanup(func() { p.CloseClientConnections(); p.Close(); wg.Wait() })
	return p, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
}

// A fleet reached through the HTTPS_PROXY of the environment, as on a
// cluster whose servers sit behind a gateway: a `pipe run` process sends
// health, info, probes and generations through the proxy's tunnel, over
// HTTP/2 since the gateway offers it, and the server is named by its own URL.
func TestGenerateThroughHTTPSProxy(t *testing.T) {
	f := startTestFleet(t, quickSim(1))
	gw, ca, h2 := tlsGateway(t, f.URLs()[0])
	_, port, _ := net.SplitHostPort(gw.Listener.Addr().String())
	// example.com is in httptest's certificate; not being loopback, it is
	// proxied (Go never proxies localhost). Only the proxy resolves it.
	server := "https://example.com:" + port
	proxy, asked := connectProxy(t, func(hostport string) string {
		if hostport == "example.com:"+port {
			return gw.Listener.Addr().String()
		}
		return "127.0.0.1:1" // anything else must not be reached
	})

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(genPrompts(40)), 0o644)
	path := filepath.Join(dir, "p.toml")
	os.WriteFile(path, []byte(genPipeline(serversKey([]string{server})+fastGenKeys+readyKey+"concurrency = 8\n")), 0o644)
	cmd := exec.Command(pipeBinary(t), "run", path)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.EqualFold(k, "no_proxy") && !strings.EqualFold(k, "https_proxy") && !strings.EqualFold(k, "http_proxy") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "SSL_CERT_FILE="+ca, "HTTPS_PROXY="+proxy.URL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pipe run through HTTPS_PROXY: %v\n%s", err, out)
	}
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if len(recs) != 40 {
		t.Fatalf("%d completions through the proxy, want 40\n%s", len(recs), out)
	}
	if recs[0].Completion == nil || recs[0].Completion.Server != server {
		t.Fatalf("completion server %+v, want %s", recs[0].Completion, server)
	}
	if want := "server " + server + " is reached through the proxy " + proxy.URL; !strings.Contains(string(out), want) {
		t.Errorf("the terminal does not say %q:\n%s", want, out)
	}
	tunnels := asked()
	if len(tunnels) == 0 {
		t.Fatal("nothing went through the proxy")
	}
	for _, h := range tunnels {
		if h != "example.com:"+port {
			t.Errorf("the proxy was asked for %s", h)
		}
	}
	if h2.Load() < 40 {
		t.Errorf("%d requests came over HTTP/2, want all (at least 40): the gateway offers it", h2.Load())
	}
}
