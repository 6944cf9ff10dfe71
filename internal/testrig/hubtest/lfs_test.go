package hubtest

import (
	"bytes"
	"strconv"
	"testing"
)

type batchObject struct {
	Oid     string
	Size    int64
	Actions *struct {
		Upload struct {
			Href   string
			Header map[string]string
		}
		Verify struct{ Href string }
	}
	Error *struct {
		Code    int
		Message string
	}
}

// batch asks the LFS batch endpoint of repo to upload objects, as
// lfs.post_lfs_batch_info does.
func (h hub) batch(repo string, objects ...[]byte) []batchObject {
	h.t.Helper()
	var objs []map[string]any
	for _, o := range objects {
		objs = append(objs, map[string]any{"oid": sha256Hex(o), "size": len(o)})
	}
	r := h.send("POST", "/datasets/"+repo+".git/info/lfs/objects/batch", writeToken, map[string]any{
		"operation": "upload", "transfers": []string{"basic", "multipart"}, "objects": objs,
		"hash_algo": "sha256", "ref": map[string]any{"name": "main"},
	}, "Accept", lfsMediaType, "Content-Type", lfsMediaType).want(h.t, 200)
	if ct := r.header.Get("Content-Type"); ct != lfsMediaType {
		h.t.Errorf("batch answer's Content-Type %q", ct)
	}
	var got struct {
		Transfer string
		Objects  []batchObject
	}
	r.decode(h.t, &got)
	if got.Transfer != "basic" || len(got.Objects) != len(objects) {
		h.t.Fatalf("batch answer %s", r.body)
	}
	return got.Objects
}

func (h hub) verify(href string, data []byte) response {
	h.t.Helper()
	return h.send("POST", href, writeToken, map[string]any{"oid": sha256Hex(data), "size": len(data)})
}

func TestLFSBasicUpload(t *testing.T) {
	h := newHub(t)
	repo := h.createRepo("ds")
	data := []byte("PAR1 some parquet bytes PAR1")

	obj := h.batch(repo, data)[0]
	if obj.Oid != sha256Hex(data) || obj.Size != int64(len(data)) || obj.Actions == nil {
		t.Fatalf("batch object %+v", obj)
	}
	if obj.Actions.Upload.Header != nil {
		t.Errorf("a basic upload with a header %v", obj.Actions.Upload.Header)
	}
	up, verify := obj.Actions.Upload.Href, obj.Actions.Verify.Href
	h.verify(verify, data).want(t, 404)
	h.send("PUT", up, "", []byte("other bytes of other size")).want(t, 400)
	h.send("PUT", up, "", bytes.ToUpper(data)).want(t, 400) // same size, other sha256
	h.send("PUT", up, writeToken, data).want(t, 400)        // a token never goes to storage
	h.send("PUT", up, "", data).want(t, 200)
	h.verify(verify, data).want(t, 200)
	h.send("POST", verify, writeToken, map[string]any{"oid": sha256Hex(data), "size": 1}).want(t, 404)
	h.send("POST", verify, "", map[string]any{"oid": sha256Hex(data), "size": len(data)}).want(t, 401)

	// Stored: the next batch asks for nothing.
	if again := h.batch(repo, data)[0]; again.Actions != nil {
		t.Errorf("stored object got actions %+v", again.Actions)
	}
	// Stores are per repo.
	other := h.createRepo("other")
	if o := h.batch(other, data)[0]; o.Actions == nil {
		t.Error("another repo's object counted as stored")
	}

	h.commit(repo, "", lfsOp("data/train.parquet", data)).want(t, 200)
	if got := h.Files(repo, "main")["data/train.parquet"]; !bytes.Equal(got, data) {
		t.Errorf("committed %q, want %q", got, data)
	}
	r := h.send("GET", "/datasets/"+repo+"/resolve/main/data/train.parquet", writeToken, nil).want(t, 200)
	if !bytes.Equal(r.body, data) || r.header.Get("ETag") != `"`+sha256Hex(data)+`"` {
		t.Errorf("resolve %q, ETag %s", r.body, r.header.Get("ETag"))
	}
	var info struct {
		Siblings []struct {
			Rfilename string
			Size      int
			Lfs       *struct {
				Sha256      string
				Size        int
				PointerSize int
			}
		}
	}
	h.send("GET", "/api/datasets/"+repo, writeToken, nil).want(t, 200).decode(t, &info)
	found := false
	for _, s := range info.Siblings {
		if s.Rfilename == "data/train.parquet" {
			found = true
			if s.Lfs == nil || s.Lfs.Sha256 != sha256Hex(data) || s.Lfs.Size != len(data) || s.Size != len(data) ||
				s.Lfs.PointerSize != 125+len(strconv.Itoa(len(data))) {
				t.Errorf("sibling %+v, lfs %+v", s, s.Lfs)
			}
		}
	}
	if !found {
		t.Errorf("no sibling data/train.parquet in %+v", info.Siblings)
	}
	// Copying an LFS file sends no size.
	h.commit(repo, "", map[string]any{"key": "lfsFile", "value": map[string]any{
		"path": "copy.parquet", "algo": "sha256", "oid": sha256Hex(data)}}).want(t, 200)
	// A size other than the stored object's is refused.
	h.commit(repo, "", map[string]any{"key": "lfsFile", "value": map[string]any{
		"path": "bad.parquet", "algo": "sha256", "oid": sha256Hex(data), "size": 1}}).want(t, 422)
}

