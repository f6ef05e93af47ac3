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

// Errors returned by Chain.Enter, for errors.Is.
var (
	ErrCycle = errors.New("delegation cycle")
	ErrDepth = errors.New("delegation too deep")
)

// A Chain is the path a task has taken through agents: the run it belongs to,
// the agents it has passed through in order, and its depth (len(Agents)).
type Chain struct {
	RunID  string   `json:"run_id"`
	Agents []string `json:"agents"`
	Depth  int      `json:"depth"`
}

// Enter returns the chain extended by agent, or an error when agent is
// already on the chain (a cycle) or the new depth exceeds maxDepth
// (DefaultMaxDepth when maxDepth <= 0).
func (c Chain) Enter(agent string, maxDepth int) (Chain, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if slices.Contains(c.Agents, agent) {
		return c, fmt.Errorf("%w: agent %q is already on the chain %s (run %s)", ErrCycle, agent, c.path(agent), c.RunID)
	}
	if c.Depth+1 > maxDepth {
		return c, fmt.Errorf("%w: entering agent %q would make depth %d, past the limit %d (chain %s, run %s)", ErrDepth, agent, c.Depth+1, maxDepth, c.path(agent), c.RunID)
	}
	return Chain{RunID: c.RunID, Agents: append(slices.Clone(c.Agents), agent), Depth: c.Depth + 1}, nil
}

func (c Chain) path(next string) string {
	return strings.Join(append(slices.Clone(c.Agents), next), " → ")
}

// Meta returns a _meta map carrying the chain.
func (c Chain) Meta() map[string]any {
	return map[string]any{MetaKey: map[string]any{"run_id": c.RunID, "agents": slices.Clone(c.Agents), "depth": c.Depth}}
}

// FromMeta reads the chain from a tools/call _meta. ok is false when meta
// carries no chain. A chain that is present but malformed is an error that
// says what is wrong: an agent must not run a task whose provenance it cannot
// read.
func FromMeta(meta map[string]any) (c Chain, ok bool, err error) {
	v, ok := meta[MetaKey]
	if !ok {
		return Chain{}, false, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Chain{}, true, fmt.Errorf("_meta %q: %w", MetaKey, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Chain{}, true, fmt.Errorf("_meta %q is not a delegation chain: %w", MetaKey, err)
	}
	if c.Depth != len(c.Agents) {
		return Chain{}, true, fmt.Errorf("_meta %q: depth %d does not match %d agents", MetaKey, c.Depth, len(c.Agents))
	}
	// Enter refuses an agent already on the chain, so a chain that names an
	// agent twice was not built by agents: accepting it would let a call
	// through whose path already loops.
	for i, a := range c.Agents {
		if slices.Contains(c.Agents[:i], a) {
			return Chain{}, true, fmt.Errorf("_meta %q: agent %q appears twice in %s: the chain already loops", MetaKey, a, strings.Join(c.Agents, " → "))
		}
	}
	return c, true, nil
}
