package agentdef

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// An Error is a problem with an agent.json. It names the file and, when it
// concerns one, the field and the value at fault:
//
//	agents/packrat/agent.json: field "max_steps": want an integer from 1 to 100, got 0
//
// A JSON syntax error is rendered as "agents/packrat/agent.json:3:5: invalid
// JSON: ...". Problems with tools/mcp.json are [*mcpconfig.ConfigError]s.
type Error struct {
	File string
	// Line and Col locate a JSON syntax error (1-based); both are 0 for
	// every other error, which Field locates instead.
	Line, Col int
	// Field is the field at fault, e.g. "name", "model.base_url" or
	// "tools[1]"; empty when the error concerns the whole file.
	Field string
	// Value is the offending value as written: the string for a string,
	// the JSON text otherwise. It may be empty.
	Value string
	// Msg says what is wrong; it quotes the value when that helps.
	Msg string
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Col))
	}
	if e.Field != "" {
		b.WriteString(": field " + strconv.Quote(e.Field))
	}
	b.WriteString(": " + e.Msg)
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrStdioNotAllowed is matched (errors.Is) by the error of
// [Definition.CheckServer] for a stdio server of an agent without
// allow_stdio.
var ErrStdioNotAllowed = errors.New("stdio servers not allowed")

type stdioError struct{ agent, server string }

func (e *stdioError) Error() string {
	return fmt.Sprintf("agent %q does not allow stdio servers (set allow_stdio in agent.json): server %q", e.agent, e.server)
}

func (e *stdioError) Is(target error) bool { return target == ErrStdioNotAllowed }
