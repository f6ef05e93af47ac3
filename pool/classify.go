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
	notWritten  bool // that POST failed before anything reached the server, or was never handed on (its context had ended)

	// What the server said in an error answer (status >= 400) to that POST.
	rpc       *jsonrpc.Error // a JSON-RPC error response
	rpcIDNull bool           // ... whose id was null or absent

	overCap *ResultTooLargeError // the answer to that POST passed the server's MaxResultBytes
}

// undispatched reports whether the server's answer to the request's own POST
// proves that it never dispatched the request (see classify).
func (ev evidence) undispatched() bool {
	if ev.drainRefusal() {
		return true
	}
	if !ev.overHTTP || ev.posts <= 0 || ev.status < 400 || ev.status >= 500 {
		return false
	}
	return tooLarge(ev.status) || ev.rpc != nil && ev.rpcIDNull
}

// drainRefusal reports whether the request's own POST was refused by a
// draining agent: 503 with CodeShuttingDown (internal/agentserver's gate,
// which answers before go-sdk sees the request, with the request's id).
// Nothing ran. The same code in a 200 answer is a call the agent admitted
// and cut at the end of its shutdown grace: that one may have taken effect.
func (ev evidence) drainRefusal() bool {
	return ev.overHTTP && ev.posts > 0 && ev.status == http.StatusServiceUnavailable &&
		ev.rpc != nil && ev.rpc.Code == CodeShuttingDown
}

// tooLarge reports whether status refuses a request whole for its size:
// 413 Content Too Large (RFC 9110 §15.5.14), 414 URI Too Long (§15.5.15),
// 431 Request Header Fields Too Large (RFC 6585 §5). A server produces them
// while reading the request, before it routes it or parses its body
// (net/http answers 431 itself, before any handler; http.MaxBytesReader
// makes the 413), so the request did not run; and the same request is
// refused again, so it is never sent again. Other 4xx answers that may come
// before dispatch are left out: 400, 411 and 415 say nothing about size and
// are judged by their body (a null-id JSON-RPC error proves the request
// was not dispatched, below); 429 says "later", and a later send may pass.
func tooLarge(status int) bool {
	switch status {
	case http.StatusRequestEntityTooLarge, http.StatusRequestURITooLong, http.StatusRequestHeaderFieldsTooLarge:
		return true
	}
	return false
}

// Invalidation and close reasons, as reported in Stats.
const (
	reasonExpired  = "expired"  // the server answered 404 to the session id
	reasonDied     = "died"     // the session ended on its own (GET stream, keepalive, process exit)
	reasonRejected = "rejected" // an intermediary refused the session (400 with a JSON-RPC error)
	reasonIdle     = "idle"     // idle longer than IdleTimeout
	reasonClosed   = "closed"   // Pool.Close
	reasonBroken   = "broken"   // the session failed in a way that leaves it unusable
	reasonEra      = "era"      // the server refused the protocol version the session speaks (-32022)
	reasonDraining = "draining" // the server is shutting down and refused the request (503, -32065)
)

// verdict is what the pool does with a failed request.
type verdict struct {
	kind       Kind
	rpc        *jsonrpc.Error // the server's own error, for KindRPC
	retry      bool           // provably not executed: safe to send again on a new session
	invalidate string         // non-empty: drop the session, for this reason
	cause      error          // a sentinel the error must match (errors.Is), when the cause alone may not
}

