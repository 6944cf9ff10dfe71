package runreport

import (
	"fmt"
	"github.com/pipe-dev/pipe/internal/numfmt"
	"slices"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// Economy is what the fleet's decode became (issue 32): the output tokens
// decoded, the loss tokens of training rows the trainer keeps, and which
// output lengths ended in a training row and which in a reject.
type Economy struct {
	// MaxLength is the trainer's max_length (run.json's [trainer]); 0: no
	// trainer declared, every loss token counts as trained.
	MaxLength int `json:"max_length,omitempty"`
	// Decoded is the completion_tokens of every record with a completion,
	// in the training outputs and in the rejects, each id once.
	Decoded int64 `json:"decoded_tokens"`
	// Trained is the loss tokens of the training rows within MaxLength,
	// each id once.
	Trained int64 `json:"trained_tokens"`
	// DecodedPerTrained is Decoded/Trained; 0 when nothing is trained.
	DecodedPerTrained float64 `json:"decoded_per_trained"`
	// KeptAtLength are kept rows the length limit stopped (their meta's
	// cut_at_length), and KeptAtLengthTokens their completion tokens.
	KeptAtLength       int64 `json:"kept_at_length"`
	KeptAtLengthTokens int64 `json:"kept_at_length_tokens"`
	// Kept and Rejected are completion tokens per row of the rows kept
	// (in a training output) and of the rows rejected: a selection bias
	// shows as a longer Rejected.
	Kept     Dist `json:"kept_output_tokens"`
	Rejected Dist `json:"rejected_output_tokens"`
	// Longest is the longest decile of output lengths, kept and rejected
	// rows together.
	Longest Decile `json:"longest_decile"`
}

// Decile is the longest tenth of rows by output length: From tokens up,
// Rows of them (ties at From included), Rejected of those rejected.
type Decile struct {
	From     int64 `json:"from_tokens"`
	Rows     int64 `json:"rows"`
	Rejected int64 `json:"rejected"`
}

// DistKept and DistRejected name the selection-bias panel's distributions.
const (
	DistKept     = "output tokens, kept rows"
	DistRejected = "output tokens, rejected rows"
)

// economy accumulates the Economy while the outputs are read.
type economy struct {
	maxLength        int
	decoded, trained int64
	atLength         int64
	atLengthTokens   int64
	kept, rejected   sample
	// dedupe: more than one training output, so an id may be in two;
	// seen holds the ids counted (a hash each, with trainedKey for the
	// trained side).
	dedupe bool
	seen   commitlog.SeenSet
}

// trainedKey tells an id's trained count from its decoded one in seen.
const trainedKey = 0x9e3779b97f4a7c15

// atLengthKey tells an id's kept-at-length count from the others in seen.
const atLengthKey = 0x632be59bd9b4e019

func newEconomy(maxLength, trainingOutputs int) *economy {
	e := &economy{maxLength: maxLength, dedupe: trainingOutputs > 1}
	e.kept.name, e.rejected.name = DistKept, DistRejected
	return e
}

// keep counts a row of a training output that carries no rejection.
func (e *economy) keep(x *row) {
	var h uint64
	if e.dedupe {
		h = commitlog.Hash(x.ID)
	}
	if x.Completion && (!e.dedupe || e.seen.Add(h)) {
		e.decoded += int64(x.CompletionTokens + x.RetriedTokens)
		e.kept.add(x.CompletionTokens)
	}
	// Apart from the decode: the output read first may be a writer of
	// every completion, from before validate-thinking marked the cut.
	if x.Completion && x.CutAtLength && (!e.dedupe || e.seen.Add(h^atLengthKey)) {
		e.atLength++
		e.atLengthTokens += int64(x.CompletionTokens)
	}
	if x.Tokens && (!e.dedupe || e.seen.Add(h^trainedKey)) {
		e.trained += int64(e.trainedTokens(x))
	}
}

// reject counts a rejected row's decode, once per rejection (the caller
// counts a rejection kept in two places once).
func (e *economy) reject(x *row) {
	if x.Completion {
		e.decoded += int64(x.CompletionTokens + x.RetriedTokens)
		e.rejected.add(x.CompletionTokens)
	}
}

// trainedTokens are the loss tokens of x within max_length: counted in
// its mask where it was read, else its num_loss_tokens (tokenize-and-mask
// cuts a row to [trainer] max_length, so they are the same).
func (e *economy) trainedTokens(x *row) int {
	if x.Mask.Known {
		return x.Mask.In
	}
	return x.LossTokens
}

func (e *economy) result() *Economy {
	out := &Economy{MaxLength: e.maxLength, Decoded: e.decoded, Trained: e.trained,
		KeptAtLength: e.atLength, KeptAtLengthTokens: e.atLengthTokens,
		Kept: e.kept.dist(), Rejected: e.rejected.dist()}
	if e.trained > 0 {
		out.DecodedPerTrained = float64(e.decoded) / float64(e.trained)
	}
	out.Longest = longestDecile(&e.kept, &e.rejected)
	return out
}

// longestDecile walks the output lengths of kept and rejected rows from
// the longest down until a tenth of all rows (rounded up) is taken; the
// rows tied at the last length taken are in too.
func longestDecile(kept, rejected *sample) Decile {
	n := kept.n + rejected.n
	if n == 0 {
		return Decile{}
	}
	vals := make([]int32, 0, len(kept.counts)+len(rejected.counts))
	for v := range kept.counts {
		vals = append(vals, v)
	}
	for v := range rejected.counts {
		if _, dup := kept.counts[v]; !dup {
			vals = append(vals, v)
		}
	}
	slices.Sort(vals)
	want := (n + 9) / 10
	var d Decile
	for i := len(vals) - 1; i >= 0 && d.Rows < want; i-- {
		v := vals[i]
		d.From = int64(v)
		d.Rows += kept.counts[v] + rejected.counts[v]
		d.Rejected += rejected.counts[v]
	}
	return d
}

// Ratio is the economy's sentence: "1.01 decoded tokens per trained token".
func (e *Economy) Ratio() string {
	if e.Trained == 0 {
		return "no trained tokens"
	}
	return fmt.Sprintf("%.2f decoded tokens per trained token", e.DecodedPerTrained)
}

// Lines are the economy's sentences, for the text report and the page.
func (e *Economy) Lines() []string {
	within := "every loss token (no [trainer] max_length)"
	if e.MaxLength > 0 {
		within = fmt.Sprintf("loss tokens within max_length %d", e.MaxLength)
	}
	out := []string{fmt.Sprintf("decoded %d output tokens, trained %d (%s): %s",
		e.Decoded, e.Trained, within, e.Ratio())}
	if e.Decoded > e.Trained && e.Decoded > 0 {
		out[0] += fmt.Sprintf("; %s of the decode is never trained on", pct(1-Share(e.Trained, e.Decoded)))
	}
	if e.Trained > 0 && e.Kept.N == 0 {
		// A trainer layout's rows hold tokens, not the completion.
		out = append(out, "decoded tokens count the rejects only: no training output keeps the completions of its rows (write them too, e.g. write-arrow or layout = \"records\")")
	}
	if e.KeptAtLength > 0 {
		out = append(out, fmt.Sprintf("kept at length: %s stopped by the length limit and kept, as the trainer would cut them (%d output tokens)",
			numfmt.Plural(e.KeptAtLength, "row"), e.KeptAtLengthTokens))
	}
	if d := e.Longest; d.Rows > 0 && e.Rejected.N > 0 {
		all := e.Kept.N + e.Rejected.N
		out = append(out, fmt.Sprintf("longest tenth of outputs (%s, %d+ tokens): %s rejected, against %s of all rows",
			numfmt.Plural(d.Rows, "row"), d.From, pct(Share(d.Rejected, d.Rows)), pct(Share(e.Rejected.N, all))))
	}
	return out
}
