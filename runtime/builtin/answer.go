package builtin

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// This file writes the final answer from what the turn's calls returned.
// It reports every step: what a successful call found or did, a failed
// call's own error message, a step that was skipped and why, and a request
// no tool fits. It adds nothing the tools did not say.

// maxSummary bounds how much of one tool result is quoted in the answer.
const maxSummary = 600

func answer(task string, steps []step, outcomes []outcome, extra []issued, tools []*tool) string {
	byStep := map[*step]outcome{}
	for _, o := range outcomes {
		byStep[o.step] = o
	}
	if !slices.ContainsFunc(steps, func(s step) bool { return s.tool != nil }) && len(extra) == 0 {
		// Nothing fitted at all: say what this model is and how to ask.
		return noMatch(task, tools)
	}
	var out []string
	for i := range steps {
		s := &steps[i]
		if s.tool == nil {
			if requestLike(s.text, tools) {
				out = append(out, fmt.Sprintf("None of my tools fits %q.", trimEnd(s.text)))
			}
			continue
		}
		o, ok := byStep[s]
		switch {
		case !ok:
			// Planned after a batch that was never reached: cannot happen
			// when answering, but say so rather than drop it.
			out = append(out, fmt.Sprintf("I did not get to %q.", trimEnd(s.text)))
		case o.skipped != nil:
			out = append(out, fmt.Sprintf("I did not call %s for %q: it %s.", s.tool.display(), trimEnd(s.text), skipReason(o.skipped)))
		default:
			out = append(out, describe(s, s.tool, o.call))
		}
	}
	for k := range extra {
		out = append(out, describe(nil, toolOrStub(tools, extra[k].name), &extra[k]))
	}
	return strings.Join(out, " ")
}

// skipReason words why a step was not called, naming the parameter:
// "needs the id from an earlier result, and there was none".
func skipReason(err error) string {
	param, _, _ := strings.Cut(err.Error(), ":")
	switch {
	case errors.Is(err, errNeedsEarlierResult):
		return fmt.Sprintf("needs the %s from an earlier result, and there was none", param)
	case errors.Is(err, errNoContent):
		return fmt.Sprintf("gives nothing to pass as %s", param)
	}
	return err.Error()
}

func noMatch(task string, tools []*tool) string {
	var names []string
	for i, t := range tools {
		if i == 8 {
			names = append(names, "…")
			break
		}
		names = append(names, t.display())
	}
	return fmt.Sprintf("I could not match %q to any of my tools (%s). I am the builtin offline model, a deterministic planner "+
		"rather than a language model: phrase the task as commands, for example \"remember that ...\", "+
		"\"tell me what you know about ...\" or \"calculate ...\", joined with \"then\".", trimEnd(task), strings.Join(names, ", "))
}

func toolNamed(tools []*tool, name string) *tool {
	for _, t := range tools {
		if t.name == name {
			return t
		}
	}
	return nil
}

// toolOrStub is toolNamed, or, for a name the request no longer offers, a
// tool known by its name alone.
func toolOrStub(tools []*tool, name string) *tool {
	if t := toolNamed(tools, name); t != nil {
		return t
	}
	return newTool(name, "", &schema{})
}

// requestLike tells a step that asked for something (and deserves "no tool
// fits") from a greeting or a remark, which is passed over.
func requestLike(text string, tools []*tool) bool {
	return strings.Contains(text, "?") || startsCommand(text, tools)
}

