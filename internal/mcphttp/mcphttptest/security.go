package mcphttptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
)

// The checks below are the security battery that docs/SECURITY.md reports:
// each runs against any MCP endpoint that sits behind the mcphttp
// middleware (an agent server, a studio route), over real HTTP, and fails t
// with what it saw. The endpoint must not require a token (CheckBearer
// covers one that does).

// do sends one request built by the caller, with c.Header added unless the
// request sets the header itself, and reads the whole answer.
func (c *Client) do(req *http.Request) (*Response, error) {
	for k, v := range c.Header {
		if req.Header.Get(k) == "" {
			req.Header.Set(k, v)
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the %s %s answer: %w", req.Method, req.URL, err)
	}
	r := &Response{Status: resp.StatusCode, Header: resp.Header, Body: data, SessionID: resp.Header.Get("Mcp-Session-Id")}
	r.Messages = decode(resp.Header.Get("Content-Type"), data)
	return r, nil
}

func initializeBody() []byte {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{
			"protocolVersion": ProtocolVersion,
			"capabilities":    map[string]any{},
			"clientInfo":      map[string]any{"name": "mcphttptest", "version": "0"},
		},
	})
	return body
}

func (c *Client) post(ctx context.Context, body io.Reader, header map[string]string, host string) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if host != "" {
		req.Host = host
	}
	return c.do(req)
}

