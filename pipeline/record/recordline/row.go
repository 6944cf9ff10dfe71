package recordline

import (
	"bytes"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// Row is what the readers of a run's outputs (pipe report, pipe inspect)
// read of a record line, without decoding it whole.
type Row struct {
	ID    string
	Tools bool // the conversation declares tools
	// Completion: the record has one; its figures follow.
	Completion                                      bool
	FinishReason                                    string
	PromptTokens, CompletionTokens, ReasoningTokens int
	// ReasoningBytes and AnswerBytes are the texts' lengths as written
	// (escapes make a length a little longer).
	ReasoningBytes, AnswerBytes int
	// ThinkingForced: the template forced thinking (the request recorded
	// thinking_forced), so the output started inside the reasoning.
	ThinkingForced bool
	// IDs counts the output ids around </think> (Options.Classes, when the
	// server reported no reasoning_tokens); OutputIDs, if set, are ids a
	// reader still has to count into it (Parser.CountIDs).
	IDs       IDCount
	OutputIDs []int
	// Tokens: the row's token counts are known (the record's tokens, or a
	// trainer row's loss_mask).
	Tokens                bool
	NumTokens, LossTokens int
	// Mask counts the loss mask's ones, when the row's mask was read.
	Mask MaskCount
	Marks
	RejectStage, RejectReason string
	FailStage, Failed         string
}

// SetVerdict sets the row's rejection or failure.
func (x *Row) SetVerdict(j *record.Rejection, fl *record.Failure) {
	if j != nil {
		x.RejectStage, x.RejectReason = j.Stage, j.Reason
	}
	if fl != nil {
		x.FailStage, x.Failed = fl.Stage, fl.Error
	}
}

// MaskCount is a loss mask's nonzero values: all, and those within the
// trainer's max_length (In); Len is its values; Known: the mask was read.
type MaskCount struct {
	Known        bool
	All, In, Len int
}

// CountMask counts mask's nonzero values, all and within its first max
// (0: all).
func CountMask(mask []uint8, max int) MaskCount {
	m := MaskCount{Known: true, Len: len(mask)}
	for i, v := range mask {
		if v != 0 {
			m.All++
			if max == 0 || i < max {
				m.In++
			}
		}
	}
	return m
}

// IDCount is what a reasoning/answer split needs of a completion's output
// ids: N counts the ids that are neither special nor </think>, Before
// those of them ahead of its last </think> (End: there is one); Any: there
// are ids.
type IDCount struct {
	Any, End  bool
	N, Before int
}

// What an output id is to the split (Options.Classes).
const (
	ClassText uint8 = iota
	ClassSpecial
	ClassEnd // </think>
)

// Options say what a Parser reads.
type Options struct {
	// VerdictsOnly reads the id and the verdict, nothing else.
	VerdictsOnly bool
	// MaxLength: Mask.In counts the loss mask's ones within it (0: all).
	MaxLength int
	// Classes is the class of each output id of the tokenizer's
	// vocabulary, shared and read only; nil: output ids are not counted.
	// Special classes an id past it.
	Classes []uint8
	Special func(id int) bool
}

// A Parser reads record lines into Rows; one a goroutine.
type Parser struct {
	opt Options
	buf []byte
}

// NewParser is a Parser reading what o says.
func NewParser(o Options) *Parser { return &Parser{opt: o} }

// lineJSON is the part of a record line a Row reads.
type lineJSON struct {
	ID         string  `json:"id"`
	Tools      present `json:"tools"`
	Completion *struct {
		Reasoning        strLen  `json:"reasoning"`
		Answer           strLen  `json:"answer"`
		FinishReason     string  `json:"finish_reason"`
		PromptTokens     int     `json:"prompt_tokens"`
		CompletionTokens int     `json:"completion_tokens"`
		ReasoningTokens  int     `json:"reasoning_tokens"`
		OutputIDs        idsList `json:"output_ids"`
		Request          struct {
			ThinkingForced bool `json:"thinking_forced"`
		} `json:"request"`
	} `json:"completion"`
	Tokens *struct {
		NumTokens     int `json:"num_tokens"`
		NumLossTokens int `json:"num_loss_tokens"`
	} `json:"tokens"`
	Meta    *metaMarks        `json:"meta"`
	Reject  *record.Rejection `json:"reject"`
	Failure *record.Failure   `json:"failure"`
}

// verdictJSON is what Options.VerdictsOnly reads.
type verdictJSON struct {
	ID      string            `json:"id"`
	Reject  *record.Rejection `json:"reject"`
	Failure *record.Failure   `json:"failure"`
}

// lineOptions accept what encoding/json (which writes the lines) accepts.
var lineOptions = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// Parse reads one record line into x (zeroed first). The id lists are
// lifted out first (lift), so that decoding the rest does not scan
// thousands of numbers per row; the output ids and the loss mask are
// counted in the same pass.
func (p *Parser) Parse(line []byte, x *Row) error {
	*x = Row{}
	dec := p.lift(line, x)
	if p.opt.VerdictsOnly {
		var l verdictJSON
		if err := json.Unmarshal(dec, &l, lineOptions); err != nil {
			return err
		}
		x.ID = l.ID
		x.SetVerdict(l.Reject, l.Failure)
		return nil
	}
	var l lineJSON
	if err := json.Unmarshal(dec, &l, lineOptions); err != nil {
		return err
	}
	x.ID, x.Tools = l.ID, bool(l.Tools)
	if c := l.Completion; c != nil {
		x.Completion, x.FinishReason = true, c.FinishReason
		x.PromptTokens, x.CompletionTokens, x.ReasoningTokens = c.PromptTokens, c.CompletionTokens, c.ReasoningTokens
		x.ReasoningBytes, x.AnswerBytes = int(c.Reasoning), int(c.Answer)
		x.ThinkingForced = c.Request.ThinkingForced
		// Only a completion without the server's reasoning_tokens needs its
		// output ids, and only with classes to find </think> in them.
		if x.ReasoningTokens <= 0 && p.opt.Classes != nil && !c.OutputIDs.stripped {
			x.IDs = IDCount{}
			p.CountIDs(c.OutputIDs.ids, &x.IDs)
		}
	}
	if t := l.Tokens; t != nil {
		x.Tokens, x.NumTokens, x.LossTokens = true, t.NumTokens, t.NumLossTokens
	} else if x.Mask.Known {
		// A trainer layout's row (input_ids, loss_mask at the top): its
		// mask is its tokens and loss tokens.
		x.Tokens, x.NumTokens, x.LossTokens = true, x.Mask.Len, x.Mask.All
	}
	if l.Meta != nil {
		x.Marks = Marks(*l.Meta)
	}
	x.SetVerdict(l.Reject, l.Failure)
	return nil
}

// CountIDs adds output ids to c (with Options.Classes).
func (p *Parser) CountIDs(ids []int, c *IDCount) {
	for _, id := range ids {
		p.count(id, c)
	}
}

// count adds one output id to c.
func (p *Parser) count(id int, c *IDCount) {
	c.Any = true
	class := ClassText
	if uint(id) < uint(len(p.opt.Classes)) {
		class = p.opt.Classes[id]
	} else if p.opt.Special != nil && p.opt.Special(id) {
		class = ClassSpecial
	}
	switch class {
	case ClassText:
		c.N++
	case ClassEnd:
		c.Before, c.End = c.N, true
	}
}

// strLen is the length of a JSON string as written, without its quotes:
// a text is neither unescaped nor copied.
type strLen int

func (s *strLen) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	v, err := d.ReadValue()
	if err != nil {
		return err
	}
	*s = 0
	if v.Kind() == '"' {
		*s = strLen(len(v) - 2)
	}
	return nil
}

