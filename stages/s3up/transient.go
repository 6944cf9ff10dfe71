package s3up

import (
	"context"
	"errors"
	"net/http"

	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/pipe-dev/pipe/internal/outage"
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

// noAnswer reports whether err is a request that never got an answer
// (outage.NoAnswer), or the SDK's word for it.
func noAnswer(err error) bool {
	var se *smithyhttp.RequestSendError // no response: the request never got an answer
	return errors.As(err, &se) || outage.NoAnswer(err)
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
