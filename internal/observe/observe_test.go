package observe

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// TestDelegationRecovery: a tools/call answered 404 and then sent again
// (the pool's retry on a new session) is shown as a recovery on both.
func TestDelegationRecovery(t *testing.T) {
	l := NewDelegations()
	call := func(kind string) *studioapi.Delegation {
		o := &observation{agent: "packrat", method: "tools/call", tool: "store_note", runID: "R1", argsDigest: "d1", start: time.Now()}
		d := l.start(o)
		o.kind, o.duration = kind, time.Millisecond
		l.finish(d, o)
		return d
	}
	other := &observation{agent: "packrat", method: "tools/call", tool: "store_note", runID: "R2", argsDigest: "d1", start: time.Now()}

	first := call("session_not_found")
	if first.Recovery != studioapi.RecoveryExpired {
		t.Fatalf("404: recovery %q, want %q", first.Recovery, studioapi.RecoveryExpired)
	}
	// Another run's identical call is not the retry.
	l.finish(l.start(other), other)
	retry := call("")
	got := l.Recent(10)
	if len(got) != 3 || got[0].ID != retry.ID || got[0].Recovery != studioapi.RecoveryRecovered || got[2].Recovery != studioapi.RecoveryRetried || got[1].Recovery != "" {
		t.Fatalf("after the retry: %+v", got)
	}

	failed := call("session_not_found")
	again := call("session_not_found")
	if failed.Recovery != studioapi.RecoveryRetried || again.Recovery != studioapi.RecoveryFailed {
		t.Fatalf("a retry that fails: %q then %q", failed.Recovery, again.Recovery)
	}

	// The ring keeps the most recent only.
	for range RecentDelegations + 5 {
		call("")
	}
	if got := l.Recent(RecentDelegations + 10); len(got) != RecentDelegations || got[0].ID != l.lastID {
		t.Fatalf("ring: %d entries, newest %d, want %d and %d", len(got), got[0].ID, RecentDelegations, l.lastID)
	}
}

// TestSniffer: the JSON-RPC response to the request is found in an SSE
// stream split across writes, among progress notifications, and in a JSON
// body; what passes through is unchanged.
func TestSniffer(t *testing.T) {
	notification := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"message":"{\"result\":{\"isError\":true}}"}}`
	cases := []struct {
		name, contentType, body string
		status                  int
		wantKind, wantMessage   string
	}{
		{"sse ok", "text/event-stream", "event: message\ndata: " + notification + "\n\nevent: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n", 200, "", ""},
		{"sse tool error", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"isError\":true}}\r\n\r\n", 200, "tool_error", ""},
		{"sse rpc error", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32602,\"message\":\"unknown tool\"}}\n\n", 200, "rpc_error", "unknown tool"},
		{"sse other id", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"isError\":true}}\n\n", 200, "no_response", ""},
		{"json ok", "application/json", `{"jsonrpc":"2.0","id":7,"result":{}}`, 200, "", ""},
		{"404", "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"session not found"}}`, 404, "session_not_found", "session not found"},
		{"503", "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"agent abacus is restarting"}}`, 503, "agent_unavailable", "agent abacus is restarting"},
		{"413", "application/json", `{"error":"too large"}`, 413, "http_413", "too large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			sn := &sniffer{ResponseWriter: rec, wantID: json.RawMessage("7"), parse: true}
			sn.Header().Set("Content-Type", c.contentType)
			sn.WriteHeader(c.status)
			for b := []byte(c.body); len(b) > 0; b = b[min(5, len(b)):] {
				sn.Write(b[:min(5, len(b))])
				sn.Flush()
			}
			o := &observation{}
			sn.finish(o, t.Context())
			if o.kind != c.wantKind || o.message != c.wantMessage {
				t.Errorf("kind %q message %q, want %q %q", o.kind, o.message, c.wantKind, c.wantMessage)
			}
			if rec.Body.String() != c.body || !rec.Flushed {
				t.Errorf("passed through %q (flushed %v), want %q", rec.Body.String(), rec.Flushed, c.body)
			}
		})
	}
}

// TestSnifferAnswersBeforePassingOn: in an SSE stream the call is recorded
// when its response is seen, before the response reaches the client, so a
// caller holding its answer never finds its call still running.
func TestSnifferAnswersBeforePassingOn(t *testing.T) {
	rec := httptest.NewRecorder()
	sn := &sniffer{ResponseWriter: rec, wantID: json.RawMessage("7"), parse: true}
	answered := 0
	sn.answered = func() {
		answered++
		if strings.Contains(rec.Body.String(), `"id":7`) {
			t.Error("the response reached the client before the call was recorded")
		}
	}
	sn.Header().Set("Content-Type", "text/event-stream")
	sn.WriteHeader(200)
	sn.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"))
	if answered != 0 {
		t.Fatal("answered on a notification")
	}
	sn.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n"))
	sn.Write([]byte(": the stream stays open a moment\n"))
	if answered != 1 {
		t.Fatalf("answered %d times, want once", answered)
	}
}
