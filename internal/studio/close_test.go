package studio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// openStandaloneStream initializes a session on url by hand and opens its
// standalone GET stream, returning once the stream's headers arrived: the
// studio is then holding it, through session continuity.
func openStandaloneStream(t *testing.T, url string) *http.Response {
	t.Helper()
	send := func(method string, body []byte, session string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	init := send(http.MethodPost, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`), "")
	io.Copy(io.Discard, init.Body)
	init.Body.Close()
	id := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s, session %q", init.Status, id)
	}
	ack := send(http.MethodPost, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), id)
	io.Copy(io.Discard, ack.Body)
	ack.Body.Close()
	stream := send(http.MethodGet, nil, id)
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %s", stream.Status)
	}
	return stream
}

// TestCloseEndsHeldStreams: a client's standalone stream, which stays open
// for as long as its session lives, does not keep Close waiting: Close ends
// it first, Shutdown then finishes, and Close returns nil (before, Close
// waited the whole shutdownTimeout and dropped Shutdown's error).
func TestCloseEndsHeldStreams(t *testing.T) {
	// An agent that drains for longer than shutdownTimeout keeps its
	// end of the stream open meanwhile: only the studio can end it.
	s := startStudio(t, projecttest.New(t, "abacus"), &Options{Env: []string{"SWITCHBOARD_SHUTDOWN_GRACE=20s"}})
	stream := openStandaloneStream(t, s.AgentURL("abacus"))
	defer stream.Body.Close()

	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close with a stream held: %v, want nil", err)
	}
	t.Logf("Close took %v with a stream held (shutdownTimeout %v)", time.Since(start), shutdownTimeout)
	// The stream ended with the studio (its read returns, EOF or not).
	io.Copy(io.Discard, stream.Body)
}

// TestCloseNamesAStuckHandler: a handler that does not return within
// shutdownTimeout makes Close return ErrStillServing naming it, and its
// connection is closed.
func TestCloseNamesAStuckHandler(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	o := Options{
		Dir:         projecttest.New(t, "abacus"),
		Listen:      "127.0.0.1:0",
		Executable:  switchboardBin,
		AgentOutput: io.Discard,
		wrapHandler: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/stuck" {
					next.ServeHTTP(w, r)
					return
				}
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				close(entered)
				<-release // ignores its context, as a buggy handler would
			})
		},
	}
	s, err := Start(t.Context(), &o)
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	resp, err := http.Get(s.URL() + "/stuck")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-entered

	err = s.Close()
	if !errors.Is(err, ErrStillServing) {
		t.Fatalf("Close with a stuck handler: %v, want ErrStillServing", err)
	}
	if !strings.Contains(err.Error(), "GET /stuck") {
		t.Errorf("Close's error does not name the stuck request: %v", err)
	}
	if again := s.Close(); again == nil || again.Error() != err.Error() {
		t.Errorf("Close again: %v, want the same error", again)
	}
	// Its connection was closed: the read ends.
	io.Copy(io.Discard, resp.Body)
}

// TestCloseWithAConnectionThatSentNothing: a connection that never sent a
// request (a client's spare dial, which net/http's Transport parks when
// another connection served the request first) does not hold Close.
// http.Server.Shutdown treats such a connection as busy for its first 5 s,
// exactly shutdownTimeout, so Close failed with ErrStillServing naming no
// request (the project's CI, TestE2ECycleAndDepthRefusal).
func TestCloseWithAConnectionThatSentNothing(t *testing.T) {
	s := startStudio(t, projecttest.New(t, "abacus"), nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The studio has accepted it: a request on another connection is
	// answered only after the accept loop took the earlier one.
	resp, err := http.Get(s.URL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if err := s.Close(); err != nil {
		t.Fatalf("Close with a connection that sent nothing: %v, want nil", err)
	}
	// The studio closed it.
	if n, err := conn.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes on the quiet connection after Close, want it closed", n)
	}
}