func TestLFSBatchChecks(t *testing.T) {
	h := newHub(t)
	repo := h.createRepo("ds")
	path := "/datasets/" + repo + ".git/info/lfs/objects/batch"
	body := map[string]any{"operation": "upload", "objects": []map[string]any{{"oid": "ABC", "size": 3}}}
	r := h.send("POST", path, writeToken, body, "Content-Type", lfsMediaType).want(t, 200)
	var got struct{ Objects []batchObject }
	r.decode(t, &got)
	if o := got.Objects[0]; o.Error == nil || o.Error.Code != 422 || o.Actions != nil {
		t.Errorf("malformed oid: %s", r.body)
	}
	h.send("POST", path, writeToken, body, "Content-Type", "application/json").want(t, 415)
	h.send("POST", path, writeToken, map[string]any{"operation": "download"}, "Content-Type", lfsMediaType).want(t, 400)
	h.send("POST", path, readToken, body, "Content-Type", lfsMediaType).want(t, 403)
	many := make([]map[string]any, 257)
	for i := range many {
		many[i] = map[string]any{"oid": sha256Hex([]byte{byte(i), byte(i >> 8)}), "size": 2}
	}
	h.send("POST", path, writeToken, map[string]any{"operation": "upload", "objects": many},
		"Content-Type", lfsMediaType).want(t, 400)
	h.send("POST", "/datasets/"+User+"/nope.git/info/lfs/objects/batch", writeToken, body,
		"Content-Type", lfsMediaType).want(t, 404)
}

func TestLFSMultipartUpload(t *testing.T) {
	h := newHub(t)
	h.MultipartThreshold = 10
	h.PartSize = 4
	repo := h.createRepo("ds")
	small, data := []byte("tiny"), []byte("0123456789abcdefghij!") // 21 bytes: parts of 4,4,4,4,4,1

	objs := h.batch(repo, small, data)
	if objs[0].Actions.Upload.Header != nil {
		t.Errorf("an object under the threshold got a multipart upload")
	}
	up := objs[1].Actions.Upload
	if up.Header["chunk_size"] != "4" {
		t.Fatalf("header %v", up.Header)
	}
	var etags []string
	for i := 1; i <= 6; i++ {
		url := up.Header[strconv.Itoa(i)]
		if url == "" {
			t.Fatalf("no URL for part %d in %v", i, up.Header)
		}
		part := data[(i-1)*4 : min(i*4, len(data))]
		h.send("PUT", url, "", append(bytes.Clone(part), 'x')).want(t, 400) // wrong part size
		r := h.send("PUT", url, "", part).want(t, 200)
		if r.header.Get("ETag") == "" {
			t.Fatalf("part %d: no ETag", i)
		}
		etags = append(etags, r.header.Get("ETag"))
	}
	if len(up.Header) != 7 {
		t.Errorf("header has %d keys, want chunk_size and 6 parts: %v", len(up.Header), up.Header)
	}
	complete := func(etags []string) response {
		var parts []map[string]any
		for i, e := range etags {
			parts = append(parts, map[string]any{"partNumber": i + 1, "etag": e})
		}
		return h.send("POST", up.Href, "", map[string]any{"oid": sha256Hex(data), "parts": parts},
			"Accept", lfsMediaType, "Content-Type", lfsMediaType)
	}
	complete(etags[:5]).want(t, 400)
	bad := append([]string(nil), etags...)
	bad[2] = `"0000"`
	complete(bad).want(t, 400)
	h.verify(objs[1].Actions.Verify.Href, data).want(t, 404)
	complete(etags).want(t, 200)
	h.verify(objs[1].Actions.Verify.Href, data).want(t, 200)

	h.commit(repo, "", lfsOp("big.parquet", data)).want(t, 200)
	if got := h.Files(repo, "main")["big.parquet"]; !bytes.Equal(got, data) {
		t.Errorf("committed %q, want %q", got, data)
	}
}
