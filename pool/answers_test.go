package pool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// answerUnknownSessionsWith400 makes ts answer a POST carrying a session id
// it does not know the way the TypeScript SDK's example servers and
// server-everything do: 400 with a JSON-RPC error whose id is null.
func answerUnknownSessionsWith400(ts *testServer) {
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		id := r.Header.Get("Mcp-Session-Id")
		if id == "" || r.Method != http.MethodPost {
			return false
		}
		for ss := range ts.MCPServer().Sessions() {
			if ss.ID() == id {
				return false
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
		return true
	})
}

// After a restart of a server that answers an unknown session with 400 and a
// null-id JSON-RPC error, concurrent calls on the stale session all recover,
// each executed exactly once, as they do against a server answering 404.
func TestRestartOf400NullIDServerRecovers(t *testing.T) {
	ts := newTestServer(t, false)
	answerUnknownSessionsWith400(ts)
	p := newTestPool(t, nil)
	srv := server(ts, "ts-style")
	mustCall(t, p, srv, "echo", "warm")
	ts.Restart()

	const n = 30
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := call(ctx, p, srv, "echo", fmt.Sprint(i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("call after the restart: %v", err)
		}
	}
	for i := range n {
		if got := ts.Executions(fmt.Sprint(i)); got != 1 {
			t.Errorf("executions of call %d = %d, want 1", i, got)
		}
	}
	// The stale session is dropped once, for its 400 (rejected). On a
	// loaded machine the client may instead still hold a keep-alive
	// connection the restart closed, and find the session dead before any
	// request is answered (died); both are one drop and one re-dial.
	// TestRepeated400NullIDSurfacesTheServersMessage pins the 400 path.
	st := p.Stats()
	if st.Reinitializations != 1 || st.Dials != 2 || st.Invalidations != 1 ||
		st.InvalidationsByReason[reasonRejected]+st.InvalidationsByReason[reasonDied] != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// A second 400 after the recovery is returned with the server's own message,
// after exactly one retry.
func TestRepeated400NullIDSurfacesTheServersMessage(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "tools/call" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
		return true
	})
	_, err := call(context.Background(), p, srv, "echo", "x")
	pe := asPoolError(t, err)
	if pe.Kind != KindSessionExpired || !pe.Retried || pe.Code != -32000 || pe.Message != "Bad Request: No valid session ID provided" || pe.Status != http.StatusBadRequest {
		t.Fatalf("want session_expired after one retry with the server's message, got %+v", pe)
	}
	if !strings.Contains(err.Error(), "No valid session ID provided") {
		t.Fatalf("the message %q lost the server's words", err)
	}
	if st := p.Stats(); st.Retries != 1 || st.Dials != 2 {
		t.Fatalf("stats: %+v", st)
	}
}

// A 413 is produced before the body was read: nothing ran, and sending the
// same body again would be refused again (see also toolarge_test.go).
func TestBodyLimit413IsNothingRan(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.CallID == "big" {
			http.Error(w, "request body too large (limit 1 MiB)", http.StatusRequestEntityTooLarge)
			return true
		}
		return false
	})
	_, err := call(context.Background(), p, srv, "echo", "big")
	pe := asPoolError(t, err)
	if pe.Kind != KindRefused || !errors.Is(err, ErrTooLarge) || pe.Retried || pe.Status != http.StatusRequestEntityTooLarge || pe.Body != "request body too large (limit 1 MiB)" {
		t.Fatalf("want refused (too large, nothing ran) with the server's body, got %+v", pe)
	}
	if p.Stats().Retries != 0 {
		t.Fatal("a 413 was retried")
	}
}

// A non-JSON-RPC error body and WWW-Authenticate are kept in the error.
func TestErrorKeepsBodyAndAuthenticate(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	long := strings.Repeat("x", 2000)
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		switch rpc.CallID {
		case "auth":
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="https://auth.example/.well-known/oauth-protected-resource"`)
			http.Error(w, "token expired", http.StatusUnauthorized)
			return true
		case "long":
			http.Error(w, long, http.StatusForbidden)
			return true
		}
		return false
	})
	_, err := call(context.Background(), p, srv, "echo", "auth")
	pe := asPoolError(t, err)
	if pe.Status != http.StatusUnauthorized || pe.Body != "token expired" || !strings.Contains(pe.Authenticate, "resource_metadata=") {
		t.Fatalf("the 401's body and WWW-Authenticate are lost: %+v", pe)
	}
	for _, want := range []string{"token expired", "WWW-Authenticate: Bearer resource_metadata="} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	_, err = call(context.Background(), p, srv, "echo", "long")
	if pe := asPoolError(t, err); len(pe.Body) != maxErrorBody {
		t.Fatalf("a %d-byte body is kept as %d bytes, want the first %d", len(long), len(pe.Body), maxErrorBody)
	}
}

// A pin the server cannot speak is a clear error naming both versions, not
// a session of another era.
func TestProtocolPinIsEnforced(t *testing.T) {
	ts := newTestServer(t, false) // a go-sdk stateful server: 2025-11-25 only
	p := newTestPool(t, nil)
	srv := &Server{Name: "old", URL: ts.URL(), ProtocolVersion: Protocol20260728}
	_, err := call(context.Background(), p, srv, "echo", "x")
	if !errors.Is(err, ErrProtocolVersion) {
		t.Fatalf("want ErrProtocolVersion, got %v", err)
	}
	for _, v := range []string{Protocol20251125, Protocol20260728} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error %q does not name %s", err, v)
		}
	}
	if n := ts.Executions("x"); n != 0 {
		t.Fatalf("executions = %d", n)
	}
	eventually(t, "the refused session to be closed on the server", func() bool { return ts.Sessions() == 0 })
}

// A request whose context ended before the recorder handed it on was not
// sent: the evidence says so.
func TestCancelledBeforeWrittenIsNotSent(t *testing.T) {
	sent := false
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { sent = true; return nil, errors.New("unreachable") })
	e := &entry{}
	e.abortCtx, e.abort = context.WithCancel(context.Background())
	defer e.abort()
	r := &recorder{base: base, entry: e}
	pr := newProbe(context.Background())
	ctx, cancel := context.WithCancel(pr)
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader("{}"))
	req.Header.Set(sessionIDHeader, "s")
	if _, err := r.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("RoundTrip = %v", err)
	}
	ev := pr.evidence(true)
	if sent || !ev.notWritten {
		t.Fatalf("sent %v, evidence %+v", sent, ev)
	}
	if v := classify(context.Canceled, ev, context.Canceled); v.kind != KindTransport {
		t.Fatalf("verdict %+v, want transport", v)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
