// Package s3up uploads committed files to S3 (or an S3-compatible server)
// with the AWS SDK for Go v2: a bucket check with clear errors, idempotent
// uploads verified by size and SHA-256, multipart above a part size with
// parts read straight from the file (no part buffers), retries with backoff.
//
// Credentials come only from the standard AWS chain (AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared config and credentials
// files, SSO, web identity, container and instance roles). Nothing here
// prints them: errors name the bucket, the endpoint and the S3 error code.
package s3up

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3's limits on multipart uploads.
const (
	MinPartSize = 5 << 20       // every part but the last
	MaxPartSize = 5 << 30       // any part
	MaxParts    = 10000         // parts per upload
	MetaSHA256  = "pipe-sha256" // user metadata: hex SHA-256 of the object
)

// responseTimeout bounds the wait for an answer once a request is sent.
const responseTimeout = 2 * time.Minute

// Config says where to upload and how.
type Config struct {
	URI       string // "s3://bucket/prefix"
	Endpoint  string // "" is AWS (or AWS_ENDPOINT_URL[_S3])
	Region    string // "" is the AWS chain's, else us-east-1
	PathStyle bool
	// PartSize is the multipart threshold and part size (raised so an
	// object stays within MaxParts); PartConcurrency the parts of one
	// object in flight; MaxAttempts the tries per request.
	PartSize        int64
	PartConcurrency int
	MaxAttempts     int
	// Conns is the HTTP connections kept open (default PartConcurrency).
	Conns int
}

// ParseURI splits "s3://bucket/prefix" (prefix optional, without leading or
// trailing slashes).
func ParseURI(uri string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an s3:// URI (want s3://bucket/prefix)", uri)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%q names no bucket (want s3://bucket/prefix)", uri)
	}
	if strings.ContainsAny(bucket, " \t\n?#") {
		return "", "", fmt.Errorf("%q: %q is not a bucket name", uri, bucket)
	}
	if strings.Contains(prefix, "//") {
		return "", "", fmt.Errorf("%q: empty path segment in the prefix", uri)
	}
	return bucket, prefix, nil
}

// Client uploads into one bucket and prefix.
type Client struct {
	cfg            Config
	Bucket, Prefix string
	region         string
	aws            aws.Config
	s3             *s3.Client
	tr             *http.Transport
}

// New builds the client from the standard AWS configuration chain. It does
// no network access (credentials are resolved by Check or the first
// request).
func New(ctx context.Context, cfg Config) (*Client, error) {
	bucket, prefix, err := ParseURI(cfg.URI)
	if err != nil {
		return nil, err
	}
	if cfg.PartSize <= 0 {
		cfg.PartSize = 64 << 20
	}
	if cfg.PartConcurrency <= 0 {
		cfg.PartConcurrency = 4
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Conns <= 0 {
		cfg.Conns = cfg.PartConcurrency
	}
	conns := cfg.Conns + 4
	maxAttempts := cfg.MaxAttempts
	opts := []func(*config.LoadOptions) error{
		// The SDK's buildable client, so that the configuration can add a
		// CA bundle (AWS_CA_BUNDLE) to it.
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns, tr.MaxIdleConnsPerHost = conns, conns
			// A request sent whose answer never comes (a server hung, a
			// network that drops packets) is a failure to retry, not a
			// wait for ever: S3 answers a whole request in seconds.
			tr.ResponseHeaderTimeout = responseTimeout
		})),
		config.WithLogger(logging.Nop{}),
		config.WithDefaultRegion("us-east-1"), // when the chain has none
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = maxAttempts
				// No retry quota: a long run retries every request up to
				// MaxAttempts however many failed before.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	ac, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	// Its transport (with the CA bundle, if any), in a client of our own:
	// one Close can close, and which S3's client does not copy.
	bc, ok := ac.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		return nil, fmt.Errorf("the AWS configuration has an HTTP client of type %T", ac.HTTPClient)
	}
	tr := bc.GetTransport()
	ac.HTTPClient = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	c := &Client{cfg: cfg, Bucket: bucket, Prefix: prefix, region: ac.Region, aws: ac, tr: tr}
	c.s3 = s3.NewFromConfig(ac, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	})
	return c, nil
}

