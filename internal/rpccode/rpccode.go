// Package rpccode is the one list of the JSON-RPC error codes Switchboard
// answers or gives a meaning to. Every package that writes or reads one of
// them names it from here, so that a code means one thing across the tree:
// the agents, the studio's proxy and routes, the mcphttp middleware, the
// idempotency ledger, the pool and `switchboard client`'s answers.
//
// Codes of our own are in JSON-RPC 2.0's implementation-defined server-error
// range (-32000 to -32099, §5.1) and clear of the codes go-sdk v1.8.0 gives a
// meaning of its own: -32001 to -32005 (jsonrpc2's unknown error, the legacy
// resource-not-found -32002, "client is closing" -32003, which ends the
// connection, "server is closing" -32004, its "rejected by transport"
// marker -32005), -32020 to -32022 (header mismatch, missing client
// capabilities, unsupported protocol version: mcp.CodeHeaderMismatch and the
// next two) and -32042 (mcp.CodeURLElicitationRequired). -32000 is what
// other software answers its own refusals with (the TypeScript SDK's
// "Bad Request: No valid session ID provided"), so it says nothing a client
// can act on: a refusal of ours that the caller must tell apart has a code
// of its own.
//
// The table in docs/ARCHITECTURE.md ("Error codes") says them once.
package rpccode

// JSON-RPC 2.0's own (§5.1).
const (
	ParseError     = -32700 // the line or body is not JSON
	InvalidRequest = -32600 // JSON, but not a valid request
	MethodNotFound = -32601
	InvalidParams  = -32602
	InternalError  = -32603
)

// RejectedByTransport is the code of go-sdk v1.8.0's internal ErrRejected,
// a *jsonrpc.Error it wraps around transport failures that must not break
// the connection. It is never a server's answer.
const RejectedByTransport = -32005

// ServerError is the generic implementation-defined server error: a
// refusal the message explains (the studio's "no such agent", "agent
// restarting" with 503, a request over a budget with 503), which says
// nothing more to a program than its HTTP status does.
const ServerError = -32000

// The pool's kinds, as `switchboard client` answers them and as the studio
// says them on the wire. A caller branches on them (or on the answer's
// "kind").
const (
	// OutcomeUnknown: the request reached the server and its answer was
	// lost; it may have run. The studio answers it, with the request's own
	// id, for a call cut by its agent's death (a resumed stream of the dead
	// process, or the forward of a sessionless call); the pool reports it as
	// outcome_unknown and never replays it (a keyed call is sent again with
	// its key).
	OutcomeUnknown = -32060
	// Refused: refused whole before it ran, for a reason sending it again
	// does not change (too large, a redirect to another origin, a list
	// without end). The ledger's refusals of a key are kind refused too,
	// under their own codes (IdempotencyConflict, KeyExpired).
	Refused = -32061
	// SessionExpired: the server no longer knew the session, and the
	// pool's one re-initialization did not save the request.
	SessionExpired = -32062
	// Transport: the request never reached the server (refused
	// connection, failed dial, not sent); nothing ran.
	Transport = -32063
)

// ShuttingDown is an agent's refusal or cut while it drains. With HTTP 503
// and Retry-After (a new initialize or tools/call) nothing ran: the request
// may be sent to another replica, or again once the agent is back. In a 200
// answer to a call it had admitted, the call ran until the shutdown grace
// ended and was cancelled: whether it took effect is unknown.
const ShuttingDown = -32065

// The idempotency protocol's (docs/IDEMPOTENCY.md), answered by the ledger.
const (
	// IdempotencyConflict: the key was used before for a different request
	// (tool, arguments or caller). Nothing ran, and the same key is
	// answered the same: the pool reports it as refused
	// (pool.ErrIdempotencyConflict), never resends it, and `switchboard
	// client` answers kind "refused" with this code.
	IdempotencyConflict = -32071
	// StillRunning: the first call with this key is still running; ask
	// again later. Nothing new ran. error.data.retryAfterMs says when.
	StillRunning = -32072
	// Interrupted: the first call with this key was cut off by a crash of
	// the server process while it ran; whether its effect happened is not
	// known. Nothing new ran. This is final for the key: the pool reports
	// it as outcome_unknown (pool.ErrInterrupted), never resends it.
	Interrupted = -32073
	// KeyExpired: the key is older than the server keeps records for, so
	// the server can no longer tell whether an earlier send with it ran.
	// This one ran nothing, and the same key is answered the same: the
	// pool reports it as refused (pool.ErrKeyExpired), never resends it
	// (a new key is the caller's decision), and `switchboard client`
	// answers kind "refused" with this code.
	KeyExpired = -32074
)
