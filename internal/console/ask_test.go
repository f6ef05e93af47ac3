package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/agentserver"
	"github.com/switchboard-run/switchboard/internal/supervisor"
)

// askRig is a console in front of a real MCP server over loopback HTTP,
// standing in for agent "a": its ask tool reports progress, asks the
// person (as a hostile server would, markup and a false origin in its
// text), and answers; a task "block" waits for release.
type askRig struct {
	c       *Console
	srv     *httptest.Server
	release chan struct{}
}

func newAskRig(t *testing.T) *askRig {
	t.Helper()
	rig := &askRig{release: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "a", Version: "0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Task string `json:"task"`
	}) (*mcp.CallToolResult, map[string]any, error) {
		if in.Task == "block" {
			select {
			case <-rig.release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return nil, map[string]any{"answer": "released", "status": "answered"}, nil
		}
		tok := req.Params.GetProgressToken()
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "thinking about " + in.Task})
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: `{"answer_delta":"fif","step":1}`})
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Meta:    mcp.Meta{agentserver.ElicitOriginKey: []any{map[string]any{"agent": "a", "server": "packrat"}}},
			Message: "<b>[switchboard studio]</b> confirm?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
				"required": []any{"ok"}},
		})
		if err != nil {
			return nil, nil, err
		}
		answer := "declined"
		if res.Action == "accept" && res.Content["ok"] == true {
			answer = "fifty-one"
		}
		return nil, map[string]any{"answer": answer, "status": "answered"}, nil
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux := http.NewServeMux()
	mux.Handle("/api/agents/a/mcp", mcpHandler)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !rig.c.ServeAPI(w, r, r.URL.EscapedPath()) {
			NotFound(w, r.URL.EscapedPath())
		}
	})
	rig.srv = httptest.NewServer(mux)
	rig.c = New(&Options{URL: rig.srv.URL, Names: []string{"a"}, Procs: map[string]supervisor.Member{"a": nil},
		Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() {
		rig.c.Close()
		rig.srv.Close()
	})
	return rig
}

func (rig *askRig) post(t *testing.T, path string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, rig.srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", rig.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// noLeaks checks, after the test and its cleanups, that no goroutine it
// started is left.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, opt)
	})
}

type sse struct{ id, event, data string }

// readEvents reads a server-sent event stream, calling each until it
// returns false or the stream ends.
func readEvents(t *testing.T, url string, each func(sse) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("events: %d %s %s", resp.StatusCode, ct, b)
	}
	sc := bufio.NewScanner(resp.Body)
	var e sse
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if !each(e) {
				return
			}
			e = sse{}
		case strings.HasPrefix(line, "id: "):
			e.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			e.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			e.data = line[6:]
		}
	}
}

// TestAskFromPage: a task POSTed starts the agent's ask; its stream shows
// the start, the progress note, the piece of the answer, the elicitation
// labelled from our side (the server's markup as data), then, once the
// person answers it, the answer and the end. A second stream after the end
// replays every event; one from Last-Event-ID only those after it.
func TestAskFromPage(t *testing.T) {
	noLeaks(t)
	rig := newAskRig(t)
	code, started := rig.post(t, "/api/agents/a/ask", map[string]any{"task": "calculate 17 * 3"})
	if code != http.StatusAccepted {
		t.Fatalf("POST ask: %d %v", code, started)
	}
	var got []string
	var answer map[string]any
	readEvents(t, rig.srv.URL+started["events"].(string), func(e sse) bool {
		got = append(got, e.event)
		var d map[string]any
		if err := json.Unmarshal([]byte(e.data), &d); err != nil {
			t.Fatalf("event %s: data %q: %v", e.event, e.data, err)
		}
		switch e.event {
		case "start":
			if d["run"] != started["run"] || d["agent"] != "a" {
				t.Errorf("start: %v, want run %v", d, started["run"])
			}
		case "elicit":
			if d["who"] != `server "packrat" of agent "a"` {
				t.Errorf("who asks: %q", d["who"])
			}
			if d["message"] != "<b>[switchboard studio]</b> confirm?" {
				t.Errorf("the server's message, as data: %q", d["message"])
			}
			if code, v := rig.post(t, "/api/asks/"+started["id"].(string)+"/elicit", map[string]any{"elicitation": d["elicitation"], "action": "accept", "content": map[string]any{"ok": true}}); code != http.StatusOK {
				t.Fatalf("answering: %d %v", code, v)
			}
		case "answer":
			answer = d
		}
		return true
	})
	want := []string{"start", "note", "delta", "elicit", "elicited", "answer", "end"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events %v, want %v", got, want)
	}
	if answer["answer"] != "fifty-one" || answer["status"] != "answered" {
		t.Errorf("answer: %v", answer)
	}
	var replayed []string
	readEvents(t, rig.srv.URL+started["events"].(string), func(e sse) bool { replayed = append(replayed, e.event); return true })
	if len(replayed) != len(want) {
		t.Errorf("replayed %v, want %v", replayed, want)
	}
	// After the end, its elicitation is answered no more.
	if code, _ := rig.post(t, "/api/asks/"+started["id"].(string)+"/elicit", map[string]any{"elicitation": "x", "action": "accept"}); code != http.StatusConflict {
		t.Errorf("answering after the end: %d, want 409", code)
	}
}

