package pool

import (
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// evidence is what the pool knows about one failed request: the facts its
// probe recorded about the request's own HTTP POST.
type evidence struct {
	overHTTP    bool // Streamable HTTP; for stdio there is no per-request evidence
	posts       int  // POSTs the request issued
	status      int  // HTTP status of its first POST; 0 when none was answered
	withSession bool // that POST carried Mcp-Session-Id
	notWritten  bool // that POST failed before anything reached the server
}

// Invalidation and close reasons, as reported in Stats.
const (
	reasonExpired  = "expired"   // the server answered 404 to the session id
	reasonDied     = "died"      // the session ended on its own (GET stream, keepalive, process exit)
	reasonRejected = "rejected"  // an intermediary refused the session (400 with a JSON-RPC error)
	reasonIdle     = "idle"      // idle longer than IdleTimeout
	reasonClosed   = "closed"    // Pool.Close
	reasonBroken   = "broken"    // the session failed in a way that leaves it unusable
	reasonDialGone = "dial_gone" // the session died between dial and first use
)

// verdict is what the pool does with a failed request.
type verdict struct {
	kind       Kind
	rpc        *jsonrpc.Error // the server's own error, for KindRPC
	retry      bool           // provably not executed: safe to send again on a new session
	invalidate string         // non-empty: drop the session, for this reason
}

// classify decides, from the error and the request's own evidence, what a
// failure means. It retries only when the server provably did not run the
// request, in the spirit of database/sql's driver.ErrBadConn: "should NOT be
// returned if there's a possibility that the database server might have
// performed the operation". Everything else keeps its meaning and is returned.
func classify(err error, ev evidence, ctxErr error) verdict {
	sessionDead := errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing)

	switch {
	case ctxErr != nil:
		// The caller gave up. If the request went out, the server may be
		// running it (go-sdk sent notifications/cancelled).
		if ev.overHTTP && ev.posts == 0 || ev.notWritten {
			return verdict{kind: KindTransport}
		}
		return verdict{kind: KindOutcomeUnknown}

	case ev.overHTTP && ev.posts > 0 && ev.status == http.StatusNotFound && ev.withSession:
		// The server looks the session up before it reads the body, so a
		// 404 to a request carrying a session id means the request never ran,
		// whatever the body says (some servers send a JSON-RPC error there).
		return verdict{kind: KindSessionExpired, retry: true, invalidate: reasonExpired}

	case ev.overHTTP && ev.posts == 0 && sessionDead:
		// The session was already dead (another request, or the GET stream,
		// saw the 404) and go-sdk failed this request locally: it never left
		// the process.
		return verdict{kind: KindSessionExpired, retry: true, invalidate: reasonDied}

	case ev.overHTTP && ev.notWritten:
		// Connection refused: nothing reached the server. The session may
		// be fine once the server is back (or it will answer 404 then), so it
		// is kept; retrying now would only fail again.
		return verdict{kind: KindTransport}
	}

	// go-sdk marks transport failures with its ErrRejected sentinel, which is
	// itself a *jsonrpc.Error (-32005). A JSON-RPC error is the server's only
	// if the server answered this request.
	if w, ok := rpcError(err); ok && (!ev.overHTTP || ev.status != 0) {
		if ev.overHTTP && ev.status == http.StatusBadRequest && ev.withSession && w.Code == jsonrpc.CodeInvalidRequest {
			// An intermediary refusing the session outright ("Session has
			// been terminated"). The session is of no further use; whether
			// this request reached a server is not provable, so it is not
			// replayed.
			return verdict{kind: KindSessionExpired, rpc: w, invalidate: reasonRejected}
		}
		return verdict{kind: KindRPC, rpc: w}
	}
	if sessionDead {
		return verdict{kind: KindOutcomeUnknown, invalidate: reasonBroken}
	}
	// The request may have reached the server: the answer was lost
	// (connection reset, stream ended, a 5xx). Never replayed.
	return verdict{kind: KindOutcomeUnknown}
}
