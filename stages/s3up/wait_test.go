package s3up

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func httpErr(status int, code string) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code, Message: code},
	}}
}

// Which failures can pass (waited out) and which are refusals (exit 2).
func TestTransientAndRefused(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err                error
		transient, refusal bool
	}{
		{reqErr("PutObject", refused), true, false},
		{reqErr("HeadObject", &smithyhttp.RequestSendError{Err: errors.New("http: server closed idle connection")}), true, false},
		{reqErr("PutObject", httpErr(503, "SlowDown")), true, false},
		{reqErr("PutObject", httpErr(500, "InternalError")), true, false},
		{reqErr("PutObject", httpErr(429, "TooManyRequests")), true, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true, false},
		{reqErr("PutObject", httpErr(403, "AccessDenied")), false, true},
		{reqErr("PutObject", httpErr(403, "InvalidAccessKeyId")), false, true},
		{reqErr("PutObject", httpErr(404, "NoSuchBucket")), false, true},
		{&RefusalError{errors.New("bucket b does not exist")}, false, true},
		{context.Canceled, false, false},
	} {
		if got := Transient(c.err); got != c.transient {
			t.Errorf("Transient(%v) = %v", c.err, got)
		}
		if got := Refused(c.err); got != c.refusal {
			t.Errorf("Refused(%v) = %v", c.err, got)
		}
	}
}

// An outage shorter than the timeout is waited out (with notices at its
// start and end; the retry that ends it comes up to one jittered backoff,
// at most 15 s, after it); a longer one ends in an OutageError; a refusal is
// returned at once, not retried.
func TestWaiter(t *testing.T) {
	down := reqErr("PutObject", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	synctest.Test(t, func(t *testing.T) {
		var notes []string
		w := &Waiter{Timeout: time.Minute, Notify: func(m string) { notes = append(notes, m) }}
		start := time.Now()
		calls := 0
		err := w.Do(context.Background(), "uploading x", func() error {
			calls++
			if time.Since(start) < 40*time.Second {
				return down
			}
			return nil
		})
		if err != nil || calls < 4 || len(notes) != 2 || !strings.HasPrefix(notes[0], "uploads waiting: uploading x failed") || !strings.HasPrefix(notes[1], "uploads going again after ") {
			t.Fatalf("40 s outage: %v after %d calls; notes %q", err, calls, notes)
		}
		if _, _, outages, longest, _ := w.State(); outages != 1 || longest < 40*time.Second {
			t.Errorf("state: %d outages, longest %s", outages, longest)
		}

		start = time.Now()
		err = w.Do(context.Background(), "uploading y", func() error { return down })
		var oe *OutageError
		if !errors.As(err, &oe) || time.Since(start) < time.Minute || time.Since(start) > time.Minute+time.Second {
			t.Fatalf("endless outage: %v after %s", err, time.Since(start))
		}

		calls = 0
		deny := reqErr("PutObject", httpErr(403, "AccessDenied"))
		if err := w.Do(context.Background(), "z", func() error { calls++; return deny }); err != deny || calls != 1 {
			t.Fatalf("refusal: %v after %d calls", err, calls)
		}
	})
}
