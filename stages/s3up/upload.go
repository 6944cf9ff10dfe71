package s3up

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Uploaded says what an upload did.
type Uploaded struct {
	Key   string
	Bytes int64
	Parts int // 0: one PutObject
	// Verified says what the HeadObject after the upload checked: "size"
	// and, when the server keeps checksums, "sha256".
	Verified string
}

// PartSizeFor is the part size for an object of size bytes: partSize,
// raised (to whole MiB) so the object fits in MaxParts parts.
func PartSizeFor(size, partSize int64) int64 {
	if partSize < MinPartSize {
		partSize = MinPartSize
	}
	if need := (size + MaxParts - 1) / MaxParts; need > partSize {
		partSize = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return partSize
}

// UploadFile uploads the file at path to key, expecting size bytes with the
// hex SHA-256 sha: the file is hashed first and refused if it is not what
// it should be. Up to the part size it is one PutObject; above, a multipart
// upload with PartConcurrency parts in flight, each read from the file
// (retries re-read it), aborted on failure. Every request carries the
// SHA-256 of its body, which the server checks; the object gets user
// metadata pipe-sha256 = sha plus meta, and a HeadObject afterwards checks
// its size and, when the server keeps one, its checksum.
func (c *Client) UploadFile(ctx context.Context, key, path string, size int64, sha string, meta map[string]string) (*Uploaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if size >= 0 && st.Size() != size {
		return nil, fmt.Errorf("%s has %d bytes, %d when committed: it changed since", path, st.Size(), size)
	}
	size = st.Size()
	partSize := PartSizeFor(size, c.cfg.PartSize)
	multipart := size > partSize

	// One pass over the file: its SHA-256 and, for multipart, each part's.
	full := sha256.New()
	var partSums [][]byte
	if multipart {
		buf := make([]byte, 1<<20)
		for off := int64(0); off < size; off += partSize {
			ph := sha256.New()
			if _, err := io.CopyBuffer(io.MultiWriter(full, ph), io.NewSectionReader(f, off, min(partSize, size-off)), buf); err != nil {
				return nil, fmt.Errorf("reading %s: %w", path, err)
			}
			partSums = append(partSums, ph.Sum(nil))
		}
	} else if _, err := io.Copy(full, io.NewSectionReader(f, 0, size)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	fullSum := full.Sum(nil)
	if got := hex.EncodeToString(fullSum); sha != "" && !strings.EqualFold(got, sha) {
		return nil, fmt.Errorf("%s has SHA-256 %s, %s when committed: it changed since", path, got, sha)
	}
	sha = hex.EncodeToString(fullSum)
	md := map[string]string{MetaSHA256: sha}
	for k, v := range meta {
		md[k] = v
	}

	// An object gone at the check after its upload was removed in
	// between (a lifecycle rule, another job emptying the prefix): it is
	// uploaded once more before that is an error.
	var res *Uploaded
	for attempt := 1; ; attempt++ {
		res, err = c.putVerified(ctx, f, key, size, sha, fullSum, partSize, partSums, md)
		if !errors.Is(err, errGoneAfterUpload) || attempt == 2 {
			return res, err
		}
	}
}

// errGoneAfterUpload marks an upload whose object was not there at the
// check right after it.
var errGoneAfterUpload = errors.New("it is not there after the upload")

// putVerified is one upload of f (PutObject, or multipart when partSums
// has its parts) and the HeadObject that checks it.
func (c *Client) putVerified(ctx context.Context, f *os.File, key string, size int64, sha string, fullSum []byte, partSize int64, partSums [][]byte, md map[string]string) (*Uploaded, error) {
	multipart := partSums != nil
	res := &Uploaded{Key: key, Bytes: size}
	var wantChecksum string
	if !multipart {
		wantChecksum = b64(fullSum)
		_, err := c.s3.PutObject(ctx, &s3.PutObjectInput{
			Bucket:            aws.String(c.Bucket),
			Key:               aws.String(key),
			Body:              io.NewSectionReader(f, 0, size),
			ContentLength:     aws.Int64(size),
			Metadata:          md,
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
			ChecksumSHA256:    aws.String(wantChecksum),
		})
		if err != nil {
			return nil, reqErr("PutObject "+c.URL(key), err)
		}
	} else {
		res.Parts = len(partSums)
		if err := c.multipart(ctx, f, key, size, partSize, partSums, md); err != nil {
			return nil, err
		}
		cat := make([]byte, 0, len(partSums)*sha256.Size)
		for _, s := range partSums {
			cat = append(cat, s...)
		}
		sum := sha256.Sum256(cat)
		wantChecksum = fmt.Sprintf("%s-%d", b64(sum[:]), len(partSums))
	}

	obj, err := c.Head(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("verifying the upload: %w", err)
	}
	switch {
	case obj == nil:
		return nil, fmt.Errorf("verifying the upload: %s: %w", c.URL(key), errGoneAfterUpload)
	case obj.Size != size:
		return nil, fmt.Errorf("verifying the upload: %s has %d bytes, want %d", c.URL(key), obj.Size, size)
	case obj.SHA256 != "" && !strings.EqualFold(obj.SHA256, sha):
		return nil, fmt.Errorf("verifying the upload: %s has metadata %s = %s, want %s", c.URL(key), MetaSHA256, obj.SHA256, sha)
	}
	res.Verified = "size"
	if obj.Checksum != "" {
		got, want := obj.Checksum, wantChecksum
		if multipart && !strings.Contains(got, "-") { // some servers leave off the part count
			want, _, _ = strings.Cut(want, "-")
		}
		if got != want {
			return nil, fmt.Errorf("verifying the upload: %s has SHA-256 checksum %s, want %s", c.URL(key), got, want)
		}
		res.Verified = "size, sha256"
	}
	return res, nil
}

// multipart uploads f in parts of partSize with their SHA-256s.
func (c *Client) multipart(ctx context.Context, f *os.File, key string, size, partSize int64, partSums [][]byte, md map[string]string) error {
	cr, err := c.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:            aws.String(c.Bucket),
		Key:               aws.String(key),
		Metadata:          md,
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumType:      types.ChecksumTypeComposite,
	})
	if err != nil {
		return reqErr("CreateMultipartUpload "+c.URL(key), err)
	}
	up := &partUpload{c: c, f: f, key: key, uploadID: cr.UploadId, size: size, partSize: partSize, partSums: partSums}
	parts, err := up.parts(ctx)
	if err != nil {
		up.abort(ctx)
		return err
	}
	_, err = c.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(c.Bucket),
		Key:             aws.String(key),
		UploadId:        up.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		ChecksumType:    types.ChecksumTypeComposite,
		MpuObjectSize:   aws.Int64(size),
	})
	if err != nil {
		up.abort(ctx)
		return reqErr("CompleteMultipartUpload "+c.URL(key), err)
	}
	return nil
}