// Close closes the S3 connections. (The clients of the credential
// providers — IMDS, STS, SSO — keep theirs until their idle timeout: the
// SDK gives no way to close them.)
func (c *Client) Close() {
	if c != nil && c.tr != nil {
		c.tr.CloseIdleConnections()
	}
}

// Region is the region requests are signed for.
func (c *Client) Region() string { return c.region }

// S3 is the SDK client.
func (c *Client) S3() *s3.Client { return c.s3 }

// URL is s3://bucket/key.
func (c *Client) URL(key string) string { return "s3://" + c.Bucket + "/" + key }

// Key is the prefix joined with the parts by "/".
func (c *Client) Key(parts ...string) string {
	if c.Prefix != "" {
		parts = append([]string{c.Prefix}, parts...)
	}
	return strings.Join(parts, "/")
}

// Where names the bucket's server for messages: the endpoint, or AWS S3
// in the region.
func (c *Client) Where() string {
	if c.cfg.Endpoint != "" {
		return c.cfg.Endpoint
	}
	if c.aws.BaseEndpoint != nil && *c.aws.BaseEndpoint != "" {
		return *c.aws.BaseEndpoint
	}
	return "AWS S3 (region " + c.region + ")"
}

const credHint = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE"

// Check resolves the credentials and checks that the bucket exists and they
// may use it (HeadBucket), with an error a user can act on. It returns
// where the credentials came from (e.g. "EnvConfigCredentials"; never the
// keys).
func (c *Client) Check(ctx context.Context) (source string, err error) {
	creds, err := c.aws.Credentials.Retrieve(ctx)
	if err != nil {
		return "", &RefusalError{fmt.Errorf("no AWS credentials for bucket %s: set %s (or the shared config and credentials files): %v", c.Bucket, credHint, errorSummary(err))}
	}
	_, err = c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(c.Bucket)})
	if err == nil {
		return creds.Source, nil
	}
	return "", c.bucketError(ctx, err)
}

// bucketError turns a failed HeadBucket into a clear error. HEAD responses
// have no body, so a 404 does not say whether the bucket or the access key
// is unknown (versitygw answers an unknown key with 404); a ListObjectsV2
// of one key, which needs the same permission, tells.
func (c *Client) bucketError(ctx context.Context, headErr error) error {
	code, status, err := c.listAfterHead(ctx, headErr)
	if err != nil {
		return err
	}
	switch {
	case code == "NoSuchBucket" || (status == http.StatusNotFound && code == "NotFound"):
		return &RefusalError{fmt.Errorf("bucket %s does not exist at %s", c.Bucket, c.Where())}
	case isAuthCode(code) || status == http.StatusForbidden:
		return &RefusalError{fmt.Errorf("access denied to bucket %s at %s (%s): check the AWS credentials (%s)", c.Bucket, c.Where(), code, credHint)}
	case status == http.StatusMovedPermanently || code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed":
		return c.wrongRegion(headErr, code)
	case status == 0:
		return reqErr(fmt.Sprintf("cannot reach %s for bucket %s", c.Where(), c.Bucket), headErr)
	}
	return fmt.Errorf("bucket %s at %s: %s", c.Bucket, c.Where(), errorSummary(headErr))
}

// listAfterHead is the code and status that say why HeadBucket failed
// with headErr: after a 404, 403 or 400, those of a ListObjectsV2 of one
// key, which has a body that tells. err is set when the listing works:
// then only HeadBucket is refused, and that is the error.
func (c *Client) listAfterHead(ctx context.Context, headErr error) (code string, status int, err error) {
	code, status = codeOf(headErr)
	if status != http.StatusNotFound && status != http.StatusForbidden && status != http.StatusBadRequest {
		return code, status, nil
	}
	_, lerr := c.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(c.Bucket), MaxKeys: aws.Int32(1)})
	if lerr == nil { // HeadBucket refused but listing works: report the first
		return code, status, fmt.Errorf("bucket %s at %s: HeadBucket failed: %s", c.Bucket, c.Where(), errorSummary(headErr))
	}
	if lcode, lstatus := codeOf(lerr); lstatus != 0 {
		code, status = lcode, lstatus
	}
	return code, status, nil
}

