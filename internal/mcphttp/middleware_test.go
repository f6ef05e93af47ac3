package mcphttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type echoIn struct {
	Text string `json:"text"`
}

// newServer starts a go-sdk Streamable HTTP server with one tool, echo,
// behind the middleware (or bare, when opts is nil and bare is true).
func newServer(t *testing.T, opts *mcphttp.Options, bare bool) (*httptest.Server, *mcphttp.Handler) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var mw *mcphttp.Handler
	if !bare {
		mw = mcphttp.New(h, opts)
		h = mw
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		closeSessions(s)
	})
	return ts, mw
}

// closeSessions ends what go-sdk keeps per session (a reader goroutine),
// which no HTTP-level close reaches.
func closeSessions(s *mcp.Server) {
	for ss := range s.Sessions() {
		ss.Close()
	}
}

func client(ts *httptest.Server) *mcphttptest.Client {
	return &mcphttptest.Client{URL: ts.URL, HTTP: ts.Client()}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestStaleSessionInitialize is failure 1 of DESIGN.md: a client that DELETEs
// its session and reconnects with initialize still carrying the old id.
func TestStaleSessionInitialize(t *testing.T) {
	ctx := t.Context()
	t.Run("bare go-sdk answers 404", func(t *testing.T) {
		// Documents why the middleware exists; if go-sdk changes this, the
		// middleware's header surgery may become unnecessary.
		ts, _ := newServer(t, nil, true)
		c := client(ts)
		id := must[string](t)(c.Open(ctx))
		must[*mcphttptest.Response](t)(c.Delete(ctx, id))
		r := must[*mcphttptest.Response](t)(c.Initialize(ctx, id))
		if r.Status != http.StatusNotFound {
			t.Fatalf("bare go-sdk: initialize with a terminated id: %v, want 404", r)
		}
	})
	t.Run("middleware starts a fresh session", func(t *testing.T) {
		ts, mw := newServer(t, nil, false)
		c := client(ts)
		id := must[string](t)(c.Open(ctx))
		if d := must[*mcphttptest.Response](t)(c.Delete(ctx, id)); d.Status/100 != 2 {
			t.Fatalf("DELETE: %v", d)
		}
		if n := mw.Sessions(); n != 0 {
			t.Errorf("after DELETE the middleware remembers %d sessions, want 0", n)
		}
		r := must[*mcphttptest.Response](t)(c.Initialize(ctx, id))
		if r.Status != http.StatusOK || r.SessionID == "" || r.SessionID == id {
			t.Fatalf("initialize with the terminated id %q: %v, want 200 with a new id", id, r)
		}
		for _, stale := range []string{"never-existed", r.SessionID} {
			r2 := must[*mcphttptest.Response](t)(c.Initialize(ctx, stale))
			if r2.Status != http.StatusOK || r2.SessionID == "" || r2.SessionID == stale {
				t.Fatalf("initialize carrying %q: %v, want 200 with a new id", stale, r2)
			}
		}
		// The new session works.
		sid := r.SessionID
		must[*mcphttptest.Response](t)(c.Call(ctx, sid, nil, "notifications/initialized", nil))
		call := must[*mcphttptest.Response](t)(c.Call(ctx, sid, 2, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}))
		if call.Status != http.StatusOK || !strings.Contains(string(call.Body), `"hi"`) {
			t.Fatalf("tools/call on the new session: %v", call)
		}
		// A request that is not initialize with the dead id is still 404:
		// only initialize may shed its id.
		if r := must[*mcphttptest.Response](t)(c.Call(ctx, id, 3, "tools/list", nil)); r.Status != http.StatusNotFound {
			t.Fatalf("tools/list on the terminated session: %v, want 404", r)
		}
	})
}

func TestOrigin(t *testing.T) {
	ts, _ := newServer(t, nil, false)
	c := client(ts)
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"", http.StatusOK},
		{"http://localhost:3000", http.StatusOK},
		{"http://127.0.0.1:9", http.StatusOK},
		{"http://[::1]:8080", http.StatusOK},
		{ts.URL, http.StatusOK}, // same origin
		{"https://evil.example", http.StatusForbidden},
		{"http://localhost.evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
	} {
		c.Header = map[string]string{}
		if tc.origin != "" {
			c.Header["Origin"] = tc.origin
		}
		r := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), ""))
		if r.Status != tc.want {
			t.Errorf("Origin %q: %v, want %d", tc.origin, r, tc.want)
		}
		if tc.want == http.StatusForbidden && !strings.Contains(string(r.Body), "origin not allowed") {
			t.Errorf("Origin %q: body %s does not say why", tc.origin, r.Body)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	ts, _ := newServer(t, &mcphttp.Options{MaxBodyBytes: 1024}, false)
	c := client(ts)
	id := must[string](t)(c.Open(t.Context()))
	big := strings.Repeat("x", 2048)
	r := must[*mcphttptest.Response](t)(c.Call(t.Context(), id, 2, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": big}}))
	if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Body), "exceeds the limit of 1024 bytes") {
		t.Fatalf("oversized POST: %v, want 413 with a clear body", r)
	}
	// Chunked (no Content-Length) is bounded while reading.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL, struct{ *strings.Reader }{strings.NewReader(big)})
	req.Header.Set("Content-Type", "application/json")
	resp := must[*http.Response](t)(ts.Client().Do(req))
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized chunked POST: %d, want 413", resp.StatusCode)
	}
}

