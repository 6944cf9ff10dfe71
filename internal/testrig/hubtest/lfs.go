package hubtest

import (
	"crypto/md5"
	"encoding/hex"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

const (
	lfsMediaType    = "application/vnd.git-lfs+json" // lfs.LFS_HEADERS
	maxBatchObjects = 256                            // _commit_api._upload_lfs_files sends chunks of 256
	defaultPartSize = 5 << 20
)

// lfsBatch answers POST /datasets/{id}.git/info/lfs/objects/batch
// (lfs.post_lfs_batch_info). An object already in the repo's LFS store
// gets no actions, and lfs.lfs_upload skips it. Any other gets an upload
// action, basic or (over MultipartThreshold) multipart, and a verify
// action. A malformed oid or size gets a per-object error, which
// post_lfs_batch_info returns apart.
func (s *Server) lfsBatch(w http.ResponseWriter, r *http.Request, at target) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != lfsMediaType {
		return &hubError{status: http.StatusUnsupportedMediaType, msg: "Content-Type must be " + lfsMediaType}
	}
	var req struct {
		Operation string   `json:"operation"`
		Transfers []string `json:"transfers"`
		Objects   []struct {
			Oid  string `json:"oid"`
			Size int64  `json:"size"`
		} `json:"objects"`
		HashAlgo string `json:"hash_algo"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if req.Operation != "upload" {
		return badRequest("operation %q: hubtest serves uploads only", req.Operation)
	}
	if req.HashAlgo != "" && req.HashAlgo != "sha256" {
		return badRequest("hash_algo %q: want sha256", req.HashAlgo)
	}
	if len(req.Objects) > maxBatchObjects {
		return badRequest("too many objects: %d, at most %d per batch", len(req.Objects), maxBatchObjects)
	}
	multipart := slices.Contains(req.Transfers, "multipart") && s.MultipartThreshold > 0
	partSize := s.partSize()

	s.mu.Lock()
	defer s.mu.Unlock()
	rp, err := s.repo(at.repo)
	if err != nil {
		return err
	}
	objects := []map[string]any{}
	for _, o := range req.Objects {
		obj := map[string]any{"oid": o.Oid, "size": o.Size}
		objects = append(objects, obj)
		if !validOid(o.Oid) || o.Size < 0 {
			obj["error"] = map[string]any{"code": http.StatusUnprocessableEntity,
				"message": "oid must be 64 lowercase hex digits and size ≥ 0"}
			continue
		}
		if data, ok := rp.lfs[o.Oid]; ok && int64(len(data)) == o.Size {
			continue
		}
		href := s.URL + uploadPrefix + rp.id + "/" + o.Oid + "/" + strconv.FormatInt(o.Size, 10)
		upload := map[string]any{"href": href}
		if multipart && o.Size > s.MultipartThreshold {
			// lfs._upload_multi_part: the header maps chunk_size and each
			// part's number to its URL; href takes the completion.
			header := map[string]string{"chunk_size": strconv.FormatInt(partSize, 10)}
			for i := 1; i <= numParts(o.Size, partSize); i++ {
				header[strconv.Itoa(i)] = href + "/part/" + strconv.Itoa(i)
			}
			upload["header"] = header
		}
		obj["actions"] = map[string]any{
			"upload": upload,
			"verify": map[string]any{"href": s.URL + "/datasets/" + rp.id + ".git/info/lfs/objects/verify"},
		}
	}
	w.Header().Set("Content-Type", lfsMediaType)
	writeJSON(w, http.StatusOK, map[string]any{"transfer": "basic", "objects": objects})
	return nil
}

func (s *Server) partSize() int64 {
	if s.PartSize > 0 {
		return s.PartSize
	}
	return defaultPartSize
}

func numParts(size, partSize int64) int { return int((size + partSize - 1) / partSize) }

// upload answers the PUT of an upload action's href (lfs._upload_single_part)
// or of one part's URL (lfs._upload_parts_iteratively). These stand for
// presigned S3 URLs: they take no token, and one sent is refused as S3
// refuses it (a token must never go to storage). A basic upload's bytes
// must have the size and sha256 the batch was asked for; a part must be
// chunk_size long, the last one the rest. A part's answer carries the ETag
// the completion must name.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, at target) error {
	if r.Header.Get("Authorization") != "" {
		return badRequest("InvalidArgument: Only one auth mechanism allowed; the URL is presigned: send no Authorization header")
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return badRequest("reading the body: %v", err)
	}
	if at.part > 0 {
		return s.uploadPart(w, at, data)
	}
	if int64(len(data)) != at.size || sha256Hex(data) != at.oid {
		return badRequest("uploaded %d bytes of sha256 %s; the batch promised %d bytes of sha256 %s",
			len(data), sha256Hex(data), at.size, at.oid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, err := s.repo(at.repo)
	if err != nil {
		return err
	}
	rp.lfs[at.oid] = data
	w.Header().Set("ETag", etag(data))
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) uploadPart(w http.ResponseWriter, at target, data []byte) error {
	partSize := s.partSize()
	n := numParts(at.size, partSize)
	if at.part > n {
		return badRequest("part %d of an object of %d parts", at.part, n)
	}
	want := partSize
	if at.part == n {
		want = at.size - int64(n-1)*partSize
	}
	if int64(len(data)) != want {
		return badRequest("part %d is %d bytes; want %d (chunk_size %d)", at.part, len(data), want, partSize)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, err := s.repo(at.repo)
	if err != nil {
		return err
	}
	if rp.parts[at.oid] == nil {
		rp.parts[at.oid] = map[int][]byte{}
	}
	rp.parts[at.oid][at.part] = data
	w.Header().Set("ETag", etag(data))
	w.WriteHeader(http.StatusOK)
	return nil
}

// etag is an S3 part's ETag: its md5 in hex, quoted.
func etag(data []byte) string {
	sum := md5.Sum(data)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// completeMultipart answers the POST to a multipart upload's href
// (lfs._upload_multi_part, _get_completion_payload): {"oid", "parts":
// [{"partNumber", "etag"}]}, every part in order with the ETag its PUT
// returned (quoted or not). The assembled object must have the promised
// size and sha256. lfs.LFS_HEADERS go with it, and no token.
func (s *Server) completeMultipart(w http.ResponseWriter, r *http.Request, at target) error {
	var req struct {
		Oid   string `json:"oid"`
		Parts []struct {
			PartNumber int    `json:"partNumber"`
			Etag       string `json:"etag"`
		} `json:"parts"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if req.Oid != at.oid {
		return badRequest("completion for oid %s sent to the URL of %s", req.Oid, at.oid)
	}
	if n := numParts(at.size, s.partSize()); len(req.Parts) != n {
		return badRequest("completion names %d parts; the object has %d", len(req.Parts), n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, err := s.repo(at.repo)
	if err != nil {
		return err
	}
	var data []byte
	for i, p := range req.Parts {
		part, ok := rp.parts[at.oid][p.PartNumber]
		switch {
		case p.PartNumber != i+1:
			return badRequest("completion part %d has partNumber %d; want them in order from 1", i+1, p.PartNumber)
		case !ok:
			return badRequest("part %d was not uploaded", p.PartNumber)
		case strings.Trim(p.Etag, `"`) != strings.Trim(etag(part), `"`):
			return badRequest("part %d: etag %s; the upload returned %s", p.PartNumber, p.Etag, etag(part))
		}
		data = append(data, part...)
	}
	if int64(len(data)) != at.size || sha256Hex(data) != at.oid {
		return badRequest("the parts make %d bytes of sha256 %s; the batch promised %d bytes of sha256 %s",
			len(data), sha256Hex(data), at.size, at.oid)
	}
	rp.lfs[at.oid] = data
	delete(rp.parts, at.oid)
	writeJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// verify answers POST /datasets/{id}.git/info/lfs/objects/verify, the
// verify action of lfs.lfs_upload: {"oid", "size"}; 200 when the repo's
// LFS store holds that object with that size, 404 otherwise.
func (s *Server) verify(w http.ResponseWriter, r *http.Request, at target) error {
	var req struct {
		Oid  string `json:"oid"`
		Size int64  `json:"size"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, err := s.repo(at.repo)
	if err != nil {
		return err
	}
	if data, ok := rp.lfs[req.Oid]; !ok || int64(len(data)) != req.Size {
		return notFound("", "object %s of %d bytes not found", req.Oid, req.Size)
	}
	writeJSON(w, http.StatusOK, map[string]any{})
	return nil
}
