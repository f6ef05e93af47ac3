package faultsuite

// The model endpoint rows (TestModelFaults): a person runs `switchboard
// ask` against a real studio whose oracle, the real agent process, sends
// its chat requests to a scripted OpenAI-compatible endpoint on loopback
// (OPENAI_BASE_URL). At step 1 the endpoint asks oracle to store a note in
// packrat, a real sibling process; at step 2, with the delegation done and
// its result in the history, the endpoint fails the way the row says. The
// row records what ask showed (its exit code, the error or the live notes)
// and, from packrat's on-disk archive, how many times each ask's note was
// stored: a retried model request must never run a delegation again.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studio"
)

// modelAskTimeout bounds one ask; reaching it fails the row.
const modelAskTimeout = 3 * time.Minute

// The exit codes of `switchboard ask` the rows expect (internal/askcmd).
const (
	askExitOK     = 0
	askExitFailed = 1 // the runtime failed: here, the model endpoint
)

// A modelFault answers step 2's attempt (from 1) of the ask tag; since is
// the time since that ask's first step-2 request. It returns false to let
// the endpoint answer normally.
type modelFault func(w http.ResponseWriter, r *http.Request, tag string, attempt int, since time.Duration) bool

// modelEndpoint is a chat completions endpoint in OpenAI's documented shape
// (https://platform.openai.com/docs/api-reference/chat/object) whose step 2
// fails as the current row says. The task of each ask is its tag: the note
// stored at step 1 carries it, and the endpoint counts step 2's attempts
// by it.
type modelEndpoint struct {
	t   *testing.T
	URL string // the base URL, ending in /v1

	mu      sync.Mutex // protects following fields
	fault   modelFault
	step2   map[string]int       // attempts of step 2, by tag
	first   map[string]time.Time // the first step-2 request, by tag
	release chan struct{}        // closed at cleanup: a stalled answer ends

	hijacked sync.WaitGroup // the connections a reset answer took over
}

func startModelEndpoint(t *testing.T) *modelEndpoint {
	m := &modelEndpoint{t: t, step2: map[string]int{}, first: map[string]time.Time{}, release: make(chan struct{})}
	ts := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(func() {
		close(m.release)
		ts.Close()
		m.hijacked.Wait()
	})
	m.URL = ts.URL + "/v1"
	return m
}

// setFault makes f the fault of the asks that follow.
func (m *modelEndpoint) setFault(f modelFault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = f
}

func (m *modelEndpoint) attempts(tag string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.step2[tag]
}

func (m *modelEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/chat/completions" {
		m.t.Errorf("model endpoint: %s %s: %v", r.Method, r.URL.Path, err)
		http.Error(w, "not a chat request", http.StatusBadRequest)
		return
	}
	var tag string
	step2 := false
	for _, msg := range req.Messages {
		switch msg.Role {
		case openai.ChatMessageRoleUser:
			tag = msg.Content
		case openai.ChatMessageRoleTool:
			step2 = true
		}
	}
	if !step2 {
		args, _ := json.Marshal(map[string]any{"text": "model fault suite note " + tag, "tags": []string{tag}})
		writeCompletion(w, `{"role":"assistant","content":null,"tool_calls":[{"id":"call_`+tag+`","type":"function",`+
			`"function":{"name":"packrat__store_note","arguments":`+quote(string(args))+`}}]}`, "tool_calls")
		return
	}
	m.mu.Lock()
	m.step2[tag]++
	attempt := m.step2[tag]
	if attempt == 1 {
		m.first[tag] = time.Now()
	}
	since := time.Since(m.first[tag])
	f := m.fault
	m.mu.Unlock()
	if f != nil && f(w, r, tag, attempt, since) {
		return
	}
	writeCompletion(w, `{"role":"assistant","content":`+quote(answerFor(tag))+`}`, "stop")
}

func answerFor(tag string) string { return "Stored note " + tag + "." }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// completionBody is a chat completion with one choice, in OpenAI's shape.
func completionBody(msg, finish string) string {
	return `{"id":"chatcmpl-faultsuite","object":"chat.completion","created":1733000000,"model":"faulty",` +
		`"choices":[{"index":0,"message":` + msg + `,"logprobs":null,"finish_reason":"` + finish + `"}],` +
		`"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110},"system_fingerprint":"fp_faultsuite"}`
}

func writeCompletion(w http.ResponseWriter, msg, finish string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, completionBody(msg, finish))
}

