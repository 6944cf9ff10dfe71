package record

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
)

// fill sets v (settable) to a random value of its type: nil, empty and
// full slices, maps and pointers, strings that need escaping, numbers of
// every size and sign.
func fill(rng *rand.Rand, v reflect.Value, depth int) {
	strs := []string{"", "a", "<b>&amp;", "\u2028\u2029", "bad \xff", "é 日本 😀", "\"q\"\\", "ctl \x01\n\t", "r-0000001"}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strs[rng.IntN(len(strs))])
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		vals := []int64{0, 1, -1, 9, 10, 9999, 10000, 10001, 151643, 99999999, 100000000, math.MaxInt32, math.MinInt32}
		x := vals[rng.IntN(len(vals))]
		if rng.IntN(2) == 0 {
			x = rng.Int64N(400000) - 1000
		}
		if v.OverflowInt(x) {
			x = int64(rng.IntN(100))
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(rng.IntN(300)) % (1 << min(16, v.Type().Bits())))
	case reflect.Float32, reflect.Float64:
		vals := []float64{0, 0.125, -3, 1e21, 1e-7, 123456.789}
		v.SetFloat(vals[rng.IntN(len(vals))])
	case reflect.Pointer:
		if depth > 4 || rng.IntN(4) == 0 {
			return // nil
		}
		p := reflect.New(v.Type().Elem())
		fill(rng, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		switch rng.IntN(4) {
		case 0:
			return // nil
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := rng.IntN(30)
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				fill(rng, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		if rng.IntN(3) == 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := range rng.IntN(4) {
			k := reflect.New(v.Type().Key()).Elem()
			k.SetString("k" + strconv.Itoa(3-i) + strs[rng.IntN(len(strs))])
			e := reflect.New(v.Type().Elem()).Elem()
			fill(rng, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		choices := []any{nil, "s<>", 1.5, float64(151645), true, []any{"x", 2.0, nil}, map[string]any{"b": 1.0, "a": "<"}}
		if c := choices[rng.IntN(len(choices))]; c != nil {
			v.Set(reflect.ValueOf(c))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i), depth+1)
			}
		}
	}
}

// Types that AppendJSON must hand to encoding/json whole, or walk with
// care: embedded fields, tag options, marshalers on values and pointers,
// named lists with their own encoding, odd names.
type (
	jsonInner struct {
		A int `json:"a"`
	}
	jsonEmbeds struct {
		jsonInner
		B string `json:"b"`
	}
	jsonOptions struct {
		N int    `json:"n,string"`
		Z string `json:"z,omitzero"`
	}
	jsonPtrMarshaler struct{ X int }
	jsonNamedInts    []int
	jsonOdd          struct {
		Quote string `json:"q<"`
	}
	jsonMix struct {
		P    jsonPtrMarshaler  `json:"p"`
		PP   *jsonPtrMarshaler `json:"pp,omitempty"`
		N    jsonNamedInts     `json:"n"`
		E    jsonEmbeds        `json:"e"`
		O    *jsonOptions      `json:"o"`
		D    jsonOdd           `json:"d"`
		Ints []int             `json:"ints,omitempty"`
		I32  []int32           `json:"i32"`
		Mask LossMask          `json:"mask,omitempty"`
		Rec  *Record           `json:"rec"`
		Any  any               `json:"any"`
		Arr  [3]int            `json:"arr"`
		Map  map[string][]int  `json:"map,omitempty"`
		Skip int               `json:"-"`
		//lint:ignore SA5008 a field named "-": AppendJSON must agree with encoding/json on it
		Dash int    `json:"-,"`
		Un   string `json:",omitempty"`
		//lint:ignore U1000 unexported: never written, and the test says so
		priv int
		Strs map[string]string  `json:"strs"`
		Nest map[string]*Tokens `json:"nest"`
		Msgs []Message          `json:"msgs"`
		Comp Completion         `json:"comp"`
		Tok  *Tokens            `json:"tok"`
		Fn   func()             `json:"-"`
	}
)

func (p *jsonPtrMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(`"ptr ` + strconv.Itoa(p.X) + `"`), nil
}
func (n jsonNamedInts) MarshalJSON() ([]byte, error) { return []byte(strconv.Itoa(len(n))), nil }

