package askcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// testDeadline bounds a wait that must succeed; reaching it is a failure.
const testDeadline = 20 * time.Second

type askInput struct {
	Task string `json:"task"`
}

// fakeStudio serves /healthz and one agent whose ask tool is handle, the
// way a studio routes /api/agents/<name>/mcp.
func fakeStudio(t *testing.T, agent string, handle mcp.ToolHandlerFor[askInput, any]) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: agent, Version: "test"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "ask"}, handle)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.Handle("/api/agents/"+agent+"/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL
}

// notify sends ev as the agent server's ask tool does: a progress
// notification whose message is the event's JSON.
func notify(ctx context.Context, req *mcp.CallToolRequest, n int, ev delegation.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: req.Params.GetProgressToken(), Progress: float64(n), Message: string(b),
	})
}

// watcher is a stderr that signals when a line containing want is written.
type watcher struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newWatcher(want string) *watcher { return &watcher{want: want, seen: make(chan struct{})} }

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.want != "" && strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

var (
	t0    = time.Date(2026, 3, 1, 12, 0, 1, 120e6, time.Local)
	start = delegation.Event{Phase: delegation.PhaseStart, RunID: "r1", Depth: 1, CallID: "call_1", Agent: "packrat", Tool: "store_note", Time: t0}
	done  = delegation.Event{Phase: delegation.PhaseFinish, RunID: "r1", Depth: 1, CallID: "call_1", Agent: "packrat", Tool: "store_note",
		Time: t0.Add(44 * time.Millisecond), DurationMS: 44, Outcome: delegation.OutcomeOK, Retried: true, Recovered: true}
)

// TestAskShowsDelegationsLive checks that a delegation is printed while the
// agent is still working: the agent does not answer until the line for its
// finished delegation has been printed.
func TestAskShowsDelegationsLive(t *testing.T) {
	stderr := newWatcher("✓ packrat.store_note 44ms (recovered on a new session)")
	url := fakeStudio(t, "oracle", func(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
		if in.Task != "remember that the launch moved to Friday" {
			return nil, nil, errors.New("wrong task " + in.Task)
		}
		notify(ctx, req, 1, start)
		notify(ctx, req, 2, done)
		select {
		case <-stderr.seen:
		case <-time.After(testDeadline):
			return nil, nil, errors.New("the delegation was not shown before the answer")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "The launch moved to Friday."}}}, nil, nil
	})
	var stdout bytes.Buffer
	code := Main(t.Context(), []string{"--studio", url, "remember", "that the launch moved to Friday"}, nil, &stdout, stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if got := stdout.String(); got != "The launch moved to Friday.\n" {
		t.Errorf("stdout %q", got)
	}
	if want := "12:00:01.120 → packrat.store_note\n"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks the start line %q", stderr, want)
	}
}

func TestAskJSON(t *testing.T) {
	url := fakeStudio(t, "oracle", func(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
		notify(ctx, req, 1, start)
		// The structured result is complete even if a notification were lost.
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Friday."}}},
			map[string]any{"answer": "Friday.", "delegations": []delegation.Event{done}}, nil
	})
	var stdout bytes.Buffer
	stderr := newWatcher("")
	code := Main(t.Context(), []string{"when is the launch", "--json", "--studio", url + "/"}, nil, &stdout, stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var out struct {
		Answer      string             `json:"answer"`
		Agent       string             `json:"agent"`
		Status      string             `json:"status"`
		ExitCode    *int               `json:"exit_code"`
		Delegations []delegation.Event `json:"delegations"`
		DurationMS  *int64             `json:"duration_ms"`
	}
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not the JSON object: %v", err)
	}
	if !strings.Contains(stderr.String(), "✓ packrat.store_note 44ms") {
		t.Errorf("stderr %q lacks the finish line that only the result carried", stderr)
	}
	if out.Answer != "Friday." || out.Agent != "oracle" || out.Status != "answered" || out.ExitCode == nil || *out.ExitCode != 0 ||
		out.DurationMS == nil || len(out.Delegations) != 1 ||
		out.Delegations[0].CallID != "call_1" || out.Delegations[0].Outcome != delegation.OutcomeOK {
		t.Errorf("output %+v", out)
	}
}

// TestAskExitCodes: the turn's status, from the agent's structured result,
// decides the exit code; the answer is printed whatever it is, and the
// reason goes to stderr and --json.
func TestAskExitCodes(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   int
	}{
		{"answered", exitOK},
		{"not_answered", exitNotAnswered},
		{"delegation_failed", exitDelegationFailed},
		{"unavailable", exitUnavailable},
		{"failed", exitFailed},
	} {
		t.Run(tc.status, func(t *testing.T) {
			url := fakeStudio(t, "oracle", func(context.Context, *mcp.CallToolRequest, askInput) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{IsError: tc.status != "answered", Content: []mcp.Content{&mcp.TextContent{Text: "the text"}}},
					map[string]any{"answer": "partial answer", "status": tc.status, "reason": "because " + tc.status, "unavailable": []string{`agent "abacus": down`}}, nil
			})
			var stdout bytes.Buffer
			stderr := newWatcher("")
			code := Main(t.Context(), []string{"--json", "--studio", url, "a task"}, nil, &stdout, stderr)
			if code != tc.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.want, stderr)
			}
			var out output
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				t.Fatalf("json %q: %v", stdout.String(), err)
			}
			if out.ExitCode != tc.want || out.Status != tc.status || len(out.Unavailable) != 1 {
				t.Errorf("json %+v", out)
			}
			if tc.want != exitOK && tc.want != exitFailed && (out.Answer != "partial answer" || !strings.Contains(stderr.String(), "because "+tc.status)) {
				t.Errorf("answer %q, stderr %q: want the answer and the reason", out.Answer, stderr)
			}
		})
	}
}

