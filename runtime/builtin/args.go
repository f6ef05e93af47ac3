package builtin

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file fills a tool's arguments from a step's text, by the rules of
// doc.go, reading only the tool's schema: a JSON object or name=value pairs
// when the step gives them, an expression, numbers in order, an enum value
// named in the text, and free text for the one string left. A required
// parameter it cannot read is an error that names it; an optional one is
// left out.

// pairRE is one name=value pair; a value with spaces is quoted.
var pairRE = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S+)`)

// numberRE is a number in free text.
var numberRE = regexp.MustCompile(`-?\d+(?:\.\d+)?`)

// fill returns the arguments of m.tool read from m.obj.
func fill(m mapping, prior string) (map[string]any, error) {
	if m.args != nil {
		return m.args, nil // a phrase read them (phrases.go)
	}
	t, obj := m.tool, strings.TrimSpace(m.obj)
	args := map[string]any{}
	if strings.HasPrefix(obj, "{") {
		if err := json.Unmarshal([]byte(obj), &args); err != nil || args == nil {
			return nil, unmapped("the arguments for %s are not a JSON object: %v", t.display(), err)
		}
		return args, nil
	}
	// name=value pairs for the tool's own parameters.
	obj = pairRE.ReplaceAllStringFunc(obj, func(pair string) string {
		sub := pairRE.FindStringSubmatch(pair)
		p := paramNamed(t, sub[1])
		if p == nil {
			return pair
		}
		raw := sub[2]
		if unq, err := strconv.Unquote(raw); err == nil {
			raw = unq
		}
		args[p.name] = typed(p, raw)
		return ""
	})
	obj = strings.TrimSpace(strings.Join(strings.Fields(obj), " "))

	var missing []*param
	for _, p := range t.params {
		if _, done := args[p.name]; done || !p.required {
			continue
		}
		switch {
		case p.isExpression():
			expr := obj
			if !m.arith {
				var err error
				if expr, err = arithExpr(obj, prior); err != nil {
					return nil, err
				}
			}
			args[p.name], obj = expr, ""
		case p.typ == "number" || p.typ == "integer":
			lit := numberRE.FindString(obj)
			if lit == "" {
				return nil, unmapped("%s needs %s (%s), and there is no number left in %q", t.display(), p.name, describeParam(p), obj)
			}
			args[p.name] = typed(p, lit)
			obj = strings.TrimSpace(strings.Replace(obj, lit, "", 1))
		case len(p.enum) > 0:
			v := enumIn(obj, p.enum)
			if v == "" {
				return nil, unmapped("%s needs %s, one of %s, and the step names none", t.display(), p.name, strings.Join(p.enum, ", "))
			}
			args[p.name] = v
		case p.typ == "string" || p.typ == "":
			missing = append(missing, p)
		default:
			return nil, unmapped("%s needs %s, of type %s, which cannot be read from text: give it as %s=... or the arguments as a JSON object", t.display(), p.name, p.typ, p.name)
		}
	}
	// The strings left: when there are several, each one the text names
	// ("to mi" for a parameter "to"); the last takes the rest of the text.
	if len(missing) > 1 {
		var left []*param
		for _, p := range missing {
			if v, rest, ok := namedValue(obj, p.name); ok {
				args[p.name], obj = v, rest
				continue
			}
			left = append(left, p)
		}
		missing = left
	}
	switch len(missing) {
	case 0:
	case 1:
		p := missing[0]
		text, ok := substitutePrior(obj, prior, true)
		switch {
		case !ok:
			return nil, unmapped("%q refers to an earlier result, and there is none", obj)
		case strings.TrimSpace(text) == "":
			return nil, unmapped("%s needs %s (%s), and the step gives no text for it", t.display(), p.name, describeParam(p))
		}
		args[p.name] = text
	default:
		var names []string
		for _, p := range missing {
			names = append(names, p.name)
		}
		return nil, unmapped("%s needs %s as text, and the step does not say which words are which: write NAME=VALUE for each", t.display(), strings.Join(names, " and "))
	}
	return args, nil
}

func paramNamed(t *tool, name string) *param {
	for _, p := range t.params {
		if p.name == name {
			return p
		}
	}
	return nil
}

// typed converts a literal to the parameter's type where it can; anything
// else stays a string, for the tool to judge.
func typed(p *param, raw string) any {
	switch p.typ {
	case "integer":
		if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
			return n
		}
	case "number":
		if f, err := strconv.ParseFloat(raw, 64); err == nil {
			return f
		}
	case "boolean":
		if b, err := strconv.ParseBool(raw); err == nil {
			return b
		}
	case "array":
		var parts []string
		for _, s := range strings.Split(raw, ",") {
			if s = strings.TrimSpace(s); s != "" {
				parts = append(parts, s)
			}
		}
		return parts
	}
	return raw
}

// enumIn is the one enum value the text has as a word.
func enumIn(text string, enum []string) string {
	ws := words(text)
	var found string
	for _, e := range enum {
		if slices.Contains(ws, strings.ToLower(e)) {
			if found != "" {
				return "" // two: not certain
			}
			found = e
		}
	}
	return found
}

// namedValue reads "NAME value" from text: the word after the parameter's
// name ("to mi" for a parameter "to"), and the text without both.
func namedValue(text, name string) (value, rest string, ok bool) {
	fs := strings.Fields(text)
	for i := 0; i+1 < len(fs); i++ {
		if strings.EqualFold(fs[i], name) {
			value = fs[i+1]
			rest = strings.Join(append(slices.Clone(fs[:i]), fs[i+2:]...), " ")
			return value, rest, true
		}
	}
	return "", text, false
}

func describeParam(p *param) string {
	if p.desc == "" {
		return p.typ
	}
	d, _, _ := strings.Cut(p.desc, ". ")
	return strings.TrimRight(d, ".")
}

// encodeArgs renders arguments as a JSON object with sorted keys (what
// encoding/json does for maps), so equal requests give equal bytes.
func encodeArgs(args map[string]any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		return "{}"
	}
	return strings.TrimSpace(b.String())
}
