// Package pipeline is the stage API and the graph: a stage kind registers its
// Spec into DefaultRegistry and implements Source or Processor (and the hooks
// of stage.go); Build decodes a pipefile.File's stages against the registry
// and wires the Plan that engine.Run runs. It never imports the stage kinds.
package pipeline