// partUpload is one multipart upload under way: f's size bytes in parts
// of partSize, whose SHA-256s are partSums.
type partUpload struct {
	c              *Client
	f              *os.File
	key            string
	uploadID       *string
	size, partSize int64
	partSums       [][]byte
}

// parts uploads the parts, PartConcurrency at a time, and returns them in
// order. The first failure cancels the others and is the error.
func (up *partUpload) parts(ctx context.Context) ([]types.CompletedPart, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := make([]types.CompletedPart, len(up.partSums))
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range min(up.c.cfg.PartConcurrency, len(up.partSums)) {
		wg.Go(func() {
			for i := range next {
				part, err := up.part(pctx, i)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					continue
				}
				parts[i] = part
			}
		})
	}
feed:
	for i := range up.partSums {
		select {
		case next <- i:
		case <-pctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return nil, firstErr
	}
	sort.Slice(parts, func(i, j int) bool { return *parts[i].PartNumber < *parts[j].PartNumber })
	return parts, nil
}

// part uploads part i (from 0) and checks the SHA-256 the server computed
// of it, when it tells.
func (up *partUpload) part(ctx context.Context, i int) (types.CompletedPart, error) {
	off := int64(i) * up.partSize
	n := min(up.partSize, up.size-off)
	sum := b64(up.partSums[i])
	out, err := up.c.s3.UploadPart(ctx, &s3.UploadPartInput{
		Bucket:            aws.String(up.c.Bucket),
		Key:               aws.String(up.key),
		UploadId:          up.uploadID,
		PartNumber:        aws.Int32(int32(i + 1)),
		Body:              io.NewSectionReader(up.f, off, n),
		ContentLength:     aws.Int64(n),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumSHA256:    aws.String(sum),
	})
	if err == nil && out.ChecksumSHA256 != nil && *out.ChecksumSHA256 != sum {
		err = fmt.Errorf("the server computed SHA-256 %s, want %s", *out.ChecksumSHA256, sum)
	}
	if err != nil {
		return types.CompletedPart{}, reqErr(fmt.Sprintf("UploadPart %d of %d of %s", i+1, len(up.partSums), up.c.URL(up.key)), err)
	}
	return types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag, ChecksumSHA256: aws.String(sum)}, nil
}

// abort aborts the upload, so its parts are not kept (and billed).
func (up *partUpload) abort(ctx context.Context) {
	// A fresh context: the upload's may be what was cancelled.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	up.c.s3.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: aws.String(up.c.Bucket), Key: aws.String(up.key), UploadId: up.uploadID})
}

// PutBytes uploads a small object (a manifest) in one PutObject with its
// SHA-256 checked by the server and as pipe-sha256 metadata. It returns the
// hex SHA-256.
func (c *Client) PutBytes(ctx context.Context, key string, data []byte, contentType string) (string, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	_, err := c.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:            aws.String(c.Bucket),
		Key:               aws.String(key),
		Body:              bytes.NewReader(data),
		ContentLength:     aws.Int64(int64(len(data))),
		ContentType:       aws.String(contentType),
		Metadata:          map[string]string{MetaSHA256: sha},
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumSHA256:    aws.String(b64(sum[:])),
	})
	if err != nil {
		return "", reqErr("PutObject "+c.URL(key), err)
	}
	return sha, nil
}

// Same reports whether obj is the object with size bytes and hex SHA-256
// sha: same size, same pipe-sha256 metadata and, when the server keeps a
// whole-object SHA-256 checksum, that too.
func Same(obj *Object, size int64, sha string) bool {
	if obj == nil || obj.Size != size || !strings.EqualFold(obj.SHA256, sha) {
		return false
	}
	if obj.Checksum != "" && obj.ChecksumType == string(types.ChecksumTypeFullObject) && !strings.Contains(obj.Checksum, "-") {
		raw, err := hex.DecodeString(sha)
		return err == nil && obj.Checksum == b64(raw)
	}
	return true
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
