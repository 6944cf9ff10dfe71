package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var pipeBin struct {
	once sync.Once
	path string
	err  error
}

// PipeBinary builds cmd/pipe once per test binary and returns its path, for
// tests that run `pipe` as the real process a user starts.
func PipeBinary(t testing.TB) string {
	t.Helper()
	root := RepoRoot(t)
	pipeBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "pipe-test-bin-")
		if err != nil {
			pipeBin.err = err
			return
		}
		pipeBin.path = filepath.Join(dir, "pipe")
		cmd := exec.Command("go", "build", "-o", pipeBin.path, "./cmd/pipe")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			pipeBin.err = fmt.Errorf("go build ./cmd/pipe: %v\n%s", err, out)
		}
	})
	if pipeBin.err != nil {
		t.Fatal(pipeBin.err)
	}
	return pipeBin.path
}

// Sim is a `pipe sim` process serving several simulated SGLang servers.
type Sim struct {
	URLs []string
	cmd  *exec.Cmd
}

var readyLine = regexp.MustCompile(`ready at (http://\S+)`)

// StartSim starts `pipe sim --listen 127.0.0.1:0 --count N ARGS...` and
// waits until every server listens. It is killed when the test ends.
func StartSim(t testing.TB, bin string, n int, args ...string) *Sim {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"sim", "--listen", "127.0.0.1:0", "--count", strconv.Itoa(n)}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := &Sim{cmd: cmd}
	found := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
				s.URLs = append(s.URLs, m[1])
				if len(s.URLs) == n {
					found <- nil
					io.Copy(io.Discard, out)
					return
				}
			}
		}
		found <- fmt.Errorf("pipe sim exited before %d servers were ready: %v", n, sc.Err())
	}()
	select {
	case err := <-found:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("pipe sim: servers not ready within 60s")
	}
	return s
}

// Metric sums one metric (e.g. "sglang:num_running_reqs") over the servers.
func (s *Sim) Metric(t testing.TB, name string) int64 {
	t.Helper()
	var sum int64
	for _, u := range s.URLs {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, name+"{") {
				f := strings.Fields(line)
				v, err := strconv.ParseFloat(f[len(f)-1], 64)
				if err != nil {
					t.Fatalf("metric %s: %q", name, line)
				}
				sum += int64(v)
			}
		}
	}
	return sum
}

// Stop kills the simulated servers and waits until they are gone: what a
// test that must run with no server up calls.
func (s *Sim) Stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// DeadURL is the URL of a server that is never reachable: it drops every
// connection before a byte is read. The test holds the port for its whole
// life: a port merely closed can be taken by a parallel test's simulator,
// which would make the "unreachable" server ready.
func DeadURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // a reset, as from a closed port
			}
			c.Close()
		}
	}()
	return "http://" + l.Addr().String()
}
