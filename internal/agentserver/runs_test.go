package agentserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	auth string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.auth)
	return b.next.RoundTrip(r)
}

// TestRunsEndpoint: GET /runs lists the journal's runs of the caller's
// credential, newest first, with why each ended, the task redacted and
// shortened; ?state= and ?limit= filter, and bad values are named. GET
// /runs/<id> is one run; another credential's run, or an unknown id, is
// 404. A foreign Origin is refused before anything is read.
func TestRunsEndpoint(t *testing.T) {
	var down atomic.Bool
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io := `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`
		w.Write([]byte(io))
	}))
	t.Cleanup(model.Close)
	zero := 0
	def := &agentdef.Definition{Name: "lambda", Instructions: "You are lambda.", Model: agentdef.Model{BaseURL: model.URL + "/v1", Name: "m", MaxRetries: &zero}}
	s, err := New(def, &Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler())
	mux.Handle("/runs", s.RunsHandler())
	mux.Handle("/runs/", s.RunsHandler())
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		s.CloseSessions()
		ts.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	askAs := func(auth, task string) string {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{auth, http.DefaultTransport}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": task}})
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			RunID string `json:"run_id"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		return out.RunID
	}
	get := func(auth, path string, h map[string]string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+path, nil)
		req.Header.Set("Authorization", auth)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, []byte(b.String())
	}

	const me, other = "Bearer me", "Bearer someone-else"
	secret := "sk-" + strings.Repeat("a1B2", 10)
	done := askAs(me, "summarize the report with key "+secret+" "+strings.Repeat("and more ", 40))
	down.Store(true)
	failed := askAs(me, "a task the model cannot answer")
	theirs := askAs(other, "another caller's task")
	if done == "" || failed == "" || theirs == "" {
		t.Fatalf("runs %q %q %q: an ask named no run", done, failed, theirs)
	}

	code, body := get(me, "/runs", nil)
	var list studioapi.JournalRuns
	if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET /runs: %d %s (%v)", code, body, err)
	}
	if len(list.Runs) != 2 || list.Runs[0].ID != failed || list.Runs[1].ID != done || list.Resumable != 1 || list.Agent != "lambda" {
		t.Fatalf("GET /runs listed %+v, want the failed run then the done one (not the other caller's), 1 resumable", list)
	}
	f, d := list.Runs[0], list.Runs[1]
	if f.State != studioapi.JournalFailed || !f.Resumable || !strings.Contains(f.Why, "model request failed") || f.Attempts != 1 || f.Keyed {
		t.Errorf("the failed run: %+v", f)
	}
	if d.State != studioapi.JournalDone || d.Resumable || d.Status == "" || d.Why == "" || d.Steps != 1 || d.Delegations != 0 {
		t.Errorf("the done run: %+v", d)
	}
	if strings.Contains(d.Task, secret) || !strings.HasSuffix(d.Task, "…") || len([]rune(d.Task)) != listTask {
		t.Errorf("the done run's task %q: want it redacted and cut to %d characters", d.Task, listTask)
	}

	code, body = get(me, "/runs?state=done,broken&limit=5", nil)
	if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil || len(list.Runs) != 1 || list.Runs[0].ID != done {
		t.Errorf("GET /runs?state=done,broken: %d %s", code, body)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?state=lost"} {
		if code, body := get(me, "/runs"+q, nil); code != http.StatusBadRequest || !strings.Contains(string(body), strings.TrimPrefix(strings.Split(q, "=")[0], "?")) {
			t.Errorf("GET /runs%s: %d %s, want 400 naming the parameter", q, code, body)
		}
	}

	code, body = get(me, "/runs/"+failed, nil)
	var one studioapi.JournalRun
	if err := json.Unmarshal(body, &one); code != http.StatusOK || err != nil || one.ID != failed || !one.Resumable {
		t.Errorf("GET /runs/%s: %d %s", failed, code, body)
	}
	if code, _ := get(me, "/runs/"+theirs, nil); code != http.StatusNotFound {
		t.Errorf("another caller's run: %d, want 404", code)
	}
	if code, body := get(me, "/runs/no-such-run", nil); code != http.StatusNotFound || !strings.Contains(string(body), `no-such-run`) {
		t.Errorf("an unknown run: %d %s, want 404 naming it", code, body)
	}
	if code, _ := get(me, "/runs", map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("a foreign Origin: %d, want 403", code)
	}
}
