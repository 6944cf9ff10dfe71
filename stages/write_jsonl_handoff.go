package stages

import (
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/stages/trainrow"
)

var _ output.TrainerFile = (*writeJSONLConfig)(nil)

// TrainerFile: an output of layout specforge or conversations is the file
// SpecForge loads (data.prompts_path, data.train_data_path).
func (c *writeJSONLConfig) TrainerFile() (layout, path string, maxLength int, ok bool) {
	if c.Layout != trainrow.SpecForge && c.Layout != trainrow.Conversations {
		return "", "", 0, false
	}
	return c.Layout, c.Path, c.MaxLength, c.Path != ""
}
