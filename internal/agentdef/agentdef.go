// Package agentdef loads agent definitions: a folder agents/<name>/ holding
// agent.json and tools/mcp.json.
package agentdef

import "github.com/switchboard-run/switchboard/internal/mcpconfig"

// Definition is one agent.
type Definition struct {
	Dir          string // the agent's folder
	Name         string
	Description  string
	Instructions string
	Model        Model
	// Tools names the native toolsets (Go code registered in package agents)
	// this agent offers, e.g. ["packrat"].
	Tools []string
	// MaxSteps bounds the model turn loop (default 10).
	MaxSteps int
	// MaxDepth bounds the delegation chain this agent accepts (default
	// delegation.DefaultMaxDepth).
	MaxDepth int
	// AllowStdio permits starting stdio servers declared in tools/mcp.json.
	AllowStdio bool
	// MCP is tools/mcp.json; an agent without one has an empty Config.
	MCP *mcpconfig.Config
}

// Model says which model drives the agent's turn.
type Model struct {
	// BaseURL of an OpenAI-compatible API; empty means the builtin model.
	BaseURL string
	// Name of the model, e.g. "gpt-4o-mini", "llama3.1", or "builtin".
	Name string
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string
}

// Load reads the agent in dir.
func Load(dir string) (*Definition, error) { panic("not implemented") }

// LoadAll loads every agents/<name>/ under agentsDir that has an agent.json,
// sorted by name.
func LoadAll(agentsDir string) ([]*Definition, error) { panic("not implemented") }