// OpenAI's documented error bodies
// (https://platform.openai.com/docs/guides/error-codes).
const (
	rateLimitBody   = `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 1s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	overloadedBody  = `{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error","param":null,"code":null}}`
	retryAfterStorm = "1"
)

// rateLimited answers the first n attempts (all, when n < 0) 429 with
// Retry-After: 1 and OpenAI's x-ratelimit-* headers
// (https://platform.openai.com/docs/guides/rate-limits).
func rateLimited(n int) modelFault {
	return func(w http.ResponseWriter, _ *http.Request, _ string, attempt int, _ time.Duration) bool {
		if n >= 0 && attempt > n {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", retryAfterStorm)
		w.Header().Set("x-ratelimit-limit-requests", "3")
		w.Header().Set("x-ratelimit-remaining-requests", "0")
		w.Header().Set("x-ratelimit-reset-requests", "1s")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, rateLimitBody)
		return true
	}
}

// unavailable answers 503 for d from the ask's first step-2 request, with
// Retry-After when retryAfter is not empty.
func unavailable(d time.Duration, retryAfter string) modelFault {
	return func(w http.ResponseWriter, _ *http.Request, _ string, _ int, since time.Duration) bool {
		if since >= d {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, overloadedBody)
		return true
	}
}

// resetMidBody takes over the connection of the first attempt, writes a
// 200 whose Content-Length promises the whole answer, half of the body,
// and closes the connection.
func (m *modelEndpoint) resetMidBody() modelFault {
	return func(w http.ResponseWriter, _ *http.Request, tag string, attempt int, _ time.Duration) bool {
		if attempt > 1 {
			return false
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			m.t.Errorf("hijacking the connection: %v", err)
			return false
		}
		m.hijacked.Add(1)
		defer m.hijacked.Done()
		body := completionBody(`{"role":"assistant","content":`+quote(answerFor(tag))+`}`, "stop")
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:len(body)/2])
		buf.Flush()
		conn.Close()
		return true
	}
}

// stall accepts the request and never answers: the handler returns only
// when the client gives up (or the test ends).
func (m *modelEndpoint) stall(_ http.ResponseWriter, r *http.Request, _ string, _ int, _ time.Duration) bool {
	select {
	case <-r.Context().Done():
	case <-m.release:
	}
	return true
}

// modelRig is a studio over oracle, packrat and abacus whose agents send
// their chat requests to the endpoint. Each rig has its own project
// directory, so its own packrat archive.
type modelRig struct {
	dir      string
	studio   *studio.Studio
	endpoint *modelEndpoint
	settings string
}

// startModelRig starts the studio with env (model settings) added to the
// agents' environment; settings describes them for the table.
func startModelRig(t *testing.T, m *modelEndpoint, settings string, env ...string) *modelRig {
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	env = append([]string{"OPENAI_BASE_URL=" + m.URL, "OPENAI_MODEL=faulty", "OPENAI_API_KEY="}, env...)
	s := startStudio(t, dir, 60*time.Second, func(o *studio.Options) { o.Env = append(o.Env, env...) })
	return &modelRig{dir: dir, studio: s, endpoint: m, settings: settings}
}

// askOutcome is one `switchboard ask --json` as the person saw it.
type askOutcome struct {
	tag      string
	exit     int
	took     time.Duration
	stderr   string
	Answer   string `json:"answer"`
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error"`
	// Delegations are the tool calls the turn made, as ask reports them.
	Delegations []struct {
		Agent   string `json:"agent"`
		Tool    string `json:"tool"`
		Outcome string `json:"outcome"`
	} `json:"delegations"`
}

// ask runs `switchboard ask --agent oracle --json tag`.
func (g *modelRig) ask(t *testing.T, tag string) askOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), modelAskTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, switchboardBin, "ask", "--studio", g.studio.URL(), "--agent", "oracle", "--json", tag)
	cmd.Dir = g.dir
	cmd.Env = askEnv()
	stdout, stderr := &proctest.SyncBuffer{}, &proctest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	began := time.Now()
	err := cmd.Run()
	o := askOutcome{tag: tag, took: time.Since(began), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		o.exit = ee.ExitCode()
	default:
		t.Fatalf("ask %s: %v\nstderr:\n%s", tag, err, stderr)
	}
	if ctx.Err() != nil {
		t.Fatalf("ask %s: no answer within %v\nstderr:\n%s", tag, modelAskTimeout, stderr)
	}
	if err := json.Unmarshal([]byte(stdout.String()), &o); err != nil {
		t.Fatalf("ask %s --json printed %q: %v\nstderr:\n%s", tag, stdout, err, stderr)
	}
	if testing.Verbose() {
		t.Logf("ask %s: exit %d in %v, status %q, answer %q, error %q\nstderr:\n%s", tag, o.exit, o.took.Round(time.Millisecond), o.Status, o.Answer, o.Error, o.stderr)
	}
	return o
}

