package agentdef

// Every problem with an agent's files (agent.json as well as
// tools/mcp.json) is a [*mcpconfig.ConfigError], one type for both, so
// that a caller handles a bad agent folder with one errors.As. The type
// lives in mcpconfig because this package loads mcp.json through it and
// mcpconfig cannot import this one. For an agent.json its Server is
// always empty and Field names the agent.json field ("max_steps",
// "model.base_url", "tools[1]"):
//
//	agents/packrat/agent.json: field "max_steps": want an integer from 1 to 100, got 0
//
// A JSON syntax error is rendered as "agents/packrat/agent.json:3:5:
// invalid JSON: ...".

import (
	"errors"
	"fmt"
)

// ErrStdioNotAllowed is matched (errors.Is) by the error of
// [Definition.CheckServer] for a stdio server of an agent without
// allow_stdio.
var ErrStdioNotAllowed = errors.New("stdio servers not allowed")

type stdioError struct{ agent, server string }

func (e *stdioError) Error() string {
	return fmt.Sprintf("agent %q does not allow stdio servers (set allow_stdio in agent.json): server %q", e.agent, e.server)
}

func (e *stdioError) Is(target error) bool { return target == ErrStdioNotAllowed }
