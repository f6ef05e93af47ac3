package pool

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchboard-run/switchboard/internal/rpccode"
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
	// than it keeps (a *ListError, ErrListTooLong), or the server's
	// idempotency ledger refused the call's key (ErrIdempotencyConflict,
	// -32071: the key was used for another call; ErrKeyExpired, -32074: the
	// key is older than the server keeps records for; Code is the
	// server's). Nothing ran, the session is kept, and the pool never sends
	// the request again, keyed or not.
	//
	// The ledger's two refusals are KindRefused rather than KindRPC because
	// what a caller does next is what it does for every refusal: not send
	// it again as it is. The ledger answers them before the tool is
	// looked up, so this send ran nothing, and the
	// same key gets the same answer. A KeyExpired says one thing more: an
	// earlier send with that key, if there was one, may have run, and the
	// server can no longer tell; running the call again needs a new key,
	// which is the caller's decision, never the pool's.
	KindRefused
	// KindInterrupted: a keyed call (docs/IDEMPOTENCY.md) whose first run the
	// server's death cut off: the server's ledger says so (JSON-RPC
	// CodeInterrupted, -32073), for good. Whether it took effect is
	// unknown, as for KindOutcomeUnknown, whose sentinel it matches too;
	// unlike it, sending the key again is answered the same, so the pool
	// never does. It wraps ErrInterrupted; Code is the server's.
	KindInterrupted
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
	case KindInterrupted:
		return "interrupted"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Sentinel errors, one per Kind, for errors.Is. Every *Error matches the
// sentinel of its Kind (KindInterrupted's is ErrInterrupted, in
// idempotency.go; it matches ErrOutcomeUnknown as well).
var (
	ErrSessionExpired = errors.New("mcp session expired")
	ErrOutcomeUnknown = errors.New("outcome unknown: the request may have run")
	ErrTransport      = errors.New("mcp transport failure")
	ErrRPC            = errors.New("mcp server error")
	ErrRefused        = errors.New("request refused before it ran")

	// ErrTooLarge is wrapped by the KindRefused error of a request the
	// server refused for its size (HTTP 413, 414 or 431) before it ran.
	ErrTooLarge = errors.New("the server refused the request as too large; nothing ran")

	// ErrResultTooLarge is wrapped by the error of a request whose answer
	// was larger than its server's MaxResultBytes (a *ResultTooLargeError):
	// the pool stopped reading it and kept nothing of it. The server may
	// have run the request (the error is KindOutcomeUnknown), and would
	// answer the same again, so it is never resent.
	ErrResultTooLarge = errors.New("result too large")

	// ErrProtocolVersion is wrapped by the error of a dial whose server
	// negotiated another protocol version than the Server's pin.
	ErrProtocolVersion = errors.New("protocol version not supported by the server")

	// ErrShuttingDown is wrapped by the KindTransport error of a request a
	// draining server refused (HTTP 503, JSON-RPC CodeShuttingDown) on the
	// pool's one retry as well: nothing ran, and it may be sent again once
	// the server (or another replica) takes work.
	ErrShuttingDown = errors.New("the server is shutting down and took no new work; nothing ran")

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
			// The cause's text may quote the server's message again
			// (go-sdk's does), unbounded.
			s += ": " + boundMessage(e.Err.Error())
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
		// An interrupted call's outcome is unknown too: a caller that
		// checks what may have run must see it.
		return e.Kind == KindOutcomeUnknown || e.Kind == KindInterrupted
	case ErrInterrupted:
		return e.Kind == KindInterrupted
	case ErrTransport:
		return e.Kind == KindTransport
	case ErrRPC:
		return e.Kind == KindRPC
	case ErrRefused:
		return e.Kind == KindRefused
	}
	return false
}

// maxMessage bounds what of a server's error message an *Error keeps
// (Message) and quotes (Error). A server's validation error may quote the
// argument it refused: a 4 MB argument came back in a 4,000,352-byte
// error, through every hop and into a model's context. The reason is in
// the first lines.
const maxMessage = 2048

// boundMessage is s cut to maxMessage bytes at a UTF-8 boundary, saying
// how much was left out.
func boundMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	kept := strings.ToValidUTF8(s[:maxMessage], "")
	return fmt.Sprintf("%s… (%d more bytes left out)", kept, len(s)-len(kept))
}

// CodeOutcomeUnknown is the JSON-RPC error code with which an intermediary
// (the studio) answers a request whose answer it cannot deliver and which
// may have run: it reached the server, and the server is gone (a call's SSE
// stream resumed after the agent that ran it was killed, a sessionless
// call whose agent died under it). The pool reports it as
// KindOutcomeUnknown, never KindRPC, and never replays it (see the package
// doc: a request is retried only when it provably did not run); a
// keyed call is sent again with its idempotency key. `switchboard client`
// answers every outcome_unknown with it. The tree's codes are listed once,
// in docs/ARCHITECTURE.md ("Error codes").
const CodeOutcomeUnknown = rpccode.OutcomeUnknown

// CodeShuttingDown is the code of a draining agent's refusal (with HTTP 503:
// nothing ran, and the pool sends it again) or cut (in a 200
// answer: the call ran until the agent's shutdown grace ended; outcome
// unknown).
const CodeShuttingDown = rpccode.ShuttingDown

// codeRejectedByTransport is the code of go-sdk's internal ErrRejected
// sentinel, a *jsonrpc.Error it wraps around transport failures that must
// not break the connection. It is never a server's answer.
const codeRejectedByTransport = rpccode.RejectedByTransport

// refusedByLedger makes the KindRPC error of a keyed call that the
// server's idempotency ledger refused (finish, in idempotency.go, has
// wrapped ErrIdempotencyConflict or ErrKeyExpired around it) KindRefused:
// nothing ran, and sending it again is answered the same (see KindRefused).
// The server's Code and Message are kept.
func refusedByLedger(err error) error {
	if err == nil {
		return nil // spares the success path errors.As's escaping target
	}
	var pe *Error
	if errors.As(err, &pe) && pe.Kind == KindRPC &&
		(errors.Is(pe.Err, ErrIdempotencyConflict) || errors.Is(pe.Err, ErrKeyExpired)) {
		pe.Kind = KindRefused
	}
	return err
}

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

// A ResultTooLargeError is the cause of a request whose answer passed its
// server's cap (Server.MaxResultBytes). It matches ErrResultTooLarge.
type ResultTooLargeError struct {
	Server string
	Limit  int64 // the cap, in bytes
	// Size is the answer's length as the server announced it
	// (Content-Length), refused before any of it was read; -1 when it was
	// not announced (a stream, chunked), and the pool read Limit bytes
	// and one more before it stopped.
	Size int64
}

func (e *ResultTooLargeError) Error() string {
	if e.Size >= 0 {
		return fmt.Sprintf("result too large: %d bytes, %d bytes over the cap of %d (maxResultBytes of server %q); nothing of it kept", e.Size, e.Size-e.Limit, e.Limit, e.Server)
	}
	return fmt.Sprintf("result too large: over the cap of %d bytes (maxResultBytes of server %q), reading stopped there; nothing of it kept", e.Limit, e.Server)
}

func (e *ResultTooLargeError) Unwrap() error { return ErrResultTooLarge }
