package studio

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// stepsModel is an OpenAI-shaped model endpoint for a two-step run: step 1
// calls a tool that does not exist, step 2 answers with markup, an echo of
// echo (a secret the test plants) and more text than one message shows.
func stepsModel(t *testing.T, echo string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		msg := map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "no_such_tool", "arguments": `{"key":"` + echo + `"}`}}}}
		finish := "tool_calls"
		if bytes.Contains(body, []byte(`"role":"tool"`)) {
			msg = map[string]any{"role": "assistant", "content": stepsAnswer + " " + echo + " " + strings.Repeat("more of the answer. ", 1000)}
			finish = "stop"
		}
		json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}}})
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/v1"
}

const stepsAnswer = `<img src=x onerror="window.pwned=1"><script>window.pwned=1</script> the answer`

// TestConsoleStepAPI: in token mode, GET /api/agents/<name>/runs/<id>/steps/<n>
// is the agent's rebuilt step, through the studio: step 2's messages (the
// task, the call, the tool's refusal) and its response, the studio's token
// the model echoed redacted, the long answer cut with its mark. The checks
// of the other journal reads hold (the token, also for a cross-site fetch,
// the Origin, GET only); an unknown run or step is a 404 that says so.
func TestConsoleStepAPI(t *testing.T) {
	const token = "studio-token-for-the-steps-test"
	dir := projecttest.New(t)
	writeAgent(t, dir, "abacus", "lambda", func(d map[string]any) {
		d["model"] = map[string]any{"name": "m", "base_url": stepsModel(t, token), "max_retries": 0}
	})
	s := startStudio(t, dir, &Options{Token: token})
	c := newAPIClient(t, s, token)
	res := callThroughProxy(t, s, token, "lambda", "ask", map[string]any{"task": "use the tool that is not there"})
	var out struct {
		RunID string `json:"run_id"`
		Steps int    `json:"steps"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.RunID == "" || out.Steps != 2 {
		t.Fatalf("ask: %s", b)
	}
	path := "/api/agents/lambda/runs/" + out.RunID + "/steps/2"
	code, body := c.do("GET", path, "", nil)
	var sc studioapi.StepContent
	if err := json.Unmarshal(body, &sc); code != http.StatusOK || err != nil {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if bytes.Contains(body, []byte(token)) {
		t.Errorf("the step holds the studio's token: %s", body)
	}
	if sc.Agent != "lambda" || sc.Step != 2 || sc.Steps != 2 || !sc.Exact || len(sc.Messages) != 4 ||
		sc.Messages[1].Content != "use the tool that is not there" || len(sc.Messages[2].ToolCalls) != 1 || sc.Messages[2].ToolCalls[0].Name != "no_such_tool" ||
		sc.Messages[3].Role != "tool" || sc.Messages[3].ToolCallID != "call_1" || sc.Messages[3].Content == "" {
		t.Errorf("step 2: %+v", sc)
	}
	if r := sc.Response; sc.FinishReason != "stop" || !strings.HasPrefix(r.Content, stepsAnswer) || r.Cut == 0 || !strings.Contains(r.Content, "[cut, ") {
		t.Errorf("step 2's response: cut %d, %q…", r.Cut, r.Content[:min(len(r.Content), 200)])
	}
	for _, g := range []struct {
		name string
		path string
		hdr  map[string]string
		want int
		says string
	}{
		{"no token", path, map[string]string{"Authorization": ""}, http.StatusUnauthorized, ""},
		{"another origin", path, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, ""},
		{"a cross-site fetch without the token", path, map[string]string{"Authorization": "", "Sec-Fetch-Site": "cross-site"}, http.StatusUnauthorized, ""},
		{"a step past the run's", "/api/agents/lambda/runs/" + out.RunID + "/steps/3", nil, http.StatusNotFound, "journaled 2 model steps"},
		{"not a step", "/api/agents/lambda/runs/" + out.RunID + "/steps/two", nil, http.StatusNotFound, "a step is a number from 1"},
		{"an unknown run", "/api/agents/lambda/runs/no-such-run/steps/1", nil, http.StatusNotFound, "no run"},
	} {
		if code, b := c.do("GET", g.path, "", g.hdr); code != g.want || !strings.Contains(string(b), g.says) {
			t.Errorf("%s: %d %s, want %d saying %q", g.name, code, b, g.want, g.says)
		}
	}
	if code, b := c.do("POST", path, "{}", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST on a step: %d %s, want 405", code, b)
	}
}

// TestStepInBrowser: in headless Chromium, a person opens a run's page,
// clicks its second model step, and reads the messages the model was sent
// and its response, fetched from the agent's journal on the click: the
// task, the call it made, the tool's answer, and the answer as text (its
// markup shown, not run), cut with its mark. With
// SWITCHBOARD_UPDATE_SCREENSHOTS set, docs/studio-step.png is written.
func TestStepInBrowser(t *testing.T) {
	bin := findChromium(t)
	dir := projecttest.New(t)
	writeAgent(t, dir, "abacus", "lambda", func(d map[string]any) {
		d["model"] = map[string]any{"name": "m", "base_url": stepsModel(t, "nothing secret"), "max_retries": 0}
	})
	s := startStudio(t, dir, nil)
	res := callThroughProxy(t, s, "", "lambda", "ask", map[string]any{"task": "use the tool that is not there"})
	var out struct {
		RunID string `json:"run_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if json.Unmarshal(b, &out); out.RunID == "" {
		t.Fatalf("ask: %s", b)
	}

	br := openBrowser(t, bin, 1280, 1400)
	br.navigate(s.URL() + "/runs/" + out.RunID)
	br.waitPage("run")
	step := `details.span-step[data-key$="-step-2"]`
	br.waitFor(`document.querySelector(`+jsString(step)+`)`, "model step 2 on the run page")
	br.click(step + " > summary")
	box := step + ` .step-content[data-state="shown"]`
	br.waitFor(`document.querySelector(`+jsString(box)+`)`, "step 2's messages and response")
	got := br.text(box)
	for _, want := range []string{"4 messages sent", "sent 2 · user", "use the tool that is not there", "→ no_such_tool (call_1)", "sent 4 · tool · answers call_1",
		"response · finish reason stop", stepsAnswer, "[cut, "} {
		if !strings.Contains(got, want) {
			t.Errorf("step 2 reads\n%s\nwant %q in it", got[:min(len(got), 3000)], want)
		}
	}
	var pwned bool
	var imgs, foreign int
	br.eval(`!!window.pwned`, &pwned)
	br.eval(`document.querySelectorAll(`+jsString(step+" img, "+step+" script")+`).length`, &imgs)
	// The page's own scripts only: each from /static/, none inline.
	br.eval(`[...document.scripts].filter(function (s) { return !s.src.startsWith(location.origin + "/static/"); }).length`, &foreign)
	if pwned || imgs != 0 || foreign != 0 {
		t.Errorf("the model's markup ran or was added: pwned %v, %d elements in the step, %d scripts not the page's own", pwned, imgs, foreign)
	}
	br.eval(`document.querySelector(`+jsString(step)+`).scrollIntoView()`, nil)
	png := br.screenshot()
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10000 {
		t.Errorf("screenshot: %d bytes", len(png))
	}
	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOTS") != "" {
		if err := os.WriteFile(filepath.Join(moduleRoot, "docs", "studio-step.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
