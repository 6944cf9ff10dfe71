package pipeline

import (
	"reflect"
)

// ReasonOtherShard is the skip reason of records a source read that belong
// to another shard.
const ReasonOtherShard = "other_shard"

// otherShard drops a record a source read that belongs to another shard of
// the run: it counts as skipped (ReasonOtherShard) and gets no ticket, so it
// is neither rejected, failed nor finished here — the shard owning it does
// that. Records a stage sends on while processing are never dropped.
func (em *emitter) otherShard(rec *Record) bool {
	sh := em.e.plan.File.Shard
	if sh == nil || sh.Count == 1 || em.in != nil || !em.n.ps.Spec.Source || sh.Owns(rec.ID) {
		return false
	}
	em.touched.Store(true)
	em.n.skipped.Add(1)
	em.n.reasonsMu.Lock()
	em.n.skips[ReasonOtherShard]++
	em.n.reasonsMu.Unlock()
	return true
}

// Prefixes lists the destination prefixes that are not paths (keys tagged
// `shard:"prefix"`, e.g. upload-s3's uri) with Mode "prefix", stages in
// plan order: with Paths, where a run's outputs go.
func (p *Plan) Prefixes() []PathUse {
	var out []PathUse
	for _, s := range p.Stages {
		if s.Spec == nil || s.Config == nil {
			continue
		}
		v := reflect.ValueOf(s.Config).Elem()
		fields, _ := fieldsOf(v.Type())
		for _, f := range fields {
			if fv := v.Field(f.Index); f.ShardPrefix && fv.Kind() == reflect.String && fv.String() != "" {
				out = append(out, PathUse{Stage: s.ID(), Key: f.Key, Kind: s.kind(), Mode: "prefix", Path: fv.String(), Pos: s.Decl.KeyPosition(f.Key)})
			}
		}
	}
	return out
}
