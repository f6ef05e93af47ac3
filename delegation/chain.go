package delegation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MetaKey is the _meta key under which a tools/call carries its delegation
// chain. It uses a reverse-DNS prefix, as the MCP spec asks of _meta keys
// that are not the protocol's own.
const MetaKey = "run.switchboard/chain"

// DefaultMaxDepth bounds a chain when an agent sets no limit of its own.
const DefaultMaxDepth = 4

// MaxChainDepth is the deepest chain any agent may accept
// (agentdef.MaxMaxDepth is this), and so the longest chain worth reading: a
// longer one is refused before any of its entries is looked at.
const MaxChainDepth = 16

// Bounds on what one chain entry may hold. Agent names come from agent.json
// folder names; run ids from NewRunID (26 characters).
const (
	MaxAgentNameLen = 64
	MaxRunIDLen     = 128
	// MaxChainBytes bounds the JSON text of a chain: MaxChainDepth names
	// of the longest length, quoted, a run id, and the member names.
	MaxChainBytes = MaxChainDepth*(MaxAgentNameLen+3) + MaxRunIDLen + 64
)

// Errors returned by Chain.Enter and FromMeta, for errors.Is.
var (
	ErrCycle = errors.New("delegation cycle")
	ErrDepth = errors.New("delegation too deep")
	// ErrMalformed is a chain that cannot be read: not the shape of a
	// chain, or past one of the bounds above.
	ErrMalformed = errors.New("malformed delegation chain")
)

// testHookEntries is called with the number of entries a chain check
// looked at; tests use it to prove the work is bounded.
var testHookEntries = func(int) {}

// A Chain is the path a task has taken through agents: the run it belongs to,
// the agents it has passed through in order, and its depth (len(Agents)).
type Chain struct {
	RunID  string   `json:"run_id"`
	Agents []string `json:"agents"`
	// Depth is len(Agents), always: it is counted from the entries, never
	// taken from the wire, where it is written only for readers.
	Depth int `json:"depth"`
}

// Enter returns the chain extended by agent, or an error when agent is
// already on the chain (a cycle) or the new depth exceeds maxDepth
// (DefaultMaxDepth when maxDepth <= 0, and never more than MaxChainDepth).
func (c Chain) Enter(agent string, maxDepth int) (Chain, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	maxDepth = min(maxDepth, MaxChainDepth)
	if agent == "" || len(agent) > MaxAgentNameLen {
		return c, fmt.Errorf("%w: agent name of %d bytes (at most %d)", ErrMalformed, len(agent), MaxAgentNameLen)
	}
	depth := len(c.Agents)
	if slices.Contains(c.Agents, agent) {
		return c, fmt.Errorf("%w: agent %q is already on the chain %s (run %s)", ErrCycle, agent, c.path(agent), c.RunID)
	}
	if depth+1 > maxDepth {
		return c, fmt.Errorf("%w: entering agent %q would make depth %d, past the limit %d (chain %s, run %s)", ErrDepth, agent, depth+1, maxDepth, c.path(agent), c.RunID)
	}
	return Chain{RunID: c.RunID, Agents: append(slices.Clone(c.Agents), agent), Depth: depth + 1}, nil
}

func (c Chain) path(next string) string {
	return strings.Join(append(slices.Clone(c.Agents), next), " → ")
}

// Meta returns a _meta map carrying the chain.
func (c Chain) Meta() map[string]any {
	return map[string]any{MetaKey: map[string]any{"run_id": c.RunID, "agents": slices.Clone(c.Agents), "depth": len(c.Agents)}}
}

