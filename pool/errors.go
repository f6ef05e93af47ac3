package pool

import (
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Kind says what a failed pool operation means for the caller, and so what it
// may do next.
type Kind int

const (
	// KindSessionExpired: the server no longer knew the session. The pool
	// re-initialized and retried once where that was safe; the error says
	// whether it did (Error.Retried).
	KindSessionExpired Kind = iota + 1
	// KindOutcomeUnknown: the request reached the server and the answer was
	// lost. The tool may have run; the pool never replays such a request.
	KindOutcomeUnknown
	// KindTransport: the request never reached the server (connection refused,
	// dial failure, pool closed). Nothing ran.
	KindTransport
	// KindRPC: the server answered with a JSON-RPC error. Code and Message are
	// the server's own.
	KindRPC
	// KindRefused: the request was refused whole, before it ran, for a
	// reason that sending it again does not change: the server refused it
	// as too large (HTTP 413, 414 or 431: ErrTooLarge; Status and Body say
	// what the server said), or the pool would not follow the server's
	// redirect to another origin (a *RedirectError, ErrCrossOriginRedirect),
	// or the pool stopped a list whose pages do not end or that holds more
	// than it keeps (a *ListError, ErrListTooLong). Nothing ran, the session
	// is kept, and the pool never sends the request again, keyed or not.
	KindRefused
)

func (k Kind) String() string {
	switch k {
	case KindSessionExpired:
		return "session_expired"
	case KindOutcomeUnknown:
		return "outcome_unknown"
	case KindTransport:
		return "transport"
	case KindRPC:
		return "rpc"
	case KindRefused:
		return "refused"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Sentinel errors, one per Kind, for errors.Is. Every *Error matches the
// sentinel of its Kind.
var (
	ErrSessionExpired = errors.New("mcp session expired")
	ErrOutcomeUnknown = errors.New("outcome unknown: the request may have run")
	ErrTransport      = errors.New("mcp transport failure")
	ErrRPC            = errors.New("mcp server error")
	ErrRefused        = errors.New("request refused before it ran")

	// ErrTooLarge is wrapped by the KindRefused error of a request the
	// server refused for its size (HTTP 413, 414 or 431) before it ran.
	ErrTooLarge = errors.New("the server refused the request as too large; nothing ran")

	// ErrProtocolVersion is wrapped by the error of a dial whose server
	// negotiated another protocol version than the Server's pin.
	ErrProtocolVersion = errors.New("protocol version not supported by the server")

	// ErrClosed is returned (wrapped in a KindTransport *Error) by operations
	// on a closed Pool.
	ErrClosed = errors.New("pool closed")
)

// An Error is a failed pool operation. It wraps the underlying cause, which
// for KindRPC is the server's *jsonrpc.Error.
type Error struct {
	Kind   Kind
	Server string // the Server's Name
	Method string // "tools/call", "tools/list", "initialize"
	Tool   string // for tools/call

	// Code and Message are the JSON-RPC error's, when there is one: the
	// server's own, also when go-sdk dropped it (an error body whose id is
	// null) and for Kinds other than KindRPC.
	Code    int64
	Message string

	// Status is the HTTP status of an error answer (400 and up) to the
	// request's own POST (or, for initialize, to the dial's last POST).
	// Body is that answer's body when it was not a JSON-RPC error, at most
	// 512 bytes; Authenticate its WWW-Authenticate header.
	Status       int
	Body         string
	Authenticate string

	// Retried reports that the pool re-initialized the session and sent the
	// request once more.
	Retried bool

	Err error
}

func (e *Error) Error() string {
	what := e.Method
	if e.Tool != "" {
		what += " " + e.Tool
	}
	s := fmt.Sprintf("%s %s on %q", e.Kind, what, e.Server)
	if e.Retried {
		s += " (after re-initializing the session)"
	}
	if e.Kind == KindRPC {
		s += fmt.Sprintf(": JSON-RPC error %d: %s", e.Code, e.Message)
	} else {
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
		if e.Message != "" {
			s += fmt.Sprintf(" (the server said: JSON-RPC error %d: %s)", e.Code, e.Message)
		}
	}
	if e.Status != 0 {
		s += fmt.Sprintf(" [HTTP %d", e.Status)
		if e.Body != "" {
			s += fmt.Sprintf(", body %q", e.Body)
		}
		if e.Authenticate != "" {
			s += ", WWW-Authenticate: " + e.Authenticate
		}
		s += "]"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrSessionExpired) and the like true for an *Error
// of that Kind.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrSessionExpired:
		return e.Kind == KindSessionExpired
	case ErrOutcomeUnknown:
		return e.Kind == KindOutcomeUnknown
	case ErrTransport:
		return e.Kind == KindTransport
	case ErrRPC:
		return e.Kind == KindRPC
	case ErrRefused:
		return e.Kind == KindRefused
	}
	return false
}

// CodeOutcomeUnknown is the JSON-RPC error code with which an intermediary
// (the studio) answers a request whose answer it cannot deliver and which
// may have run: it reached the server, and the server is gone (a call's SSE
// stream resumed after the agent that ran it was killed). The pool reports
// it as KindOutcomeUnknown, never KindRPC, and never replays it (see
// classify); a keyed call is sent again with its idempotency key.
//
// It is in JSON-RPC's implementation-defined server error range (-32000 to
// -32099) and clear of the codes go-sdk v1.8.0 gives a meaning of its own:
// -32001 to -32005 (jsonrpc2's unknown error, its legacy resource-not-found
// -32002, "client is closing" -32003, which ends the connection, "server is
// closing" -32004, "rejected by transport" -32005), -32020 to -32022
// (header mismatch, missing client capabilities, unsupported protocol
// version) and -32042 (URL elicitation required); and of -32000, which the
// TypeScript SDK uses for its own refusals and the studio for a 502, and of
// the idempotency protocol's -32071 to -32074.
const CodeOutcomeUnknown = -32060

// codeRejectedByTransport is the code of go-sdk's internal ErrRejected
// sentinel, a *jsonrpc.Error it wraps around transport failures that must
// not break the connection. It is never a server's answer.
const codeRejectedByTransport = -32005

// rpcError returns the first JSON-RPC error in err's tree that is not go-sdk's
// transport marker.
func rpcError(err error) (*jsonrpc.Error, bool) {
	if err == nil {
		return nil, false
	}
	if w, ok := err.(*jsonrpc.Error); ok && w.Code != codeRejectedByTransport {
		return w, true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return rpcError(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if w, ok := rpcError(e); ok {
				return w, true
			}
		}
	}
	return nil, false
}
