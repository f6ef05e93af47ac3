package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/rpccode"
)

// cutCall is the call the raw tests post: a sessionless (2026-07-28)
// tools/call with id 7.
const cutCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"work","arguments":{}},"_meta":{}}`

const (
	progressEvent = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n"
	answerEvent   = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n"
)

// cuttingAgent is an upstream that answers a POST with SSE headers, writes
// sent (flushed), and then resets the connection (hijacked, closed with
// SO_LINGER 0), as an agent SIGKILLed mid-stream does; with clean, it
// returns instead, ending the stream properly.
func cuttingAgent(t *testing.T, sent string, clean bool) *url.URL {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, sent)
		rc := http.NewResponseController(w)
		if err := rc.Flush(); err != nil {
			t.Errorf("flush: %v", err)
			return
		}
		if clean {
			return
		}
		conn, _, err := rc.Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, not a FIN
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

type sseEvent struct{ Name, ID, Data string }

// postThrough posts cutCall through a proxy in front of upstream and returns
// the complete events of the answer and how reading it ended.
func postThrough(t *testing.T, upstream *url.URL) ([]sseEvent, error) {
	t.Helper()
	transport := NewTransport()
	proxy := httptest.NewServer(New(upstream, &Options{Transport: transport}))
	t.Cleanup(func() { proxy.Close(); transport.CloseIdleConnections() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy.URL, strings.NewReader(cutCall))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return readEvents(resp.Body)
}

// readEvents parses SSE as go-sdk does, for the tests: complete events only.
func readEvents(r io.Reader) ([]sseEvent, error) {
	var evs []sseEvent
	var ev sseEvent
	var data []string
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return evs, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			ev.Data = strings.Join(data, "\n")
			if ev != (sseEvent{}) {
				evs = append(evs, ev)
			}
			ev, data = sseEvent{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Name = value
		case "id":
			ev.ID = value
		case "data":
			data = append(data, value)
		}
	}
}

func messageData(ev string) string {
	_, data, _ := strings.Cut(strings.TrimSpace(ev), "data: ")
	return data
}

// checkCutError checks that ev is the JSON-RPC error the proxy gives call 7
// whose stream was cut.
func checkCutError(t *testing.T, ev sseEvent) {
	t.Helper()
	var msg struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Agent          string `json:"agent"`
				OutcomeUnknown bool   `json:"outcomeUnknown"`
			} `json:"data"`
		} `json:"error"`
	}
	if ev.Name != "message" {
		t.Fatalf("last event is %q, want message: %+v", ev.Name, ev)
	}
	if err := json.Unmarshal([]byte(ev.Data), &msg); err != nil {
		t.Fatalf("last event's data: %v: %s", err, ev.Data)
	}
	if string(msg.ID) != "7" || msg.Error.Code != rpccode.OutcomeUnknown || !msg.Error.Data.OutcomeUnknown || msg.Error.Data.Agent == "" {
		t.Fatalf("last event: %s; want id 7, code %d, data {agent, outcomeUnknown: true}", ev.Data, rpccode.OutcomeUnknown)
	}
	if !strings.Contains(msg.Error.Message, "tools/call") || !strings.Contains(msg.Error.Message, msg.Error.Data.Agent) {
		t.Errorf("message %q names neither the method nor the agent", msg.Error.Message)
	}
}

// TestCutStreamEndsWithTheCallsError: the agent's SSE answer to a call is
// reset after a progress event (between events, in the middle of one, in
// the middle of a field's name); the client gets every complete event, then
// the call's typed error with its id, then a clean end, and nothing of the
// half-written event as a message.
func TestCutStreamEndsWithTheCallsError(t *testing.T) {
	half := answerEvent[:len(answerEvent)/2]
	for _, tc := range []struct{ name, sent string }{
		{"between events", progressEvent},
		{"mid event", progressEvent + half},
		{"mid field name", progressEvent + "event: message\nda"},
		{"after a line", progressEvent + "event: message\n"},
		{"crlf", strings.ReplaceAll(progressEvent, "\n", "\r\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := postThrough(t, cuttingAgent(t, tc.sent, false))
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the stream did not end cleanly: %v (events %+v)", err, evs)
			}
			var messages []sseEvent
			for _, ev := range evs {
				if ev.Name == "message" {
					messages = append(messages, ev)
				} else if ev.Name != cutEventName {
					t.Errorf("unexpected event %+v", ev)
				}
			}
			if len(messages) != 2 {
				t.Fatalf("got %d messages, want the progress and the error: %+v", len(messages), evs)
			}
			if want := messageData(progressEvent); messages[0].Data != want {
				t.Errorf("first message %q, want %q", messages[0].Data, want)
			}
			checkCutError(t, messages[1])
		})
	}
}

// TestCutStreamLeftAlone: a stream cut after the call's answer passed, a
// stream that carried an event id (the client's to resume with
// Last-Event-ID, continuity_streams.go), and a stream the agent ended on
// purpose get nothing added.
func TestCutStreamLeftAlone(t *testing.T) {
	primed := "id: s1_0\nretry: 500\ndata: \n\n"
	for _, tc := range []struct {
		name, sent string
		clean      bool
	}{
		{"answered", progressEvent + answerEvent, false},
		{"answer first in crlf", strings.ReplaceAll(answerEvent, "\n", "\r\n"), false},
		{"resumable", primed + progressEvent, false},
		{"clean end", progressEvent, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, _ := postThrough(t, cuttingAgent(t, tc.sent, tc.clean))
			want, _ := readEvents(strings.NewReader(tc.sent))
			if !slices.Equal(want, evs) {
				t.Errorf("events:\n got %+v\nwant %+v", evs, want)
			}
		})
	}
}

// TestCutCallThroughGoSDK: a real go-sdk client calls a real go-sdk server
// (session era, no event store, so no priming event) whose connection is
// reset once the tool's progress went out; the call fails with the typed
// error, its own, not with a broken connection.
func TestCutCallThroughGoSDK(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "cut", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "work"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1}); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "never seen"}}}, nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"tools/call"`)) {
			sdk.ServeHTTP(w, r)
			return
		}
		sdk.ServeHTTP(&resettingWriter{ResponseWriter: w, after: []byte("notifications/progress")}, r)
	}))
	u, err := url.Parse(upstream.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	transport := NewTransport()
	proxy := httptest.NewServer(New(u, &Options{Transport: transport}))
	defer func() {
		proxy.Close()
		upstream.Close()
		transport.CloseIdleConnections()
		for ss := range s.Sessions() {
			ss.Close()
		}
	}()
	progressed := make(chan struct{}, 1)
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case progressed <- struct{}{}:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: proxy.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != rpccode.OutcomeUnknown {
		t.Fatalf("call: %v, %+v; want JSON-RPC error %d", err, res, rpccode.OutcomeUnknown)
	}
	// go-sdk hands notifications to their handler on its own goroutine,
	// which may run after the call returned.
	select {
	case <-progressed:
	case <-ctx.Done():
		t.Error("the progress sent before the cut did not reach the client")
	}
	// The session is still usable: the cut ended one call, not the client.
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("after the cut call: %v", err)
	}
}

// resettingWriter passes writes through until one holding after, which it
// flushes before resetting the connection; later writes fail.
type resettingWriter struct {
	http.ResponseWriter
	after []byte
	mu    sync.Mutex
	cut   bool
}

func (w *resettingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		return 0, http.ErrHijacked
	}
	n, err := w.ResponseWriter.Write(p)
	if err != nil || !bytes.Contains(p, w.after) {
		return n, err
	}
	w.cut = true
	rc := http.NewResponseController(w.ResponseWriter)
	rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		return n, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
	return n, nil
}

func (w *resettingWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.cut {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}