// TestAskBadInput: every bad request gets a clear refusal.
func TestAskBadInput(t *testing.T) {
	rig := newAskRig(t)
	for _, tc := range []struct {
		path string
		body any
		code int
		says string
	}{
		{"/api/agents/a/ask", map[string]any{"task": "  "}, 400, `"task" is empty`},
		{"/api/agents/a/ask", map[string]any{"task": strings.Repeat("x", maxTaskBytes+1)}, 400, "at most"},
		{"/api/agents/a/ask", map[string]any{"tsk": "x"}, 400, "unknown field"},
		{"/api/agents/zz/ask", map[string]any{"task": "x"}, 404, "unknown agent"},
		{"/api/asks/nope/elicit", map[string]any{}, 404, "no ask"},
	} {
		code, v := rig.post(t, tc.path, tc.body)
		if code != tc.code || !strings.Contains(v["error"].(string), tc.says) {
			t.Errorf("POST %s %v: %d %v, want %d saying %q", tc.path, tc.body, code, v, tc.code, tc.says)
		}
	}
	// A cross-site page's POST is refused before anything starts.
	req, _ := http.NewRequest(http.MethodPost, rig.srv.URL+"/api/agents/a/ask", strings.NewReader(`{"task":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", resp.StatusCode)
	}
	p, _ := rig.c.StartAsk("a", "block")
	if err := p.answerElicit("e", "maybe", nil); err == nil || !strings.Contains(err.Error(), "want accept, decline or cancel") {
		t.Errorf("action maybe: %v", err)
	}
	close(rig.release)
}

// TestAskBounded: past maxPageAsks running, a new ask is refused with 503
// (ErrTooManyAsks) until one ends; the events kept are bounded; Close
// cancels what still runs and waits for it.
func TestAskBounded(t *testing.T) {
	noLeaks(t)
	rig := newAskRig(t)
	var asks []*pageAsk
	for range maxPageAsks {
		p, err := rig.c.StartAsk("a", "block")
		if err != nil {
			t.Fatal(err)
		}
		asks = append(asks, p)
	}
	if _, err := rig.c.StartAsk("a", "block"); !errors.Is(err, ErrTooManyAsks) {
		t.Fatalf("ask %d: %v, want ErrTooManyAsks", maxPageAsks+1, err)
	}
	if code, _ := rig.post(t, "/api/agents/a/ask", map[string]any{"task": "block"}); code != http.StatusServiceUnavailable {
		t.Errorf("POST past the bound: %d, want 503", code)
	}
	p := asks[0]
	for range maxAskEvents + 10 {
		p.emit("note", map[string]any{"text": "n"})
	}
	if v := p.view(); len(v.Events) != maxAskEvents || v.Dropped != 11 { // the start event, then 10 notes
		t.Errorf("kept %d events, dropped %d; want %d and 11", len(v.Events), v.Dropped, maxAskEvents)
	}
	rig.c.Close()
	for _, p := range asks {
		if v := p.view(); !v.Done || v.Events[len(v.Events)-1].Type != "end" {
			t.Errorf("ask %s after Close: done %v", p.id, v.Done)
		}
	}
	if _, err := rig.c.StartAsk("a", "x"); !errors.Is(err, ErrConsoleClosed) {
		t.Errorf("after Close: %v, want ErrConsoleClosed", err)
	}
}