// AppendJSON writes exactly json.Marshal's bytes: for records, journal
// entries and the layouts' rows filled at random, and for types it must
// leave to encoding/json.
func TestAppendJSONIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cases := []func() any{
		func() any { r := new(Record); fill(rng, reflect.ValueOf(r).Elem(), 0); return r },
		func() any {
			var r Record
			fill(rng, reflect.ValueOf(&r).Elem(), 0)
			return struct { // the engine's journal entry
				Port   string  `json:"port"`
				Record *Record `json:"record"`
			}{"out", &r}
		},
		func() any { var m jsonMix; fill(rng, reflect.ValueOf(&m).Elem(), 0); return &m },
		func() any { var m jsonMix; fill(rng, reflect.ValueOf(&m).Elem(), 0); return m },
		func() any {
			var tk Tokens
			fill(rng, reflect.ValueOf(&tk).Elem(), 0)
			return struct {
				ID       string   `json:"id"`
				InputIDs []int32  `json:"input_ids"`
				LossMask LossMask `json:"loss_mask"`
			}{"r<1>", tk.InputIDs, tk.LossMask}
		},
		func() any { return (*Record)(nil) },
		func() any { return nil },
		func() any { return []int{1, 2, 10000} },
	}
	dst := bytes.Repeat([]byte("left over "), 50)
	for round := range 3000 {
		v := cases[round%len(cases)]()
		want, werr := json.Marshal(v)
		got, err := AppendJSON(dst[:0], v)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("round %d (%T): AppendJSON\n %s (%v)\njson.Marshal\n %s (%v)", round, v, got, err, want, werr)
		}
		if err == nil {
			dst = got
		}
	}
	// It appends: what dst held stays in front.
	if got, err := AppendJSON([]byte("head:"), []int{1, 2}); err != nil || string(got) != "head:[1,2]" {
		t.Errorf("AppendJSON after a head = %q, %v; want \"head:[1,2]\"", got, err)
	}
}

// appendInt is strconv.AppendInt for every number up to 10^6 and at the
// tables' edges and beyond.
func TestAppendInt(t *testing.T) {
	check := func(n int64) {
		if got, want := appendInt([]byte("x"), n), strconv.AppendInt([]byte("x"), n, 10); !bytes.Equal(got, want) {
			t.Fatalf("appendInt(%d) = %s, want %s", n, got, want)
		}
	}
	for n := int64(-1000); n <= 1_000_000; n++ {
		check(n)
	}
	for _, n := range []int64{9_999_999, 10_000_000, 99_999_999, 100_000_000, 100_000_001, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64} {
		check(n)
	}
}

// A value encoding/json refuses is refused, and nothing is written.
func TestAppendJSONErrors(t *testing.T) {
	r := &Record{ID: "x", Completion: &Completion{LatencySeconds: math.NaN()}}
	if _, err := json.Marshal(r); err == nil {
		t.Fatal("json.Marshal took NaN")
	}
	if got, err := AppendJSON(nil, r); err == nil {
		t.Errorf("AppendJSON took NaN: %s", got)
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	ids := make([]int, 1400)
	in := make([]int32, 1500)
	mask := make(LossMask, 1500)
	for i := range ids {
		ids[i] = 100 + i*97%151000
	}
	for i := range in {
		in[i], mask[i] = int32(i*89%151000), uint8(i%3/2)
	}
	r := &Record{ID: "r-0000001", Messages: []Message{{Role: "user", Content: "Question 1: explain the idea."}},
		Completion: &Completion{Reasoning: "Okay, let me think.", Answer: "Yes.", FinishReason: "stop", PromptTokens: 26, CompletionTokens: 1400,
			PromptIDs: ids[:26], OutputIDs: ids, Server: "127.0.0.1:1", Attempts: 1, Request: map[string]any{"api": "generate"}},
		Tokens: &Tokens{InputIDs: in, LossMask: mask, NumTokens: 1500, NumLossTokens: 1000}}
	var buf []byte
	b.Run("AppendJSON", func(b *testing.B) {
		for b.Loop() {
			buf, _ = AppendJSON(buf, r)
		}
	})
	b.Run("reference=json.Marshal", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(r)
		}
	})
}
