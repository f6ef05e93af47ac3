package mcpconfig

import (
	"strconv"
	"strings"

	"github.com/switchboard-run/switchboard/internal/logging"
)

// A ConfigError is a problem with one configuration file: an mcp.json, or
// an agent's agent.json (package runtime/agentdef returns this same type,
// so that a bad agent folder is one type of error whichever file is at
// fault). It names the file and, when they apply, the server, the field
// and the value at fault, so that a user can go straight to the line to
// fix. Callers that need the parts use errors.As; the rendered form is
//
//	tools/mcp.json: server "packrat": field "url": undefined variable ${STUDIO} (no default)
//	agents/packrat/agent.json: field "max_steps": want an integer from 1 to 100, got 0
//
// and, for a JSON syntax error, "tools/mcp.json:3:5: invalid JSON: ...".
type ConfigError struct {
	File string
	// Line and Col locate a JSON syntax error (1-based); both are 0 for
	// every other error, which Server and Field locate instead.
	Line, Col int
	// Server is the server's name; empty when the error is not inside one
	// (always, for an agent.json).
	Server string
	// Field is the field at fault, e.g. "url", "args[2]" or
	// "headers.Authorization"; empty when the error concerns a whole server
	// or the whole file.
	Field string
	// Value is the offending value as written in the file: the string for
	// a string, the JSON text otherwise. It is taken before variable
	// expansion, so it never holds a secret from the environment. It may be
	// empty.
	Value string
	// Msg says what is wrong; it quotes the value when that helps.
	Msg string
	// Err is the underlying cause, if any.
	Err error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.File == "" {
		b.WriteString("mcp.json")
	}
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Col))
	}
	if e.Server != "" {
		b.WriteString(": server " + strconv.Quote(e.Server))
	}
	if e.Field != "" {
		b.WriteString(": field " + strconv.Quote(e.Field))
	}
	b.WriteString(": " + e.Msg)
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	// A message may quote a value after expansion (an invalid URL), which
	// can hold a secret from the environment; the rendering goes wherever
	// the error goes (stderr, an agent's last_error, the studio's API), so
	// it gets the logs' redaction.
	return logging.Scrub(b.String())
}

// Unwrap returns the underlying cause, so that errors.Is(err,
// fs.ErrNotExist) works on an error from [Load].
func (e *ConfigError) Unwrap() error { return e.Err }
