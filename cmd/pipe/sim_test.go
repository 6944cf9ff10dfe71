package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestSimCommand runs `pipe sim` in-process on kernel-chosen ports, talks to
// both servers, then interrupts it.
func TestSimCommand(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	outR, outW := io.Pipe()
	var errBuf bytes.Buffer
	sigs := make(chan os.Signal, 1)
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"sim", "--listen", "127.0.0.1:0", "--count", "2", "--speed", "1000", "--fault", "500:1#1"},
			&stdio{Out: outW, Err: &errBuf, Signals: sigs})
		outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	ready := regexp.MustCompile(`^sim: server (\d) ready at (http://127\.0\.0\.1:\d+)$`)
	var urls []string
	for len(urls) < 2 && sc.Scan() {
		m := ready.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("unexpected line %q", sc.Text())
		}
		urls = append(urls, m[2])
	}
	if len(urls) != 2 {
		t.Fatalf("got %d ready lines; stderr:\n%s", len(urls), errBuf.String())
	}
	tr := &http.Transport{}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i, want := range []int{200, 500} {
		resp, err := c.Post(urls[i]+"/generate", "application/json", strings.NewReader(`{"text":"hi","sampling_params":{"max_new_tokens":8}}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("server %d: status %d, want %d", i, resp.StatusCode, want)
		}
	}
	tr.CloseIdleConnections()
	sigs <- os.Interrupt
	go io.Copy(io.Discard, outR)
	select {
	case got := <-code:
		if got != 0 {
			t.Errorf("exit %d; stderr:\n%s", got, errBuf.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pipe sim did not stop on interrupt")
	}
	if _, err := c.Get(urls[0] + "/health"); err == nil {
		t.Error("server still answers after pipe sim returned")
	}
}

func TestSimHelpDocumentsDefaults(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"help", "sim"}, &stdio{Out: &out, Err: &errb}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	help := out.String()
	for _, want := range []string{"-max-running int", "(default 48)", "-max-queued", "(default 1024)", "-speed", "-warm-up", "(default 0s: none)",
		"-decode-tps", "(default 60)", "-fault FAULT", "-ports FROM-TO", "-tokenizer DIR", "-seed", "-spec-accept", "die@1h+5m#2"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestSimAddrs(t *testing.T) {
	got, err := simAddrs("30000-30002,30010", "", 0)
	if err != nil || strings.Join(got, " ") != "127.0.0.1:30000 127.0.0.1:30001 127.0.0.1:30002 127.0.0.1:30010" {
		t.Errorf("ports: %v %v", got, err)
	}
	got, err = simAddrs("", "0.0.0.0:31000", 3)
	if err != nil || strings.Join(got, " ") != "0.0.0.0:31000 0.0.0.0:31001 0.0.0.0:31002" {
		t.Errorf("listen: %v %v", got, err)
	}
	for _, bad := range [][2]string{{"30005-30000", ""}, {"x", ""}, {"", "nohost"}} {
		if _, err := simAddrs(bad[0], bad[1], 1); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	var errb bytes.Buffer
	if code := run([]string{"sim", "--fault", "boom:1"}, &stdio{Out: io.Discard, Err: &errb}); code != 2 || !strings.Contains(errb.String(), "unknown fault kind") {
		t.Errorf("bad fault: exit %d %s", code, errb.String())
	}
}
