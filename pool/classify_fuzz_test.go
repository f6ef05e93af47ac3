package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzClassify checks the invariants of the retry decision over every shape
// of error and evidence the pool can see:
//
//   - a request is sent again only when its own POST, carrying a session id,
//     was answered 404, or 400 with a JSON-RPC error whose id is null (the
//     server refused it before dispatch), or when it never left the process
//     (no POST on an HTTP session), or when a sessionless request was
//     answered 400 with -32022 (the server cannot process its protocol
//     version; then always, on a new dial), or refused by a draining agent
//     (503 with CodeShuttingDown; then always, on a new dial); never when
//     the caller gave up;
//   - a request that never left the process (no POST, on HTTP) is always
//     sent again, whatever go-sdk's error says (on a failed connection it
//     repeats another request's error);
//   - a retried request always drops its session;
//   - KindTransport ("nothing ran") only when nothing ran: no POST was sent,
//     the connection could not be made or the request was never handed on,
//     or the server's answer proves it was not dispatched (413, a 4xx
//     JSON-RPC error with a null id, a draining agent's 503);
//   - CodeShuttingDown in any answer but a 503 (a call the agent cut at
//     the end of its grace) is outcome_unknown, never retried;
//   - the server's own JSON-RPC error, read from an answer go-sdk could not
//     decode, is kept in every verdict that it explains;
//   - KindRPC always carries the server's own error, never go-sdk's
//     transport marker (-32005), and only from a server that answered;
//   - a JSON-RPC error CodeOutcomeUnknown (the studio's answer to the
//     resumption of a stream that died with its agent) from a server that
//     answered is outcome_unknown with that error kept, never retried,
//     unless the request provably never ran (the rows above it);
//   - KindRefused only for a refusal that proves nothing ran: the request's
//     own POST answered 413, 414 or 431 (too large), or a redirect to
//     another origin that the pool did not follow (not a 303, which
//     answers a request that ran), or a list the pool stopped (a cursor
//     loop, too many pages or tools); never retried, never dropping the
//     session; a too-large answer is always refused unless the request
//     provably never left (or the caller gave up);
//   - the Kind is one of the five classify decides (KindInterrupted is
//     the keyed call's, decided after it).
//
// The seeds are in testdata/fuzz/FuzzClassify; run it with
//
//	go test -run '^$' -fuzz '^FuzzClassify$' -fuzztime 30s ./pool
func FuzzClassify(f *testing.F) {
	for _, s := range []struct {
		shape, wraps, ctxShape uint8
		code                   int64
		overHTTP               bool
		posts, status          int
		withSession, notWrit   bool
		answer                 uint8
	}{
		{shape: 1, overHTTP: true, posts: 1, status: 404, withSession: true},               // the 404 retry
		{shape: 0, overHTTP: true, posts: 0},                                               // dead session, never sent
		{shape: 2, code: -32600, overHTTP: true, posts: 1, status: 400, withSession: true}, // intermediary 400
		{shape: 3, overHTTP: true, posts: 1, status: 0, withSession: true},                 // rejected marker, unanswered
		{shape: 6, ctxShape: 1, overHTTP: true, posts: 1, status: 0, withSession: true},
		{shape: 7, overHTTP: true, posts: 1, notWrit: true}, // connection refused
		{shape: 2, code: -32042, overHTTP: false},           // stdio server error
		{shape: 5, wraps: 3, code: -32601, overHTTP: true, posts: 2, status: 404, withSession: false},
		{shape: 10, overHTTP: true, posts: 1, status: 400, withSession: true, answer: 1}, // server-everything after a restart
		{shape: 10, overHTTP: true, posts: 1, status: 413, answer: 3},                    // body limit
		{shape: 3, overHTTP: true, posts: 1, status: 413, withSession: true, answer: 1},  // ... as the recorder hands it to go-sdk, with mcphttp's null-id error
		{shape: 3, overHTTP: true, posts: 1, status: 431, withSession: true},             // headers too large
		{shape: 3, overHTTP: true, posts: 1, status: 414, withSession: true},             // URI too long
		{shape: 0, overHTTP: true, posts: 1, status: 401, withSession: true, answer: 1},  // auth gateway, null id
		{shape: 0, overHTTP: true, posts: 1, status: 502, withSession: true, answer: 1},  // the studio's 502: the agent did not answer
		{shape: 6, ctxShape: 1, overHTTP: true, posts: 1, status: 400, withSession: true, answer: 1},
		{shape: 2, code: CodeOutcomeUnknown, overHTTP: true, posts: 1, status: 200, withSession: true},              // the studio's lost stream
		{shape: 9, code: CodeOutcomeUnknown, overHTTP: true, posts: 1, status: 200, withSession: true},              // ... behind go-sdk's marker
		{shape: 5, code: CodeOutcomeUnknown, overHTTP: true, posts: 1, status: 200, withSession: true},              // ... with the connection closed
		{shape: 2, code: CodeOutcomeUnknown, overHTTP: false},                                                       // ... over stdio
		{shape: 10, overHTTP: true, posts: 1, status: 200, withSession: true, answer: 4},                            // ... read by the recorder
		{shape: 2, code: CodeOutcomeUnknown, ctxShape: 2, overHTTP: true, posts: 1, status: 200, withSession: true}, // ... after the caller gave up
		{shape: 2, code: CodeOutcomeUnknown, overHTTP: true, posts: 1, status: 404, withSession: true},              // ... but the session was refused
		{shape: 11, code: 307, overHTTP: true, posts: 1, status: 307, withSession: true},                            // a redirect to another origin, refused
		{shape: 11, code: 303, overHTTP: true, posts: 1, status: 303, withSession: true},                            // ... after the request ran
		{shape: 12, overHTTP: true, posts: 1, status: 200, withSession: true},                                       // a list the pool stopped
		{shape: 2, code: int64(mcp.CodeUnsupportedProtocolVersion), overHTTP: true, posts: 1, status: 400},          // a sessionless request, its era refused
		{shape: 9, code: int64(mcp.CodeUnsupportedProtocolVersion), overHTTP: true, posts: 1, status: 400, withSession: true},
		{shape: 2, code: CodeShuttingDown, overHTTP: true, posts: 1, status: 503, withSession: true, answer: 5}, // a draining agent's refusal
		{shape: 10, overHTTP: true, posts: 1, status: 503, answer: 5},                                           // ... sessionless, as go-sdk reports it
		{shape: 2, code: CodeShuttingDown, ctxShape: 1, overHTTP: true, posts: 1, status: 503, answer: 5},       // ... after the caller gave up
		{shape: 2, code: CodeShuttingDown, overHTTP: true, posts: 1, status: 200, withSession: true},            // a call cut at the end of the grace
	} {
		f.Add(s.shape, s.wraps, s.ctxShape, s.code, s.overHTTP, s.posts, s.status, s.withSession, s.notWrit, s.answer)
	}
	f.Fuzz(func(t *testing.T, shape, wraps, ctxShape uint8, code int64, overHTTP bool, posts, status int, withSession, notWritten bool, answerShape uint8) {
		err := fuzzError(shape, code)
		for range wraps % 4 {
			err = fmt.Errorf("layer: %w", err)
		}
		var ctxErr error
		switch ctxShape % 3 {
		case 1:
			ctxErr = context.Canceled
		case 2:
			ctxErr = context.DeadlineExceeded
		}
		ev := evidence{overHTTP: overHTTP, posts: posts, status: status, withSession: withSession, notWritten: notWritten}
		// What the server's error answer said, as the recorder read it.
		serverSaid := &jsonrpc.Error{Code: -32000, Message: "Bad Request: No valid session ID provided"}
		switch answerShape % 6 {
		case 1:
			ev.rpc, ev.rpcIDNull = serverSaid, true
		case 2:
			ev.rpc = serverSaid
		case 4:
			ev.rpc = &jsonrpc.Error{Code: CodeOutcomeUnknown, Message: "the agent restarted while this request ran"}
		case 5:
			ev.rpc = &jsonrpc.Error{Code: CodeShuttingDown, Message: "agent packrat is shutting down and takes no new calls; nothing ran"}
		}
		if re := (*RedirectError)(nil); errors.As(err, &re) {
			// A redirect is the answer to the request's own POST, over
			// HTTP, and the recorder reads no body of an answer below 400.
			overHTTP, posts, status, notWritten = true, max(posts, 1), re.Status, false
			ev = evidence{overHTTP: overHTTP, posts: posts, status: status, withSession: withSession}
		}
		if errors.Is(err, ErrListTooLong) {
			// The pool stops a list on a page the server answered.
			posts, status, notWritten = max(posts, 1), http.StatusOK, false
			ev = evidence{overHTTP: overHTTP, posts: posts, status: status, withSession: withSession}
		}
		v := classify(err, ev, ctxErr)

		answered4xx := overHTTP && posts > 0 && status >= 400 && status < 500
		own404 := answered4xx && status == http.StatusNotFound && withSession
		nullID := answered4xx && ev.rpc != nil && ev.rpcIDNull
		refused := nullID && status == http.StatusBadRequest && withSession
		neverSent := overHTTP && posts <= 0
		said, fromSDK := rpcError(err)
		if !fromSDK && !(ev.rpc != nil && ev.rpcIDNull && status >= 500) {
			said = ev.rpc
		}
		draining := overHTTP && posts > 0 && status == http.StatusServiceUnavailable && ev.rpc != nil && ev.rpc.Code == CodeShuttingDown
		if draining && ctxErr == nil && (!v.retry || (v.invalidate == "") == withSession || v.kind != KindTransport || v.cause != ErrShuttingDown) {
			t.Fatalf("a draining agent's refusal is not sent again (on a new session if it had one), as transport: %+v for %v, %+v", v, err, ev)
		}
		if draining && ctxErr != nil && v.kind != KindTransport {
			t.Fatalf("a draining agent's refusal, the caller gone, is not transport (nothing ran): %+v", v)
		}
		if said != nil && said.Code == CodeShuttingDown && status != http.StatusServiceUnavailable && ctxErr == nil && (!overHTTP || status != 0) && !(overHTTP && posts <= 0) && !(overHTTP && notWritten) &&
			!(answered4xx && (status == http.StatusNotFound && withSession || ev.rpc != nil && ev.rpcIDNull || tooLarge(status))) && !errors.As(err, new(*RedirectError)) {
			if v.kind != KindOutcomeUnknown || v.retry {
				t.Fatalf("a call cut at the end of the grace (%d in a %d answer) is not outcome_unknown: %+v for %v, %+v", CodeShuttingDown, status, v, err, ev)
			}
		}
		eraRefused := overHTTP && posts > 0 && status == http.StatusBadRequest && !withSession && said != nil && said.Code == mcp.CodeUnsupportedProtocolVersion
		if eraRefused && ctxErr == nil && !neverSent && !notWritten && (!v.retry || v.invalidate == "") {
			t.Fatalf("a refused era is not dialed again: %+v for %v, %+v", v, err, ev)
		}
		if v.retry {
			if ctxErr != nil {
				t.Fatalf("retry after the caller gave up: %+v for %v, %+v", v, err, ev)
			}
			if !own404 && !refused && !neverSent && !eraRefused && !draining {
				t.Fatalf("retry without proof that the request never ran: %+v for %v, %+v", v, err, ev)
			}
			if v.invalidate == "" && !(draining && !withSession) {
				t.Fatalf("retry on the same session: %+v", v)
			}
		}
		if neverSent && ctxErr == nil && !v.retry {
			t.Fatalf("a request that never left the process is not sent again: %+v for %v, %+v", v, err, ev)
		}
		if refused && ctxErr == nil && !v.retry {
			t.Fatalf("a session refused before dispatch is not recovered: %+v for %v, %+v", v, err, ev)
		}
		undispatched := nullID || answered4xx && tooLarge(status) || draining
		if v.kind == KindTransport && !notWritten && !(overHTTP && posts <= 0) && !undispatched {
			t.Fatalf("KindTransport (nothing ran) for a request that may have reached the server: %v, %+v", err, ev)
		}
		if ev.rpc != nil && answered4xx && v.rpc == nil && v.kind != KindOutcomeUnknown && !(overHTTP && posts <= 0) {
			t.Fatalf("the server's own error was dropped: %+v for %v, %+v", v, err, ev)
		}
		if _, fromSDK := rpcError(err); !fromSDK && ctxErr == nil && ev.rpc != nil && ev.rpcIDNull && status >= 500 && v.kind != KindOutcomeUnknown && !(overHTTP && posts <= 0) && !notWritten {
			// An intermediary's 5xx (the studio's 502) says the request may
			// have reached the server behind it.
			t.Fatalf("a 5xx with a null-id error is not outcome_unknown: %+v for %v, %+v", v, err, ev)
		}
		provedNotRun := neverSent || overHTTP && notWritten || own404 || undispatched
		if said != nil && said.Code == CodeOutcomeUnknown && ctxErr == nil && (!overHTTP || status != 0) && !provedNotRun {
			if v.kind != KindOutcomeUnknown || v.retry || v.rpc == nil || v.rpc.Code != CodeOutcomeUnknown {
				t.Fatalf("the intermediary's outcome-unknown error (%d) is not outcome_unknown with its message: %+v for %v, %+v", CodeOutcomeUnknown, v, err, ev)
			}
		}
		var redirect *RedirectError
		crossOrigin := errors.As(err, &redirect)
		refusedWhole := answered4xx && tooLarge(status)
		if v.kind == KindRefused {
			if !refusedWhole && !errors.Is(err, ErrListTooLong) && (!crossOrigin || redirect.Status == http.StatusSeeOther) {
				t.Fatalf("KindRefused (nothing ran) without proof: %v, %+v", err, ev)
			}
			if refusedWhole && !crossOrigin && v.cause != ErrTooLarge {
				t.Fatalf("a too-large refusal without ErrTooLarge: %+v", v)
			}
			if v.retry || v.invalidate != "" {
				t.Fatalf("a refusal is sent again or drops its session: %+v", v)
			}
		}
		if crossOrigin && ctxErr == nil && (v.retry || v.kind != KindRefused && v.kind != KindOutcomeUnknown) {
			t.Fatalf("a refused redirect is %+v", v)
		}
		if refusedWhole && ctxErr == nil && !own404 && !neverSent && !notWritten && v.kind != KindRefused {
			t.Fatalf("a too-large refusal (%d) is not refused: %+v for %v, %+v", status, v, err, ev)
		}
		switch v.kind {
		case KindSessionExpired, KindOutcomeUnknown, KindTransport, KindRefused:
		case KindRPC:
			if v.rpc == nil || v.rpc.Code == codeRejectedByTransport {
				t.Fatalf("KindRPC without the server's error: %+v for %v", v, err)
			}
			if overHTTP && status == 0 {
				t.Fatalf("KindRPC from a server that never answered: %v, %+v", err, ev)
			}
		default:
			t.Fatalf("kind %v", v.kind)
		}
	})
}