// askEnv is the test's environment without what would change what ask
// does (a model endpoint or a studio of the developer's own).
func askEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "SWITCHBOARD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// notesStored counts the notes packrat's archive holds under each tag,
// through a `switchboard client` of its own.
func (g *modelRig) notesStored(t *testing.T, tags []string) map[string]int64 {
	t.Helper()
	c := startClient(t, writeConfig(t, map[string]string{"packrat": g.studio.AgentURL("packrat")}))
	counts := map[string]int64{}
	for _, tag := range tags {
		a := c.callArgs("packrat", "list_notes", "count-"+tag, map[string]any{"tag": tag, "limit": 100}).wait()
		var res struct {
			StructuredContent struct {
				Count int64 `json:"count"`
			} `json:"structuredContent"`
		}
		if a.lost || a.Error != nil || json.Unmarshal(a.Result, &res) != nil {
			t.Fatalf("counting the notes of %s: %+v", tag, a)
		}
		counts[tag] = res.StructuredContent.Count
	}
	c.finish()
	return counts
}

// A modelCase is one row: the fault, how many asks, and what each must
// end as.
type modelCase struct {
	name   string // the subtest
	fault  string // the row's description
	rig    *modelRig
	asks   int
	inject modelFault // what the endpoint does at step 2
	// answered: every ask must answer after attempts attempts of step 2
	// (0: after some retries, when the waits are a random backoff);
	// otherwise fail after them with an error saying each of want.
	answered bool
	attempts int
	want     []string
	// noteWant, when set, must be in the notes ask printed live.
	noteWant string
}

func runModelCase(t *testing.T, c modelCase) ModelRow {
	row := ModelRow{Fault: c.fault, Settings: c.rig.settings}
	c.rig.endpoint.setFault(c.inject)
	defer c.rig.endpoint.setFault(nil)
	var outcomes []askOutcome
	for i := range c.asks {
		o := c.rig.ask(t, fmt.Sprintf("mf-%s-%d", c.name, i))
		outcomes = append(outcomes, o)
		row.Asks++
		row.Slowest = max(row.Slowest, o.took)
		n := c.rig.endpoint.attempts(o.tag)
		row.Attempts = max(row.Attempts, n)
		switch {
		case c.attempts > 0 && n != c.attempts:
			t.Errorf("ask %s: step 2 was sent %d times, want %d", o.tag, n, c.attempts)
		case c.attempts == 0 && n < 2:
			t.Errorf("ask %s: step 2 was sent %d times, want it retried", o.tag, n)
		}
		if c.noteWant != "" && !strings.Contains(o.stderr, c.noteWant) {
			t.Errorf("ask %s: stderr lacks the live note %q:\n%s", o.tag, c.noteWant, o.stderr)
		}
		if c.answered {
			if o.exit != askExitOK || o.Status != "answered" || o.Answer != answerFor(o.tag) {
				t.Errorf("ask %s: exit %d, status %q, answer %q, error %q; want exit 0, answered %q", o.tag, o.exit, o.Status, o.Answer, o.Error, answerFor(o.tag))
				continue
			}
			if d := o.Delegations; len(d) != 1 || d[0].Agent != "packrat" || d[0].Tool != "store_note" || d[0].Outcome != "ok" {
				t.Errorf("ask %s: delegations %+v, want the one packrat.store_note, ok", o.tag, d)
				continue
			}
			row.Answered++
			continue
		}
		if o.exit != askExitFailed || o.ExitCode != askExitFailed || o.Status != "failed" {
			t.Errorf("ask %s: exit %d (json %d), status %q, error %q; want exit %d", o.tag, o.exit, o.ExitCode, o.Status, o.Error, askExitFailed)
			continue
		}
		ok := true
		for _, want := range append([]string{c.rig.endpoint.URL, "step 2"}, c.want...) {
			if !strings.Contains(o.Error, want) || !strings.Contains(o.stderr, want) {
				t.Errorf("ask %s: error %q (stderr %q) does not say %q", o.tag, o.Error, o.stderr, want)
				ok = false
			}
		}
		if ok {
			row.Failed++
		}
	}
	var tags []string
	for _, o := range outcomes {
		tags = append(tags, o.tag)
	}
	for tag, n := range c.rig.notesStored(t, tags) {
		row.MaxExecutions = max(row.MaxExecutions, n)
		if n != 1 {
			t.Errorf("ask %s: its note was stored %d times, want once", tag, n)
		}
		if n > 1 {
			row.Duplicates++
		}
	}
	// The endpoint's port changes from run to run; the table names it.
	row.Saw = strings.ReplaceAll(saw(outcomes[len(outcomes)-1], c.answered), c.rig.endpoint.URL, "<endpoint>")
	return row
}

