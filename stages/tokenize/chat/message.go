package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Message is one chat turn: a JSON object whose keys keep their order, as a
// Python dict does. It carries "role" and "content" and any other keys the
// template reads ("reasoning_content", "tool_calls", "name", ...). The zero
// Message is an empty object.
type Message struct {
	raw json.RawMessage // a compact JSON object
	// texts, when set, are raw's members (key, value, key, value...), all
	// strings, as a JSON decoder reads them: NewMessage and NewReply keep
	// them, so a render converts the message without parsing raw again.
	texts []string
}

// NewMessage returns {"role": role, "content": content}.
func NewMessage(role, content string) Message {
	r, _ := json.Marshal(role)
	c, _ := json.Marshal(content)
	var b bytes.Buffer
	b.WriteString(`{"role":`)
	b.Write(r)
	b.WriteString(`,"content":`)
	b.Write(c)
	b.WriteByte('}')
	return Message{raw: b.Bytes(), texts: []string{"role", jsonText(role), "content", jsonText(content)}}
}

// NewReply returns {"role": role, "content": content, "reasoning_content":
// reasoning}: NewMessage(role, content).With("reasoning_content",
// reasoning), in one pass (With parses the message again, which cost as
// much as a render for a long reply).
func NewReply(role, content, reasoning string) Message {
	r, _ := json.Marshal(role)
	c, _ := json.Marshal(content)
	rc, _ := json.Marshal(reasoning)
	b := make([]byte, 0, len(r)+len(c)+len(rc)+len(`{"role":,"content":,"reasoning_content":}`))
	b = append(append(append(b, `{"role":`...), r...), `,"content":`...)
	b = append(append(append(b, c...), `,"reasoning_content":`...), rc...)
	return Message{raw: append(b, '}'), texts: []string{"role", jsonText(role), "content", jsonText(content), "reasoning_content", jsonText(reasoning)}}
}

// jsonText is s as encoding/json writes it and a decoder reads it back:
// each byte of invalid UTF-8 becomes U+FFFD.
func jsonText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// With returns m with key set to value (replacing it in place if present,
// else appended last). value is anything encoding/json marshals, or a
// json.RawMessage; a value that cannot be marshalled is a programming error
// and panics.
func (m Message) With(key string, value any) Message {
	v, err := json.Marshal(value)
	if err != nil {
		panic(fmt.Sprintf("chat: Message.With(%q): %v", key, err))
	}
	fields, _ := splitObject(m.object())
	replaced := false
	for i := range fields {
		if fields[i].key == key {
			fields[i].value = v
			replaced = true
		}
	}
	if !replaced {
		fields = append(fields, rawField{key: key, value: v})
	}
	return Message{raw: joinObject(fields)}
}

// Role returns the "role" string ("" if absent or not a string).
func (m Message) Role() string {
	var r struct {
		Role string `json:"role"`
	}
	_ = json.Unmarshal(m.object(), &r)
	return r.Role
}

// Get returns the raw JSON of key, or nil.
func (m Message) Get(key string) json.RawMessage {
	fields, _ := splitObject(m.object())
	for _, f := range fields {
		if f.key == key {
			return f.value
		}
	}
	return nil
}

// UnmarshalJSON accepts any JSON object and keeps it, key order included.
func (m *Message) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("a message must be a JSON object")
	}
	if !json.Valid(b) { // encoding/json has validated it already; other callers may not have
		return errors.New("a message is not valid JSON")
	}
	m.raw, m.texts = append(json.RawMessage(nil), b...), nil
	return nil
}

// MarshalJSON returns the object as given or built.
func (m Message) MarshalJSON() ([]byte, error) { return m.object(), nil }

func (m Message) object() json.RawMessage {
	if len(m.raw) == 0 {
		return json.RawMessage("{}")
	}
	return m.raw
}

type rawField struct {
	key   string
	value json.RawMessage
}

// splitObject returns the fields of a JSON object in order.
func splitObject(b []byte) ([]rawField, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("a message must be a JSON object")
	}
	var fields []rawField
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		fields = append(fields, rawField{key: k.(string), value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return fields, nil
}

func joinObject(fields []rawField) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(f.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}