// CheckOrigin: an initialize from a foreign web page (Origin
// https://evil.example) is refused with 403 and creates no session; one from
// a loopback page is served.
func CheckOrigin(t testing.TB, ctx context.Context, c *Client) {
	t.Helper()
	for _, origin := range []string{"https://evil.example", "http://evil.example:80", "null", "file://"} {
		r, err := c.post(ctx, bytes.NewReader(initializeBody()), map[string]string{"Origin": origin}, "")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusForbidden || r.SessionID != "" {
			t.Errorf("initialize with Origin %q: %v, want 403 and no session", origin, r)
		}
	}
	r, err := c.post(ctx, bytes.NewReader(initializeBody()), map[string]string{"Origin": "http://localhost:5173"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK || r.SessionID == "" {
		t.Errorf("initialize from a loopback page: %v, want 200 with a session", r)
	}
}

// CheckHost: a request that reached a loopback listener naming another host
// (a DNS-rebound page sends its own domain) is refused with 403.
func CheckHost(t testing.TB, ctx context.Context, c *Client) {
	t.Helper()
	r, err := c.post(ctx, bytes.NewReader(initializeBody()), nil, "evil.example")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusForbidden || r.SessionID != "" {
		t.Errorf("initialize with Host evil.example: %v, want 403", r)
	}
}

// CheckCrossCredential: a session is bound to the Authorization header that
// created it; presented with another credential, or none, it is 404 (as if
// it did not exist), and nothing runs on it.
func CheckCrossCredential(t testing.TB, ctx context.Context, c *Client) {
	t.Helper()
	alice := &Client{URL: c.URL, HTTP: c.HTTP, Header: map[string]string{"Authorization": "Bearer alice"}}
	sid, err := alice.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	for who, header := range map[string]map[string]string{
		"bob":                     {"Authorization": "Bearer bob"},
		"no credential":           nil,
		"alice in another scheme": {"Authorization": "Basic YWxpY2U6"},
	} {
		h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": ProtocolVersion}
		for k, v := range header {
			h[k] = v
		}
		r, err := c.post(ctx, bytes.NewReader(list), h, "")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusNotFound || r.Result() != nil {
			t.Errorf("alice's session presented by %s: %v, want 404", who, r)
		}
	}
	r, err := alice.Call(ctx, sid, 3, "tools/list", nil)
	if err != nil || r.Status != http.StatusOK || r.Result() == nil {
		t.Errorf("alice's session presented by alice: %v %v, want 200", r, err)
	}
	// And the other way round: a session made without a credential is not
	// anyone's to pick up.
	anon, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := alice.Call(ctx, anon, 4, "tools/list", nil); err != nil || r.Status != http.StatusNotFound {
		t.Errorf("an anonymous session presented with a credential: %v %v, want 404", r, err)
	}
}

// SessionIDs opens n sessions and checks their ids: each at least 128 bits
// from a uniform source (26 or more characters of the base32 alphabet that
// go-sdk's default generator, crypto/rand.Text, draws from), all distinct,
// and the characters spread as a uniform source spreads them (a chi-square
// test at p = 1e-6). It returns the ids.
func SessionIDs(t testing.TB, ctx context.Context, c *Client, n int) []string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	seen := make(map[string]bool, n)
	counts := make(map[rune]int)
	total := 0
	var ids []string
	for range n {
		r, err := c.Initialize(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		id := r.SessionID
		if r.Status != http.StatusOK || id == "" {
			t.Fatalf("initialize: %v", r)
		}
		if bits := float64(len(id)) * math.Log2(float64(len(alphabet))); bits < 128 || strings.Trim(id, alphabet) != "" {
			t.Fatalf("session id %q: %d characters (%.0f bits), want at least 128 bits of base32 (%s)", id, len(id), bits, alphabet)
		}
		if seen[id] {
			t.Fatalf("session id %q issued twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
		for _, ch := range id {
			counts[ch]++
			total++
		}
	}
	expected := float64(total) / float64(len(alphabet))
	chi2 := 0.0
	for _, ch := range alphabet {
		d := float64(counts[ch]) - expected
		chi2 += d * d / expected
	}
	// 31 degrees of freedom; P(chi2 > 80) is about 2e-6 for a uniform source.
	if chi2 > 80 {
		t.Errorf("session id characters are not uniform: chi-square %.1f over %d characters", chi2, total)
	}
	return ids
}

// CheckBodyLimit: a body over limit bytes is refused with 413 and a JSON-RPC
// error, whether it announces its length or streams it chunked.
func CheckBodyLimit(t testing.TB, ctx context.Context, c *Client, limit int64) {
	t.Helper()
	pad := strings.Repeat("x", int(limit))
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + pad + `"}}`)
	for name, rd := range map[string]io.Reader{
		"with Content-Length": bytes.NewReader(body),
		"chunked":             io.MultiReader(bytes.NewReader(body)), // unknown length: chunked
	} {
		r, err := c.post(ctx, rd, nil, "")
		if err != nil {
			t.Fatalf("oversized body %s: %v", name, err)
		}
		if r.Status != http.StatusRequestEntityTooLarge || r.Error() == nil {
			t.Errorf("oversized body %s: HTTP %d %.200s, want 413 with a JSON-RPC error", name, r.Status, r.Body)
		}
	}
}

// CheckMalformed: a body that is not one JSON-RPC 2.0 message gets a
// JSON-RPC error (parse error or invalid request) in an application/json
// answer, never a crash; afterwards the endpoint still serves.
func CheckMalformed(t testing.TB, ctx context.Context, c *Client) {
	t.Helper()
	for _, tc := range []struct {
		name, body string
		code       float64
	}{
		{"truncated JSON", `{"jsonrpc":"2.0","id":1,"method":`, -32700},
		{"not JSON", `hello`, -32700},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, -32600},
		{"an empty batch", `[]`, -32600},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32600},
		{"no jsonrpc member", `{"id":1,"method":"ping"}`, -32600},
		{"not an object", `42`, -32600},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":7}`, -32600},
	} {
		r, err := c.post(ctx, strings.NewReader(tc.body), nil, "")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		e := r.Error()
		if r.Status/100 != 4 || e == nil || e["code"] != tc.code || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %v, want a 4xx JSON-RPC error %v", tc.name, r, tc.code)
		}
	}
	if _, err := c.Open(ctx); err != nil {
		t.Errorf("after the malformed requests the endpoint no longer serves: %v", err)
	}
}
