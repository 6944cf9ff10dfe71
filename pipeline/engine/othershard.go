package engine

import "github.com/pipe-dev/pipe/pipeline/record"

// ReasonOtherShard is the skip reason of records a source read that belong
// to another shard.
const ReasonOtherShard = "other_shard"

// otherShard drops a record a source read that belongs to another shard of
// the run: it counts as skipped (ReasonOtherShard) and gets no ticket, so it
// is neither rejected, failed nor finished here — the shard owning it does
// that. Records a stage sends on while processing are never dropped.
func (em *emitter) otherShard(rec *record.Record) bool {
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