// classify decides, from the error and the request's own evidence, what a
// failure means. It retries only when the server provably did not run the
// request, in the spirit of database/sql's driver.ErrBadConn: "should NOT be
// returned if there's a possibility that the database server might have
// performed the operation". Everything else keeps its meaning and is returned.
//
// The table, first matching row wins ("own POST" is the request's first
// POST, the one the probe saw; "session" means it carried Mcp-Session-Id):
//
//	caller gave up, own POST never handed on / answered undispatched   transport
//	caller gave up otherwise                                         outcome_unknown
//	own POST's answer past MaxResultBytes, not kept                  outcome_unknown (ErrResultTooLarge), drop session
//	a list the pool stopped (list.go: cursor loop, too many pages)   refused
//	redirect to another origin, not followed (origin.go)             refused; a 303: outcome_unknown
//	own POST with session answered 404                               session_expired, retry
//	own POST with session answered 400, JSON-RPC error, null id      session_expired, retry
//	own POST answered 413, 414 or 431 (too large)                    refused (ErrTooLarge)
//	own POST answered 503 with CodeShuttingDown (a draining agent)   transport (ErrShuttingDown), retry on a new dial
//	no POST, session already dead (go-sdk failed it locally)         session_expired, retry
//	no POST otherwise (go-sdk failed it locally)                      transport, retry
//	own POST refused (dial failed) or never handed on                transport
//	5xx with a JSON-RPC error, null id (an intermediary's)           outcome_unknown, message kept
//	JSON-RPC error from a server that answered, 400 with session     session_expired (not replayed)
//	400 with -32022 (version not supported), no session             rpc, retry on a new dial (era)
//	JSON-RPC error CodeOutcomeUnknown (an intermediary's, -32060)    outcome_unknown, message kept
//	JSON-RPC error CodeShuttingDown not in a 503 (a call cut)         outcome_unknown, message kept
//	JSON-RPC error from a server that answered                       rpc
//	session dead                                                     outcome_unknown, drop session
//	anything else                                                    outcome_unknown
//
// What a 4xx answer to a POST proves. A server dispatches a JSON-RPC request
// only after it has read the body and parsed the message, and from then on
// it knows the request's id: every answer it produces after dispatch,
// success or error, carries that id (JSON-RPC 2.0 §5: the id "MUST be Null"
// only "if there was an error in detecting the id in the Request object").
// So a JSON-RPC error with a null (or absent) id was produced before the
// request was dispatched: by a session lookup that failed (the TypeScript
// SDK's example servers and server-everything answer an unknown session with
// 400 {"code":-32000,"message":"Bad Request: No valid session ID
// provided","id":null}), a parse failure, or an intermediary. A 413 was
// produced before the body was read in full, so before it was parsed (414
// and 431 before the body was read at all, see tooLarge). Neither
// request ran. A 400 of that kind to a request carrying a session id is the
// session refused, as 404 is for spec-compliant servers: the session is
// dropped and the request sent once more on a new one. If the refusal was
// about something else the retry gets the same answer and it is returned;
// the cost is one dial, never a second execution. Other 4xx answers with a
// null id (401, 403, 415) prove the request did not run but say nothing
// about the session; they are returned as the server's error. A 413 (414,
// 431) is returned as refused, with ErrTooLarge ("too large, nothing
// ran"), and never sent again: the same request would only be refused
// again, and an 8 MB call resent on new sessions uploaded 32 MB for one
// refusal. It says nothing against the session either. A 4xx without a
// JSON-RPC body proves nothing about dispatch and is treated as any other
// answer.
//
// A -32022 (UnsupportedProtocolVersion, SEP-2575) to a request of the
// sessionless era says the server cannot process a request of that
// version: it did not run it. The pool sends such a request only in an
// era it learned from the server, so the server behind the URL changed
// (rolled back to a release of the session era, or a replica of one behind
// a balancer). The session is dropped and the request sent once more on a
// new dial, whose server/discover finds the era again (go-sdk falls back
// to initialize). A pinned 2026-07-28 then fails that dial with
// ErrProtocolVersion. A session-era request with a session id is left to
// the rows above: its session was made by the server that answers.
//
// A 401, or a 403 with error="insufficient_scope", that a token can answer
// never reaches this table: the OAuth RoundTripper (oauth.go) sits below
// the recorder, gets the token, and sends the same request once more
// (maxAuthRetries). That resend is provably safe for the reason above,
// stronger still: a bearer-token check runs before the message is read as
// MCP at all (MCP authorization, "Token Handling": servers "MUST validate
// access tokens before processing the request"), so the refused request did
// not run whatever its body. What the recorder sees, and classify judges,
// is the answer to the request as finally sent.
func classify(err error, ev evidence, ctxErr error) verdict {
	sessionDead := errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing)
	undispatched := ev.undispatched()
	var redirect *RedirectError

	switch {
	case ctxErr != nil:
		// The caller gave up. If the request went out, the server may be
		// running it (go-sdk sent notifications/cancelled).
		if ev.overHTTP && ev.posts == 0 || ev.notWritten || undispatched {
			return verdict{kind: KindTransport, rpc: ev.rpc}
		}
		return verdict{kind: KindOutcomeUnknown}

	case ev.overCap != nil:
		// The server answered, and the pool stopped reading the answer at
		// the cap (evidence.go, answerBody). The request may have run; sent
		// again it would be answered the same. A JSON body cut short fails
		// go-sdk's session from a goroutine of its own, perhaps after the
		// next request went out on it, so the session is dropped now.
		return verdict{kind: KindOutcomeUnknown, cause: ev.overCap, invalidate: reasonBroken}

	case errors.Is(err, ErrListTooLong):
		// The pool stopped a list the server would not end, or that holds
		// more than it keeps (list.go). Every page was answered; listing
		// again gets the same answer. The session is the server's, and fine.
		return verdict{kind: KindRefused}

	case errors.As(err, &redirect):
		// The pool refused to follow the server's redirect to another
		// origin, so nothing was sent there. A 307 or 308 asks for the same
		// request at another URI, a 301 or 302 says the resource moved: the
		// server did not process it here. Sending it again would be
		// redirected again; the session is left alone. A 303 is the answer
		// to a request that was processed ("see other" for its result), so
		// what ran is unknown.
		if redirect.Status == http.StatusSeeOther {
			return verdict{kind: KindOutcomeUnknown}
		}
		return verdict{kind: KindRefused}

	case ev.overHTTP && ev.posts > 0 && ev.status == http.StatusNotFound && ev.withSession:
		// The server looks the session up before it reads the body, so a
		// 404 to a request carrying a session id means the request never ran,
		// whatever the body says (some servers send a JSON-RPC error there).
		return verdict{kind: KindSessionExpired, retry: true, invalidate: reasonExpired, rpc: ev.rpc}

	case undispatched && ev.status == http.StatusBadRequest && ev.withSession:
		return verdict{kind: KindSessionExpired, retry: true, invalidate: reasonRejected, rpc: ev.rpc}

	case ev.drainRefusal():
		// A draining agent's gate refused it before go-sdk saw it: nothing
		// ran, and the agent takes no new work. The session (or the
		// sessionless entry) goes with the agent: the one retry dials
		// anew, which behind a balancer reaches a replica that is not
		// draining (the balancer's /readyz check takes this one out), and
		// in front of one agent the new process once it is back. Refused
		// again (no other replica yet), it is returned as transport, and a
		// keyed call is sent again with its key after a backoff
		// (idempotency.go) until the agent is back.
		//
		// A sessionless entry is kept: its next request goes to the
		// balancer afresh anyway, and a new dial would cost a request
		// (server/discover) that a strict round robin sends to the other
		// replica, so that the retry meets the draining one again.
		v := verdict{kind: KindTransport, rpc: ev.rpc, retry: true, cause: ErrShuttingDown}
		if ev.withSession {
			v.invalidate = reasonDraining
		}
		return v

	case undispatched && tooLarge(ev.status):
		// Refused for its size before it ran. The session is fine (the
		// recorder kept go-sdk from failing it, see tooLargeError), and
		// neither a new session nor an idempotency key changes the answer.
		return verdict{kind: KindRefused, rpc: ev.rpc, cause: ErrTooLarge}

	case ev.overHTTP && ev.posts <= 0 && sessionDead:
		// The session was already dead (another request, or the GET stream,
		// saw the 404) and go-sdk failed this request locally: it never left
		// the process.
		return verdict{kind: KindSessionExpired, retry: true, invalidate: reasonDied}

	case ev.overHTTP && ev.posts <= 0:
		// go-sdk failed this request without sending it, with an error that
		// does not say the session is dead: on a connection that an earlier
		// answer failed, go-sdk hands every later request that answer's error
		// (another request's "Bad Request", say). It never left the process,
		// and the session is of no further use. Sent once more on a new
		// session; if the failure was this request's own (it cannot be
		// encoded), the retry fails alike and says nothing ran.
		return verdict{kind: KindTransport, retry: true, invalidate: reasonBroken}

	case ev.overHTTP && ev.notWritten:
		// Connection refused: nothing reached the server. The session may
		// be fine once the server is back (or it will answer 404 then), so it
		// is kept; retrying now would only fail again.
		return verdict{kind: KindTransport, rpc: ev.rpc}
	}

	// go-sdk marks transport failures with its ErrRejected sentinel, which is
	// itself a *jsonrpc.Error (-32005). A JSON-RPC error is the server's only
	// if the server answered this request. go-sdk drops an error body whose
	// id is null; the recorder kept it (ev.rpc).
	w, ok := rpcError(err)
	if !ok && ev.rpc != nil {
		if ev.status >= 500 && ev.rpcIDNull {
			// A 5xx with a null id is an intermediary's word (the studio's
			// 502 "the agent did not answer"): the request may have reached
			// the server behind it. Its message is kept; the outcome is
			// unknown.
			return verdict{kind: KindOutcomeUnknown, rpc: ev.rpc}
		}
		w, ok = ev.rpc, true
	}
	if ok && (!ev.overHTTP || ev.status != 0) {
		if ev.overHTTP && ev.status == http.StatusBadRequest && ev.withSession && w.Code == jsonrpc.CodeInvalidRequest {
			// An intermediary refusing the session outright ("Session has
			// been terminated") with the request's id: the session is of no
			// further use; whether this request reached a server is not
			// provable, so it is not replayed.
			return verdict{kind: KindSessionExpired, rpc: w, invalidate: reasonRejected}
		}
		if ev.overHTTP && ev.status == http.StatusBadRequest && !ev.withSession && w.Code == mcp.CodeUnsupportedProtocolVersion {
			return verdict{kind: KindRPC, rpc: w, retry: true, invalidate: reasonEra}
		}
		if w.Code == CodeOutcomeUnknown {
			// The studio's word for a call whose stream died with the
			// agent that ran it (a resumption it answers itself, in a 200
			// stream, with the call's id), or whose forward the agent's
			// death cut (sessionless): the request reached the agent, its
			// answer is gone. The session is fine: the studio keeps it.
			return verdict{kind: KindOutcomeUnknown, rpc: w}
		}
		if w.Code == CodeShuttingDown {
			// Not a refusal (that is a 503, above): a call the agent
			// admitted and cancelled when its shutdown grace ended. It ran
			// for a while; whether it took effect is unknown.
			return verdict{kind: KindOutcomeUnknown, rpc: w}
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
