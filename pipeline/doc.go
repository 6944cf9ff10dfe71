// Package pipeline is the core of pipe: it decodes pipeline files with
// positions (LoadFile), checks them against the stage registry and wires the
// graph (Build), and runs the graph on go-streams with backpressure,
// cancellation, draining and per-stage accounting (Run). It never imports the
// stage kinds: they register themselves into DefaultRegistry.
//
// Where exactly-once resume (DESIGN.md §6) plugs in: records carry stable
// ids; kinds whose work is costly declare Spec.Expensive, so the engine knows
// where a record becomes worth keeping — the emitter of an expensive stage is
// the place to append each record to a journal in the run directory and
// fsync it within a second, before it moves downstream; a
// dedupe-against-progress kind then reads that journal (and the committed
// outputs) to drop done ids while streaming. Rejected and failed records
// already land in RUN_DIR/rejected and RUN_DIR/failed, so every id has a
// place.
package pipeline
