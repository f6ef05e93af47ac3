package agentserver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestPOSTStreamsAreResumable: a session-era POST stream opens with a
// priming event that has an event id and a retry field (spec 2025-11-25,
// SEP-1699), and a client that reconnects with that id as Last-Event-ID
// gets the rest of the stream: the request's response, from the event
// store.
func TestPOSTStreamsAreResumable(t *testing.T) {
	ts := resumableServer(t, true)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := &mcphttptest.Client{URL: ts.URL}
	sid, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Call(ctx, sid, 7, "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(r.Body, []byte("\n\n"))
	lines := strings.Split(string(first), "\n")
	if r.Status != http.StatusOK || len(lines) < 3 || lines[0] != "event: prime" || !strings.HasPrefix(lines[1], "id: ") || lines[2] != "retry: 500" {
		t.Fatalf("the stream's first event is %q, want a priming event with an id and retry: 500\n%s", first, r.Body)
	}
	primeID := strings.TrimPrefix(lines[1], "id: ")
	if r.Result() == nil {
		t.Fatalf("no result in %s", r.Body)
	}

	// Reconnect as if the stream had dropped right after the priming event.
	again, err := c.Do(ctx, http.MethodGet, sid, nil, map[string]string{"Last-Event-ID": primeID})
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != http.StatusOK || again.Result() == nil || len(again.Messages) != 1 || again.Messages[0]["id"] != float64(7) {
		t.Fatalf("resuming after %s: %v, want the call's response replayed", primeID, again)
	}
}

// TestStreamsAreNotResumableWhenOff: with Options.NoResumableStreams a
// stream carries no event ids (so no client tries to resume it).
func TestStreamsAreNotResumableWhenOff(t *testing.T) {
	ts := resumableServer(t, false)
	c := &mcphttptest.Client{URL: ts.URL}
	sid, err := c.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Call(t.Context(), sid, 7, "tools/list", nil)
	if err != nil || r.Result() == nil {
		t.Fatalf("tools/list: %v %v", r, err)
	}
	if bytes.Contains(r.Body, []byte("\nid: ")) || bytes.HasPrefix(r.Body, []byte("id: ")) || bytes.Contains(r.Body, []byte("event: prime")) {
		t.Errorf("a stream with NoResumableStreams has event ids: %s", r.Body)
	}
}

func resumableServer(t *testing.T, on bool) *httptest.Server {
	t.Helper()
	s, err := New(&agentdef.Definition{Name: "alpha", MaxDepth: 3}, &Options{DataDir: t.TempDir(), NoResumableStreams: !on})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.CloseSessions()
		ts.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return ts
}
