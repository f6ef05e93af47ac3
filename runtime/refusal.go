package runtime

// One tool whose schema an endpoint will not take fails every request that
// offers it, so every turn of the agent ends in the same 400. The answer
// says which tool, in one of two ways, and refusedTools reads both:
//
//	an index into the request's tools
//	  OpenAI, Azure OpenAI:  "param": "tools[3].function.parameters" (Azure: also "tools[3].parameters")
//	  Groq:                  "param": "tool view_agent_graph, tools[24].function.parameters"
//	  vLLM (pydantic):       "message": "... tools.0.function.parameters ..."
//	  Gemini:                "tools[0].function_declarations[53].parameters ..." (every function is
//	                         a declaration of tools[0], so the declaration's index is the tool's)
//	the tool's name in the message
//	  OpenAI, DeepSeek:      "Invalid schema for function 'abacus__calculate': ..."
//	  Groq:                  "invalid JSON schema for tool abacus__calculate, ..."
//
// An index is preferred: it is positional over what was sent, while a name
// might be quoted for another reason. A name counts only as a whole token
// (offered names are [a-zA-Z0-9_-]; anything else bounds them), so that
// "abacus__calc" is not found inside "abacus__calculate". This is reading
// a provider's wire text, which has no standard field for the tool; an
// answer that names no offered tool leaves the 400 as it was.
//
// The fix then names the line to write: the tool's server and MCP name,
// for "disabledTools" in the agent's tools/mcp.json (see pool/mcpconfig's
// filter.go). The turn's Toolbox, which maps model names back, is not
// within reach of a failed request, so toolSource inverts
// delegation.ToolName over the agent's servers instead: exact for every
// name that needed no rewriting. A name shortened with a hash says only
// its server; a tool whose MCP name had characters rewritten gets the
// rewritten name, and the next turn's discovery then says which names the
// server does offer (delegation.FilterError).

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

var (
	declRef = regexp.MustCompile(`function_declarations\[(\d+)\]`)
	toolRef = regexp.MustCompile(`\btools(?:\[(\d+)\]|\.(\d+)\b)`)
)

// maxRefusalText bounds how much of an error body refusedTools reads.
const maxRefusalText = 64 << 10

// refusedTools returns the offered tools (model tool names, in the order
// of the request's tools) that an endpoint's error text says are at fault,
// in offer order; none when it names none.
func refusedTools(text string, offered []string) []string {
	if len(text) > maxRefusalText {
		text = text[:maxRefusalText]
	}
	at := map[int]bool{}
	refs := toolRef
	if strings.Contains(text, "function_declarations") {
		// Gemini's tools[0] is the wrapper of every declaration.
		refs = declRef
	}
	for _, m := range refs.FindAllStringSubmatch(text, -1) {
		// toolRef has one group for tools[N] and one for tools.N; one is empty.
		if i, err := strconv.Atoi(strings.Join(m[1:], "")); err == nil && i >= 0 && i < len(offered) {
			at[i] = true
		}
	}
	if len(at) == 0 {
		for i, name := range offered {
			if containsToken(text, name) {
				at[i] = true
			}
		}
	}
	var out []string
	for i, name := range offered {
		if at[i] {
			out = append(out, name)
		}
	}
	return out
}

// containsToken reports whether name occurs in text with no name character
// on either side.
func containsToken(text, name string) bool {
	if name == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !nameChar(text[start-1])) && (end == len(text) || !nameChar(text[end])) {
			return true
		}
		i = start + 1
	}
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// providerText is what an endpoint's error answer says, for refusedTools:
// OpenAI's message and param, or the body go-openai could not decode
// (vLLM's {"object":"error",...}, Gemini's [{"error":...}]).
func providerText(err error) string {
	if apiErr, ok := errors.AsType[*openai.APIError](err); ok {
		if apiErr.Param != nil {
			return apiErr.Message + "\n" + *apiErr.Param
		}
		return apiErr.Message
	}
	if reqErr, ok := errors.AsType[*openai.RequestError](err); ok {
		body := reqErr.Body[:min(len(reqErr.Body), maxRefusalText)]
		var v any
		if json.Unmarshal(body, &v) != nil {
			return string(body)
		}
		// The strings of the body, unescaped: pydantic's "\ntools.0." is
		// "\\ntools.0." in JSON, where no boundary precedes "tools".
		var b strings.Builder
		jsonStrings(&b, v)
		return b.String()
	}
	return ""
}

// jsonStrings writes every string in v, keys included, one a line.
func jsonStrings(b *strings.Builder, v any) {
	switch v := v.(type) {
	case string:
		b.WriteString(v)
		b.WriteByte('\n')
	case []any:
		for _, e := range v {
			jsonStrings(b, e)
		}
	case map[string]any:
		for k, e := range v {
			b.WriteString(k)
			b.WriteByte('\n')
			jsonStrings(b, e)
		}
	}
}

