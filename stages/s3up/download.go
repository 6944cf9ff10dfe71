package s3up

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// maxSmallObject bounds GetBytes (manifests are small).
const maxSmallObject = 64 << 20

// GetBytes returns a small object, such as a manifest.
func (c *Client) GetBytes(ctx context.Context, key string) ([]byte, error) {
	out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, reqErr("GetObject "+c.URL(key), err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, maxSmallObject+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.URL(key), err)
	}
	if len(data) > maxSmallObject {
		return nil, fmt.Errorf("%s is larger than %d MiB", c.URL(key), maxSmallObject>>20)
	}
	return data, nil
}

// Download writes the object at key into a new file at path and checks it
// against wantSHA256 (hex; "" checks nothing). On an error the file is
// removed.
func (c *Client) Download(ctx context.Context, key, path, wantSHA256 string) (err error) {
	out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(key)})
	if err != nil {
		return reqErr("GetObject "+c.URL(key), err)
	}
	defer out.Body.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), out.Body); err != nil {
		return fmt.Errorf("downloading %s: %w", c.URL(key), err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); wantSHA256 != "" && got != wantSHA256 {
		return fmt.Errorf("%s: sha256 %s, the manifest says %s", c.URL(key), got, wantSHA256)
	}
	return nil
}
