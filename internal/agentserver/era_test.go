package agentserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// eras are the two protocol versions every agent serves on one endpoint:
// the session era, pinned as a caller pins it (pool.Server.ProtocolVersion),
// and the sessionless era, which an unpinned pool negotiates with our agents
// through server/discover.
var eras = []struct{ name, pin, want string }{
	{"2025-11-25", pool.Protocol20251125, pool.Protocol20251125},
	{"2026-07-28", "", pool.Protocol20260728},
}

// eraTools adds the test's tools to s: progress sends three progress
// notifications, block waits until its call is cancelled (and says so on
// cancelled), traceid returns the trace id its handler's context carries.
func eraTools(s *Server, started chan<- struct{}, cancelled chan<- struct{}) {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := range 3 {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 3, Message: fmt.Sprintf("step %d", i+1),
			}); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "traceid"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: trace.SpanContextFromContext(ctx).TraceID().String()}}}, nil, nil
	})
}

// TestBothEras: one agent endpoint, called through the pool in each era
// over real HTTP. The era negotiated is the one Stats reports; the
// delegation chain is entered and enforced, progress reaches the caller,
// a cancelled call cancels the tool, an idempotency key replays, and the
// caller's trace context is the tool's.
func TestBothEras(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			s, ts := newTestServer(t, &agentdef.Definition{Name: "kappa", MaxDepth: 3, Tools: []string{"packrat"}})
			started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
			eraTools(s, started, cancelled)
			p := pool.New(&pool.Options{Transport: ts.Client().Transport})
			t.Cleanup(func() { p.Close() })
			srv := &pool.Server{Name: "kappa", URL: ts.URL, ProtocolVersion: era.pin}
			ctx := t.Context()

			in := delegation.Chain{RunID: "run-e", Agents: []string{"oracle"}, Depth: 1}
			res, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}, Meta: in.Meta()})
			if err != nil || res.IsError || mcptest.Text(res) != `{"run_id":"run-e","agents":["oracle","kappa"],"depth":2}` {
				t.Fatalf("whoami with a chain: %v %v", err, res)
			}
			if got := p.Stats().Protocols; got[era.want] != 1 || len(got) != 1 {
				t.Fatalf("Stats().Protocols = %v, want one session at %s", got, era.want)
			}

			t.Run("chain", func(t *testing.T) {
				deep := delegation.Chain{RunID: "r", Agents: []string{"a", "b", "c"}, Depth: 3}
				res, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}, Meta: deep.Meta()})
				if err != nil || !res.IsError || !strings.Contains(mcptest.Text(res), "too deep") {
					t.Fatalf("a chain at the limit: %v %v, want the refusal", err, res)
				}
			})

			t.Run("progress", func(t *testing.T) {
				msgs := make(chan string, 3)
				pctx := pool.WithProgress(ctx, func(n *mcp.ProgressNotificationParams) { msgs <- n.Message })
				res, err := p.CallTool(pctx, srv, &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{}})
				if err != nil || mcptest.Text(res) != "done" {
					t.Fatalf("progress: %v %v", err, res)
				}
				// go-sdk may hand a notification read before the result to
				// the pool after CallTool returned (pool/progress.go).
				var got []string
				for len(got) < 3 {
					select {
					case m := <-msgs:
						got = append(got, m)
					case <-time.After(10 * time.Second):
						t.Fatalf("progress messages %q after 10s, want 3", got)
					}
				}
				if strings.Join(got, ",") != "step 1,step 2,step 3" {
					t.Fatalf("progress messages %q, want step 1..3", got)
				}
			})

			t.Run("cancellation", func(t *testing.T) {
				cctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() {
					_, err := p.CallTool(cctx, srv, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{}})
					done <- err
				}()
				<-started
				cancel()
				select {
				case <-cancelled:
				case <-time.After(10 * time.Second):
					t.Fatal("the tool's context was not cancelled within 10s of the caller's")
				}
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled call: %v, want context.Canceled", err)
				}
			})

			t.Run("idempotency", func(t *testing.T) {
				kctx := pool.WithIdempotencyKey(ctx, idempotency.NewKey(time.Now()))
				tag := "idem-" + strings.ReplaceAll(era.name, "-", "")
				args := map[string]any{"text": "once", "tags": []string{tag}}
				var texts []string
				for range 2 {
					res, err := p.CallTool(kctx, srv, &mcp.CallToolParams{Name: "store_note", Arguments: args})
					if err != nil || res.IsError {
						t.Fatalf("store_note: %v %v", err, res)
					}
					texts = append(texts, mcptest.Text(res))
				}
				if texts[0] != texts[1] || p.Stats().Replays != 1 {
					t.Fatalf("repeat: %q, replays %d, want the first answer replayed", texts, p.Stats().Replays)
				}
				list, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"tag": tag}})
				if err != nil || !strings.HasPrefix(mcptest.Text(list), "1 note ") {
					t.Fatalf("archive after a repeated store: %v %q", err, mcptest.Text(list))
				}
			})

			t.Run("trace context", func(t *testing.T) {
				tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
				sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled, Remote: true})
				res, err := p.CallTool(trace.ContextWithRemoteSpanContext(ctx, sc), srv, &mcp.CallToolParams{Name: "traceid", Arguments: map[string]any{}})
				if err != nil || mcptest.Text(res) != tid.String() {
					t.Fatalf("traceid: %v %q, want %s", err, mcptest.Text(res), tid)
				}
			})

			if st := p.Stats(); st.Dials != 1 || st.Retries != 0 {
				t.Fatalf("stats %+v, want one dial and no retry", st)
			}
		})
	}
}

