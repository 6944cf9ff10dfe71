package output

import (
	"context"
	"io"
)

// Card is what a run knew of how it made its data, for an output that
// describes itself where it is published (a Hub dataset card). pipe run
// fills it at the end from its report; the kind renders it.
type Card struct {
	Pipeline string // the pipeline's name
	// Command is the command line that ran it, and PipelineFile the
	// pipeline file, both with credentials taken out.
	Command      string
	PipelineFile []byte
	// Generation are the data-defining settings of the stages that
	// generate (model, sampling, chat template digest), as run.json
	// records them; those not set are left out (the server's default
	// applies).
	Generation []Setting
	Trainer    string // "specforge dflash, max_length 4096"; "" with none
	Finished   int64  // prompts finished
	Rejected   []Count
	// Decoded and Trained are output tokens decoded and loss tokens the
	// trainer keeps (0: not measured).
	Decoded, Trained int64
	// Acceptance is the servers' mean speculative accept length (0: not
	// reported).
	Acceptance float64
	// Spared says what stages before generation rejected ("" if none).
	Spared string
}

// Setting is one key of a stage.
type Setting struct{ Stage, Key, Value string }

// Count is rejections by a stage for a reason.
type Count struct {
	Stage, Reason string
	N             int64
}

// PublishFunc completes an output published elsewhere with the run's
// card, at the end of a run whose outputs verified.
type PublishFunc func(ctx context.Context, config any, env *PublishEnv) error

// PublishEnv is what a Publish is given.
type PublishEnv struct {
	StageID string
	RunDir  string
	Log     io.Writer // lines for the terminal and the run log
	Card    *Card
	// Inputs are the verified outputs feeding the stage (a writer's
	// shard directory).
	Inputs []*Verified
}
