// Package engine runs a built plan (Run): every stage on goroutines of its
// own, connected by bounded edges on go-streams (fabric.go), with
// backpressure, a drain on Stop, per-stage accounting (Summary), the
// journal of expensive stages, the run directory's done log (ledger.go)
// and its rejected/ and failed/ files, and the failure limits.
//
// Exactly-once resume (DESIGN.md §6): records carry stable ids; kinds whose
// work is costly declare Spec.Expensive, and the emitter of an expensive
// stage appends each record to a journal in the run directory, fsynced
// within a second, before it moves downstream; a dedupe-against-progress
// kind reads that journal (and the committed outputs) to drop done ids
// while streaming. Rejected and failed records land in RUN_DIR/rejected
// and RUN_DIR/failed, so every id has a place.
package engine
