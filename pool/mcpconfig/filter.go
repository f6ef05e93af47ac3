package mcpconfig

// A server's tool filter: which of its tools the model is offered. The
// names are the ones MCP clients already write, per server, in the same
// file:
//
//	"disabledTools"  Roo Code (.roo/mcp.json), LangChain deepagents: tools hidden from the agent
//	"allowedTools"   LangChain deepagents: the only tools kept
//	"includeTools"   Gemini CLI (settings.json mcpServers): the only tools kept
//	"excludeTools"   Gemini CLI: tools left out
//
// VS Code, Cursor and Windsurf filter tools in their UI, not in mcp.json,
// and Claude Code's allowedTools/disallowedTools are session permissions
// (mcp__server__tool), not server fields; Cline's "alwaysAllow" and
// "autoApprove" skip a confirmation and hide nothing (ignoredFields).
// So allowedTools/disabledTools are the names, and Gemini CLI's two are
// read as aliases because people copy servers between those files.
//
// A list holds exact MCP tool names, case-sensitive, as the server lists
// them in tools/list: not the model's "<server>__<tool>" names and not
// patterns (LangChain's globs would make a typo match nothing silently).
//
// Giving both lists is an error, as in LangChain (Gemini CLI lets
// excludeTools win): with an allow list, every name a deny list could hold
// is either already left out or contradicts the allow list, so the second
// list can only be a mistake. An empty "allowedTools" would offer none of
// the server's tools, which "disabled": true says better; an empty
// "disabledTools" is nothing to leave out, and Roo Code writes one, so it
// is accepted, next to an allow list too.
//
// Whether a named tool exists is known only once the server answers
// tools/list: package delegation applies the filter and reports a name
// the server does not offer.

import (
	"fmt"
	"strings"
)

// A filterList is one of a server's tool filter fields as written.
type filterList struct {
	field string // "allowedTools", "disabledTools", "includeTools" or "excludeTools"
	raw   string // the JSON text, for errors
	names []string
}

// allows reports whether the list names the tools to keep.
func (l filterList) allows() bool { return l.field == "allowedTools" || l.field == "includeTools" }

// toolFilter checks a server's filter fields, in file order, and returns
// the allow or the deny list (at most one is non-nil).
func (sp *serverParser) toolFilter(lists []filterList) (allowed, disabled []string, err error) {
	var allow, deny *filterList
	for i := range lists {
		l := &lists[i]
		if err := sp.filterNames(l); err != nil {
			return nil, nil, err
		}
		prev := &deny
		if l.allows() {
			prev = &allow
		}
		if *prev != nil {
			return nil, nil, sp.fail(l.field, l.raw, `the same list as %q ("includeTools" and "excludeTools" are Gemini CLI's names for "allowedTools" and "disabledTools"); give one of them`, (*prev).field)
		}
		*prev = l
	}
	if allow != nil && deny != nil && len(deny.names) > 0 {
		for _, n := range deny.names {
			for _, a := range allow.names {
				if n == a {
					return nil, nil, sp.fail(deny.field, deny.raw, "tool %q is in both %q and %q", n, allow.field, deny.field)
				}
			}
		}
		return nil, nil, sp.fail(deny.field, deny.raw, "not allowed with %q, which already leaves out every tool it does not name; give one of them", allow.field)
	}
	if allow != nil {
		if len(allow.names) == 0 {
			return nil, nil, sp.fail(allow.field, allow.raw, `an empty list would offer none of the server's tools; to leave the server out, set "disabled": true`)
		}
		return allow.names, nil, nil
	}
	if deny != nil && len(deny.names) > 0 {
		return nil, deny.names, nil
	}
	return nil, nil, nil
}

// filterNames checks each name of a list.
func (sp *serverParser) filterNames(l *filterList) error {
	seen := make(map[string]int, len(l.names))
	for i, n := range l.names {
		field := fmt.Sprintf("%s[%d]", l.field, i)
		switch {
		case n == "":
			return sp.fail(field, n, "empty tool name")
		case strings.TrimSpace(n) != n:
			return sp.fail(field, n, "tool name %q has spaces around it", n)
		case strings.ContainsAny(n, "*?"):
			return sp.fail(field, n, "%q: patterns are not supported; name each tool as the server lists it", n)
		}
		if j, ok := seen[n]; ok {
			return sp.fail(field, n, "tool %q is named twice (also %s[%d])", n, l.field, j)
		}
		seen[n] = i
	}
	return nil
}