func TestSessionBoundToCredential(t *testing.T) {
	ts, _ := newServer(t, nil, false)
	alice := client(ts)
	alice.Header = map[string]string{"Authorization": "Bearer alice"}
	id := must[string](t)(alice.Open(t.Context()))

	for name, hdr := range map[string]map[string]string{
		"another token": {"Authorization": "Bearer mallory"},
		"no token":      {},
	} {
		other := client(ts)
		other.Header = hdr
		r := must[*mcphttptest.Response](t)(other.Call(t.Context(), id, 2, "tools/list", nil))
		if r.Status != http.StatusNotFound {
			t.Fatalf("%s presenting alice's session: %v, want 404", name, r)
		}
		if e := r.Error(); e == nil || e["code"] != float64(-32600) || e["message"] != "session not found" {
			t.Fatalf("%s: body %s, want JSON-RPC -32600 session not found", name, r.Body)
		}
		if r := must[*mcphttptest.Response](t)(other.Delete(t.Context(), id)); r.Status != http.StatusNotFound {
			t.Fatalf("%s deleting alice's session: %v, want 404", name, r)
		}
	}
	if r := must[*mcphttptest.Response](t)(alice.Call(t.Context(), id, 3, "tools/list", nil)); r.Status != http.StatusOK {
		t.Fatalf("alice on her own session: %v", r)
	}
}

