// Package pipeline is the stage API and the graph. A stage kind registers
// its Spec (config, ports, fields, constructor) into DefaultRegistry and
// implements Source or Processor and the optional hooks of stage.go; Build
// decodes each stage of a pipefile.File against the registry and wires the
// Plan that engine.Run runs. It never imports the stage kinds.
package pipeline