// swappable serves whichever agent server is current, so a test can
// restart the agent (a new Server over the same data directory: every
// session of the old one gone) behind one URL.
type swappable struct{ h atomic.Pointer[http.Handler] }

func (sw *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*sw.h.Load()).ServeHTTP(w, r)
}

// TestRestartBetweenCallsByEra: the agent restarts between two calls of
// one pool. In the session era the agent's own continuity
// (continuity.go) restores the pool's session from the data directory, so
// the restart is a non-event; with it off (NoContinuity) the session is
// gone (404), and the second call is retried on a re-initialized session.
// In the sessionless era there is nothing to lose: no retry, no re-dial.
// In every case every call lands once (packrat's archive).
func TestRestartBetweenCallsByEra(t *testing.T) {
	type variant struct {
		name         string
		pin, want    string
		noContinuity bool
	}
	var variants []variant
	for _, era := range eras {
		variants = append(variants, variant{era.name, era.pin, era.want, false})
		if era.pin == pool.Protocol20251125 {
			variants = append(variants, variant{era.name + "/no-continuity", era.pin, era.want, true})
		}
	}
	for _, era := range variants {
		t.Run(era.name, func(t *testing.T) {
			dir := t.TempDir()
			start := func() *Server {
				s, err := New(&agentdef.Definition{Name: "packrat", Tools: []string{"packrat"}}, &Options{DataDir: dir, NoContinuity: era.noContinuity})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			sw := &swappable{}
			cur := start()
			h := cur.Handler()
			sw.h.Store(&h)
			ts := httptest.NewServer(sw)
			t.Cleanup(func() {
				cur.CloseSessions()
				ts.Close()
				cur.Close()
			})
			p := pool.New(&pool.Options{Transport: ts.Client().Transport})
			t.Cleanup(func() { p.Close() })
			srv := &pool.Server{Name: "packrat", URL: ts.URL, ProtocolVersion: era.pin}
			store := func(id string) {
				t.Helper()
				res, err := p.CallTool(t.Context(), srv, &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": id, "tags": []string{id}}})
				if err != nil || res.IsError {
					t.Fatalf("store_note %s: %v %v", id, err, res)
				}
			}
			const n = 5
			for i := range n {
				store(fmt.Sprintf("b%d", i))
			}
			// The restart: the old server's sessions end, it closes (its
			// data directory is free only then), a new one serves.
			cur.CloseSessions()
			if err := cur.Close(); err != nil {
				t.Fatal(err)
			}
			cur = start()
			h = cur.Handler()
			sw.h.Store(&h)
			for i := range n {
				store(fmt.Sprintf("a%d", i))
			}
			st := p.Stats()
			wantRetries := int64(0)
			if era.noContinuity {
				wantRetries = 1 // the first call after the restart, on a new session
			}
			if st.Retries != wantRetries || st.Reinitializations != wantRetries || st.Protocols[era.want] != 1 {
				t.Fatalf("after a restart in the %s era: retries %d, reinitializations %d, protocols %v; want %d, %d, one at %s",
					era.name, st.Retries, st.Reinitializations, st.Protocols, wantRetries, wantRetries, era.want)
			}
			cs := connect(t, ts.URL, nil)
			for _, prefix := range []string{"b", "a"} {
				for i := range n {
					id := fmt.Sprintf("%s%d", prefix, i)
					res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"tag": id}})
					if err != nil || !strings.HasPrefix(mcptest.Text(res), "1 note ") {
						t.Fatalf("notes of %s: %v %q, want exactly 1", id, err, mcptest.Text(res))
					}
				}
			}
			t.Logf("%s era: %d/%d calls after the restart landed, 0 duplicates, %d retries", era.name, n, n, st.Retries)
		})
	}
}