// toolNames are the model tool names of a request's tools, in order.
func toolNames(tools []openai.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		if t.Function != nil {
			out[i] = t.Function.Name
		}
	}
	return out
}

// A toolOrigin is where a model tool came from.
type toolOrigin struct {
	server string
	// tool is the MCP tool name, as the server listed it.
	tool string
	// mcp is the server's mcp.json entry; nil for a native toolset.
	mcp *mcpconfig.Server
}

// toolOrigin finds the server and MCP tool behind a model tool name in
// the turn's toolbox, and the server's mcp.json entry unless it is one of
// the agent's native servers (offered first, under their own names).
func (a *Agent) toolOrigin(tb *delegation.Toolbox, name string) (toolOrigin, bool) {
	if tb == nil {
		return toolOrigin{}, false
	}
	t, ok := tb.Lookup(name)
	if !ok {
		return toolOrigin{}, false
	}
	o := toolOrigin{server: t.Server.Name, tool: t.Tool.Name}
	if slices.ContainsFunc(a.opts.Servers, func(s *pool.Server) bool { return s.Name == o.server }) {
		return o, true
	}
	if a.def.MCP != nil {
		if i := slices.IndexFunc(a.def.MCP.Servers, func(s *mcpconfig.Server) bool { return s.Name == o.server }); i >= 0 {
			o.mcp = a.def.MCP.Servers[i]
		}
	}
	return o, true
}

// refusalFix is the fix for a 400 that names offered tools, or "" when it
// names none. msg is the provider's message, scrubbed.
func (a *Agent) refusalFix(offered []openai.Tool, tb *delegation.Toolbox, err error, msg string) string {
	refused := refusedTools(providerText(err), toolNames(offered))
	if len(refused) == 0 {
		return ""
	}
	what := fmt.Sprintf("tool %q's schema", refused[0])
	if len(refused) > 1 {
		what = "the schemas of tools " + quoteAll(refused)
	}
	head := fmt.Sprintf("the endpoint refused %s (400): %q", what, msg)

	path := "tools/mcp.json"
	if a.def.MCP != nil && a.def.MCP.Path != "" {
		path = a.def.MCP.Path
	}
	// One clause per server, in the order its tools were refused.
	type fix struct {
		origin toolOrigin
		tools  []string
	}
	var fixes []*fix
	var native, unknown []string
	for _, n := range refused {
		o, ok := a.toolOrigin(tb, n)
		switch {
		case !ok:
			unknown = append(unknown, strconv.Quote(n))
			continue
		case o.mcp == nil:
			native = append(native, strconv.Quote(n))
			continue
		}
		i := slices.IndexFunc(fixes, func(f *fix) bool { return f.origin.server == o.server })
		if i < 0 {
			fixes = append(fixes, &fix{origin: o})
			i = len(fixes) - 1
		}
		if o.tool != "" {
			fixes[i].tools = append(fixes[i].tools, o.tool)
		}
	}
	var clauses []string
	for _, f := range fixes {
		clauses = append(clauses, filterClause(f.origin.server, f.origin.mcp, f.tools))
	}
	var parts []string
	if len(clauses) > 0 {
		parts = append(parts, fmt.Sprintf("leave %s out with %s in %s", plural(len(refused), "it", "them"), strings.Join(clauses, ", and "), path))
	}
	if len(native) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s the agent's own (a native toolset that agent.json's \"tools\" names): its schema is fixed in its Go code, or the toolset left out of agent.json",
			strings.Join(native, ", "), plural(len(native), "is", "are")))
	}
	if len(unknown) > 0 {
		parts = append(parts, fmt.Sprintf("leave %s out with \"disabledTools\" under its server in %s", strings.Join(unknown, ", "), path))
	}
	return head + "; " + strings.Join(parts, "; ")
}

// filterClause says what to write under server s so that tools are no
// longer offered: a disabledTools entry, or, for a server that lists its
// allowedTools, taking them out of that list.
func filterClause(server string, s *mcpconfig.Server, tools []string) string {
	if len(tools) == 0 {
		return fmt.Sprintf("\"disabledTools\" naming it under server %q", server)
	}
	if s.AllowedTools != nil {
		return fmt.Sprintf("%s taken out of \"allowedTools\" under server %q", quoteAll(tools), server)
	}
	return fmt.Sprintf("\"disabledTools\": [%s] under server %q", quoteAll(append(slices.Clone(s.DisabledTools), tools...)), server)
}

// quoteAll renders names as a JSON list's members.
func quoteAll(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, ", ")
}
