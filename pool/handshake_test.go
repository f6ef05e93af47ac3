package pool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// forgetInitialized makes ts answer 404 to the first n
// notifications/initialized POSTs that carry a session id, as a server does
// whose idle timeout ended the session between initialize and initialized,
// or a replica behind a balancer that never saw the initialize. It returns
// the count of 404s sent.
func forgetInitialized(ts *testServer, n int64) *atomic.Int64 {
	var sent atomic.Int64
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if rpc.Method != "notifications/initialized" || r.Header.Get(sessionIDHeader) == "" {
			return false
		}
		if sent.Add(1) > n {
			return false
		}
		http.Error(w, "session not found", http.StatusNotFound)
		return true
	})
	return &sent
}

// TestHandshake404DialsAgain: a 404 during the handshake fired the entry's
// expiry while Connect was still running, and the pool closed a session that
// did not exist yet (a nil *mcp.ClientSession, SIGSEGV in closeSession).
// Now the dial sees the mark, dials once more, and the call runs once.
func TestHandshake404DialsAgain(t *testing.T) {
	ts := newTestServer(t, false)
	sent := forgetInitialized(ts, 1)
	p := newTestPool(t, nil)
	srv := server(ts, "s")

	mustCall(t, p, srv, "echo", "after-404")
	if got := sent.Load(); got < 1 {
		t.Fatalf("the server sent %d 404s to notifications/initialized; the test needs one", got)
	}
	if n := ts.Executions("after-404"); n != 1 {
		t.Fatalf("the call ran %d times, want 1", n)
	}
	st := p.Stats()
	if st.Dials != 1 || st.DialFailures != 0 {
		t.Fatalf("dials %d, dial failures %d; want one dial whose handshake was retried inside it", st.Dials, st.DialFailures)
	}
	// The pool is intact: a second call reuses the session, and Close
	// (which waits for every entry's count on the pool) returns.
	mustCall(t, p, srv, "echo", "second")
	if st := p.Stats(); st.Dials != 1 {
		t.Fatalf("dials %d after a second call, want the session reused", st.Dials)
	}
	p.Close()
}

// TestHandshake404Twice: a server that forgets every handshake's session
// fails the call, typed, after exactly two handshakes, and the tool never
// runs.
func TestHandshake404Twice(t *testing.T) {
	ts := newTestServer(t, false)
	sent := forgetInitialized(ts, 1<<30)
	p := newTestPool(t, nil)
	srv := server(ts, "s")

	_, err := call(t.Context(), p, srv, "echo", "never")
	if err == nil {
		t.Fatal("the call succeeded against a server that forgets every session during its handshake")
	}
	pe := asPoolError(t, err)
	if !errors.Is(err, errForgottenInDial) || !strings.Contains(pe.Error(), "notifications/initialized") {
		t.Fatalf("error %q, want the handshake failure saying the session was forgotten at notifications/initialized", pe)
	}
	if got := sent.Load(); got != 2 {
		t.Fatalf("%d handshakes were answered 404, want 2 (the dial and its one retry)", got)
	}
	if n := ts.Executions("never"); n != 0 {
		t.Fatalf("the tool ran %d times, want 0", n)
	}
	p.Close()
}

// TestHandshakeRoundRobin: two replicas with no shared sessions behind a
// plain round-robin proxy, as in the replicas issue: initialize reaches one,
// initialized the other, whose 404 crashed the pool. The call now fails with
// a pool error and the pool closes cleanly.
func TestHandshakeRoundRobin(t *testing.T) {
	a, b := newTestServer(t, false), newTestServer(t, false)
	var next atomic.Uint64
	var targets []*url.URL
	for _, ts := range []*testServer{a, b} {
		u, err := url.Parse(ts.URL())
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(targets[next.Add(1)%2])
		r.Out.URL.Path = targets[0].Path
	}}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)

	p := newTestPool(t, nil)
	srv := &Server{Name: "rr", URL: proxy.URL + "/mcp", ProtocolVersion: Protocol20251125}
	for i := range 3 {
		_, err := call(t.Context(), p, srv, "echo", "rr")
		if err == nil {
			t.Fatalf("call %d succeeded, but no replica could have kept the session", i)
		}
		asPoolError(t, err)
	}
	if n := a.Executions("rr") + b.Executions("rr"); n != 0 {
		t.Fatalf("the tool ran %d times, want 0", n)
	}
	p.Close()
}

// TestRoundRobinReplicas200: 200 calls, four at a time (one identity, so
// one key, each: their dials and requests interleave), through a plain
// round-robin reverse proxy (httputil.ReverseProxy, the next replica for
// every request) in front of two go-sdk servers of the session era that
// share no sessions. A call succeeds only when its session's handshake and
// the call itself happened to reach one replica. Nothing panics; every
// failure is a *pool.Error of a kind that says nothing ran
// (session_expired, or transport for a handshake that failed); the tool
// ran exactly once for every success and never for a failure; the pool
// closes with no dial, entry or goroutine left.
func TestRoundRobinReplicas200(t *testing.T) {
	a, b := newTestServer(t, false), newTestServer(t, false)
	var next atomic.Uint64
	var targets []*url.URL
	for _, ts := range []*testServer{a, b} {
		u, err := url.Parse(ts.URL())
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(targets[next.Add(1)%2])
		r.Out.URL.Path = targets[0].Path
	}}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)

	p := newTestPool(t, nil)
	const calls, workers = 200, 4
	errs := make([]error, calls)
	var wg sync.WaitGroup
	var n atomic.Int64
	for w := range workers {
		srv := &Server{Name: "rr", URL: proxy.URL + "/mcp", ProtocolVersion: Protocol20251125, Headers: map[string]string{"X-Worker": fmt.Sprint(w)}}
		wg.Go(func() {
			for i := int(n.Add(1) - 1); i < calls; i = int(n.Add(1) - 1) {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				_, errs[i] = call(ctx, p, srv, "echo", fmt.Sprintf("rr-%d", i))
				cancel()
			}
		})
	}
	wg.Wait()

	succeeded, byKind := 0, map[Kind]int{}
	for i, err := range errs {
		id := fmt.Sprintf("rr-%d", i)
		ran := a.Executions(id) + b.Executions(id)
		if err == nil {
			succeeded++
			if ran != 1 {
				t.Errorf("call %d succeeded and ran %d times, want once", i, ran)
			}
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("call %d: %v (%T) is not a *pool.Error", i, err, err)
		}
		byKind[pe.Kind]++
		// The other replica's 404: to the handshake's
		// notifications/initialized (the dial, or the re-initialization
		// after a 404 to the call), or to the call on its second session.
		if pe.Kind != KindSessionExpired && pe.Kind != KindTransport || !errors.Is(err, errForgottenInDial) && !errors.Is(err, mcp.ErrSessionMissing) {
			t.Errorf("call %d: kind %s (%v), want session_expired or transport, caused by a replica's 404", i, pe.Kind, err)
		}
		if ran != 0 {
			t.Errorf("call %d failed (%v) and ran %d times, want never", i, err, ran)
		}
	}
	st := p.Stats()
	t.Logf("%d of %d calls succeeded; failures by kind %v; dials %d, dial failures %d, retries %d, invalidations %v",
		succeeded, calls, byKind, st.Dials, st.DialFailures, st.Retries, st.InvalidationsByReason)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Open != 0 || st.Dialing != 0 {
		t.Fatalf("after Close: %+v, want nothing open or dialing", st)
	}
}
