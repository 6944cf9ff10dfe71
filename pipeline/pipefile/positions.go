package pipefile

import (
	"regexp"
	"strings"
)

// positions maps keys of a pipeline file to where they are written. The TOML
// decoder does not expose key positions, so a light line scanner finds them:
// table headers and `key =` lines outside multi-line strings and arrays.
type positions struct {
	file    string
	topKeys map[string]Pos
	tables  map[string]map[string]Pos // "pipeline", "vars" -> key -> pos; "" key = header
	stages  []stagePos
}

type stagePos struct {
	header Pos
	keys   map[string]Pos
	// elems are where each inline table of a key's array value opens
	// (filter's rules, map's set): a problem of one item is shown there.
	elems map[string][]Pos
}

var (
	headerRe = regexp.MustCompile(`^\s*(\[\[?)\s*([A-Za-z0-9_.-]+)\s*\]\]?`)
	// keyRe matches a key, dotted or not: `a =`, `"a.b" =`, `a . b =`.
	keyRe = regexp.MustCompile(`^(\s*)((?:` + keyPart + `)(?:\s*\.\s*(?:` + keyPart + `))*)\s*=`)
	// keyPartRe finds the parts of a dotted key.
	keyPartRe = regexp.MustCompile(keyPart)
)

const keyPart = `[A-Za-z0-9_-]+|"[^"]*"|'[^']*'`

func scanPositions(file string, src []byte) *positions {
	s := &posScanner{p: &positions{file: file, topKeys: map[string]Pos{}, tables: map[string]map[string]Pos{}}, atTop: true}
	s.cur = s.p.topKeys
	depth := 0    // open [ or { brackets of a value spanning lines
	inMulti := "" // `"""` or `'''` while inside a multi-line string
	for i, line := range strings.Split(string(src), "\n") {
		ln := i + 1
		if inMulti == "" && depth == 0 {
			if m := headerRe.FindStringSubmatchIndex(line); m != nil {
				s.header(line, ln, m)
				continue
			}
			if m := keyRe.FindStringSubmatchIndex(line); m != nil {
				s.keyLine(line, ln, m)
			}
		}
		depth, inMulti = scanLine(line, depth, inMulti, func(col int) {
			if s.stage != nil && s.key != "" {
				s.stage.elems[s.key] = append(s.stage.elems[s.key], Pos{File: file, Line: ln, Col: col + 1})
			}
		})
	}
	return s.p
}

// posScanner is scanPositions' state between lines.
type posScanner struct {
	p     *positions
	cur   map[string]Pos // the keys of the table being read
	atTop bool           // no table header yet
	stage *stagePos      // the [[stage]] being read, if any
	key   string         // the stage's key whose value is being scanned
}

// header takes the table header on line ln (m: headerRe's match): a new
// [[stage]], or another table, whose keys come next.
func (s *posScanner) header(line string, ln int, m []int) {
	p := s.p
	name := line[m[4]:m[5]]
	h := Pos{File: p.file, Line: ln, Col: m[2] + 1}
	s.atTop = false
	if line[m[2]:m[3]] == "[[" && name == "stage" {
		p.stages = append(p.stages, stagePos{header: h, keys: map[string]Pos{}, elems: map[string][]Pos{}})
		s.stage = &p.stages[len(p.stages)-1]
		s.cur = s.stage.keys
		return
	}
	s.stage = nil
	if p.tables[name] == nil {
		p.tables[name] = map[string]Pos{"": h}
	}
	s.cur = p.tables[name]
	if _, ok := p.topKeys[name]; !ok {
		p.topKeys[name] = h
	}
}

// keyLine takes the key set on line ln (m: keyRe's match).
func (s *posScanner) keyLine(line string, ln int, m []int) {
	p := s.p
	parts := keyPartRe.FindAllString(line[m[4]:m[5]], -1)
	for i := range parts {
		parts[i] = strings.Trim(parts[i], `"'`)
	}
	kp := Pos{File: p.file, Line: ln, Col: m[4] + 1}
	// A dotted key is reported at its own line: `a.b = 1` in a
	// table sets its key a; at the top, `pipeline.name = "x"`
	// also sets [pipeline]'s key name.
	setPos(s.cur, parts[0], kp)
	s.key = parts[0]
	if len(parts) > 1 && s.atTop {
		if p.tables[parts[0]] == nil {
			p.tables[parts[0]] = map[string]Pos{"": kp}
		}
		setPos(p.tables[parts[0]], parts[1], kp)
	}
}

// setPos records where key is first set.
func setPos(m map[string]Pos, key string, p Pos) {
	if _, dup := m[key]; !dup {
		m[key] = p
	}
}

// scanLine tracks bracket depth and multi-line strings across one line,
// skipping single-line strings and comments. item, if not nil, is called
// with the index of each '{' that opens an item of a top-level array.
func scanLine(line string, depth int, inMulti string, item func(col int)) (int, string) {
	for i := 0; i < len(line); i++ {
		if inMulti != "" {
			if strings.HasPrefix(line[i:], inMulti) {
				i += 2
				inMulti = ""
			} else if inMulti == `"""` && line[i] == '\\' {
				i++
			}
			continue
		}
		switch c := line[i]; c {
		case '#':
			return depth, ""
		case '"', '\'':
			q := string([]byte{c, c, c})
			if strings.HasPrefix(line[i:], q) {
				inMulti = q
				i += 2
				continue
			}
			i = stringEnd(line, i)
		case '[', '{':
			if c == '{' && depth == 1 && item != nil {
				item(i)
			}
			depth++
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return depth, inMulti
}

// stringEnd is the index of the quote closing the one-line string that
// opens at i of line (len(line) when it is not closed).
func stringEnd(line string, i int) int {
	c := line[i]
	for i++; i < len(line) && line[i] != c; i++ {
		if c == '"' && line[i] == '\\' {
			i++
		}
	}
	return i
}

func (p *positions) top(key string) Pos {
	if pos, ok := p.topKeys[key]; ok {
		return pos
	}
	if len(p.stages) > 0 && key == "stage" {
		return p.stages[0].header
	}
	return Pos{File: p.file, Line: 1, Col: 1}
}

func (p *positions) table(name, key string) Pos {
	t := p.tables[name]
	if pos, ok := t[key]; ok {
		return pos
	}
	if pos, ok := t[""]; ok {
		return pos
	}
	return Pos{File: p.file, Line: 1, Col: 1}
}

func (p *positions) stageHeader(i int) Pos {
	if i < len(p.stages) {
		return p.stages[i].header
	}
	return Pos{File: p.file}
}

func (p *positions) stageElems(i int) map[string][]Pos {
	if i < len(p.stages) {
		return p.stages[i].elems
	}
	return map[string][]Pos{}
}

func (p *positions) stageKeys(i int) map[string]Pos {
	if i < len(p.stages) {
		return p.stages[i].keys
	}
	return map[string]Pos{}
}
