package pipeline

import (
	"reflect"
)

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
