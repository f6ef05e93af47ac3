package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// This file digests the request's tools into what the planner reads: the
// name (and its part after "__", which the runtime puts between the agent
// and the tool), the words of the name and of the description, and each
// parameter in the order its schema lists it. Nothing here knows any
// particular tool.

// tool is one function the caller offers.
type tool struct {
	name   string // as offered, e.g. "packrat__store_note"
	server string // "packrat"; "" when the name has no "__"
	short  string // "store_note"
	desc   string
	params []*param // in schema order
	// nameWords are the lower-case words of short; descVerbs the verbs its
	// description offers (see descriptionVerbs).
	nameWords []string
	descVerbs map[string]bool
}

// display is the name a person reads: "packrat.store_note".
func (t *tool) display() string { return displayName(t.name) }

func displayName(name string) string {
	if server, short, ok := strings.Cut(name, "__"); ok {
		return server + "." + short
	}
	return name
}

type param struct {
	name     string
	typ      string // JSON Schema type; "" when the schema gives none
	desc     string
	enum     []string
	required bool
}

// isExpression: the parameter takes an arithmetic expression (its name or
// its description says so).
func (p *param) isExpression() bool {
	return p.typ == "string" && (p.name == "expression" || p.name == "expr" || wordSet(p.desc)["expression"])
}

// schema is the part of JSON Schema the planner reads.
type schema struct {
	Type        json.RawMessage `json:"type"`
	Description string          `json:"description"`
	Enum        []any           `json:"enum"`
	Properties  orderedProps    `json:"properties"`
	Required    []string        `json:"required"`
}

// orderedProps keeps "properties" in the order the schema wrote them (a Go
// map would lose it): numbers in a task fill numeric parameters in this
// order.
type orderedProps struct {
	names   []string
	schemas map[string]*schema
}

func (o *orderedProps) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("properties must be an object")
	}
	o.schemas = map[string]*schema{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name := t.(string) // an object's keys are strings
		s := &schema{}
		if err := dec.Decode(s); err != nil {
			return fmt.Errorf("property %q: %w", name, err)
		}
		if _, dup := o.schemas[name]; !dup {
			o.names = append(o.names, name)
		}
		o.schemas[name] = s
	}
	_, err := dec.Token()
	return err
}

// typeName reads "type": "string" or "type": ["string", "null"].
func typeName(raw json.RawMessage) string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
	}
	return ""
}

// parseTools validates and digests the request's tools. Errors name the
// tool so a caller can fix its request.
func parseTools(specs []toolSpec) ([]*tool, error) {
	var tools []*tool
	seen := map[string]bool{}
	for i, s := range specs {
		if s.Type != "function" {
			return nil, fmt.Errorf("tools[%d].type must be \"function\", not %q", i, s.Type)
		}
		if s.Function == nil {
			return nil, fmt.Errorf("tools[%d].function is missing", i)
		}
		name := s.Function.Name
		if !validToolName(name) {
			return nil, fmt.Errorf("tools[%d].function.name %q must match ^[a-zA-Z0-9_-]{1,64}$", i, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("tools[%d]: function %q is listed twice", i, name)
		}
		seen[name] = true
		sc := &schema{}
		if p := bytes.TrimSpace(s.Function.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
			if err := json.Unmarshal(p, sc); err != nil {
				return nil, fmt.Errorf("tools[%d] (%s): parameters: %w", i, name, err)
			}
			if typ := typeName(sc.Type); typ != "" && typ != "object" {
				return nil, fmt.Errorf("tools[%d] (%s): parameters must be an object schema, not type %q", i, name, typ)
			}
		}
		tools = append(tools, newTool(name, s.Function.Description, sc))
	}
	return tools, nil
}

func validToolName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func newTool(name, desc string, sc *schema) *tool {
	t := &tool{name: name, short: name, desc: desc, descVerbs: descriptionVerbs(desc)}
	if server, short, ok := strings.Cut(name, "__"); ok {
		t.server, t.short = server, short
	}
	t.nameWords = nameWords(t.short)
	for _, pn := range sc.Properties.names {
		ps := sc.Properties.schemas[pn]
		p := &param{name: pn, typ: typeName(ps.Type), desc: ps.Description, required: slices.Contains(sc.Required, pn)}
		for _, e := range ps.Enum {
			if s, ok := e.(string); ok {
				p.enum = append(p.enum, s)
			}
		}
		if p.typ == "" && len(p.enum) > 0 {
			p.typ = "string"
		}
		t.params = append(t.params, p)
	}
	return t
}

// nameWords splits a tool name at '_', '-' and lower-to-upper case
// changes: "store_note" and "storeNote" are both [store note].
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range name {
		switch {
		case r == '_' || r == '-':
			flush()
		case r >= 'A' && r <= 'Z' && prev >= 'a' && prev <= 'z':
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// descriptionVerbs are the words a description offers as the verbs of its
// tool: its first word ("Save", "Convert"), and the words of a parenthesis
// that opens within its first three words, which is where descriptions
// list their synonyms ("Save (remember, record, archive) a piece of
// text"). Not every word of it: a description also says "pass", "text",
// "returns" and "errors", and a step starting with one of those is not
// asking for that tool, least of all after an "and" inside a note.
func descriptionVerbs(desc string) map[string]bool {
	set := map[string]bool{}
	fs := strings.Fields(desc)
	if len(fs) == 0 {
		return set
	}
	if ws := words(fs[0]); len(ws) > 0 {
		set[ws[0]] = true
	}
	for i := 0; i < len(fs) && i < 3; i++ {
		if !strings.Contains(fs[i], "(") {
			continue
		}
		rest := strings.Join(fs[i:], " ")
		inner, _, _ := strings.Cut(rest[strings.Index(rest, "(")+1:], ")")
		for _, w := range words(inner) {
			set[w] = true
		}
		break
	}
	return set
}

// words splits text into lower-case words of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f)
	})
}

func wordSet(text string) map[string]bool {
	set := map[string]bool{}
	for _, w := range words(text) {
		set[w] = true
	}
	return set
}

func toolNamed(tools []*tool, name string) *tool {
	for _, t := range tools {
		if t.name == name {
			return t
		}
	}
	return nil
}
