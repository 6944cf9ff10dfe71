// Package engine runs a built plan (Run): every stage on goroutines of its
// own, connected by bounded edges on go-streams (fabric.go), with
// backpressure, a drain on Stop, per-stage accounting (Summary), the
// journal of expensive stages, the run directory's done log (ledger.go)
// and its rejected/ and failed/ files, and the failure limits.
package engine