// fuzzError builds one of the errors go-sdk and net/http hand the pool.
func fuzzError(shape uint8, code int64) error {
	rpc := &jsonrpc.Error{Code: code, Message: "from the server"}
	rejected := &jsonrpc.Error{Code: codeRejectedByTransport, Message: "rejected by transport"}
	switch shape % 13 {
	case 0:
		return fmt.Errorf("calling %q: %w", "tools/call", mcp.ErrConnectionClosed)
	case 1:
		return fmt.Errorf("failed to connect: %w", mcp.ErrSessionMissing)
	case 2:
		return rpc
	case 3:
		return fmt.Errorf("%w: sending: %w", rejected, io.EOF)
	case 4:
		return errors.New("something else")
	case 5:
		return errors.Join(rpc, mcp.ErrConnectionClosed)
	case 6:
		return fmt.Errorf("%w: %w", rejected, context.Canceled)
	case 7:
		return &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	case 8:
		return fmt.Errorf("%w: %w", rpc, mcp.ErrSessionMissing)
	case 9:
		return fmt.Errorf("%w: %w", rejected, rpc)
	case 11:
		// http.Client's error for a redirect its CheckRedirect refused
		// (origin.go), as go-sdk wraps a failed Do; code is the status.
		re := &RedirectError{Status: int(code), From: "http://127.0.0.1:1", To: "http://127.0.0.1:2"}
		return fmt.Errorf("sending \"tools/call\": %w: %w", rejected, &url.Error{Op: "Post", URL: "http://127.0.0.1:2/mcp", Err: re})
	case 12:
		// A list the pool stopped (list.go), every page answered.
		return &ListError{Server: "a", Method: "tools/list", Pages: 3, Items: 3, Why: "a cursor loop"}
	default:
		// go-sdk's error for an error answer it could not decode (a
		// JSON-RPC error with a null id): the status text, and the session
		// failed.
		return fmt.Errorf("sending \"tools/call\": Bad Request")
	}
}
