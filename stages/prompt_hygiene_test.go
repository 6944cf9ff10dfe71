package stages

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// A prompt set with planted truth, for measuring the prompt hygiene kinds:
// distinct prompts (free text, templated prompts that share most of their
// words, long documents with a question), then copies of some of them
// with one known edit each, placed later in the input. Deterministic for a
// seed.

// plantedEdits are the edits a planted near duplicate has, as users' prompt
// sets have them: the same prompt with other whitespace, case and
// punctuation, a greeting, other numbers, a word changed in about every
// 25, or an instruction added at the end.
var plantedEdits = []string{"whitespace", "case-punct", "greeting", "numbers", "word-edit", "suffix"}

type plantedSet struct {
	lines  []string          // the prompts file, one JSON line a prompt
	texts  map[string]string // id → prompt text
	dupOf  map[string]string // planted duplicate id → the id it copies
	editOf map[string]string // planted duplicate id → its edit
}

var plantedFunctionWords = strings.Fields("the a an of to in and or is are be for with on at by from that this it as not but what how why which when can you your please")

// plantedWords is a vocabulary of made-up words, so two prompts share a
// content word only by chance of a Zipf draw.
func plantedWords(r *rand.Rand, n int) []string {
	syl := strings.Fields("ka lo mi ne ru sa to vi ba de fo gu ha ji ke la mo nu pi re si tu wa ye zo")
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteString(syl[r.IntN(len(syl))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

func plantedPrompts(seed uint64, distinct, dups int) *plantedSet {
	r := rand.New(rand.NewPCG(seed, 7))
	vocab := plantedWords(r, 6000)
	zipf := rand.NewZipf(r, 1.1, 4, uint64(len(vocab)-1))
	word := func() string {
		if r.IntN(10) < 4 {
			return plantedFunctionWords[r.IntN(len(plantedFunctionWords))]
		}
		return vocab[zipf.Uint64()]
	}
	sentence := func(words int) string {
		var b strings.Builder
		for i := range words {
			w := word()
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			} else {
				b.WriteByte(' ')
			}
			b.WriteString(w)
			if r.IntN(12) == 0 {
				fmt.Fprintf(&b, " %d", r.IntN(1000))
			}
			if i == words-1 {
				b.WriteByte(".?!"[r.IntN(3)])
			} else if r.IntN(15) == 0 {
				b.WriteByte(',')
			}
		}
		return b.String()
	}
	text := func(words int) string {
		var parts []string
		for words > 0 {
			n := min(words, 6+r.IntN(14))
			parts = append(parts, sentence(n))
			words -= n
		}
		return strings.Join(parts, " ")
	}
	// Templates: prompts from one share everything but one or two slots
	// of 2 to 12 words (the hard negatives: an instruction applied to
	// different inputs, alike in form, distinct prompts).
	type template struct{ parts []string }
	var templates []template
	for range 40 {
		var t template
		for range 2 + r.IntN(2) {
			t.parts = append(t.parts, text(4+r.IntN(7)))
		}
		templates = append(templates, t)
	}
	fill := func(t template) string {
		var b strings.Builder
		for i, p := range t.parts {
			if i > 0 {
				b.WriteByte(' ')
				b.WriteString(text(2 + r.IntN(11)))
				b.WriteByte(' ')
			}
			b.WriteString(p)
		}
		return b.String()
	}

	s := &plantedSet{texts: map[string]string{}, dupOf: map[string]string{}, editOf: map[string]string{}}
	var order []string
	for i := range distinct {
		id := fmt.Sprintf("d%05d", i)
		var t string
		switch k := r.IntN(10); {
		case k < 5:
			t = text(12 + r.IntN(110))
		case k < 8:
			t = fill(templates[r.IntN(len(templates))])
		default:
			t = text(150+r.IntN(250)) + " " + sentence(8)
		}
		s.texts[id] = t
		order = append(order, id)
	}
	for i := range dups {
		base := fmt.Sprintf("d%05d", r.IntN(distinct))
		edit := plantedEdits[i%len(plantedEdits)]
		id := fmt.Sprintf("n%05d", i)
		s.texts[id] = plantedEdit(r, s.texts[base], edit, vocab)
		s.dupOf[id], s.editOf[id] = base, edit
		// Anywhere after its base.
		at := 0
		for j, o := range order {
			if o == base {
				at = j + 1 + r.IntN(len(order)-j)
				break
			}
		}
		order = append(order[:at], append([]string{id}, order[at:]...)...)
	}
	for _, id := range order {
		b, _ := json.Marshal(map[string]any{"id": id, "messages": []map[string]string{{"role": "user", "content": s.texts[id]}}})
		s.lines = append(s.lines, string(b))
	}
	return s
}

func plantedEdit(r *rand.Rand, t, edit string, vocab []string) string {
	words := strings.Fields(t)
	switch edit {
	case "whitespace":
		var b strings.Builder
		for i, w := range words {
			if i > 0 {
				b.WriteString([]string{" ", "  ", "\n", " \t", "\n\n"}[r.IntN(5)])
			}
			b.WriteString(w)
		}
		return "  " + b.String() + "\n"
	case "case-punct":
		for i, w := range words {
			switch r.IntN(4) {
			case 0:
				words[i] = strings.ToUpper(w)
			case 1:
				words[i] = strings.Trim(w, ".,?!")
			case 2:
				words[i] = w + ";"
			}
		}
	case "greeting":
		g := []string{"Hi!", "Hello, can you help me?", "Please answer:", "Hey there.", "Good morning! I have a question."}
		return g[r.IntN(len(g))] + " " + t
	case "numbers":
		changed := false
		for i, w := range words {
			if strings.ContainsAny(w, "0123456789") {
				words[i] = fmt.Sprint(r.IntN(10000))
				changed = true
			}
		}
		if !changed { // a number where there was none: still the same prompt
			words = append(words, fmt.Sprintf("(%d)", 1+r.IntN(99)))
		}
	case "word-edit":
		for range max(1, len(words)/25) {
			words[r.IntN(len(words))] = vocab[r.IntN(len(vocab))]
		}
	case "suffix":
		x := []string{"Answer briefly.", "Explain step by step.", "Think carefully before answering.", "Use simple words."}
		return t + " " + x[r.IntN(len(x))]
	}
	return strings.Join(words, " ")
}
