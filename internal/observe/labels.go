package observe

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Metric labels come only from bounded sets (the Prometheus docs: never
// put unbounded values such as user input in a label). A request's JSON-RPC
// method and tool name are what the client sent, before any session check,
// so they are labels only when they are known: MCP's methods, and the tools
// the agent itself lists. Anything else counts under "other", however many
// distinct strings a client invents.

// labelOther is the label of a method or tool outside the known sets.
const labelOther = "other"

// knownMethods are the methods of MCP 2025-11-25 (client to server and
// server to client, notifications included), plus the labels the observer
// gives what is not a request.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true,
	"roots/list": true, "sampling/createMessage": true, "elicitation/create": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true,
	"notifications/initialized": true, "notifications/cancelled": true, "notifications/progress": true,
	"notifications/roots/list_changed": true, "notifications/message": true,
	// Not JSON-RPC methods: how observe.go names the other requests.
	"GET": true, "DELETE": true, "response": true, "unknown": true,
}

func methodLabel(m string) string {
	if knownMethods[m] {
		return m
	}
	return labelOther
}

// toolRefreshEvery bounds how often an unknown tool name makes the studio
// list the agent's tools again: a flood of invented names costs one
// tools/list per agent per period.
const toolRefreshEvery = 10 * time.Second

// toolListTimeout bounds that listing.
const toolListTimeout = 2 * time.Second

// maxKnownTools bounds one agent's known tool names, whatever it lists.
const maxKnownTools = 512

// Tools knows the tools each agent lists, for the tool label.
type Tools struct {
	list   func(ctx context.Context, agent string) ([]string, error)
	agents map[string]*toolNames // fixed at NewTools
}

// toolNames is the set of tools one agent lists.
type toolNames struct {
	group singleflight.Group

	mu     sync.Mutex      // protects following fields
	names  map[string]bool // as last listed
	listed time.Time       // when; zero: never
}

// NewTools knows the tools of the agents names, listed by list (an error:
// the agent could not tell, for now).
func NewTools(names []string, list func(ctx context.Context, agent string) ([]string, error)) *Tools {
	t := &Tools{list: list, agents: make(map[string]*toolNames, len(names))}
	for _, n := range names {
		t.agents[n] = &toolNames{}
	}
	return t
}

// Label is tool when agent lists it, else "other". An unknown name lists
// the agent's tools again (through list), at most once per
// toolRefreshEvery, shared by concurrent callers.
func (t *Tools) Label(ctx context.Context, agent, tool string) string {
	tn := t.agents[agent]
	if tn == nil {
		return labelOther
	}
	tn.mu.Lock()
	known, stale := tn.names[tool], time.Since(tn.listed) >= toolRefreshEvery
	tn.mu.Unlock()
	if known || !stale {
		if known {
			return tool
		}
		return labelOther
	}
	ch := tn.group.DoChan("list", func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), toolListTimeout)
		defer cancel()
		names, err := t.list(ctx, agent)
		t.Learn(agent, names, err == nil)
		return nil, nil
	})
	select {
	case <-ch:
	case <-ctx.Done():
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if tn.names[tool] {
		return tool
	}
	return labelOther
}

// Learn records what agent listed (replace: the whole list, as from a
// tools/list; else the names are added to what is known).
func (t *Tools) Learn(agent string, names []string, replace bool) {
	tn := t.agents[agent]
	if tn == nil {
		return
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.listed = time.Now()
	if replace || tn.names == nil {
		tn.names = make(map[string]bool, len(names))
	}
	for _, n := range names {
		if len(tn.names) >= maxKnownTools {
			break
		}
		tn.names[n] = true
	}
}