// describe renders one done call. s is nil for a call the plan did not
// foresee (the conversation was steered by someone else).
func describe(s *step, t *tool, c *issued) string {
	if !c.answered {
		return fmt.Sprintf("%s gave no result.", t.display())
	}
	if failed(c.result) {
		return failure(t, c.result)
	}
	if strings.TrimSpace(c.result) == "" {
		return fmt.Sprintf("%s returned nothing.", t.display())
	}
	var args map[string]any
	_ = json.Unmarshal([]byte(c.args), &args)
	text := ""
	if s != nil {
		text = s.text
	}
	switch {
	case t.intents[intentStore]:
		if id, ok := idInResult(c.result); ok {
			return fmt.Sprintf("I stored that %s (id %s).", object(t), id)
		}
		return fmt.Sprintf("I stored that %s.", object(t))
	case t.intents[intentList] && !t.intents[intentSearch]:
		items, empty := items(c.result)
		if empty {
			return fmt.Sprintf("There are no %ss.", object(t))
		}
		return sentence(fmt.Sprintf("Recent %ss: %s", object(t), strings.Join(items, "; ")))
	case t.intents[intentSearch]:
		subject := topicPhrase(text)
		if subject == "" {
			subject = "that"
		}
		items, empty := items(c.result)
		if empty {
			return fmt.Sprintf("I found nothing about %s.", subject)
		}
		// What is known, once: a fact remembered twice is still one fact.
		return fmt.Sprintf("Here is what I know about %s: %s", subject, sentence(strings.Join(distinct(items), "; ")))
	case t.intents[intentDelete]:
		if id, ok := args["id"]; ok {
			return fmt.Sprintf("I deleted %s %v.", object(t), id)
		}
		return sentence("Deleted: " + summarize(c.result))
	case t.intents[intentGet]:
		items, _ := items(c.result)
		label := "The " + object(t)
		if id, ok := args["id"]; ok {
			label = fmt.Sprintf("%s %v", capitalize(object(t)), id)
		}
		return sentence(fmt.Sprintf("%s: %s", label, strings.Join(items, "; ")))
	case (t.intents[intentCalculate] || t.intents[intentConvert]) && strings.Contains(c.result, " = "),
		t.intents[intentDate] && strings.Contains(c.result, " "):
		// The tool wrote a sentence ("5 km = 3.10686 mi"): it is the answer.
		return sentence(summarize(c.result))
	case t.intents[intentCalculate]:
		expr := firstString(args, "expression", "expr", "formula")
		if n, ok := numberIn(c.result); ok && expr != "" {
			return fmt.Sprintf("%s = %s.", expr, n)
		}
	case t.intents[intentConvert]:
		from, to := firstString(args, "from", "from_unit", "unit"), firstString(args, "to", "to_unit")
		if n, ok := numberIn(c.result); ok && from != "" && to != "" && !strings.Contains(c.result, " ") {
			return fmt.Sprintf("%v %s = %s %s.", args[valueKey(args)], from, n, to)
		}
	}
	if text != "" {
		return sentence(fmt.Sprintf("%s: %s", capitalize(trimEnd(stripFillers(text))), summarize(c.result)))
	}
	return sentence(fmt.Sprintf("%s: %s", t.display(), summarize(c.result)))
}

func valueKey(args map[string]any) string {
	for _, k := range []string{"value", "amount", "quantity", "number"} {
		if _, ok := args[k]; ok {
			return k
		}
	}
	return "value"
}

// object is what a tool acts on, from its name: "note" for store_note and
// list_notes, "contact" for save_contact; "item" when the name says only
// the verb.
func object(t *tool) string {
	var ws []string
	for _, w := range splitName(t.short) {
		verb := false
		for _, kws := range intentKeywords {
			verb = verb || slices.Contains(kws, stem(w))
		}
		if !verb {
			ws = append(ws, strings.TrimSuffix(w, "s"))
		}
	}
	if len(ws) == 0 {
		return "item"
	}
	return strings.Join(ws, " ")
}

