package delegation

// Everything the model learns about a delegation is the text of one tool
// message. A failure is never a turn-killing error: it is rendered here as a
// tool result that names the agent and the tool, carries the JSON-RPC code
// and message when the sibling sent one, and says what the pool did about it,
// so that the model can decide whether to retry, try something else, or
// answer with what it has.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/pool"
)

// ResultText renders a tool result as the text of a tool message.
func ResultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s]", c.URI))
		case *mcp.EmbeddedResource:
			if r := c.Resource; r != nil && r.Text != "" {
				parts = append(parts, r.Text)
			} else if r != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", r.URI))
			}
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if strings.TrimSpace(text) == "" {
		// Chat APIs drop an empty tool message's content; say so instead.
		text = "(the tool returned no content)"
	}
	return text
}

// toolErrorText renders a result the tool itself marked as an error.
func toolErrorText(agent, tool string, res *mcp.CallToolResult) string {
	return fmt.Sprintf("Error: agent %q, tool %q reported an error: %s", agent, tool, ResultText(res))
}

// failure is what is known about a call that produced no result.
type failure struct {
	outcome   Outcome
	code      int64
	message   string
	retried   bool
	text      string
	hasRPCErr bool
}

// describe classifies err from calling tool on agent and renders it for the
// model.
func describe(agent, tool string, err error, canceled bool) failure {
	f := failure{outcome: OutcomeError}
	var pe *pool.Error
	isPool := errors.As(err, &pe)
	if isPool {
		// The pool has already decided whether a JSON-RPC error in the
		// chain is the server's answer: go-sdk wraps transport failures in
		// its own *jsonrpc.Error (-32005 "rejected by transport"), which
		// the pool leaves out of Code and Message.
		f.outcome = Outcome(pe.Kind.String())
		f.retried = pe.Retried
		if pe.Code != 0 || pe.Message != "" {
			f.code, f.message, f.hasRPCErr = pe.Code, pe.Message, true
		}
	} else if we := (*jsonrpc.Error)(nil); errors.As(err, &we) {
		f.code, f.message, f.hasRPCErr = we.Code, we.Message, true
	}
	var timedOut *CallTimeoutError
	errors.As(err, &timedOut)
	var overCap *pool.ResultTooLargeError
	errors.As(err, &overCap)
	interrupted := errors.Is(err, pool.ErrInterrupted)
	if interrupted {
		f.outcome = OutcomeInterrupted
	}
	if canceled {
		f.outcome = OutcomeCanceled
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Error: the call to agent %q, tool %q failed", agent, tool)
	if f.hasRPCErr {
		fmt.Fprintf(&b, ": JSON-RPC error %d: %s", f.code, f.message)
	}
	b.WriteString(".")
	switch {
	case canceled:
		b.WriteString(" The turn was cancelled; the agent was told to stop.")
	case overCap != nil:
		// Nothing of the answer is kept, so there is no cause to quote
		// beyond its size.
		if overCap.Size >= 0 {
			fmt.Fprintf(&b, " Result too large: %d bytes, %d bytes over the cap of %d; nothing of it kept.", overCap.Size, overCap.Size-overCap.Limit, overCap.Limit)
		} else {
			fmt.Fprintf(&b, " Result too large: over the cap of %d bytes; nothing of it kept.", overCap.Limit)
		}
		b.WriteString(" The tool may have run; it was not retried: asked again it would answer the same. Ask for less (a narrower query, a page) if the tool can.")
	case timedOut != nil:
		// The pool saw its caller give up; the model needs to know it was
		// the deadline, and that the tool may have run in part.
		fmt.Fprintf(&b, " Timed out after %v (%s): the agent was told to stop, and the tool may or may not have taken effect; it was not retried. Check before repeating an action that must not happen twice.", timedOut.After, timedOut.Source)
	case interrupted:
		b.WriteString(" Interrupted: the agent's process died while it ran this call, so it may or may not have taken effect; it was not run again. Check before repeating an action that must not happen twice.")
	case isPool && pe.Kind == pool.KindOutcomeUnknown:
		b.WriteString(" Outcome unknown: the tool may have run; not retried. Check before repeating an action that must not happen twice.")
	case isPool && pe.Kind == pool.KindSessionExpired && pe.Retried:
		b.WriteString(" The agent's session had expired; the pool recovered on a new session and retried once, and the retry failed too.")
	case isPool && pe.Kind == pool.KindSessionExpired:
		b.WriteString(" The agent's session had expired and the call could not be retried safely.")
	case isPool && pe.Kind == pool.KindTransport:
		b.WriteString(" The agent could not be reached; nothing ran.")
	case isPool && pe.Kind == pool.KindRefused:
		b.WriteString(" Refused before it ran (too large for the server, a redirect to another origin, or a list without end): nothing ran, and sending it again unchanged would be refused again.")
	case f.retried:
		b.WriteString(" The pool recovered on a new session and retried once.")
	}
	if !f.hasRPCErr && !canceled && timedOut == nil && overCap == nil {
		// Without a JSON-RPC error the cause is all the model has to go on.
		if cause := causeText(err, pe); cause != "" {
			fmt.Fprintf(&b, " Cause: %s.", cause)
		}
	}
	f.text = b.String()
	return f
}

// causeText is the underlying error's text, without the pool's own prefix
// (which repeats the agent and tool).
func causeText(err error, pe *pool.Error) string {
	if pe != nil && pe.Err != nil {
		err = pe.Err
	}
	return strings.TrimSuffix(err.Error(), ".")
}
