package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"
)

// S3 is a versitygw process serving a directory as an S3-compatible server
// on loopback, with real SigV4 checks against a random root key pair.
type S3 struct {
	Endpoint  string // "http://127.0.0.1:PORT"
	Region    string // "us-east-1"
	Bucket    string // created empty
	AccessKey string
	SecretKey string
	// Dir is the directory served: each bucket is a subdirectory, each
	// object a file under it.
	Dir string
	// AccessLog is versitygw's access log, one line per request.
	AccessLog string
	// Output is where versitygw's stdout and stderr go.
	Output string

	bin, tmp, addr string
	mu             sync.Mutex
	cmd            *exec.Cmd
	done           chan struct{}
}

// VersityGWBinary is .cache/bin/versitygw, where scripts/setup-versitygw.sh
// builds it; a missing binary skips the test (fails it under PIPE_CI=1).
func VersityGWBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(RepoRoot(t), ".cache", "bin", "versitygw")
	if _, err := os.Stat(bin); err != nil {
		Missing(t, "no versitygw at "+bin, "scripts/setup-versitygw.sh")
	}
	return bin
}

// StartS3 starts `versitygw --port 127.0.0.1:PORT posix DIR` with a fresh
// random root key pair, waits until it answers, and creates an empty bucket
// with the AWS SDK. The process is killed when the test ends.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	bin := VersityGWBinary(t)
	var lastErr error
	for range 3 { // the free port may be taken between probe and start
		s, err := startS3(t, bin)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatal(lastErr)
	return nil
}

func startS3(t testing.TB, bin string) (*S3, error) {
	tmp := t.TempDir()
	s := &S3{
		Region:    "us-east-1",
		Bucket:    "pipe-test",
		AccessKey: "AK" + strings.ToUpper(randomHex(9)),
		SecretKey: randomHex(20),
		Dir:       filepath.Join(tmp, "root"),
		AccessLog: filepath.Join(tmp, "access.log"),
		Output:    filepath.Join(tmp, "versitygw.out"),
		bin:       bin,
		tmp:       tmp,
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	s.Endpoint = "http://" + s.addr
	if err := s.launch(); err != nil {
		return nil, err
	}
	t.Cleanup(s.Stop)

	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		return nil, fmt.Errorf("creating bucket %s on versitygw: %v\n%s", s.Bucket, err, s.tail())
	}
	return s, nil
}

// launch starts the process and waits until it answers.
func (s *S3) launch() error {
	args := []string{"--port", s.addr, "--quiet", "--access-log", s.AccessLog, "posix"}
	// The posix backend keeps object metadata (user metadata, checksums,
	// ETags) in user.* extended attributes; a filesystem without them
	// (older tmpfs) gets a sidecar directory instead.
	if err := unix.Setxattr(s.Dir, "user.pipe-probe", []byte("1"), 0); err != nil {
		side := filepath.Join(s.tmp, "meta")
		if err := os.MkdirAll(side, 0o755); err != nil {
			return err
		}
		args = append(args, "--sidecar", side)
	} else {
		unix.Removexattr(s.Dir, "user.pipe-probe")
	}
	args = append(args, s.Dir)
	out, err := os.OpenFile(s.Output, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	// Wait until it answers HTTP (an anonymous request gets 403).
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: tr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("versitygw exited before answering on %s:\n%s", s.addr, s.tail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("versitygw did not answer on %s within 30s:\n%s", s.addr, s.tail())
		}
	}
}

// Stop kills the server (SIGKILL): requests in flight fail, connections are
// refused. Its directory stays.
func (s *S3) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-done
	}
}

// Restart starts the server again after Stop: the same address, keys and
// directory, so the objects and buckets are as they were.
func (s *S3) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	var err error
	for range 50 { // the port may linger a moment
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal(err)
}

// Client is an SDK client of the server with the root credentials; its idle
// connections are closed when the test ends.
func (s *S3) Client(t testing.TB) *s3.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient:   &http.Client{Transport: tr},
	})
}

// Env is the environment of a process that should reach the server through
// the standard AWS credential chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
// set, shared config files and profiles pointed away, IMDS off.
func (s *S3) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetEnv sets Env() in this process for the test (t.Setenv), clearing
// AWS_PROFILE and AWS_SESSION_TOKEN.
func (s *S3) SetEnv(t *testing.T) {
	t.Helper()
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Requests counts the requests of the access log whose operation is op
// (e.g. "PutObject", "UploadPart", "HeadObject"), or all with op "".
func (s *S3) Requests(t testing.TB, op string) int {
	t.Helper()
	f, err := os.Open(s.AccessLog)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// OWNER BUCKET [DATE ZONE] IP REQUESTER REQUEST-ID OPERATION KEY ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || !strings.HasPrefix(fields[2], "[") {
			continue // "log starts ..."
		}
		if got := fields[7]; op == "" || got == op || got == "s3_"+op {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// ObjectPath is the file that holds key in bucket on the server's disk.
func (s *S3) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}

func (s *S3) tail() string {
	b, _ := os.ReadFile(s.Output)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
