// Package runtime runs an agent's model turn: messages to an
// OpenAI-compatible chat API, tool calls delegated through the pool, tool
// results back, until the model answers or the step limit is reached.
package runtime

import (
	"context"
	"errors"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/agentdef"
	"github.com/switchboard-run/switchboard/pool"
)

// ErrNoModel is returned by Ask when the agent has no model configured.
var ErrNoModel = errors.New("no model configured")

// Agent runs model turns for one agent definition.
type Agent struct{}

// New returns an Agent for def whose delegations go through p.
func New(def *agentdef.Definition, p *pool.Pool) (*Agent, error) { return &Agent{}, nil }

// Ask runs one turn on task, as part of chain (already entered by this
// agent), and returns the model's final answer.
func (a *Agent) Ask(ctx context.Context, task string, chain delegation.Chain) (string, error) {
	return "", ErrNoModel
}
