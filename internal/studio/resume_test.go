package studio

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// resumeModel is an OpenAI-shaped model endpoint: down (503) until up,
// then answering resumeAnswer; while holding, its next request waits
// until released (or its caller goes away).
type resumeModel struct {
	URL     string
	up      atomic.Bool
	hold    atomic.Bool
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

const resumeAnswer = "resumed and answered"

func newResumeModel(t *testing.T) *resumeModel {
	m := &resumeModel{arrived: make(chan struct{}, 1), release: make(chan struct{})}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.up.Load() {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		if m.hold.CompareAndSwap(true, false) {
			m.arrived <- struct{}{}
			select {
			case <-m.release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": resumeAnswer}}}})
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { m.once.Do(func() { close(m.release) }) })
	m.URL = ts.URL + "/v1"
	return m
}

// failedRun asks lambda a task through the proxy while the model is down:
// the run fails, resumable; it returns the run's id.
func failedRun(t *testing.T, s *Studio, task string) string {
	t.Helper()
	res := callThroughProxy(t, s, "", "lambda", "ask", map[string]any{"task": task})
	var out struct {
		RunID string `json:"run_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.RunID == "" || !res.IsError {
		t.Fatalf("ask with the model down: %s", b)
	}
	return out.RunID
}

// TestConsoleResumeAPI: the studio lists an agent's journaled runs and
// resumes one by POST, with the console's checks for a state change, and a
// typed refusal for each reason a run is not resumed: an unknown run 404,
// one running 409, one whose journaled task was altered 422, naming why. A
// resumed run answers, says it was resumed, and is then done; resumed
// again, it answers again from its journal without running.
func TestConsoleResumeAPI(t *testing.T) {
	model := newResumeModel(t)
	dir := projecttest.New(t)
	writeAgent(t, dir, "abacus", "lambda", func(d map[string]any) {
		d["model"] = map[string]any{"name": "m", "base_url": model.URL, "max_retries": 0}
	})
	s := startStudio(t, dir, nil)
	c := newAPIClient(t, s, "")

	run := failedRun(t, s, "a task that waits for its model")
	var list studioapi.JournalRuns
	c.getJSON("/api/agents/lambda/runs", &list)
	if len(list.Runs) != 1 || list.Runs[0].ID != run || !list.Runs[0].Resumable || list.Resumable != 1 || list.Runs[0].Task != "a task that waits for its model" {
		t.Fatalf("GET /api/agents/lambda/runs: %+v, want the one failed run", list)
	}
	if code, b := c.do("GET", "/api/agents/lambda/runs?state=nope", "", nil); code != http.StatusBadRequest || !strings.Contains(string(b), "state") {
		t.Errorf("a bad ?state=: %d %s", code, b)
	}

	path := "/api/agents/lambda/runs/" + run + "/resume"
	for _, g := range []struct {
		name   string
		method string
		body   string
		hdr    map[string]string
		want   int
	}{
		{"GET", "GET", "", nil, http.StatusMethodNotAllowed},
		{"a form", "POST", "{}", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"another origin", "POST", "{}", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"a cross-site fetch", "POST", "{}", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a body with fields", "POST", `{"task":"x"}`, nil, http.StatusBadRequest},
		{"an unknown run", "POST", "{}", nil, http.StatusNotFound},
	} {
		p := path
		if g.name == "an unknown run" {
			p = "/api/agents/lambda/runs/no-such-run/resume"
		}
		if code, b := c.do(g.method, p, g.body, g.hdr); code != g.want {
			t.Errorf("%s: %d %s, want %d", g.name, code, b, g.want)
		}
	}
	c.getJSON("/api/agents/lambda/runs/"+run, &list.Runs[0])
	if list.Runs[0].State != studioapi.JournalFailed || list.Runs[0].Attempts != 1 {
		t.Fatalf("after the refused requests the run is %+v, want failed, never resumed", list.Runs[0])
	}

	// Resumed while the model holds its request: a second resume is 409.
	model.up.Store(true)
	model.hold.Store(true)
	type answer struct {
		code int
		body []byte
	}
	first := make(chan answer, 1)
	go func() {
		code, b := c.do("POST", path, "{}", nil)
		first <- answer{code, b}
	}()
	<-model.arrived
	if code, b := c.do("POST", path, "{}", nil); code != http.StatusConflict || !strings.Contains(string(b), "running") {
		t.Errorf("a second resume while the first runs: %d %s, want 409", code, b)
	}
	model.once.Do(func() { close(model.release) })
	a := <-first
	var res studioapi.ResumeResult
	if err := json.Unmarshal(a.body, &res); a.code != http.StatusOK || err != nil || res.Answer != resumeAnswer || !res.Resumed || res.IsError || res.Run != run {
		t.Fatalf("the resume: %d %s, want 200 with the answer, resumed", a.code, a.body)
	}
	var now studioapi.JournalRun
	c.getJSON("/api/agents/lambda/runs/"+run, &now)
	if now.State != studioapi.JournalDone || now.Attempts != 2 || now.Steps != 1 {
		t.Errorf("after the resume the run is %+v, want done after 2 attempts, 1 step", now)
	}
	code, b := c.do("POST", path, "{}", nil)
	if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil || res.Answer != resumeAnswer {
		t.Errorf("resuming a done run: %d %s, want its answer again", code, b)
	}
	if c.getJSON("/api/agents/lambda/runs/"+run, &now); now.Attempts != 2 {
		t.Errorf("resuming a done run started attempt %d; want none (its end is answered from the journal)", now.Attempts)
	}

	// A run whose journaled task was altered on disk: 422, naming why,
	// and it is broken from then on.
	model.up.Store(false)
	broken := failedRun(t, s, "a task to be tampered with")
	db, err := sql.Open("sqlite", filepath.Join(dir, ".switchboard", "data", "lambda", journal.File))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), `UPDATE runs SET task = 'something else' WHERE run_id = ?`, broken); err != nil {
		t.Fatal(err)
	}
	bpath := "/api/agents/lambda/runs/" + broken + "/resume"
	if code, b := c.do("POST", bpath, "{}", nil); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "do not match their sum") {
		t.Errorf("resuming an altered run: %d %s, want 422 naming why", code, b)
	}
	if code, b := c.do("POST", bpath, "{}", nil); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "cannot be resumed") {
		t.Errorf("resuming it again: %d %s, want 422: broken", code, b)
	}
}

// TestResumeInBrowser: what a person does in headless Chromium when a run
// failed because its model was down. On the agent's page the run is
// listed as failed, with a Resume button; once the model is back, a click
// resumes it and the page says what it answered; the run is then done. Its
// run page shows the journal (attempt 2, one model step journaled) and the
// attempt that went on from it, and no Resume button now that it is over.
func TestResumeInBrowser(t *testing.T) {
	bin := findChromium(t)
	model := newResumeModel(t)
	dir := projecttest.New(t)
	writeAgent(t, dir, "abacus", "lambda", func(d map[string]any) {
		d["model"] = map[string]any{"name": "m", "base_url": model.URL, "max_retries": 0}
	})
	s := startStudio(t, dir, nil)
	run := failedRun(t, s, "a task cut off by its model")

	b := openBrowser(t, bin, 1280, 900)
	b.navigate(s.URL() + "/agents/lambda")
	b.waitPage("agent")
	row := `#journal tr[data-journal-run="` + run + `"]`
	b.waitFor(`document.querySelector(`+jsString(row)+`)`, "the failed run in the journaled runs")
	if got := b.text(row); !strings.Contains(got, "failed") || !strings.Contains(got, "a task cut off by its model") || !strings.Contains(got, "model request failed") {
		t.Errorf("the run's row reads %q, want failed, its task and why", got)
	}
	if got := b.text("#journal-summary"); !strings.HasPrefix(got, "1 may be resumed") {
		t.Errorf("the summary reads %q", got)
	}

	model.up.Store(true)
	b.click(row + " button[data-resume]")
	b.waitFor(`document.getElementById("action-result").dataset.outcome === "ok"`, "the resume's answer")
	if got := b.text("#action-result"); !strings.Contains(got, "resumed") || !strings.Contains(got, resumeAnswer) {
		t.Errorf("after the click the page says %q, want the run resumed and its answer", got)
	}
	b.waitFor(`(document.querySelector(`+jsString(row)+`)||{innerText:""}).innerText.includes("done")`, "the run shown done")
	var buttons int
	b.eval(`document.querySelectorAll(`+jsString(row+" button[data-resume]")+`).length`, &buttons)
	if buttons != 0 {
		t.Errorf("a done run still has %d Resume buttons", buttons)
	}

	// The run's page, as its link names it.
	var href string
	b.eval(`document.querySelector(`+jsString(row+" td.run a")+`).href`, &href)
	if href != s.URL()+"/runs/"+run {
		t.Errorf("the run's link is %q", href)
	}
	b.navigate(s.URL() + "/runs/" + run)
	b.waitPage("run")
	b.waitFor(`document.getElementById("run-journal")`, "the run's journal on its page")
	if st, at, steps := b.text("#journal-state"), b.text("#journal-attempts"), b.text("#journal-steps"); st != "done" || at != "2" || steps != "1" {
		t.Errorf("the run page's journal: state %q, attempt %q, %q steps; want done, 2, 1", st, at, steps)
	}
	b.waitFor(`document.querySelector("p.resumed")`, "the resumed attempt on the run page")
	if got := b.text("p.resumed"); !strings.Contains(got, "resumed from its journal") {
		t.Errorf("the run page says %q of the resumed attempt", got)
	}
	var resume bool
	b.eval(`!!document.getElementById("resume")`, &resume)
	if resume {
		t.Error("the run page of a done run offers Resume")
	}
}