// wrongRegion is the error of a bucket in another region than the
// client's: the one S3 names in X-Amz-Bucket-Region when it does.
func (c *Client) wrongRegion(headErr error, code string) error {
	region := ""
	var re *awshttp.ResponseError
	if errors.As(headErr, &re) && re.Response != nil {
		region = re.Response.Header.Get("X-Amz-Bucket-Region")
	}
	if region != "" {
		return &RefusalError{fmt.Errorf("bucket %s is in region %s, not %s: set region = %q", c.Bucket, region, c.region, region)}
	}
	return &RefusalError{fmt.Errorf("bucket %s at %s is not in region %s (%s): set region to the bucket's", c.Bucket, c.Where(), c.region, code)}
}

func isAuthCode(code string) bool {
	switch code {
	case "AccessDenied", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
		"ExpiredToken", "TokenRefreshRequired", "AccountProblem", "XAdminUserNotFound", "InvalidSecurity":
		return true
	}
	return false
}

// codeOf returns the S3 error code and HTTP status of err (0: no response).
func codeOf(err error) (code string, status int) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// errorSummary is err's text without the request and host ids, which say
// nothing to a user: "HTTP 403 AccessDenied: …", or for a request that got
// no answer the network error, with the attempts made.
func errorSummary(err error) string {
	if err == nil {
		return ""
	}
	var msg string
	code, status := codeOf(err)
	var ae smithy.APIError
	var ne *net.OpError
	var oe *smithy.OperationError
	switch {
	case errors.As(err, &ae) && status != 0:
		msg = fmt.Sprintf("HTTP %d %s", status, code)
		if m := ae.ErrorMessage(); m != "" && m != code {
			msg += ": " + m
		}
	case errors.As(err, &ne):
		msg = ne.Error()
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		if errors.Is(err, context.DeadlineExceeded) {
			msg = "timed out"
		} else {
			msg = "cancelled"
		}
	case errors.As(err, &oe):
		msg = oe.Err.Error()
	default:
		msg = err.Error()
	}
	var me *retry.MaxAttemptsError
	if errors.As(err, &me) {
		msg += fmt.Sprintf(" (%d attempts)", me.Attempt)
	}
	return msg
}

// Object is what HeadObject says of an object.
type Object struct {
	Size int64
	// SHA256 is the user metadata pipe-sha256 (hex), if set.
	SHA256 string
	// Checksum is the server's SHA-256 checksum (base64; "…-N" for a
	// multipart object), if it keeps one; ChecksumType FULL_OBJECT or
	// COMPOSITE.
	Checksum     string
	ChecksumType string
}

// Head returns the object at key, or nil if there is none.
func (c *Client) Head(ctx context.Context, key string) (*Object, error) {
	out, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		var nf *types.NotFound
		var nk *types.NoSuchKey
		if _, status := codeOf(err); errors.As(err, &nf) || errors.As(err, &nk) || status == http.StatusNotFound {
			return nil, nil
		}
		return nil, reqErr("HeadObject "+c.URL(key), err)
	}
	o := &Object{Size: aws.ToInt64(out.ContentLength), Checksum: aws.ToString(out.ChecksumSHA256), ChecksumType: string(out.ChecksumType)}
	for k, v := range out.Metadata {
		if strings.EqualFold(k, MetaSHA256) {
			o.SHA256 = v
		}
	}
	return o, nil
}

// RequestError is a failed request: Op names it and its object, the text
// is errorSummary's, and the SDK's error stays underneath (Transient reads
// it).
type RequestError struct {
	Op  string
	Err error
}

func (e *RequestError) Error() string { return e.Op + ": " + errorSummary(e.Err) }
func (e *RequestError) Unwrap() error { return e.Err }

func reqErr(op string, err error) error { return &RequestError{Op: op, Err: err} }

// RefusalError is S3 (or the AWS configuration) refusing for good: no
// credentials, wrong ones, access denied, no such bucket, another region.
type RefusalError struct{ Err error }

func (e *RefusalError) Error() string { return e.Err.Error() }
func (e *RefusalError) Unwrap() error { return e.Err }
