package studio

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// upstreamSeen records the requests the studio's proxy sent on to an agent:
// what got past every check of the studio.
type upstreamSeen struct {
	mu   sync.Mutex
	reqs []seenRequest
}

type seenRequest struct{ method, auth, session string }

func (u *upstreamSeen) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		u.mu.Lock()
		u.reqs = append(u.reqs, seenRequest{r.Header.Get("Mcp-Method"), r.Header.Get("Authorization"), r.Header.Get(mcphttp.SessionIDHeader)})
		u.mu.Unlock()
		return next.RoundTrip(r)
	})
}

func (u *upstreamSeen) take() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	got := u.reqs
	u.reqs = nil
	return got
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// sessionless posts one request of the 2026-07-28 era through the studio:
// the version in the MCP-Protocol-Version header and in _meta, the method in
// Mcp-Method (SEP-2243), no Mcp-Session-Id. hdr's "Host" sets the request's
// Host; chunked sends the body without a Content-Length.
func sessionless(t *testing.T, hc *http.Client, url, method, params string, hdr map[string]string, chunked bool) (int, http.Header, string) {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = "{" + params + "," + meta + "}"
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	var rd io.Reader = strings.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // unknown length: chunked
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcphttp.ProtocolVersionHeader, mcphttp.EraVersion)
	req.Header.Set("Mcp-Method", method)
	if method == "tools/call" {
		req.Header.Set("Mcp-Name", "calculate")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header, string(b)
}

// calculate is the params of abacus's calculate tool for expr.
func calculate(expr string) string {
	return `"name":"calculate","arguments":{"expression":"` + expr + `"}`
}

// resultText is the text of a tools/call answer, in a JSON body or the
// first SSE event's data.
func resultText(t *testing.T, body string) string {
	t.Helper()
	data := body
	if _, d, ok := strings.Cut(body, "data: "); ok {
		data, _, _ = strings.Cut(d, "\n")
	}
	var got struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &got); err != nil || len(got.Result.Content) == 0 || got.Result.IsError {
		t.Fatalf("not a tool's result: %v: %.300s", err, body)
	}
	return got.Result.Content[0].Text
}

// noStateLeft checks that the studio keeps nothing for sessionless
// requests: no session binding in the proxy's middleware, none in
// continuity.
func noStateLeft(t *testing.T, s *Studio) {
	t.Helper()
	m := s.agents["abacus"]
	if n := m.route.Sessions(); n != 0 {
		t.Errorf("the studio's middleware binds %d sessions after sessionless requests, want 0", n)
	}
	if kept, renewals := m.continuity.Kept(); kept != 0 || renewals != 0 {
		t.Errorf("continuity keeps %d sessions (%d renewals) after sessionless requests, want none", kept, renewals)
	}
}