// saw renders what the person saw of an ask: the exit code, and the error,
// or the live notes about retries.
func saw(o askOutcome, answered bool) string {
	if !answered {
		return fmt.Sprintf("exit %d; %s", o.exit, o.Error)
	}
	var notes []string
	sc := bufio.NewScanner(strings.NewReader(o.stderr))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.Contains(l, "retrying in") {
			notes = append(notes, l)
		}
	}
	s := "exit 0, the answer; " + plural(len(notes), "live note", "live notes")
	if len(notes) > 0 {
		s += fmt.Sprintf(", the first %q", notes[0])
	}
	return s
}

// TestModelFaults runs one subtest per model endpoint fault; each records
// a row of the model endpoint table.
func TestModelFaults(t *testing.T) {
	p := currentProfile()
	m := startModelEndpoint(t)
	defaults := startModelRig(t, m, "defaults (2 retries, 2 min model deadline)")
	raised := startModelRig(t, m, "SWITCHBOARD_MODEL_MAX_RETRIES=10", "SWITCHBOARD_MODEL_MAX_RETRIES=10")
	// The short deadline has a studio of its own: on a loaded machine an
	// ordinary answer may take longer than 2 s to be scheduled, which
	// must not turn the other rows' answers into retries.
	deadline := startModelRig(t, m, "defaults, SWITCHBOARD_MODEL_TIMEOUT=2s", "SWITCHBOARD_MODEL_TIMEOUT=2s")
	const failedWith = "model request failed"
	cases := []modelCase{
		{name: "429-storm", fault: "429 storm: every request 429 with Retry-After: 1, 2 of them, then 200", rig: defaults, asks: p.modelAsks,
			inject: rateLimited(2), answered: true, attempts: 3,
			noteWant: "rate-limited by " + m.URL + " (429), retrying in 1 s, 1 of 2"},
		{name: "429-forever", fault: "429 storm that never ends (Retry-After: 1)", rig: defaults, asks: p.modelAsks,
			inject: rateLimited(-1), attempts: 3,
			want: []string{failedWith, "3 attempts", "429 Too Many Requests"}},
		{name: "503-short-ridden", fault: fmt.Sprintf("503 for %v (no Retry-After)", p.modelOutage), rig: raised, asks: p.modelAsks,
			inject: unavailable(p.modelOutage, ""), answered: true},
		{name: "503-short-defaults", fault: fmt.Sprintf("503 for %v (no Retry-After)", p.modelOutage), rig: defaults, asks: p.modelAsks,
			inject: unavailable(p.modelOutage, ""), attempts: 3,
			want: []string{failedWith, "3 attempts", "503 Service Unavailable"}},
		{name: "reset-mid-body", fault: "connection closed after half of the 200's JSON body (Content-Length promised all of it)", rig: defaults, asks: p.modelAsks,
			inject: m.resetMidBody(), answered: true, attempts: 2},
		{name: "stall", fault: "endpoint accepts the request and never answers", rig: deadline, asks: p.modelAsks,
			inject: m.stall, attempts: 3,
			want: []string{failedWith, "3 attempts", "did not answer within 2s"}},
	}
	if *full {
		cases = append(cases,
			modelCase{name: "429-long-storm", fault: fmt.Sprintf("429 storm: every request 429 with Retry-After: 1, %d of them, then 200", p.modelLongStorm), rig: raised, asks: p.modelAsks,
				inject: rateLimited(p.modelLongStorm), answered: true, attempts: p.modelLongStorm + 1},
			modelCase{name: "503-30s-ridden", fault: "503 for 30s with Retry-After: 5", rig: raised, asks: 1,
				inject: unavailable(30*time.Second, "5"), answered: true, attempts: 7},
			modelCase{name: "503-30s-defaults", fault: "503 for 30s with Retry-After: 5", rig: defaults, asks: 1,
				inject: unavailable(30*time.Second, "5"), attempts: 3,
				want: []string{failedWith, "3 attempts", "503 Service Unavailable"}},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runModelCase(t, c)
			if r.Duplicates != 0 {
				t.Errorf("row %q: %d delegations ran twice; must be 0", r.Fault, r.Duplicates)
			}
			recordModel(r)
		})
	}
}
