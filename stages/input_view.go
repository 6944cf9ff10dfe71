package stages

// InputView is a source's typed view of how far it is into its input file
// (its View): the live display's input bar and the ETA's total come from it.
type InputView struct {
	// BytesRead of Bytes, the file's size.
	BytesRead, Bytes int64
	// Lines is the file's lines to read once the pass ahead of the reader
	// counted them; 0 until then.
	Lines int64
}

// view is the position as an InputView.
func (p *inputPos) view() InputView {
	return InputView{BytesRead: p.read.Load(), Bytes: p.size.Load(), Lines: p.lines.Load()}
}