// TestSessionlessSecurityThroughStudio: a request of the 2026-07-28 era
// sent to the studio's /api/agents/abacus/mcp passes the same checks as a
// session's (Origin, Host, bearer, body limit) before anything reaches the
// agent; with them met it is answered without a session, and the studio
// keeps no state for it. Each request reaches the agent with its own
// credential: with no session there is nothing to bind, so nothing of one
// caller's request can answer another's.
func TestSessionlessSecurityThroughStudio(t *testing.T) {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}

	t.Run("token mode", func(t *testing.T) {
		const token = "correct-horse-battery-staple"
		const limit = 1 << 12
		var up upstreamSeen
		s := startStudio(t, projecttest.New(t, "abacus"), &Options{Token: token, MaxBodyBytes: limit, wrapUpstream: up.wrap})
		before := waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
		url := s.AgentURL("abacus")
		auth := "Bearer " + token
		big := calculate("1" + strings.Repeat("+1", limit))
		for _, tc := range []struct {
			name    string
			hdr     map[string]string
			params  string
			chunked bool
			want    int
		}{
			{"foreign Origin", map[string]string{"Authorization": auth, "Origin": "https://evil.example"}, calculate("6*7"), false, http.StatusForbidden},
			{"Origin null", map[string]string{"Authorization": auth, "Origin": "null"}, calculate("6*7"), false, http.StatusForbidden},
			{"foreign Host", map[string]string{"Authorization": auth, "Host": "evil.example"}, calculate("6*7"), false, http.StatusForbidden},
			{"no bearer", nil, calculate("6*7"), false, http.StatusUnauthorized},
			{"wrong bearer", map[string]string{"Authorization": auth + "x"}, calculate("6*7"), false, http.StatusUnauthorized},
			{"token without Bearer", map[string]string{"Authorization": token}, calculate("6*7"), false, http.StatusUnauthorized},
			{"oversized body", map[string]string{"Authorization": auth}, big, false, http.StatusRequestEntityTooLarge},
			{"oversized body, chunked", map[string]string{"Authorization": auth}, big, true, http.StatusRequestEntityTooLarge},
		} {
			for _, method := range []string{"tools/call", "server/discover"} {
				params := tc.params
				if method == "server/discover" {
					params = ""
					if tc.want == http.StatusRequestEntityTooLarge {
						params = `"pad":"` + strings.Repeat("x", limit) + `"`
					}
				}
				code, hdr, body := sessionless(t, hc, url, method, params, tc.hdr, tc.chunked)
				if code != tc.want || strings.Contains(body, "= 42") || strings.Contains(body, "supportedVersions") {
					t.Errorf("%s, %s: %d %.300s, want %d and nothing from the agent", tc.name, method, code, body, tc.want)
				}
				if id := hdr.Get(mcphttp.SessionIDHeader); id != "" {
					t.Errorf("%s, %s: answered with session %q", tc.name, method, id)
				}
			}
		}
		if got := up.take(); len(got) != 0 {
			t.Errorf("refused requests reached the agent: %+v", got)
		}
		noStateLeft(t, s)

		code, hdr, body := sessionless(t, hc, url, "server/discover", "", map[string]string{"Authorization": auth}, false)
		if code != http.StatusOK || !strings.Contains(body, mcphttp.EraVersion) || hdr.Get(mcphttp.SessionIDHeader) != "" {
			t.Errorf("server/discover with every check met: %d, session %q: %.300s, want 200 naming %s and no session",
				code, hdr.Get(mcphttp.SessionIDHeader), body, mcphttp.EraVersion)
		}
		code, hdr, body = sessionless(t, hc, url, "tools/call", calculate("6*7"), map[string]string{"Authorization": auth}, false)
		if code != http.StatusOK || hdr.Get(mcphttp.SessionIDHeader) != "" {
			t.Fatalf("tools/call with every check met: %d, session %q: %.300s, want 200 and no session", code, hdr.Get(mcphttp.SessionIDHeader), body)
		}
		if got := resultText(t, body); got != "6*7 = 42" {
			t.Errorf("6*7 = %q, want 42", got)
		}
		got := up.take()
		if len(got) != 2 || got[0].method != "server/discover" || got[1].method != "tools/call" {
			t.Errorf("reached the agent: %+v, want the discover and the call", got)
		}
		for _, r := range got {
			if r.session != "" || r.auth != auth {
				t.Errorf("forwarded %+v, want the caller's Authorization and no session", r)
			}
		}
		noStateLeft(t, s)
		if after := s.Agents()[0]; after.PID != before.PID || after.Restarts != before.Restarts {
			t.Errorf("the agent restarted: before %+v, after %+v", before, after)
		}
	})

	t.Run("per-request credentials", func(t *testing.T) {
		var up upstreamSeen
		s := startStudio(t, projecttest.New(t, "abacus"), &Options{wrapUpstream: up.wrap})
		url := s.AgentURL("abacus")
		// Interleaved callers, each with its own bearer (or none): every
		// answer is its own request's, and every request reaches the agent
		// with its own Authorization, nothing remembered from the last.
		calls := []struct{ auth, expr, want string }{
			{"Bearer alice", "6*7", "42"},
			{"Bearer bob", "2+3", "5"},
			{"", "10-1", "9"},
			{"Bearer alice", "5*5", "25"},
			{"Bearer bob", "7*8", "56"},
		}
		for _, c := range calls {
			hdr := map[string]string{}
			if c.auth != "" {
				hdr["Authorization"] = c.auth
			}
			code, h, body := sessionless(t, hc, url, "tools/call", calculate(c.expr), hdr, false)
			if code != http.StatusOK || h.Get(mcphttp.SessionIDHeader) != "" {
				t.Fatalf("%q %s: %d, session %q: %.300s", c.auth, c.expr, code, h.Get(mcphttp.SessionIDHeader), body)
			}
			if got := resultText(t, body); got != c.expr+" = "+c.want {
				t.Errorf("%q %s = %q, want %s", c.auth, c.expr, got, c.want)
			}
		}
		got := up.take()
		if len(got) != len(calls) {
			t.Fatalf("reached the agent: %+v, want %d calls", got, len(calls))
		}
		for i, r := range got {
			if r.auth != calls[i].auth || r.session != "" || r.method != "tools/call" {
				t.Errorf("call %d reached the agent as %+v, want Authorization %q and no session", i, r, calls[i].auth)
			}
		}
		noStateLeft(t, s)

		// The control: a session of the 2025-11-25 era on the same
		// endpoint is bound and kept, so the zeros above are not counters
		// that never move.
		alice := &mcphttptest.Client{URL: url, HTTP: hc, Header: map[string]string{"Authorization": "Bearer alice"}}
		if _, err := alice.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		m := s.agents["abacus"]
		if n, _ := m.continuity.Kept(); n != 1 || m.route.Sessions() != 1 {
			t.Errorf("after one session-era initialize: continuity keeps %d, the middleware binds %d; want 1 and 1", n, m.route.Sessions())
		}
	})
}
