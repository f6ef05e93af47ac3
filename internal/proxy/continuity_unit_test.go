package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// restartable is an upstream MCP server whose "process" can be replaced:
// each generation is a fresh go-sdk server and handler, which knows none
// of the previous one's sessions, as an agent's new process. It records
// the methods each generation was sent.
type restartable struct {
	h atomic.Pointer[http.Handler]

	mu      sync.Mutex    // protects following fields
	methods []string      // of the current generation
	servers []*mcp.Server // every generation's, to close their sessions
}

// close ends every generation's sessions, as the processes' deaths would.
func (r *restartable) close() {
	r.mu.Lock()
	servers := r.servers
	r.mu.Unlock()
	for _, srv := range servers {
		for ss := range srv.Sessions() {
			ss.Close()
		}
	}
}

func newRestartable(t *testing.T) (*restartable, *httptest.Server) {
	r := &restartable{}
	r.restart(nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			var m struct {
				Method string `json:"method"`
			}
			json.Unmarshal(body, &m)
			r.mu.Lock()
			r.methods = append(r.methods, m.Method)
			r.mu.Unlock()
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		(*r.h.Load()).ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		r.close()
		ts.Close()
	})
	return r, ts
}

// restart starts a new generation: a fresh server, or refuse when not nil.
func (r *restartable) restart(refuse http.Handler) {
	var h http.Handler = refuse
	if h == nil {
		srv := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "0"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct{ Text string }) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
		r.mu.Lock()
		r.servers = append(r.servers, srv)
		r.mu.Unlock()
	}
	r.h.Store(&h)
	r.mu.Lock()
	r.methods = nil
	r.mu.Unlock()
}

func (r *restartable) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.methods...)
}

// TestContinuityReplaysTheSessionSetup: after the upstream restarts, the
// first request re-establishes the session with exactly what the client
// had sent to set it up (initialize, initialized, its logging level), and
// then runs once. When the new upstream refuses the replayed initialize,
// the client gets the 404 it would have got without continuity, and the
// session is forgotten.
func TestContinuityReplaysTheSessionSetup(t *testing.T) {
	up, upstream := newRestartable(t)
	u, _ := url.Parse(upstream.URL)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cont := NewContinuity(tr, testSessionTTL, nil)
	proxy := httptest.NewServer(New(u, &Options{Transport: cont}))
	t.Cleanup(proxy.Close)

	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: proxy.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// logging/setLevel is deprecated in 2026-07-28 but still sent by clients
	// of the session era, which is what continuity must replay.
	//lint:ignore SA1019 the replay of a deprecated request is what is tested
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	echo := func(text string) error {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"Text": text}})
		if err == nil && (res.IsError || toolText(res) != text) {
			err = errors.New("echo answered " + toolText(res))
		}
		return err
	}
	if err := echo("one"); err != nil {
		t.Fatal(err)
	}

	up.restart(nil)
	if err := echo("two"); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	// The first tools/call met the 404, the setup was replayed, the call
	// was sent again (the GET is the client's standalone stream, reopened).
	got := strings.Join(withoutEmpty(up.sent()), " ")
	want := "tools/call initialize notifications/initialized logging/setLevel tools/call"
	if got != want {
		t.Errorf("the new upstream was sent %q, want %q", got, want)
	}
	if kept, renewals := cont.Kept(); kept != 1 || renewals != 1 {
		t.Errorf("kept %d sessions, %d renewals; want 1 and 1", kept, renewals)
	}

	// A new process that will not have the session back.
	up.restart(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "" {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		http.Error(w, "no", http.StatusBadRequest)
	}))
	err = echo("three")
	if !errors.Is(err, mcp.ErrSessionMissing) {
		t.Fatalf("when the new upstream refuses the replay: %v, want the 404 (ErrSessionMissing)", err)
	}
	if kept, _ := cont.Kept(); kept != 0 {
		t.Errorf("continuity still keeps %d sessions after giving one up", kept)
	}
}

