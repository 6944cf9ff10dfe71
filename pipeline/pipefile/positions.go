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
	p := &positions{file: file, topKeys: map[string]Pos{}, tables: map[string]map[string]Pos{}}
	var cur map[string]Pos = p.topKeys
	atTop := true // no table header yet
	depth := 0    // open [ or { brackets of a value spanning lines
	inMulti := "" // `"""` or `'''` while inside a multi-line string
	var stage *stagePos
	key := "" // the stage's key whose value is being scanned
	for i, line := range strings.Split(string(src), "\n") {
		ln := i + 1
		if inMulti == "" && depth == 0 {
			if m := headerRe.FindStringSubmatchIndex(line); m != nil {
				name := line[m[4]:m[5]]
				h := Pos{File: file, Line: ln, Col: m[2] + 1}
				atTop = false
				if line[m[2]:m[3]] == "[[" && name == "stage" {
					p.stages = append(p.stages, stagePos{header: h, keys: map[string]Pos{}, elems: map[string][]Pos{}})
					stage = &p.stages[len(p.stages)-1]
					cur = stage.keys
				} else {
					stage = nil
					if p.tables[name] == nil {
						p.tables[name] = map[string]Pos{"": h}
					}
					cur = p.tables[name]
					if _, ok := p.topKeys[name]; !ok {
						p.topKeys[name] = h
					}
				}
				continue
			}
			if m := keyRe.FindStringSubmatchIndex(line); m != nil {
				parts := keyPartRe.FindAllString(line[m[4]:m[5]], -1)
				for i := range parts {
					parts[i] = strings.Trim(parts[i], `"'`)
				}
				kp := Pos{File: file, Line: ln, Col: m[4] + 1}
				// A dotted key is reported at its own line: `a.b = 1` in a
				// table sets its key a; at the top, `pipeline.name = "x"`
				// also sets [pipeline]'s key name.
				setPos(cur, parts[0], kp)
				key = parts[0]
				if len(parts) > 1 && atTop {
					if p.tables[parts[0]] == nil {
						p.tables[parts[0]] = map[string]Pos{"": kp}
					}
					setPos(p.tables[parts[0]], parts[1], kp)
				}
			}
		}
		depth, inMulti = scanLine(line, depth, inMulti, func(col int) {
			if stage != nil && key != "" {
				stage.elems[key] = append(stage.elems[key], Pos{File: file, Line: ln, Col: col + 1})
			}
		})
	}
	return p
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