// FromMeta reads the chain from a tools/call _meta, as go-sdk decoded it. ok
// is false when meta carries no chain. A chain that is present but
// malformed is an error that says what is wrong: an agent must not run a
// task whose provenance it cannot read.
//
// The check is linear and bounded: the number of entries is looked at
// before any entry, so a chain longer than MaxChainDepth costs the same as
// one entry past it, whatever else the body holds.
func FromMeta(meta map[string]any) (c Chain, ok bool, err error) {
	v, ok := meta[MetaKey]
	if !ok {
		return Chain{}, false, nil
	}
	if v == nil {
		// null: a chain with nothing on it yet, as a JSON decoder of a
		// Chain reads it.
		return Chain{}, true, nil
	}
	obj, isObj := v.(map[string]any)
	if !isObj {
		return Chain{}, true, fmt.Errorf("%w: _meta %q must be an object, got %s", ErrMalformed, MetaKey, jsonKind(v))
	}
	for k := range obj {
		if k != "run_id" && k != "agents" && k != "depth" {
			return Chain{}, true, fmt.Errorf("%w: _meta %q has unknown member %q", ErrMalformed, MetaKey, truncate(k, 32))
		}
	}
	runID, isStr := obj["run_id"].(string)
	if _, present := obj["run_id"]; present && !isStr {
		return Chain{}, true, fmt.Errorf("%w: _meta %q: run_id must be a string, got %s", ErrMalformed, MetaKey, jsonKind(obj["run_id"]))
	}
	if len(runID) > MaxRunIDLen {
		return Chain{}, true, fmt.Errorf("%w: _meta %q: run_id of %d bytes (at most %d)", ErrMalformed, MetaKey, len(runID), MaxRunIDLen)
	}
	var entries []any
	switch a := obj["agents"].(type) {
	case nil:
	case []any:
		entries = a
	default:
		return Chain{}, true, fmt.Errorf("%w: _meta %q: agents must be an array, got %s", ErrMalformed, MetaKey, jsonKind(a))
	}
	if len(entries) > MaxChainDepth {
		// Before the entries are walked: the cost of a forged chain of a
		// million names is this comparison.
		testHookEntries(0)
		return Chain{}, true, fmt.Errorf("%w: %d agents on the chain, past the deepest any agent accepts (%d)", ErrDepth, len(entries), MaxChainDepth)
	}
	if d, present := obj["depth"]; present {
		// Written for readers; it must agree with the entries, which are
		// what counts.
		if f, isNum := d.(float64); !isNum || f != float64(len(entries)) {
			return Chain{}, true, fmt.Errorf("%w: _meta %q: depth %s does not match %d agents", ErrMalformed, MetaKey, truncate(fmt.Sprint(d), 32), len(entries))
		}
	}
	c = Chain{RunID: runID, Agents: make([]string, 0, len(entries)), Depth: len(entries)}
	seen := make(map[string]struct{}, len(entries))
	defer func() { testHookEntries(len(c.Agents)) }()
	for i, e := range entries {
		name, isStr := e.(string)
		if !isStr || name == "" || len(name) > MaxAgentNameLen {
			return Chain{}, true, fmt.Errorf("%w: _meta %q: agents[%d] must be an agent name (a string of 1 to %d bytes)", ErrMalformed, MetaKey, i, MaxAgentNameLen)
		}
		// Enter refuses an agent already on the chain, so a chain that
		// names an agent twice was not built by agents: accepting it
		// would let a call through whose path already loops.
		if _, dup := seen[name]; dup {
			return Chain{}, true, fmt.Errorf("%w: _meta %q: agent %q appears twice in %s: the chain already loops", ErrMalformed, MetaKey, name, strings.Join(append(c.Agents, name), " → "))
		}
		seen[name] = struct{}{}
		c.Agents = append(c.Agents, name)
	}
	return c, true, nil
}

// FromMetaJSON reads the chain from the raw JSON of the chain member of a
// _meta (what the studio's observer has, never a decoded tree). A text
// longer than MaxChainBytes is refused before it is parsed.
func FromMetaJSON(raw json.RawMessage) (Chain, error) {
	if len(raw) > MaxChainBytes {
		testHookEntries(0)
		return Chain{}, fmt.Errorf("%w: _meta %q of %d bytes (at most %d)", ErrMalformed, MetaKey, len(raw), MaxChainBytes)
	}
	if n := openings(raw); n > maxChainOpenings {
		// Within the byte bound a text can still hold hundreds of values
		// (["a","a",…] or [[[[…]]]]), each an allocation when decoded:
		// more than a chain can have is refused before decoding.
		testHookEntries(0)
		return Chain{}, fmt.Errorf("%w: _meta %q holds %d values or more (a chain has at most %d agents)", ErrMalformed, MetaKey, n, MaxChainDepth)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return Chain{}, fmt.Errorf("%w: _meta %q: %w", ErrMalformed, MetaKey, err)
	}
	c, _, err := FromMeta(map[string]any{MetaKey: v})
	return c, err
}

// maxChainOpenings is the most openings (see openings) a chain's text has:
// its object and agents array, a comma between its three members, and one
// between each two of MaxChainDepth agents.
const maxChainOpenings = 2 + 2 + MaxChainDepth - 1

// openings counts the commas, brackets and braces of JSON text outside its
// strings: one less than the values it holds, give or take its nesting. It
// reads the text once and allocates nothing.
func openings(raw []byte) int {
	n, inString, escaped := 0, false, false
	for _, b := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch b {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == ',' || b == '[' || b == '{':
			n++
		}
	}
	return n
}

// RefuseUnreadable is the refusal of a tools/call to agent whose chain
// member (raw, as it came) cannot be read, or "" when it can (or there is
// none): the text an agent returns as the call's tool error. A server
// runs it on the raw body before decoding it, so a forged chain of a
// million names costs a length comparison; cycles and depth are checked
// later, on the decoded chain, by Enter.
func RefuseUnreadable(agent, tool string, raw json.RawMessage) string {
	if raw == nil {
		return ""
	}
	if _, err := FromMetaJSON(raw); err != nil {
		// A glimpse of the chain, never all of it: it is the client's.
		var shown bytes.Buffer
		if json.Compact(&shown, raw[:min(len(raw), MaxChainBytes)]) != nil {
			shown.Reset()
			shown.Write(raw[:min(len(raw), MaxChainBytes)])
		}
		return fmt.Sprintf("agent %s refused the call to %s: the delegation chain %s cannot be read: %v", agent, truncate(tool, 128), truncate(shown.String(), 256), err)
	}
	return ""
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
