package recordline

import "bytes"

// idLists are the token id lists of a record line a Row does not decode:
// their thousands of numbers per row are skipped (prompt_ids, input_ids,
// loss_mask) or counted in place (output_ids, with Options.Classes).
var idLists = [...]string{"prompt_ids", "output_ids", "input_ids", "loss_mask"}

// idLists[outputIDsList] is output_ids, idLists[lossMaskList] loss_mask.
const (
	outputIDsList = 1
	lossMaskList  = 3
)

// lift returns line with its id lists lifted (p.buf, or line itself when
// none is), the output ids counted into x.IDs (with classes) and the
// loss mask's ones into x.Mask. A list is lifted at the first occurrence
// of its key, written `"key":[`, when it holds only plain integers. One
// scan from '[' to '[' finds them: a key is the string before `":[`,
// whose opening quote no `\` precedes (a quote inside a string is
// escaped; a key-like text in a string is part of a key then, and only
// lists are lifted, so the line stays valid JSON whatever it holds, with
// a string in each lifted list's place).
func (p *Parser) lift(line []byte, x *Row) []byte {
	var lifted [len(idLists)][2]int // [ and past ], by idLists index
	var got [len(idLists)]bool
	var cuts [len(idLists)]int
	ncut := 0
	for pos := 0; ncut < len(idLists); {
		i := bytes.IndexByte(line[pos:], '[')
		if i < 0 {
			break
		}
		at := pos + i
		pos = at + 1
		k := listKey(line, at)
		if k < 0 || got[k] {
			continue
		}
		got[k] = true
		var end int
		switch {
		case k == outputIDsList && p.opt.Classes != nil:
			end = p.countIDs(line[at+1:], &x.IDs)
		case k == lossMaskList:
			end = maskEnd(line[at+1:], p.opt.MaxLength, &x.Mask)
		default:
			end = intsEnd(line[at+1:])
		}
		if end < 0 {
			continue // not plain integers: decoded as they are
		}
		lifted[k] = [2]int{at, at + 1 + end + 1}
		cuts[ncut] = k
		ncut++
		pos = lifted[k][1]
	}
	if ncut == 0 {
		return line
	}
	// The scan found the lists in line order.
	b, prev := p.buf[:0], 0
	for _, k := range cuts[:ncut] {
		b = append(b, line[prev:lifted[k][0]]...)
		b = append(b, strippedMark...)
		prev = lifted[k][1]
	}
	p.buf = append(b, line[prev:]...)
	return p.buf
}

// listKey is the idLists index of the key whose list opens at line[at]
// (`"output_ids":[`), or -1.
func listKey(line []byte, at int) int {
	name, ok := keyBefore(line, at)
	if !ok {
		return -1
	}
	for k, n := range idLists {
		if string(name) == n {
			return k
		}
	}
	return -1
}

// keyBefore is the key whose value opens at line[at] (`"key":[`).
func keyBefore(line []byte, at int) ([]byte, bool) {
	if at < 3 || line[at-1] != ':' || line[at-2] != '"' {
		return nil, false
	}
	q := bytes.LastIndexByte(line[:at-2], '"')
	if q < 0 || (q > 0 && line[q-1] == '\\') {
		return nil, false
	}
	return line[q+1 : at-2], true
}

// intByte: what a list of plain integers holds before its ']'.
var intByte = func() (t [256]bool) {
	for _, c := range []byte("0123456789,- ") {
		t[c] = true
	}
	return t
}()

// intsEnd is the index of the ']' that ends a list of plain integers
// starting at b (after its '['), or -1 when something else comes first.
func intsEnd(b []byte) int {
	for i, c := range b {
		if !intByte[c] {
			if c == ']' {
				return i
			}
			return -1
		}
	}
	return -1
}

// maskEnd is intsEnd over a loss mask, counting its ones into m: all of
// them, and those of its first max values (max 0: all). A mask holds 0
// and 1 (record.LossMask), so its ones are its '1' bytes, counted with
// bytes.Count at memory speed; only a row longer than max is walked to its
// max-th value.
func maskEnd(b []byte, max int, m *MaskCount) int {
	end := intsEnd(b)
	if end < 0 {
		return -1
	}
	list := b[:end]
	m.Known, m.All = true, bytes.Count(list, one)
	m.In = m.All
	commas := bytes.Count(list, comma)
	if len(bytes.TrimSpace(list)) > 0 {
		m.Len = commas + 1
	}
	if max == 0 || commas < max {
		return end
	}
	at := 0
	for range max {
		i := bytes.IndexByte(list[at:], ',')
		if i < 0 {
			return end
		}
		at += i + 1
	}
	m.In = bytes.Count(list[:at], one)
	return end
}

var one, comma = []byte{'1'}, []byte{','}

// countIDs is intsEnd, counting the ids into c as it goes (c is
// meaningful only when it returns >= 0).
func (p *Parser) countIDs(b []byte, c *IDCount) int {
	return eachInt(b, func(id int) { p.count(id, c) })
}

// eachInt is intsEnd, calling each for every integer of the list as it
// goes (each is meaningful only when it returns >= 0).
func eachInt(b []byte, each func(int)) int {
	id, neg, digits := 0, false, false
	for i := 0; i < len(b); i++ {
		ch := b[i]
		switch {
		case ch >= '0' && ch <= '9':
			// The rest of the number in a tight loop: the ids' digits are
			// most of an output's bytes.
			id, digits = id*10+int(ch-'0'), true
			for i+1 < len(b) && b[i+1]-'0' < 10 {
				i++
				id = id*10 + int(b[i]-'0')
			}
			continue
		case ch == '-':
			neg = true
			continue
		case ch == ' ':
			continue
		case ch != ',' && ch != ']':
			return -1
		}
		if digits {
			if neg {
				id = -id
			}
			each(id)
		}
		if ch == ']' {
			return i
		}
		id, neg, digits = 0, false, false
	}
	return -1
}
