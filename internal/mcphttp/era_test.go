package mcphttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// TestByEra: behind the middleware, each request reaches the handler of
// its era; a session id always means the session handler, whatever the
// request claims.
func TestByEra(t *testing.T) {
	handler := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	}
	h := mcphttp.New(mcphttp.ByEra(handler("sessions"), handler("sessionless")), nil)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	for _, tc := range []struct {
		name, version, session, body, want string
	}{
		{"initialize", "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "sessions"},
		{"a session's call", "2025-11-25", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "sessions"},
		{"no version at all", "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "sessions"},
		{"the header", "2026-07-28", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "sessionless"},
		{"a later version", "2027-01-01", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "sessionless"},
		{"server/discover", "", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, "sessionless"},
		{"_meta alone", "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, "sessionless"},
	} {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		if tc.version != "" {
			req.Header.Set(mcphttp.ProtocolVersionHeader, tc.version)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Body.String(); got != tc.want {
			t.Errorf("%s: reached %q, want %q", tc.name, got, tc.want)
		}
	}
	// With a session id: the session handler's to answer, here the
	// middleware's 404 for a session it never saw, never the sessionless
	// handler.
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`))
	req.Header.Set(mcphttp.ProtocolVersionHeader, "2026-07-28")
	req.Header.Set(mcphttp.SessionIDHeader, "abc")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "sessionless") {
		t.Fatalf("a request with a session id: %d %q, want the 404 of the session rules", rec.Code, rec.Body)
	}
}