// rawSessionless posts one tools/call of the sessionless era (header and
// _meta, no session) with extra headers and returns the answer.
func rawSessionless(t *testing.T, url string, hdr map[string]string, args string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calculate","arguments":` + args + `,"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcphttp.ProtocolVersionHeader, "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call") // SEP-2243: required in this era
	req.Header.Set("Mcp-Name", "calculate")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}

// TestSessionlessSecurity: a request of the sessionless era passes the
// same checks as one of a session (Origin, Host, bearer, body limit)
// before any tool runs, and with them met it is answered without a
// session.
func TestSessionlessSecurity(t *testing.T) {
	const token = "correct-horse-battery-staple"
	s, err := New(&agentdef.Definition{Name: "abacus", Tools: []string{"abacus"}}, &Options{DataDir: t.TempDir(), Token: token, MaxBodyBytes: 1 << 12})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.CloseSessions()
		ts.Close()
		s.Close()
	})
	auth := "Bearer " + token
	big := `{"expression":"1` + strings.Repeat("+1", 1<<12) + `"}`
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		args string
		want int
	}{
		{"foreign Origin", map[string]string{"Authorization": auth, "Origin": "https://evil.example"}, `{"expression":"6*7"}`, http.StatusForbidden},
		{"foreign Host", map[string]string{"Authorization": auth, "Host": "evil.example"}, `{"expression":"6*7"}`, http.StatusForbidden},
		{"no bearer", nil, `{"expression":"6*7"}`, http.StatusUnauthorized},
		{"another bearer", map[string]string{"Authorization": auth + "x"}, `{"expression":"6*7"}`, http.StatusUnauthorized},
		{"oversized body", map[string]string{"Authorization": auth}, big, http.StatusRequestEntityTooLarge},
	} {
		// Refusals name the server's address, whose port may hold "42":
		// what must be missing is a JSON-RPC result, the tool's output.
		if code, body := rawSessionless(t, ts.URL, tc.hdr, tc.args); code != tc.want || strings.Contains(body, `"result"`) {
			t.Errorf("%s: %d %q, want %d", tc.name, code, body, tc.want)
		}
	}
	code, body := rawSessionless(t, ts.URL, map[string]string{"Authorization": auth}, `{"expression":"6*7"}`)
	if code != http.StatusOK || !strings.Contains(body, `"result"`) || !strings.Contains(body, `"result":42`) {
		t.Fatalf("with every check met: %d %q, want the result 42", code, body)
	}
}

// TestDiscoverOffersBothEras: server/discover names both eras, and an
// initialize still opens a session, on the same endpoint.
func TestDiscoverOffersBothEras(t *testing.T) {
	_, ts := newTestServer(t, &agentdef.Definition{Name: "mu"})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcphttp.ProtocolVersionHeader, "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, data, _ := strings.Cut(string(b), "data: ")
	if data == "" {
		data = string(b)
	}
	var got struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &got); err != nil || resp.Header.Get(mcphttp.SessionIDHeader) != "" {
		t.Fatalf("server/discover: %v, session %q: %s", err, resp.Header.Get(mcphttp.SessionIDHeader), b)
	}
	v := strings.Join(got.Result.SupportedVersions, ",")
	if !strings.Contains(v, pool.Protocol20260728) || !strings.Contains(v, pool.Protocol20251125) {
		t.Fatalf("supportedVersions %q, want both eras", v)
	}
	cs := connectEra(t, ts.URL, nil, pool.Protocol20251125)
	if cs.ID() == "" || cs.InitializeResult().ProtocolVersion != pool.Protocol20251125 {
		t.Fatalf("initialize: session %q at %s, want a session at 2025-11-25", cs.ID(), cs.InitializeResult().ProtocolVersion)
	}
	cs = connectEra(t, ts.URL, nil, "")
	if cs.ID() != "" || cs.InitializeResult().ProtocolVersion != pool.Protocol20260728 {
		t.Fatalf("unpinned client: session %q at %s, want no session at 2026-07-28", cs.ID(), cs.InitializeResult().ProtocolVersion)
	}
}

// connectEra is connect with the protocol version the client asks for
// ("" is go-sdk's newest, 2026-07-28).
func connectEra(t *testing.T, url string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
