package s3up

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Checked is what CheckObject found of one object.
type Checked struct {
	OK bool
	// How says what was compared: "size, sha256 (server checksum)",
	// "size, sha256 (composite checksum of the local file)", "size,
	// sha256 (downloaded)", or without hash "size, pipe-sha256".
	How string
	// Problem says what is wrong when not OK, e.g. "is not in the bucket".
	Problem string
	Missing bool
}

// CheckObject checks the object at key against size bytes with hex SHA-256
// sha: it must be there with that size and pipe-sha256. With hash its
// content is checked too, by the checksum the server computed where it
// keeps a whole-object one, else (a multipart object's composite checksum)
// against the same composite of local (the local copy, if there is one at
// the right size), else by downloading and hashing it.
func (c *Client) CheckObject(ctx context.Context, key string, size int64, sha, local string, hash bool) (*Checked, error) {
	obj, err := c.Head(ctx, key)
	if err != nil {
		return nil, err
	}
	if ch := checkHead(obj, size, sha); ch != nil {
		return ch, nil
	}
	if !hash {
		return &Checked{OK: true, How: "size, " + MetaSHA256}, nil
	}
	raw, err := hex.DecodeString(sha)
	if err != nil {
		return nil, fmt.Errorf("sha256 %q: %w", sha, err)
	}
	if ch := checkWholeChecksum(obj, raw); ch != nil {
		return ch, nil
	}
	if ch := c.checkComposite(obj, size, local); ch != nil {
		return ch, nil
	}
	got, err := c.downloadSHA256(ctx, key)
	if err != nil {
		return nil, err
	}
	if got != strings.ToLower(sha) {
		return &Checked{Problem: fmt.Sprintf("has SHA-256 %s (downloaded), the manifest says %s", got, sha)}, nil
	}
	return &Checked{OK: true, How: "size, sha256 (downloaded)"}, nil
}

// checkHead is the problem the object's head shows against size and hex
// SHA-256 sha (missing, another size, another pipe-sha256), or nil.
func checkHead(obj *Object, size int64, sha string) *Checked {
	switch {
	case obj == nil:
		return &Checked{Problem: "is not in the bucket", Missing: true}
	case obj.Size != size:
		return &Checked{Problem: fmt.Sprintf("has %d bytes, the manifest says %d", obj.Size, size)}
	case obj.SHA256 != "" && !strings.EqualFold(obj.SHA256, sha):
		return &Checked{Problem: fmt.Sprintf("has %s %s, the manifest says sha256 %s", MetaSHA256, obj.SHA256, sha)}
	}
	return nil
}

// checkWholeChecksum compares the server's whole-object checksum with
// the SHA-256 raw; nil when the server keeps none (a multipart object's
// is a composite).
func checkWholeChecksum(obj *Object, raw []byte) *Checked {
	if obj.Checksum == "" || strings.Contains(obj.Checksum, "-") || obj.ChecksumType == string(types.ChecksumTypeComposite) {
		return nil
	}
	if obj.Checksum != b64(raw) {
		return &Checked{Problem: fmt.Sprintf("has SHA-256 checksum %s (computed by the server), the manifest says %s", obj.Checksum, b64(raw))}
	}
	return &Checked{OK: true, How: "size, sha256 (server checksum)"}
}

// checkComposite compares a multipart object's composite checksum with
// the same composite of the local file; nil when there is no composite,
// no local file, or the file does not give one in as many parts.
func (c *Client) checkComposite(obj *Object, size int64, local string) *Checked {
	sum, parts, ok := strings.Cut(obj.Checksum, "-")
	if !ok || local == "" {
		return nil
	}
	n, _ := strconv.Atoi(parts)
	got, err := c.compositeOf(local, size, n)
	if err != nil || got == "" {
		return nil
	}
	if got != sum {
		return &Checked{Problem: fmt.Sprintf("has composite SHA-256 checksum %s-%d (computed by the server), the local shard gives %s", sum, n, got)}
	}
	return &Checked{OK: true, How: "size, sha256 (server's composite checksum of the local file)"}
}

// compositeOf is the base64 SHA-256 of the parts' SHA-256s of the file at
// path in n parts, as UploadFile cuts them; "" when the file is not size
// bytes or the part size does not give n parts.
func (c *Client) compositeOf(path string, size int64, n int) (string, error) {
	partSize := PartSizeFor(size, c.cfg.PartSize)
	if n <= 0 || (size+partSize-1)/partSize != int64(n) {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != size {
		return "", err
	}
	buf := make([]byte, 1<<20)
	cat := make([]byte, 0, n*sha256.Size)
	for off := int64(0); off < size; off += partSize {
		h := sha256.New()
		if _, err := io.CopyBuffer(h, io.NewSectionReader(f, off, min(partSize, size-off)), buf); err != nil {
			return "", err
		}
		cat = h.Sum(cat)
	}
	sum := sha256.Sum256(cat)
	return b64(sum[:]), nil
}

// downloadSHA256 reads the object at key and returns its hex SHA-256.
func (c *Client) downloadSHA256(ctx context.Context, key string) (string, error) {
	out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(key)})
	if err != nil {
		return "", reqErr("GetObject "+c.URL(key), err)
	}
	defer out.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, out.Body); err != nil {
		return "", reqErr("reading "+c.URL(key), err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// List returns the keys under prefix (with "/" added) and their sizes.
func (c *Client) List(ctx context.Context, prefix string) (map[string]int64, error) {
	out := map[string]int64{}
	p := s3.NewListObjectsV2Paginator(c.s3, &s3.ListObjectsV2Input{Bucket: aws.String(c.Bucket), Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, reqErr("ListObjectsV2 "+c.URL(prefix+"/"), err)
		}
		for _, o := range page.Contents {
			out[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	return out, nil
}

// Delete removes the object at key.
func (c *Client) Delete(ctx context.Context, key string) error {
	if _, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(key)}); err != nil {
		return reqErr("DeleteObject "+c.URL(key), err)
	}
	return nil
}
