package mcphttp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

// TestRestoreSession: a handler that never saw a session created refuses
// it unless RestoreSession vouches for it, with the digest of the
// request's credential; a vouched binding is restored (and then held to
// that credential), within MaxSessions. Two middlewares in front of one
// go-sdk handler stand for two processes in front of one session.
func TestRestoreSession(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "0"}, nil)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	t.Cleanup(func() { closeSessions(s) })
	creator := httptest.NewServer(mcphttp.New(sdk, nil))
	t.Cleanup(creator.Close)

	digest := func(auth string) string { sum := sha256.Sum256([]byte(auth)); return hex.EncodeToString(sum[:]) }
	var mu sync.Mutex
	kept := map[string]string{} // id -> cred digest, what a store would say
	var asked []string
	other := mcphttp.New(sdk, &mcphttp.Options{MaxSessions: 1, RestoreSession: func(_ context.Context, id, cred string) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, cred)
		return kept[id] == cred
	}})
	ts := httptest.NewServer(other)
	t.Cleanup(ts.Close)

	alice := &mcphttptest.Client{URL: creator.URL, HTTP: creator.Client(), Header: map[string]string{"Authorization": "Bearer alice"}}
	id := must[string](t)(alice.Open(t.Context()))
	id2 := must[string](t)(alice.Open(t.Context()))
	alice.URL = ts.URL

	// Not kept: refused, and the hook was asked with alice's digest.
	if r := must[*mcphttptest.Response](t)(alice.Call(t.Context(), id, 2, "tools/list", nil)); r.Status != http.StatusNotFound {
		t.Fatalf("a session nobody vouches for: %v, want 404", r)
	}
	if len(asked) != 1 || asked[0] != digest("Bearer alice") {
		t.Fatalf("RestoreSession asked with %q, want alice's digest", asked)
	}
	mu.Lock()
	kept[id], kept[id2] = digest("Bearer alice"), digest("Bearer alice")
	mu.Unlock()
	bob := &mcphttptest.Client{URL: ts.URL, HTTP: ts.Client(), Header: map[string]string{"Authorization": "Bearer bob"}}
	if r := must[*mcphttptest.Response](t)(bob.Call(t.Context(), id, 3, "tools/list", nil)); r.Status != http.StatusNotFound {
		t.Fatalf("alice's kept session presented by bob: %v, want 404", r)
	}
	if r := must[*mcphttptest.Response](t)(alice.Call(t.Context(), id, 4, "tools/list", nil)); r.Status != http.StatusOK {
		t.Fatalf("alice's kept session: %v, want 200", r)
	}
	if n := other.Sessions(); n != 1 {
		t.Fatalf("%d bindings after the restore, want 1", n)
	}
	// The binding now stands by itself, bound to alice.
	mu.Lock()
	delete(kept, id)
	mu.Unlock()
	if r := must[*mcphttptest.Response](t)(alice.Call(t.Context(), id, 5, "tools/list", nil)); r.Status != http.StatusOK {
		t.Fatalf("alice's restored session: %v, want 200", r)
	}
	if r := must[*mcphttptest.Response](t)(bob.Call(t.Context(), id, 6, "tools/list", nil)); r.Status != http.StatusNotFound {
		t.Fatalf("alice's restored session presented by bob: %v, want 404", r)
	}
	// MaxSessions 1: a second kept session has no room.
	if r := must[*mcphttptest.Response](t)(alice.Call(t.Context(), id2, 7, "tools/list", nil)); r.Status != http.StatusNotFound {
		t.Fatalf("a restore past MaxSessions: %v, want 404", r)
	}
}
