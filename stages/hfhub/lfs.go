package hfhub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/pipe-dev/pipe/internal/termsafe"
)

// lfsMedia is the LFS batch API's media type (lfs.py LFS_HEADERS).
const lfsMedia = "application/vnd.git-lfs+json"

// maxParts bounds a multipart upload's parts (S3's limit, which the Hub's
// presigned parts are).
const maxParts = 10000

type lfsAction struct {
	Href   string         `json:"href"`
	Header map[string]any `json:"header"`
}

// UploadLFS sends f's content (read from content) to the repository's LFS
// store unless the store has it already, by its sha256 (lfs.py
// post_lfs_batch_info, lfs_upload): uploaded is false then. The content is
// sent as the batch answer says: one PUT (_upload_single_part), or parts
// of chunk_size each to the URLs it numbers, then their ETags to complete
// (_upload_multi_part); then its verify action. Upload URLs get no token,
// as huggingface_hub sends none; the verify action gets it only on the
// endpoint's own host.
func (c *Client) UploadLFS(ctx context.Context, rev string, f *Upload, content io.ReaderAt) (uploaded bool, err error) {
	type object struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	}
	body, n := jsonBody(map[string]any{"operation": "upload", "transfers": []string{"basic", "multipart"},
		"objects": []object{{f.SHA256, f.Size}}, "hash_algo": "sha256", "ref": map[string]string{"name": rev}})
	var out struct {
		Objects []struct {
			OID     string `json:"oid"`
			Size    int64  `json:"size"`
			Actions *struct {
				Upload *lfsAction `json:"upload"`
				Verify *lfsAction `json:"verify"`
			} `json:"actions"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"objects"`
	}
	op := "LFS batch for " + f.Path
	if _, err := c.do(ctx, request{op: op, method: http.MethodPost, url: c.endpoint + "/datasets/" + c.repo + ".git/info/lfs/objects/batch",
		body: body, size: n, contentType: lfsMedia, accept: lfsMedia, auth: true, out: &out}); err != nil {
		return false, err
	}
	if len(out.Objects) != 1 || out.Objects[0].OID != f.SHA256 {
		return false, fmt.Errorf("%s: the answer is not about this file", op)
	}
	obj := out.Objects[0]
	if obj.Error != nil {
		return false, &Error{Op: op, Status: obj.Error.Code, Message: termsafe.Line(termsafe.Cut(obj.Error.Message, 300))}
	}
	if obj.Actions == nil || obj.Actions.Upload == nil {
		return false, nil // the store has it
	}
	up := obj.Actions.Upload
	if _, multipart := up.Header["chunk_size"]; multipart {
		err = c.uploadParts(ctx, f, content, up)
	} else {
		_, err = c.do(ctx, request{op: "uploading " + f.Path, method: http.MethodPut, url: up.Href,
			body: io.NewSectionReader(content, 0, f.Size), size: f.Size})
	}
	if err != nil {
		return false, err
	}
	if v := obj.Actions.Verify; v != nil {
		body, n := jsonBody(object{f.SHA256, f.Size})
		if _, err := c.do(ctx, request{op: "verifying " + f.Path, method: http.MethodPost, url: v.Href,
			body: body, size: n, contentType: lfsMedia, accept: lfsMedia, auth: c.sameHost(v.Href)}); err != nil {
			return false, err
		}
	}
	return true, nil
}

// uploadParts is a multipart upload: the header's chunk_size, and its
// part URLs keyed "1".."N".
func (c *Client) uploadParts(ctx context.Context, f *Upload, content io.ReaderAt, up *lfsAction) error {
	chunk, err := strconv.ParseInt(fmt.Sprint(up.Header["chunk_size"]), 10, 64)
	if err != nil || chunk <= 0 {
		return fmt.Errorf("uploading %s: the Hub's chunk_size %v is not a size", f.Path, up.Header["chunk_size"])
	}
	var numbers []int
	for k := range up.Header {
		if n, err := strconv.Atoi(k); err == nil && n >= 1 && n <= maxParts {
			numbers = append(numbers, n)
		}
	}
	slices.Sort(numbers)
	want := int((f.Size + chunk - 1) / chunk)
	if len(numbers) != want || (want > 0 && numbers[want-1] != want) {
		return fmt.Errorf("uploading %s: the Hub gave %d part URLs for %d parts of %d bytes", f.Path, len(numbers), want, chunk)
	}
	type part struct {
		PartNumber int    `json:"partNumber"`
		ETag       string `json:"etag"`
	}
	parts := make([]part, 0, want)
	for _, n := range numbers {
		off := int64(n-1) * chunk
		size := min(chunk, f.Size-off)
		h, err := c.do(ctx, request{op: fmt.Sprintf("uploading %s part %d of %d", f.Path, n, want), method: http.MethodPut,
			url: fmt.Sprint(up.Header[strconv.Itoa(n)]), body: io.NewSectionReader(content, off, size), size: size})
		if err != nil {
			return err
		}
		etag := h.Get("ETag")
		if etag == "" {
			return fmt.Errorf("uploading %s part %d: the answer has no ETag", f.Path, n)
		}
		parts = append(parts, part{n, etag})
	}
	body, n := jsonBody(map[string]any{"oid": f.SHA256, "parts": parts})
	_, err = c.do(ctx, request{op: "completing the upload of " + f.Path, method: http.MethodPost, url: up.Href,
		body: body, size: n, contentType: lfsMedia, accept: lfsMedia})
	return err
}

// sameHost reports whether u is on the endpoint's scheme and host.
func (c *Client) sameHost(u string) bool {
	a, err1 := url.Parse(u)
	b, err2 := url.Parse(c.endpoint)
	return err1 == nil && err2 == nil && a.Scheme == b.Scheme && a.Host == b.Host
}