func firstString(args map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := args[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

var failedLineRE = regexp.MustCompile(`(?i)^[\w.:/ -]{0,80}\bfailed\b`)

// failed reports whether a tool message is an error: it starts with
// "error", says on its first line that something failed, or is a JSON
// object with an "error" or a true "isError".
func failed(content string) bool {
	c := strings.ToLower(strings.TrimSpace(content))
	if strings.HasPrefix(c, "error") || strings.HasPrefix(c, "tool error") || strings.HasPrefix(c, "failed") {
		return true
	}
	first, _, _ := strings.Cut(c, "\n")
	if failedLineRE.MatchString(first) {
		return true
	}
	var obj map[string]any
	if json.Unmarshal([]byte(content), &obj) == nil {
		if e, ok := obj["error"]; ok && e != nil && e != false && e != "" {
			return true
		}
		if b, _ := obj["isError"].(bool); b {
			return true
		}
	}
	return false
}

// errorPrefixRE matches how errors open, including the delegation layer's
// `Error: agent "packrat", tool "store_note" reported an error:` and
// `Error: the call to agent "packrat", tool "store_note" failed:`, which
// repeat what the answer's "packrat.store_note failed:" already says.
var errorPrefixRE = regexp.MustCompile(`(?i)^(?:tool )?error\s*[:-]?\s*(?:(?:the call to )?agent "[^"]*", tool "[^"]*" (?:reported an error|failed)\s*[:.]?\s*)?`)

func failure(t *tool, content string) string {
	msg := strings.TrimSpace(content)
	var obj map[string]any
	if json.Unmarshal([]byte(msg), &obj) == nil {
		switch e := obj["error"].(type) {
		case string:
			msg = e
		case map[string]any:
			if m, ok := e["message"].(string); ok {
				msg = m
			}
		}
	}
	msg = collapse(errorPrefixRE.ReplaceAllString(msg, ""))
	name := t.display()
	if msg == "" {
		return fmt.Sprintf("%s failed.", name)
	}
	if strings.Contains(strings.ToLower(msg), strings.ToLower(name)+" failed") || strings.Contains(msg, t.name) {
		return sentence(msg)
	}
	return sentence(fmt.Sprintf("%s failed: %s", name, msg))
}

var headerLineRE = regexp.MustCompile(`(?i)^(?:note|item|entry|record|#)\s*#?\d+\b`)
var nothingRE = regexp.MustCompile(`(?i)^(?:no |nothing|0 |none|\[\]|not found)`)

// items pulls the entries out of a search or read result: the "text" of
// each object in a JSON result ({"notes":[{"text":...}]}), or, in a text
// result, each blank-line separated block without its header line (the
// form "Note 3 (stored ...)\nthe text"). empty is true when the result
// says it found nothing.
func items(content string) (texts []string, empty bool) {
	c := strings.TrimSpace(content)
	if c == "" || nothingRE.MatchString(c) {
		return nil, true
	}
	var v any
	if json.Unmarshal([]byte(c), &v) == nil {
		texts = jsonTexts(v)
		if len(texts) == 0 {
			if isEmptyJSON(v) {
				return nil, true
			}
			return []string{summarize(c)}, false
		}
		return texts, false
	}
	blocks := strings.Split(strings.ReplaceAll(c, "\r\n", "\n"), "\n\n")
	if len(blocks) > 1 && strings.HasSuffix(strings.TrimSpace(blocks[0]), ":") {
		blocks = blocks[1:]
	}
	for _, b := range blocks {
		lines := strings.Split(strings.TrimSpace(b), "\n")
		if len(lines) > 1 && headerLineRE.MatchString(lines[0]) {
			lines = lines[1:]
		}
		if t := collapse(strings.Join(lines, " ")); t != "" {
			texts = append(texts, trimEnd(t))
		}
	}
	return clip(texts), len(texts) == 0
}

// distinct returns texts without repeats (ignoring case), in order.
func distinct(texts []string) []string {
	seen := make(map[string]bool, len(texts))
	out := texts[:0:0]
	for _, t := range texts {
		if k := strings.ToLower(t); !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	return out
}

// jsonTexts finds the text of each entry in a JSON result, in order.
func jsonTexts(v any) []string {
	switch x := v.(type) {
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, jsonTexts(e)...)
		}
		return clip(out)
	case map[string]any:
		for _, k := range []string{"text", "content", "body", "snippet", "value", "message"} {
			if s, ok := x[k].(string); ok && s != "" {
				return []string{trimEnd(collapse(s))}
			}
		}
		for _, k := range []string{"notes", "results", "items", "matches", "data", "entries", "note"} {
			if e, ok := x[k]; ok {
				return jsonTexts(e)
			}
		}
	}
	return nil
}

func isEmptyJSON(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) == 0
	case map[string]any:
		if n, ok := x["count"].(float64); ok && n == 0 {
			return true
		}
		for _, k := range []string{"notes", "results", "items", "matches", "data", "entries"} {
			if a, ok := x[k].([]any); ok && len(a) == 0 {
				return true
			}
		}
	case nil:
		return true
	}
	return false
}

// clip keeps the entries within maxSummary characters.
func clip(texts []string) []string {
	total := 0
	for i, t := range texts {
		total += len(t)
		if total > maxSummary && i > 0 {
			return append(texts[:i:i], fmt.Sprintf("and %d more", len(texts)-i))
		}
	}
	return texts
}

// summarize renders a result for quoting: a JSON result's "result" or
// "text"-like field if it has one, else the result collapsed onto one line,
// cut at maxSummary.
func summarize(content string) string {
	c := strings.TrimSpace(content)
	var obj map[string]any
	if json.Unmarshal([]byte(c), &obj) == nil {
	fields:
		for _, k := range []string{"text", "message", "result", "answer", "value", "content"} {
			switch x := obj[k].(type) {
			case string:
				c = x
				break fields
			case float64, bool:
				c = fmt.Sprint(x)
				break fields
			}
		}
	}
	c = collapse(c)
	if utf8.RuneCountInString(c) > maxSummary {
		r := []rune(c)
		c = string(r[:maxSummary]) + "…"
	}
	return c
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

func trimEnd(s string) string { return strings.TrimRight(strings.TrimSpace(s), ".!?;:, ") }

// sentence ends s with exactly one period (or its own ! or ?).
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "…") {
		return s
	}
	return s + "."
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return strings.ToUpper(string(r)) + s[n:]
}
