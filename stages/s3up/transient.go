package s3up

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"syscall"

	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Transient reports whether err, from a request to S3, is one that can pass
// by itself: no answer at all (connection refused or reset, a timeout, a
// cut connection), 5xx, 429 or S3's SlowDown and RequestTimeout. Refusals —
// wrong credentials, access denied, no such bucket, a bad request — are
// not: the same request is refused again. A cancelled context is not
// transient either (the run is stopping).
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	code, status := codeOf(err)
	switch {
	case status >= 500, status == http.StatusTooManyRequests, status == http.StatusRequestTimeout:
		return true
	case transientCodes[code]:
		return true
	case status != 0:
		return false
	}
	return noAnswer(err)
}

// transientCodes are the S3 error codes of a refusal that can pass.
var transientCodes = map[string]bool{"SlowDown": true, "RequestTimeout": true, "InternalError": true, "ServiceUnavailable": true}

// noAnswerErrs are the errors of a request that got no answer at all.
var noAnswerErrs = []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE,
	io.ErrUnexpectedEOF, io.EOF, context.DeadlineExceeded}

// noAnswer reports whether err is a request that never got an answer: it
// was not sent, the connection failed or was cut, or it timed out.
func noAnswer(err error) bool {
	var ne net.Error
	var oe *net.OpError
	var se *smithyhttp.RequestSendError // no response: the request never got an answer
	if errors.As(err, &se) || errors.As(err, &oe) || (errors.As(err, &ne) && ne.Timeout()) {
		return true
	}
	return slices.ContainsFunc(noAnswerErrs, func(target error) bool { return errors.Is(err, target) })
}

// Refused reports whether err is S3 refusing the request for good: the
// credentials, the permissions or the bucket (an HTTP 4xx other than a
// timeout or throttling).
func Refused(err error) bool {
	var re *RefusalError
	if errors.As(err, &re) {
		return true
	}
	if err == nil || Transient(err) {
		return false
	}
	code, status := codeOf(err)
	return isAuthCode(code) || code == "NoSuchBucket" || (status >= 400 && status < 500)
}
