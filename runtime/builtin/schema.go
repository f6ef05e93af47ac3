package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// This file turns the request's tool list into what the planner scores and
// the argument filler reads: names split into words, descriptions into
// stems, and each parameter with its type, enum and whether it is required,
// in the order the schema lists them (the order decides, for instance, which
// of two date parameters gets the first date in the text).

// tool is one function the caller offers.
type tool struct {
	name  string // as sent, e.g. "packrat__store_note"
	agent string // "packrat"; empty when the name has no "__"
	short string // "store_note"
	desc  string

	params []*param
	// nameStems are the stems of short's words, the strongest evidence.
	nameStems map[string]bool
	// features weighs every stem that describes the tool.
	features map[string]float64
	// intents are what the tool serves, from its name first.
	intents map[intent]bool
	// mutates is true for tools that change state (store, delete): such a
	// call is never run in parallel with another call to the same agent.
	mutates bool
}

// display is the name a person reads: "packrat.store_note".
func (t *tool) display() string {
	if t.agent == "" {
		return t.short
	}
	return t.agent + "." + t.short
}

type param struct {
	name     string
	typ      string // JSON-schema type; "" when the schema gives none
	itemType string // for arrays
	desc     string
	format   string
	enum     []any
	def      any // schema default, nil if none
	min      *float64
	required bool
}

// schema is the part of JSON Schema the filler uses.
type schema struct {
	Type        json.RawMessage `json:"type"`
	Description string          `json:"description"`
	Format      string          `json:"format"`
	Enum        []any           `json:"enum"`
	Default     any             `json:"default"`
	Minimum     *float64        `json:"minimum"`
	Items       *schema         `json:"items"`
	Properties  orderedProps    `json:"properties"`
	Required    []string        `json:"required"`
}

// orderedProps keeps "properties" in the order the schema wrote them; a Go
// map would lose it.
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
		return fmt.Errorf("properties must be an object")
	}
	o.schemas = map[string]*schema{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name := t.(string)
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

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// parseTools validates and digests the request's tools. Errors name the tool
// so a caller can fix its request.
func parseTools(specs []toolSpec) ([]*tool, error) {
	var tools []*tool
	seen := map[string]bool{}
	for i, s := range specs {
		if s.Type != "function" {
			return nil, fmt.Errorf("tools[%d].type must be \"function\", got %q", i, s.Type)
		}
		if s.Function == nil {
			return nil, fmt.Errorf("tools[%d].function is missing", i)
		}
		name := s.Function.Name
		if !toolNameRE.MatchString(name) {
			return nil, fmt.Errorf("tools[%d].function.name %q must match ^[a-zA-Z0-9_-]{1,64}$", i, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("tools[%d].function.name %q is duplicated", i, name)
		}
		seen[name] = true
		var sc schema
		if p := bytes.TrimSpace(s.Function.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
			if err := json.Unmarshal(p, &sc); err != nil {
				return nil, fmt.Errorf("tools[%d].function.parameters (%s): %v", i, name, err)
			}
			if t := typeName(sc.Type); t != "" && t != "object" {
				return nil, fmt.Errorf("tools[%d].function.parameters (%s) must be an object schema, got type %q", i, name, t)
			}
		}
		tools = append(tools, newTool(name, s.Function.Description, &sc))
	}
	return tools, nil
}

func newTool(name, desc string, sc *schema) *tool {
	t := &tool{name: name, short: name, desc: desc}
	if a, s, ok := strings.Cut(name, "__"); ok && a != "" && s != "" {
		t.agent, t.short = a, s
	}
	req := map[string]bool{}
	for _, r := range sc.Required {
		req[r] = true
	}
	for _, n := range sc.Properties.names {
		ps := sc.Properties.schemas[n]
		p := &param{name: n, typ: typeName(ps.Type), desc: ps.Description, format: ps.Format,
			enum: ps.Enum, def: ps.Default, min: ps.Minimum, required: req[n]}
		if ps.Items != nil {
			p.itemType = typeName(ps.Items.Type)
		}
		if p.typ == "" && len(p.enum) > 0 {
			if _, ok := p.enum[0].(string); ok {
				p.typ = "string"
			}
		}
		t.params = append(t.params, p)
	}
	// A name required but not described is still required: it is filled as
	// a string rather than left out.
	for _, r := range sc.Required {
		if _, ok := sc.Properties.schemas[r]; !ok && t.param(r) == nil {
			t.params = append(t.params, &param{name: r, required: true})
		}
	}

	// Weights: the tool's own name says most about what it does, its
	// description and parameter names less, parameter descriptions least.
	t.features = map[string]float64{}
	add := func(stems []string, w float64) {
		for _, s := range stems {
			if t.features[s] < w {
				t.features[s] = w
			}
		}
	}
	t.nameStems = map[string]bool{}
	var nameStems []string
	for _, w := range splitName(t.short) {
		nameStems = append(nameStems, stem(w))
		t.nameStems[stem(w)] = true
	}
	add(stems(desc), 1)
	for _, p := range t.params {
		var ps []string
		for _, w := range splitName(p.name) {
			ps = append(ps, stem(w))
		}
		add(ps, 1)
		add(stems(p.desc), 0.5)
	}
	if t.agent != "" {
		add([]string{stem(strings.ToLower(t.agent))}, 1)
	}
	add(nameStems, 3)

	t.intents = map[intent]bool{}
	for in, kws := range intentKeywords {
		for _, k := range kws {
			if t.nameStems[k] {
				t.intents[in] = true
			}
		}
	}
	t.mutates = t.intents[intentStore] || t.intents[intentDelete] ||
		anyOf(t.nameStems, "updat", "set", "edit", "modify", "patch", "upsert", "clear", "reset")
	return t
}

func (t *tool) param(name string) *param {
	for _, p := range t.params {
		if p.name == name {
			return p
		}
	}
	return nil
}

func anyOf(m map[string]bool, keys ...string) bool {
	for _, k := range keys {
		if m[k] {
			return true
		}
	}
	return false
}