func TestAskReportsTheAgentsError(t *testing.T) {
	url := fakeStudio(t, "oracle", func(context.Context, *mcp.CallToolRequest, askInput) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "step limit reached"}}}, nil, nil
	})
	var stdout bytes.Buffer
	stderr := newWatcher("")
	code := Main(t.Context(), []string{"--json", "--studio", url, "loop forever"}, nil, &stdout, stderr)
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	if !strings.Contains(stderr.String(), "agent oracle: step limit reached") {
		t.Errorf("stderr %q", stderr)
	}
	var out output
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Error != "agent oracle: step limit reached" {
		t.Errorf("json %q (%v)", stdout.String(), err)
	}
}

func TestAskWithoutTheExplicitStudio(t *testing.T) {
	deadURL := mcptest.DeadURL(t)
	stderr := newWatcher("")
	code := Main(t.Context(), []string{"--studio", deadURL, "hello"}, nil, &bytes.Buffer{}, stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "no studio at "+deadURL) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestAskCancel: cancelling the command (SIGINT in main) cancels the call,
// and the agent's handler sees its context end.
func TestAskCancel(t *testing.T) {
	started := make(chan struct{})
	sawCancel := make(chan error, 1)
	url := fakeStudio(t, "oracle", func(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
		close(started)
		select {
		case <-ctx.Done():
			sawCancel <- ctx.Err()
		case <-time.After(testDeadline):
			sawCancel <- errors.New("never cancelled")
		}
		return nil, nil, errors.New("stopped")
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	stderr := newWatcher("")
	code := Main(ctx, []string{"--studio", url, "work slowly"}, nil, &bytes.Buffer{}, stderr)
	if code != exitCancelled {
		t.Errorf("exit %d, want %d; stderr %q", code, exitCancelled, stderr)
	}
	if err := <-sawCancel; !errors.Is(err, context.Canceled) {
		t.Errorf("agent: %v", err)
	}
}

func TestParseArgs(t *testing.T) {
	env := func(k string) string { return map[string]string{EnvStudioURL: "http://studio.test:1/"}[k] }
	for _, tc := range []struct {
		args []string
		want config
	}{
		{[]string{"hello", "world"}, config{agent: "oracle", dir: ".", studioURL: "http://studio.test:1", explicit: true, defaultURL: DefaultStudioURL, task: "hello world"}},
		{[]string{"--json", "hi", "--agent", "abacus", "--model=m"}, config{agent: "abacus", json: true, dir: ".", model: "m", studioURL: "http://studio.test:1", explicit: true, defaultURL: DefaultStudioURL, task: "hi"}},
		{[]string{"--studio", "http://x", "--", "--json", "is", "a", "word"}, config{agent: "oracle", dir: ".", studioURL: "http://x", explicit: true, defaultURL: DefaultStudioURL, task: "--json is a word"}},
	} {
		got, err := parseArgs(tc.args, env, &bytes.Buffer{}, &bytes.Buffer{})
		if err != nil {
			t.Errorf("parseArgs(%q): %v", tc.args, err)
			continue
		}
		if *got != tc.want {
			t.Errorf("parseArgs(%q) =\n%+v, want\n%+v", tc.args, *got, tc.want)
		}
	}
	cfg, err := parseArgs([]string{"x"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil || cfg.studioURL != DefaultStudioURL || cfg.explicit {
		t.Errorf("default studio: %+v, %v", cfg, err)
	}
	moved := func(k string) string { return map[string]string{EnvDefaultStudioURL: "http://127.0.0.1:9/"}[k] }
	if cfg, err := parseArgs([]string{"x"}, moved, &bytes.Buffer{}, &bytes.Buffer{}); err != nil || cfg.studioURL != "http://127.0.0.1:9" || cfg.explicit {
		t.Errorf("$%s: %+v, %v; want that URL, not explicit (ask may start its own)", EnvDefaultStudioURL, cfg, err)
	}
	// No task, or "-": Main reads it from stdin.
	for _, args := range [][]string{{"--json"}, {"-"}} {
		cfg, err := parseArgs(args, env, &bytes.Buffer{}, &bytes.Buffer{})
		if err != nil || (cfg.task != "" && cfg.task != "-") {
			t.Errorf("parseArgs(%q) = %+v, %v; want the task left for stdin", args, cfg, err)
		}
	}
	var help bytes.Buffer
	if _, err := parseArgs([]string{"--help"}, env, &help, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "exit status:") {
		t.Errorf("--help: %v, printed %q", err, help.String())
	}
}
