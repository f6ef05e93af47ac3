package delegation_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/pooltest"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// abacus is a real go-sdk server with calculate, add and mul (go-sdk lists
// them sorted by name), which records the name of every tool it runs.
type abacus struct {
	srv *pool.Server
	mu  sync.Mutex
	ran []string
}

func newAbacus(t *testing.T, name string) *abacus {
	a := &abacus{}
	run := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a.mu.Lock()
		a.ran = append(a.ran, req.Params.Name)
		a.mu.Unlock()
		return text("ran " + req.Params.Name), nil
	}
	a.srv = sibling(t, name, func(s *mcp.Server) {
		for _, tool := range []string{"calculate", "add", "mul"} {
			addRaw(s, tool, run)
		}
	})
	return a
}

func (a *abacus) Ran() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.ran)
}

// config is an mcp.json holding s as an HTTP server with the given filter.
func (a *abacus) config(allowed, disabled []string) *mcpconfig.Config {
	return &mcpconfig.Config{Path: "agents/oracle/tools/mcp.json", Servers: []*mcpconfig.Server{{
		Name: a.srv.Name, Type: mcpconfig.TypeHTTP, URL: a.srv.URL, AllowedTools: allowed, DisabledTools: disabled,
	}}}
}

func names(tb *delegation.Toolbox) []string {
	var out []string
	for _, t := range tb.Targets() {
		out = append(out, t.Name)
	}
	return out
}

// TestDiscoverFilter: a tool left out by allowedTools or disabledTools is
// not offered and cannot be called: a call to it is an unknown tool, and
// the server never runs it. The tools let through are offered under the
// names they would have had anyway, and run.
func TestDiscoverFilter(t *testing.T) {
	for _, tc := range []struct {
		name              string
		allowed, disabled []string
		offered           []string
		left              string
	}{
		{"disabledTools", nil, []string{"calculate"}, []string{"abacus__add", "abacus__mul"}, "abacus__calculate"},
		{"allowedTools", []string{"mul", "add"}, nil, []string{"abacus__add", "abacus__mul"}, "abacus__calculate"},
		{"allowedTools of one", []string{"calculate"}, nil, []string{"abacus__calculate"}, "abacus__mul"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAbacus(t, "abacus")
			c := pooltest.New(t, nil)
			tb := delegation.Discover(t.Context(), c, a.config(tc.allowed, tc.disabled), nil)
			if u := tb.Unavailable(); len(u) != 0 {
				t.Errorf("unavailable: %v", u)
			}
			if got := names(tb); !slices.Equal(got, tc.offered) {
				t.Errorf("offered %q, want %q", got, tc.offered)
			}
			if _, ok := tb.Lookup(tc.left); ok {
				t.Errorf("Lookup(%q) found a tool the filter leaves out", tc.left)
			}
			e := &delegation.Executor{Caller: c, Tools: tb, Chain: delegation.Chain{RunID: "run-1", Agents: []string{"oracle"}, Depth: 1}}
			res := e.Run(t.Context(), []delegation.Call{
				{ID: "call_left", Name: tc.left, Arguments: "{}"},
				{ID: "call_kept", Name: tc.offered[0], Arguments: "{}"},
			})
			if r := res[0]; r.Outcome != delegation.OutcomeUnknownTool || !r.IsError || r.Agent != "" {
				t.Errorf("call to the left-out tool = %+v, want an unknown tool", r)
			}
			if r := res[1]; r.Outcome != delegation.OutcomeOK || r.IsError {
				t.Errorf("call to the offered tool = %+v, want it run", r)
			}
			kept := strings.TrimPrefix(tc.offered[0], "abacus__")
			if got := a.Ran(); !slices.Equal(got, []string{kept}) {
				t.Errorf("the server ran %q, want only %q", got, kept)
			}
		})
	}
}

// TestDiscoverFilterNamesAMissingTool: a name in either list that the
// server does not offer is said in Unavailable, naming the file, the list,
// the name and what the server does offer; the rest of the filter applies.
func TestDiscoverFilterNamesAMissingTool(t *testing.T) {
	for _, tc := range []struct {
		name              string
		allowed, disabled []string
		field             string
		offered           []string
		hint              string
	}{
		{"allowedTools", []string{"calcuate", "add"}, nil, "allowedTools", []string{"abacus__add"}, ""},
		{"allowedTools naming a model tool name", []string{"abacus__calculate"}, nil, "allowedTools", nil,
			`; a filter names tools as the server lists them: "calculate"`},
		{"disabledTools", nil, []string{"calcuate"}, "disabledTools", []string{"abacus__add", "abacus__calculate", "abacus__mul"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAbacus(t, "abacus")
			tb := delegation.Discover(t.Context(), pooltest.New(t, nil), a.config(tc.allowed, tc.disabled), nil)
			if got := names(tb); !slices.Equal(got, tc.offered) {
				t.Errorf("offered %q, want %q", got, tc.offered)
			}
			u := tb.Unavailable()
			if len(u) != 1 {
				t.Fatalf("unavailable = %v, want one note", u)
			}
			fe, ok := errors.AsType[*delegation.FilterError](u[0])
			if !ok {
				t.Fatalf("note %v is not a *FilterError", u[0])
			}
			missing := slices.Concat(tc.allowed, tc.disabled)[0]
			if fe.Field != tc.field || fe.Tool != missing || fe.File != "agents/oracle/tools/mcp.json" || !slices.Equal(fe.Offered, []string{"add", "calculate", "mul"}) {
				t.Errorf("FilterError = %+v", fe)
			}
			want := `agent "abacus": ` + tc.field + ` in agents/oracle/tools/mcp.json names tool "` + missing + `", which the server does not offer (it offers: add, calculate, mul)` + tc.hint
			if got := u[0].Error(); got != want {
				t.Errorf("note\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestDiscoverFilterSparesNativeTools: the filter of an mcp.json server
// touches only that server; the agent's native toolset (Options.Servers),
// here offering a tool of the same name, is offered whole.
func TestDiscoverFilterSparesNativeTools(t *testing.T) {
	native := newAbacus(t, "oracle")
	a := newAbacus(t, "abacus")
	tb := delegation.Discover(t.Context(), pooltest.New(t, nil), a.config(nil, []string{"calculate", "mul"}),
		&delegation.DiscoverOptions{Servers: []*pool.Server{native.srv}})
	want := []string{"oracle__add", "oracle__calculate", "oracle__mul", "abacus__add"}
	if got := names(tb); !slices.Equal(got, want) {
		t.Errorf("offered %q, want %q", got, want)
	}
}

// TestDiscoverFilterLeavingNothing: a disabledTools that leaves out every
// tool of the server says so, rather than leave the server silently empty.
func TestDiscoverFilterLeavingNothing(t *testing.T) {
	a := newAbacus(t, "abacus")
	tb := delegation.Discover(t.Context(), pooltest.New(t, nil), a.config(nil, []string{"mul", "calculate", "add"}), nil)
	if tb.Len() != 0 {
		t.Errorf("offered %q, want none", names(tb))
	}
	u := tb.Unavailable()
	want := `agent "abacus": disabledTools in agents/oracle/tools/mcp.json leaves out every tool the server offers (add, calculate, mul)`
	if len(u) != 1 || u[0].Error() != want {
		t.Fatalf("unavailable = %v, want %s", u, want)
	}
	if fe, ok := errors.AsType[*delegation.FilterError](u[0]); !ok || fe.Tool != "" {
		t.Errorf("note %v: want a *FilterError with no Tool", u[0])
	}
}
