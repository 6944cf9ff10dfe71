// Package pipeline is the core of pipe: it decodes pipeline files with
// positions (LoadFile), checks them against the stage registry and wires the
// graph (Build), and runs the graph on go-streams with backpressure,
// cancellation, draining and per-stage accounting (Run). It never imports the
// stage kinds: they register themselves into DefaultRegistry.
package pipeline
