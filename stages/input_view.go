package stages

import "github.com/pipe-dev/pipe/pipeline/view"

// view is the position as the source's view (view.InputViewer).
func (p *inputPos) view() *view.Input {
	return &view.Input{BytesRead: p.read.Load(), Bytes: p.size.Load(), Lines: p.lines.Load()}
}
