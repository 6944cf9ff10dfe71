package s3up

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
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

// GetManifest returns the manifest of the shard directory at the client's
// prefix and its key: filecommit.ManifestNames in order, so a directory
// uploaded before the manifest was hidden (manifest.json) still reads.
func (c *Client) GetManifest(ctx context.Context) (key string, data []byte, err error) {
	for _, name := range filecommit.ManifestNames {
		key = c.Key(name)
		obj, err := c.Head(ctx, key)
		if err != nil {
			return key, nil, err
		}
		if obj != nil {
			data, err := c.GetBytes(ctx, key)
			return key, data, err
		}
	}
	return c.Key(filecommit.ManifestName), nil, fmt.Errorf("%s: no manifest (%s)", c.URL(c.Key("")), strings.Join(filecommit.ManifestNames, " or "))
}
