package console

// How the pages show what model turns cost: a run's tokens in its summary
// and in the run list, each step of its ask, and each ask's hop. A usage
// of zero requests is unknown (the agent reported none), not free, and is
// shown as nothing; a cost only when the agent priced its model.

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"

	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// usageFuncs are the pages' template functions of usage.
var usageFuncs = template.FuncMap{
	"count":     count,
	"usd":       usd,
	"hasUsage":  hasUsage,
	"usageText": usageText,
	"bytes":     bytesText,
}

// count renders n with thousands separators: 12,345.
func count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// usd renders a cost: four decimals under a dollar, where model requests
// usually are, two above.
func usd(v float64) string {
	if v < 1 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// hasUsage reports whether u is a reported usage.
func hasUsage(u studioapi.Usage) bool { return u.Requests > 0 || u.TotalTokens > 0 }

// usageText is a usage in one line: "2,334 tokens (prompt 2,100, 1,224 of
// them cached; completion 234, 128 of them reasoning) in 2 model requests,
// $0.0031".
func usageText(u studioapi.Usage) string {
	prompt := "prompt " + count(u.PromptTokens)
	if u.CachedTokens > 0 {
		prompt += ", " + count(u.CachedTokens) + " of them cached"
	}
	completion := "completion " + count(u.CompletionTokens)
	if u.ReasoningTokens > 0 {
		completion += ", " + count(u.ReasoningTokens) + " of them reasoning"
	}
	s := fmt.Sprintf("%s tokens (%s; %s) in %s model %s", count(u.TotalTokens), prompt, completion, count(u.Requests), plural(u.Requests, "request", "requests"))
	if u.CostUSD > 0 {
		s += ", " + usd(u.CostUSD)
	}
	return s
}

// bytesText renders a request's size: 870 B, 3.8 KB.
func bytesText(n int) string {
	if n < 1000 {
		return strconv.Itoa(n) + " B"
	}
	return fmt.Sprintf("%.1f KB", float64(n)/1000)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