// present records whether a value is there and not empty (null, "", []
// or {}), without copying it.
type present bool

func (p *present) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	v, err := d.ReadValue()
	if err != nil {
		return err
	}
	switch string(v) {
	case "null", `""`, "[]", "{}":
		*p = false
	default:
		*p = true
	}
	return nil
}

// idsList is a token id list: the one the line's scan lifted out
// (stripped, its digits still in the line) or, when it was not a list of
// plain integers, the ids decoded.
type idsList struct {
	stripped bool
	ids      []int
}

// strippedMark stands for a lifted list in the line as decoded: a string,
// which a list of ids never is.
const strippedMark = `"\u0000ids"`

func (l *idsList) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	v, err := d.ReadValue()
	if err != nil {
		return err
	}
	if string(v) == strippedMark {
		l.stripped = true
		return nil
	}
	return json.Unmarshal(v, &l.ids)
}

// metaMarks reads a meta object's marks (the keys named by the Meta
// constants), skipping its other members.
type metaMarks Marks

func (m *metaMarks) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if d.PeekKind() != '{' {
		return d.SkipValue()
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return err
		}
		switch name.String() {
		case MetaCutAtLength:
			err = json.UnmarshalDecode(d, &m.CutAtLength)
		case MetaAttempt:
			err = json.UnmarshalDecode(d, &m.Attempt)
		case MetaRetriedTokens:
			err = json.UnmarshalDecode(d, &m.RetriedTokens)
		default:
			err = d.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := d.ReadToken()
	return err
}

// ParseMarks reads the marks of a meta object's JSON (an Arrow row's meta
// column); a value that is not one has none.
func ParseMarks(meta []byte) Marks {
	if !bytes.Contains(meta, []byte(MetaCutAtLength)) && !bytes.Contains(meta, []byte(MetaAttempt)) && !bytes.Contains(meta, []byte(MetaRetriedTokens)) {
		return Marks{}
	}
	var m metaMarks
	_ = json.Unmarshal(meta, &m, lineOptions) // a bad meta only loses the marks
	return Marks(m)
}