func withoutEmpty(methods []string) []string {
	var out []string
	for _, m := range methods {
		if m != "" {
			out = append(out, m)
		}
	}
	return out
}

// TestContinuityBounds: what is kept of a session is bounded, and so is
// the number of sessions; past either, nothing more is kept (the session
// itself is untouched).
func TestContinuityBounds(t *testing.T) {
	c := NewContinuity(nil, testSessionTTL, nil)
	ks := &keptSession{initParams: make([]byte, 100), size: 100}
	big := []byte(`{"params":{"level":"` + strings.Repeat("x", maxKeptBytes) + `"}}`)
	c.recordLocked(ks, "logging/setLevel", big, "")
	if ks.level != "" || ks.size != 100 {
		t.Errorf("a setLevel past maxKeptBytes was kept: size %d", ks.size)
	}
	c.recordLocked(ks, "logging/setLevel", []byte(`{"params":{"level":"info"}}`), "")
	c.recordLocked(ks, "logging/setLevel", []byte(`{"params":{"level":"debug"}}`), "")
	if ks.level != "debug" || ks.size != 100+len("debug") {
		t.Errorf("the last setLevel should replace the first: %q, size %d", ks.level, ks.size)
	}
	for i := range maxKeptSubscriptions + 10 {
		c.recordLocked(ks, "resources/subscribe", []byte(`{"params":{"uri":"file:///`+strings.Repeat("a", i)+`"}}`), "")
	}
	if len(ks.subscribed) != maxKeptSubscriptions {
		t.Errorf("%d subscriptions kept, want the cap %d", len(ks.subscribed), maxKeptSubscriptions)
	}
	before := ks.size
	c.recordLocked(ks, "resources/unsubscribe", []byte(`{"params":{"uri":"file:///"}}`), "")
	if len(ks.subscribed) != maxKeptSubscriptions-1 || ks.size >= before {
		t.Errorf("unsubscribe: %d kept, size %d (was %d)", len(ks.subscribed), ks.size, before)
	}
	if ks.size > maxKeptBytes {
		t.Errorf("size %d past maxKeptBytes", ks.size)
	}
	for stream := range maxKeptStreams + 5 {
		ks.noteStreamLocked(strings.Repeat("s", stream+1), json.RawMessage("1"), "up")
	}
	if len(ks.streams) != maxKeptStreams || len(ks.streamOrder) != maxKeptStreams {
		t.Errorf("%d streams kept, want the cap %d", len(ks.streams), maxKeptStreams)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestContinuityKeepsAtMostMaxSessions: at the cap a new session is not
// kept, unless an idle one can be forgotten to make room.
func TestContinuityKeepsAtMostMaxSessions(t *testing.T) {
	n := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		h := http.Header{"Mcp-Session-Id": {"new" + strings.Repeat("x", n)}}
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: r}, nil
	})
	c := NewContinuity(base, testSessionTTL, nil)
	now := c.now()
	for i := range maxKeptSessions {
		c.sessions[strings.Repeat("s", i+1)] = &keptSession{lastUsed: now}
	}
	initialize := func() {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://agent.invalid/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`))
		if _, err := c.initialize(req); err != nil {
			t.Fatal(err)
		}
	}
	initialize()
	if kept, _ := c.Kept(); kept != maxKeptSessions {
		t.Fatalf("at the cap: %d kept, want %d", kept, maxKeptSessions)
	}
	if _, ok := c.sessions["newx"]; ok {
		t.Fatal("a session past the cap was kept")
	}
	c.sessions["s"].lastUsed = now.Add(-2 * testSessionTTL)
	initialize()
	if _, ok := c.sessions["newxx"]; !ok {
		t.Error("an idle session was not forgotten to make room")
	}
	if _, ok := c.sessions["s"]; ok {
		t.Error("the idle session is still kept")
	}
}
