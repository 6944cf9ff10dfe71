package s3up

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// An object removed between its upload and the check after it (a
// lifecycle rule, another job emptying the prefix) is uploaded once more;
// gone again, the upload is an error that says so.
func TestUploadFileAgainWhenGoneAtTheCheck(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	for _, tc := range []struct {
		name      string
		gone      int // checks that find nothing
		wantPuts  int
		wantError bool
	}{
		{"gone once", 1, 2, false},
		{"gone twice", 2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu          sync.Mutex
				puts, heads int
				stored      []byte
				meta        string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				switch r.Method {
				case http.MethodPut:
					puts++
					stored, _ = io.ReadAll(r.Body)
					meta = r.Header.Get("X-Amz-Meta-Pipe-Sha256")
				case http.MethodHead:
					heads++
					if heads <= tc.gone {
						w.WriteHeader(http.StatusNotFound)
						return
					}
					w.Header().Set("Content-Length", strconv.Itoa(len(stored)))
					w.Header().Set("X-Amz-Meta-Pipe-Sha256", meta)
				default:
					w.WriteHeader(http.StatusNotImplemented)
				}
			}))
			defer srv.Close()
			c, err := New(context.Background(), Config{URI: "s3://b/p", Endpoint: srv.URL, PathStyle: true, Region: "us-east-1", MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			data := []byte(strings.Repeat("shard bytes ", 100))
			path := filepath.Join(t.TempDir(), "part-00000.parquet")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			res, err := c.UploadFile(context.Background(), "p/train/part-00000.parquet", path, int64(len(data)), hex.EncodeToString(sum[:]), nil)
			if puts != tc.wantPuts {
				t.Errorf("%d uploads, want %d", puts, tc.wantPuts)
			}
			if tc.wantError {
				if err == nil || !strings.Contains(err.Error(), "s3://b/p/train/part-00000.parquet: it is not there after the upload") {
					t.Fatalf("err = %v, want the object named as not there", err)
				}
				return
			}
			if err != nil || res.Verified != "size" {
				t.Fatalf("upload: %+v, %v", res, err)
			}
		})
	}
}
