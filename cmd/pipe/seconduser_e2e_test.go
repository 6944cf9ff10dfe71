//go:build e2e

package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// A second user on a shared machine runs every command after root did, with
// the same temporary directory: nothing pipe leaves in a shared place (a
// cache, a compiled module) stands in its way or is run by it. pipe used to
// compile go-graphviz's wasm into $TMPDIR/go-graphviz at every start, and the
// second user's every command panicked on root's folder.
func TestSecondUserAfterRoot(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if os.Getuid() != 0 || err != nil {
		t.Skip("needs root and setpriv to act as another user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		os.Chmod(d, 0o755)
	}
	// The binary where nobody can run it.
	data, err := os.ReadFile(testenv.PipeBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "pipe")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// One shared temporary directory, like /tmp.
	tmp := filepath.Join(base, "tmp")
	os.Mkdir(tmp, 0o777)
	os.Chmod(tmp, 0o1777)
	pipeline := `[pipeline]
name = "two"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "prompts"
path  = "out/all.jsonl"
`
	// Each command, and the exit code it gives here: stop finds nothing
	// to stop (1); init, tokenize and the simulated run read the Qwen3
	// tokenizer, copied where nobody can read it.
	type command struct {
		args  []string
		code  int
		stdin string
		// serves: a server that runs until stopped (pipe sim); it must
		// start and say so, then it is stopped.
		serves bool
	}
	qwen3 := filepath.Join(base, "qwen3")
	os.Mkdir(qwen3, 0o755)
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(testenv.Qwen3Dir(t), f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(qwen3, f), data, 0o644)
	}
	var commands []command
	for _, args := range [][]string{
		{"version"}, {"help"}, {"stages"}, {"check", "p.toml"},
		{"graph", "p.toml"}, {"graph", "--format", "dot", "p.toml"},
		{"graph", "--format", "mermaid", "p.toml"}, {"graph", "--format", "svg", "-o", "p.svg", "p.toml"},
		{"run", "p.toml"}, {"status", "runs/two"}, {"inspect", "runs/two"}, {"report", "runs/two"},
		{"verify", "runs/two"}, {"merge", "--out", "merged", "runs/two"},
		{"init", "regenerate", "--prompts", "p.jsonl", "--servers", "sim:1?speed=100", "--model-dir", qwen3, "--max-output-tokens", "4096", "-o", "i.toml"},
		{"run", "i.toml"}, {"export", "--layout", "specforge", "--stage", "train", "x.jsonl", "runs/regenerate"},
	} {
		commands = append(commands, command{args: args})
	}
	commands = append(commands,
		command{args: []string{"stop", "runs/two"}, code: 1},
		command{args: []string{"sim", "--ports", fmt.Sprint(freeTCPPort(t))}, serves: true},
		command{args: []string{"tokenize", "--tokenizer", qwen3}, stdin: `{"text":"hi"}` + "\n"})
	for _, who := range []string{"root", "nobody"} {
		dir := filepath.Join(base, who)
		os.Mkdir(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "p.toml"), []byte(pipeline), 0o644)
		os.WriteFile(filepath.Join(dir, "p.jsonl"), []byte(`{"id":"1","prompt":"hi"}`+"\n"), 0o644)
		if who == "nobody" {
			if err := exec.Command("chown", "-R", nobody.Uid+":"+nobody.Gid, dir).Run(); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range commands {
			var cmd *exec.Cmd
			if who == "root" {
				cmd = exec.Command(bin, c.args...)
			} else {
				cmd = exec.Command(setpriv, append([]string{"--reuid=" + nobody.Uid, "--regid=" + nobody.Gid, "--clear-groups", bin}, c.args...)...)
			}
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+dir)
			cmd.Stdin = strings.NewReader(c.stdin)
			if c.serves {
				var buf syncBuffer
				cmd.Stdout, cmd.Stderr = &buf, &buf
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, 30*time.Second, "pipe sim to serve", func() bool { return strings.Contains(buf.String(), "Ctrl-C stops") })
				cmd.Process.Signal(os.Interrupt)
				cmd.Wait()
				if strings.Contains(buf.String(), "panic") {
					t.Errorf("%s: pipe %s:\n%s", who, strings.Join(c.args, " "), buf.String())
				}
				continue
			}
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != c.code || strings.Contains(string(out), "panic") {
				t.Errorf("%s: pipe %s: exit %d, want %d\n%s", who, strings.Join(c.args, " "), code, c.code, out)
			}
		}
		// Nothing was left in the shared temporary directory.
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Fatalf("after %s's commands, the shared TMPDIR holds %s", who, left[0].Name())
		}
	}
}

// freeTCPPort is a loopback port nothing listens on now.
func freeTCPPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