func TestBearer(t *testing.T) {
	ts, _ := newServer(t, &mcphttp.Options{Token: "s3cret"}, false)
	c := client(ts)
	for _, auth := range []string{"", "Bearer wrong", "Basic czNjcmV0", "Bearer s3cret2"} {
		c.Header = map[string]string{"Authorization": auth}
		r := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), ""))
		if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("Authorization %q: %v (WWW-Authenticate %q), want 401 with a Bearer challenge", auth, r, r.Header.Get("WWW-Authenticate"))
		}
	}
	c.Header = map[string]string{"Authorization": "Bearer s3cret"}
	if _, err := c.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestBadMessages(t *testing.T) {
	ts, _ := newServer(t, nil, false)
	c := client(ts)
	id := must[string](t)(c.Open(t.Context()))
	for _, tc := range []struct {
		name, body string
		code       float64
		id         any
	}{
		{"malformed", `{"jsonrpc":"2.0",`, -32700, nil},
		{"empty", ``, -32700, nil},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, -32600, nil},
		{"batch initialize", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`, -32600, nil},
		{"wrong version", `{"jsonrpc":"1.0","id":7,"method":"tools/list"}`, -32600, float64(7)},
		{"no version", `{"id":"a","method":"tools/list"}`, -32600, "a"},
		{"not an object", `"tools/list"`, -32600, nil},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, -32600, float64(1)},
	} {
		for _, sid := range []string{"", id} {
			r := must[*mcphttptest.Response](t)(c.Do(t.Context(), http.MethodPost, sid, []byte(tc.body), nil))
			e := r.Error()
			if r.Status != http.StatusBadRequest || e == nil || e["code"] != tc.code {
				t.Errorf("%s (session %q): %v, want 400 with JSON-RPC error %v", tc.name, sid, r, tc.code)
				continue
			}
			if got := r.Messages[0]["id"]; got != tc.id {
				t.Errorf("%s: id %v, want %v", tc.name, got, tc.id)
			}
		}
	}
}

func TestUpstream404ForgetsSession(t *testing.T) {
	// An upstream that forgets every session after initialize, as a
	// restarted server does.
	var forget bool
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "" && forget {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Mcp-Session-Id", "sid-1")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	})
	mw := mcphttp.New(up, nil)
	ts := httptest.NewServer(mw)
	defer ts.Close()
	c := client(ts)
	r := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), ""))
	if r.SessionID != "sid-1" || mw.Sessions() != 1 {
		t.Fatalf("initialize: %v, %d bindings", r, mw.Sessions())
	}
	forget = true
	if r := must[*mcphttptest.Response](t)(c.Call(t.Context(), "sid-1", 2, "tools/list", nil)); r.Status != http.StatusNotFound {
		t.Fatalf("%v", r)
	}
	if n := mw.Sessions(); n != 0 {
		t.Fatalf("after the upstream's 404 the middleware remembers %d sessions, want 0", n)
	}
}

// TestSessionCapNeverEvicts: past the cap an initialize gets 503 and every
// live session keeps working; only a binding idle past the TTL makes room,
// and it is handed to OnSessionExpired so the server closes it too.
func TestSessionCapNeverEvicts(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(0, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var n atomic.Int64
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" {
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("sid-%d", n.Add(1)))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	})
	var expired []string
	mw := mcphttp.New(up, &mcphttp.Options{
		MaxSessions: 2, SessionIdleTTL: time.Minute, Now: clock,
		OnSessionExpired: func(id string) { mu.Lock(); expired = append(expired, id); mu.Unlock() },
	})
	ts := httptest.NewServer(mw)
	defer ts.Close()
	c := client(ts)
	a := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), "")).SessionID
	b := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), "")).SessionID
	status := func(id string) int {
		return must[*mcphttptest.Response](t)(c.Call(t.Context(), id, 2, "ping", nil)).Status
	}
	// Concurrent initializes at the cap: all refused, none evicts.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r, err := c.Initialize(context.Background(), "")
			if err != nil {
				t.Error(err)
				return
			}
			if r.Status != http.StatusServiceUnavailable || r.SessionID != "" {
				t.Errorf("initialize past the cap: %v, want 503 without a session", r)
			}
			if e := r.Error(); e == nil || e["code"] != float64(mcphttp.CodeServerOverloaded) || !strings.Contains(e["message"].(string), "too many open sessions") {
				t.Errorf("initialize past the cap: error %v", e)
			}
		})
	}
	wg.Wait()
	for _, id := range []string{a, b} {
		if s := status(id); s != http.StatusOK {
			t.Errorf("live session %s after the flood: %d, want 200", id, s)
		}
	}
	if got := mw.Sessions(); got != 2 {
		t.Fatalf("%d bindings, want 2", got)
	}
	// A DELETE makes room.
	if r := must[*mcphttptest.Response](t)(c.Delete(t.Context(), a)); r.Status != http.StatusOK {
		t.Fatal(r)
	}
	c3 := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), ""))
	if c3.Status != http.StatusOK {
		t.Fatalf("initialize after a DELETE: %v", c3)
	}
	// Idle past the TTL: pruned to make room, and closed upstream.
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if r := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), "")); r.Status != http.StatusOK {
		t.Fatalf("initialize after the others idled out: %v", r)
	}
	mu.Lock()
	got := slices.Sorted(slices.Values(expired))
	mu.Unlock()
	if want := slices.Sorted(slices.Values([]string{b, c3.SessionID})); !slices.Equal(got, want) {
		t.Errorf("closed as expired: %v, want %v", got, want)
	}
	if s := status(b); s != http.StatusNotFound {
		t.Errorf("idle past the TTL: %d, want 404", s)
	}
}

func TestGoSDKClientThroughMiddleware(t *testing.T) {
	ts, _ := newServer(t, &mcphttp.Options{Token: "tok"}, false)
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer tok"}}
	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "through"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.Content)
	if !strings.Contains(string(b), "through") {
		t.Fatalf("result %s", b)
	}
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestForeignHostOnLoopback(t *testing.T) {
	ts, _ := newServer(t, nil, false)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL, nil)
	req.Host = "rebound.example:80"
	resp := must[*http.Response](t)(ts.Client().Do(req))
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("Host rebound.example on a loopback listener: %d, want 403", resp.StatusCode)
	}
}

// TestGoSDKClientSeesSessionMissing: the middleware's own 404 (here: the
// session presented with another credential) is, to a go-sdk client, what
// an expired session is: mcp.ErrSessionMissing, which the pool recovers from.
func TestGoSDKClientSeesSessionMissing(t *testing.T) {
	ts, _ := newServer(t, nil, false)
	creds := &switchable{auth: "Bearer alice"}
	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: creds}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	creds.set("Bearer mallory")
	_, err = cs.ListTools(t.Context(), nil)
	if !errors.Is(err, mcp.ErrSessionMissing) {
		t.Fatalf("ListTools with another credential: %v, want mcp.ErrSessionMissing", err)
	}
}

type switchable struct {
	mu   sync.Mutex
	auth string
}

func (s *switchable) set(a string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth = a
}

func (s *switchable) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	a := s.auth
	s.mu.Unlock()
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", a)
	return http.DefaultTransport.RoundTrip(r)
}
