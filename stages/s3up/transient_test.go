package s3up

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"

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
