package runtime

// Reasoning models served by Ollama, vLLM without a reasoning parser,
// llama.cpp or LM Studio write their thinking into the content, between
// <think> and </think> (DeepSeek-R1 and its distills, Qwen3, QwQ). Some chat
// templates open the block in the prompt, so that the content holds only
// the closing tag. The person sees the answer after it; the run keeps the
// thinking (Result.Reasoning).

import "strings"

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// splitThink returns content without its <think> blocks, and the text of
// those blocks. A closing tag with no opening one before it closes a block
// that began with the content; an opening tag never closed runs to the
// end (the answer was cut while the model thought).
func splitThink(content string) (answer, thought string) {
	if !strings.Contains(content, thinkClose) && !strings.Contains(content, thinkOpen) {
		return content, ""
	}
	var out, th []string
	rest := content
	if i, j := strings.Index(rest, thinkClose), strings.Index(rest, thinkOpen); i >= 0 && (j < 0 || i < j) {
		th = append(th, rest[:i])
		rest = rest[i+len(thinkClose):]
	}
	for {
		i := strings.Index(rest, thinkOpen)
		if i < 0 {
			out = append(out, rest)
			break
		}
		out = append(out, rest[:i])
		rest = rest[i+len(thinkOpen):]
		j := strings.Index(rest, thinkClose)
		if j < 0 {
			th = append(th, rest)
			break
		}
		th = append(th, rest[:j])
		rest = rest[j+len(thinkClose):]
	}
	var kept []string
	for _, t := range th {
		if t = strings.TrimSpace(t); t != "" {
			kept = append(kept, t)
		}
	}
	return strings.TrimSpace(strings.Join(out, "")), strings.Join(kept, "\n\n")
}

// addReasoning appends a step's reasoning to the run's record.
func (r *Result) addReasoning(parts ...string) {
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			if r.Reasoning != "" {
				r.Reasoning += "\n\n"
			}
			r.Reasoning += p
		}
	}
}
