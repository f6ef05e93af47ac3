package mcphttptest

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// CheckReconnect runs, with raw requests, the sequence that used to kill an
// agent turn (DESIGN.md, failure 1):
//
//  1. POST initialize → 200, with an Mcp-Session-Id;
//  2. POST notifications/initialized with it → 2xx; DELETE with it → 2xx;
//  3. POST initialize still carrying the terminated id → 200 with a new,
//     different id (not 404, not 400);
//  4. POST initialize with no id → 200;
//
// then tools/list and tools/call of tool with args on the session of step 3,
// whose text must contain wantText.
func CheckReconnect(t testing.TB, ctx context.Context, c *Client, tool string, args map[string]any, wantText string) {
	t.Helper()
	r, err := c.Initialize(ctx, "")
	if err != nil {
		t.Fatalf("1) initialize: %v", err)
	}
	if r.Status != http.StatusOK || r.SessionID == "" {
		t.Fatalf("1) initialize: %v, want 200 with a session id", r)
	}
	first := r.SessionID
	if r, err = c.Call(ctx, first, nil, "notifications/initialized", nil); err != nil || r.Status/100 != 2 {
		t.Fatalf("2) notifications/initialized: %v %v, want 2xx", r, err)
	}
	if r, err = c.Delete(ctx, first); err != nil || r.Status/100 != 2 {
		t.Fatalf("2) DELETE: %v %v, want 2xx", r, err)
	}
	if r, err = c.Initialize(ctx, first); err != nil || r.Status != http.StatusOK || r.SessionID == "" || r.SessionID == first {
		t.Fatalf("3) initialize carrying the terminated id %q: %v %v, want 200 with a new id", first, r, err)
	}
	second := r.SessionID
	if r, err = c.Initialize(ctx, ""); err != nil || r.Status != http.StatusOK {
		t.Fatalf("4) initialize without an id: %v %v, want 200", r, err)
	}
	// The unused session of step 4 is left to the server's idle timeout,
	// as a careless client would.

	if r, err = c.Call(ctx, second, nil, "notifications/initialized", nil); err != nil || r.Status/100 != 2 {
		t.Fatalf("notifications/initialized on the new session: %v %v", r, err)
	}
	r, err = c.Call(ctx, second, 2, "tools/list", nil)
	if err != nil || r.Status != http.StatusOK || r.Result() == nil {
		t.Fatalf("tools/list on the new session: %v %v", r, err)
	}
	var names []string
	tools, _ := r.Result()["tools"].([]any)
	for _, tl := range tools {
		if m, ok := tl.(map[string]any); ok {
			names = append(names, m["name"].(string))
		}
	}
	if !contains(names, tool) {
		t.Fatalf("tools/list: %v, want %s among them", names, tool)
	}
	r, err = c.Call(ctx, second, 3, "tools/call", map[string]any{"name": tool, "arguments": args})
	if err != nil || r.Status != http.StatusOK || r.Result() == nil {
		t.Fatalf("tools/call %s on the new session: %v %v", tool, r, err)
	}
	if isErr, _ := r.Result()["isError"].(bool); isErr || !strings.Contains(ResultText(r.Result()), wantText) {
		t.Fatalf("tools/call %s: %s, want a result containing %q", tool, r.Body, wantText)
	}
	if r, err = c.Delete(ctx, second); err != nil || r.Status/100 != 2 {
		t.Fatalf("DELETE the new session: %v %v", r, err)
	}
}

// ResultText joins the text content of a tools/call result.
func ResultText(result map[string]any) string {
	var b strings.Builder
	content, _ := result["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			if s, ok := m["text"].(string); ok {
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
