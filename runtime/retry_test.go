package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/runtime"
)

// endpoint is an OpenAI-compatible server that answers each request with
// the next of its answers, as a provider would, and records the bodies.
type endpoint struct {
	t   *testing.T
	URL string

	mu      sync.Mutex
	answers []http.HandlerFunc
	bodies  []string
}

func newEndpoint(t *testing.T, answers ...http.HandlerFunc) *endpoint {
	e := &endpoint{t: t, answers: answers}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		n := len(e.bodies)
		e.bodies = append(e.bodies, string(body))
		e.mu.Unlock()
		if n >= len(e.answers) {
			e.t.Errorf("endpoint: request %d beyond the %d answers", n+1, len(e.answers))
			http.Error(w, "beyond the script", http.StatusTeapot)
			return
		}
		e.answers[n](w, r)
	}))
	t.Cleanup(ts.Close)
	e.URL = ts.URL + "/v1"
	return e
}

func (e *endpoint) Bodies() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.bodies...)
}

// fail answers status with body (JSON) and the headers given as pairs.
func fail(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// reply answers 200 with an assistant message.
func reply(msg openai.ChatCompletionMessage) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		msg.Role = openai.ChatMessageRoleAssistant
		finish := openai.FinishReasonStop
		if len(msg.ToolCalls) > 0 {
			finish = openai.FinishReasonToolCalls
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
			ID: "chatcmpl-1", Object: "chat.completion", Model: "scripted",
			Choices: []openai.ChatCompletionChoice{{Message: msg, FinishReason: finish}},
		})
	}
}

func answer(text string) http.HandlerFunc {
	return reply(openai.ChatCompletionMessage{Content: text})
}

// waits records the waits before each retry instead of spending them.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func noWait(a *runtime.Agent) *waits {
	w := &waits{}
	runtime.SetRetryWait(a, func(ctx context.Context, d time.Duration) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.d = append(w.d, d)
		return ctx.Err()
	})
	return w
}

func (w *waits) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

// notes collects a turn's notes.
type notes struct {
	mu sync.Mutex
	s  []string
}

func (n *notes) ctx(ctx context.Context) context.Context {
	return runtime.WithNoteHandler(ctx, func(s string) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.s = append(n.s, s)
	})
}

// get returns the notes about retries (a turn without tools also notes
// that it has none).
func (n *notes) get() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var got []string
	for _, s := range n.s {
		if strings.Contains(s, ", retrying in ") {
			got = append(got, s)
		}
	}
	return got
}

// The providers' error answers, from their documentation.
const (
	openAIRateLimit = `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	openAIQuota     = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAIServer    = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
	openAIContext   = `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	openAIBadKey    = `{"error":{"message":"Incorrect API key provided: sk-test-***cret. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	openAINoModel   = `{"error":{"message":"The model ` + "`gpt-5-turbo`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`
	azureRateLimit  = `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-06-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 2 seconds."}}`
	azureForbidden  = `{"error":{"code":"PermissionDenied","message":"Principal does not have access to API/Operation."}}`
	groqRateLimit   = `{"error":{"message":"Rate limit reached for model ` + "`llama-3.1-8b-instant`" + ` in organization ` + "`org_01`" + ` on tokens per minute (TPM): Limit 6000, Used 5800, Requested 700. Please try again in 5s.","type":"tokens","code":"rate_limit_exceeded"}}`
	ollamaBusy      = `{"error":"server busy, please try again.  maximum pending requests exceeded"}`
	ollamaNoModel   = `{"error":"model \"llama3.1\" not found, try pulling it first"}`
	vllmBadRequest  = `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`
	vllmBadValue    = `{"object":"error","message":"temperature must be non-negative, got -1.0.","type":"BadRequestError","param":null,"code":400}`
	vllmNoModel     = `{"object":"error","message":"The model ` + "`gpt-4o`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`
	llamaCppLoading = `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`
	deepSeekBusy    = `{"error":{"message":"Server overloaded, please try again later","type":"service_unavailable_error","param":null,"code":"server_overloaded"}}`
)

// TestRetryProviderShapes: each provider's passing failure, in its own
// shape, is sent again once, after the wait it asked for (or a backoff
// within openai-python's bounds), with a live note; the turn then answers.
func TestRetryProviderShapes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first    http.HandlerFunc
		wantWait time.Duration // 0: a backoff in [0, 500ms]
		wantNote string
	}{
		{"OpenAI 429 with x-ratelimit headers", fail(429, openAIRateLimit,
			"x-ratelimit-limit-requests", "3", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "20s", "retry-after", "20"),
			20 * time.Second, "rate-limited by %s (429), retrying in 20 s, 1 of 2"},
		{"OpenAI 500", fail(500, openAIServer), 0, "%s answered 500 Internal Server Error, retrying in"},
		{"Azure 429 with retry-after-ms", fail(429, azureRateLimit, "retry-after", "2", "retry-after-ms", "1500"),
			1500 * time.Millisecond, "rate-limited by %s (429), retrying in 1.5 s, 1 of 2"},
		{"Groq 429 with retry-after", fail(429, groqRateLimit, "retry-after", "2"), 2 * time.Second, "rate-limited by %s (429), retrying in 2 s, 1 of 2"},
		{"Ollama 503 busy", fail(503, ollamaBusy), 0, "%s answered 503 Service Unavailable, retrying in"},
		{"llama.cpp 503 loading", fail(503, llamaCppLoading), 0, "%s answered 503 Service Unavailable, retrying in"},
		{"DeepSeek 503 overloaded", fail(503, deepSeekBusy), 0, "%s answered 503 Service Unavailable, retrying in"},
		{"a proxy's 502 in HTML", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		}, 0, "%s answered 502 Bad Gateway, retrying in"},
		{"408", fail(408, `{"error":{"message":"timeout","type":"timeout"}}`), 0, "%s answered 408 Request Timeout, retrying in"},
		{"409", fail(409, `{"error":{"message":"conflict","type":"conflict"}}`), 0, "%s answered 409 Conflict, retrying in"},
		{"a Retry-After date", func(w http.ResponseWriter, r *http.Request) {
			fail(503, openAIServer, "retry-after", time.Now().Add(30*time.Second).UTC().Format(http.TimeFormat))(w, r)
		}, -1, "%s answered 503 Service Unavailable, retrying in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.first, answer("42"))
			a := newAgent(t, oracle(e.URL), nil)
			w := noWait(a)
			var n notes
			res, err := a.Run(n.ctx(t.Context()), "what is 6 times 7?", chain)
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "42" || res.Steps != 1 || len(e.Bodies()) != 2 {
				t.Fatalf("answer %q after %d steps and %d requests; want 42 after 1 step, 2 requests", res.Answer, res.Steps, len(e.Bodies()))
			}
			if b := e.Bodies(); b[0] != b[1] {
				t.Errorf("the retry differs from the request:\n%s\n%s", b[0], b[1])
			}
			got := w.get()
			switch {
			case len(got) != 1:
				t.Fatalf("waits %v, want one", got)
			case tc.wantWait > 0 && got[0] != tc.wantWait:
				t.Errorf("waited %v, want %v (what the endpoint asked)", got[0], tc.wantWait)
			case tc.wantWait == 0 && (got[0] < 0 || got[0] > 500*time.Millisecond):
				t.Errorf("waited %v, want a backoff in [0, 500ms]", got[0])
			case tc.wantWait < 0 && (got[0] <= 20*time.Second || got[0] > 30*time.Second):
				t.Errorf("waited %v, want about the 30 s until the Retry-After date", got[0])
			}
			ns := n.get()
			if want := fmt.Sprintf(tc.wantNote, e.URL); len(ns) != 1 || !strings.HasPrefix(ns[0], want) || !strings.HasSuffix(ns[0], "1 of 2") {
				t.Errorf("notes %q, want one starting %q, ending \"1 of 2\"", ns, want)
			}
		})
	}
}

// TestRetryExhausted: an endpoint that stays down is asked 1 + 2 times;
// the error names the endpoint, the step, the attempts and the last
// status, and wraps ErrModel and the endpoint's own error.
func TestRetryExhausted(t *testing.T) {
	e := newEndpoint(t, fail(503, ollamaBusy), fail(503, ollamaBusy), fail(503, ollamaBusy))
	a := newAgent(t, oracle(e.URL), nil)
	w := noWait(a)
	var n notes
	res, err := a.Run(n.ctx(t.Context()), "anything", chain)
	if !errors.Is(err, runtime.ErrModel) {
		t.Fatalf("err = %v, want ErrModel", err)
	}
	var reqErr *openai.RequestError
	if !errors.As(err, &reqErr) || reqErr.HTTPStatusCode != 503 {
		t.Errorf("err = %v, want the endpoint's 503 inside", err)
	}
	for _, want := range []string{e.URL, "step 1", "3 attempts", "503 Service Unavailable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if len(e.Bodies()) != 3 || len(w.get()) != 2 || res.Status != runtime.StatusFailed {
		t.Errorf("%d requests, %d waits, status %q; want 3, 2, failed", len(e.Bodies()), len(w.get()), res.Status)
	}
	if ns := n.get(); len(ns) != 2 || !strings.HasSuffix(ns[0], "1 of 2") || !strings.HasSuffix(ns[1], "2 of 2") {
		t.Errorf("notes %q, want 1 of 2 then 2 of 2", ns)
	}
	// The backoff bound doubles: [0, 500ms], then [0, 1s].
	if got := w.get(); got[0] > 500*time.Millisecond || got[1] > time.Second {
		t.Errorf("waits %v beyond the backoff bounds 500ms, 1s", got)
	}
}

// TestRetryNeverRedoesADelegation: a 429 at step 2 sends step 2's request
// again, whose history already holds step 1's tool result; the sibling's
// tool ran once.
func TestRetryNeverRedoesADelegation(t *testing.T) {
	var stored atomic.Int64
	srv := scriptedPackrat(t, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		stored.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil
	})
	e := newEndpoint(t,
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "packrat__store_note", `{"text":"launch on Friday"}`)}}),
		fail(429, groqRateLimit, "retry-after", "1"),
		answer("Stored."),
	)
	a := newAgent(t, oracle(e.URL, srv), nil)
	noWait(a)
	res, err := a.Run(t.Context(), "remember the launch", chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "Stored." || res.Steps != 2 || stored.Load() != 1 || len(res.Delegations) != 1 {
		t.Errorf("answer %q, %d steps, the tool ran %d times, %d delegations; want Stored., 2, 1, 1", res.Answer, res.Steps, stored.Load(), len(res.Delegations))
	}
	if b := e.Bodies(); len(b) != 3 || b[1] != b[2] || !strings.Contains(b[2], `"tool_call_id":"c1"`) {
		t.Errorf("step 2 was not resent as it was, with step 1's tool result:\n%s", strings.Join(b, "\n"))
	}
}

// TestNoRetryForRequestErrors: 400, 401, 403 and 404, and a quota that is
// gone, fail at once, each saying what to fix; the key never shows.
func TestNoRetryForRequestErrors(t *testing.T) {
	const key = "sk-test-very-secret"
	for _, tc := range []struct {
		name   string
		answer http.HandlerFunc
		status int
		want   []string
	}{
		// A context-length 400 on a request with no tool result to leave
		// out fails at once too, saying what to set (budget.go); with tool
		// results, TestContextLengthExceeded.
		{"OpenAI 400 context length", fail(400, openAIContext), 400, []string{"longer than the model's context (400)", "maximum context length is 128000 tokens", "no tool result to leave out", "context.max_tool_results_bytes"}},
		{"vLLM 400 context length", fail(400, vllmBadRequest), 400, []string{"longer than the model's context (400)", "maximum context length is 4096 tokens"}},
		{"vLLM 400", fail(400, vllmBadValue), 400, []string{"refused the request (400)", "temperature must be"}},
		{"OpenAI 401 echoing the key", func(w http.ResponseWriter, r *http.Request) {
			fail(401, strings.Replace(openAIBadKey, "sk-test-***cret", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), 1))(w, r)
		}, 401, []string{"refused the API key (401)", "$ORACLE_KEY (model.api_key_env in agent.json)"}},
		{"Azure 403", fail(403, azureForbidden), 403, []string{"forbids this key to use model \"scripted\" (403)", "Principal does not have access"}},
		{"OpenAI 404 model", fail(404, openAINoModel), 404, []string{"knows no model \"scripted\" there (404)", "model.name in agent.json", "/v1"}},
		{"Ollama 404 model", fail(404, ollamaNoModel), 404, []string{"knows no model \"scripted\" there (404)"}},
		{"vLLM 404 model", fail(404, vllmNoModel), 404, []string{"knows no model \"scripted\" there (404)"}},
		{"OpenAI 429 insufficient_quota", fail(429, openAIQuota), 429, []string{"no quota left (insufficient_quota)"}},
		{"a Retry-After of an hour", fail(429, openAIRateLimit, "retry-after", "3600"), 429, []string{"asked to wait 1h0m0s", "longer than a turn waits (1m0s)"}},
		{"x-should-retry false", fail(500, openAIServer, "x-should-retry", "false"), 500, []string{"answered 500 Internal Server Error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.answer)
			def := oracle(e.URL)
			def.Model.APIKeyEnv = "ORACLE_KEY"
			a := newAgent(t, def, &runtime.Options{Getenv: func(k string) string { return map[string]string{"ORACLE_KEY": key}[k] }})
			w := noWait(a)
			_, err := a.Run(t.Context(), "hi", chain)
			if !errors.Is(err, runtime.ErrModel) {
				t.Fatalf("err = %v, want ErrModel", err)
			}
			var apiErr *openai.APIError
			var reqErr *openai.RequestError
			if !(errors.As(err, &apiErr) && apiErr.HTTPStatusCode == tc.status) && !(errors.As(err, &reqErr) && reqErr.HTTPStatusCode == tc.status) {
				t.Errorf("err = %v, want the endpoint's %d inside", err, tc.status)
			}
			for _, want := range append(tc.want, e.URL, "step 1") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("the key leaked: %v", err)
			}
			if len(e.Bodies()) != 1 || len(w.get()) != 0 {
				t.Errorf("%d requests, %d waits; want 1, 0", len(e.Bodies()), len(w.get()))
			}
		})
	}
}

// TestNoKeySent401: a 401 to a request that carried no key says so.
func TestNoKeySent401(t *testing.T) {
	e := newEndpoint(t, fail(401, `{"error":{"message":"You didn't provide an API key.","type":"invalid_request_error","param":null,"code":null}}`))
	a := newAgent(t, oracle(e.URL), nil)
	_, err := a.Run(t.Context(), "hi", chain)
	if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), "none was sent: set $OPENAI_API_KEY") {
		t.Errorf("err = %v, want ErrModel saying no key was sent", err)
	}
}

// resetting is a listener whose first n connections are reset (RST) once
// the request has arrived; the rest are served.
type resetting struct {
	net.Listener
	n  atomic.Int64
	wg sync.WaitGroup
}

func (l *resetting) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.n.Add(-1) < 0 {
			return c, err
		}
		l.wg.Go(func() {
			c.Read(make([]byte, 4096)) // the request reached the server...
			c.(*net.TCPConn).SetLinger(0)
			c.Close() // ... and the connection is reset without an answer
		})
	}
}

// TestRetryConnectionReset: a connection reset after the request was sent
// is retried; the next connection is answered.
func TestRetryConnectionReset(t *testing.T) {
	var answered atomic.Int64
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answered.Add(1)
		answer("42")(w, r)
	}))
	l := &resetting{Listener: ts.Listener}
	l.n.Store(2)
	ts.Listener = l
	ts.Start()
	t.Cleanup(func() { ts.Close(); l.wg.Wait() })
	a := newAgent(t, oracle(ts.URL+"/v1"), nil)
	noWait(a)
	var n notes
	res, err := a.Run(n.ctx(t.Context()), "what is 6 times 7?", chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "42" || answered.Load() != 1 {
		t.Errorf("answer %q, %d answered; want 42, 1", res.Answer, answered.Load())
	}
	if ns := n.get(); len(ns) != 2 || !strings.Contains(ns[0], "the connection") {
		t.Errorf("notes %q, want two about the connection", ns)
	}
}

// TestRetryConnectionRefused: nothing listens; the turn tries 1 + 2 times
// and says the connection was refused.
func TestRetryConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/v1"
	l.Close()
	a := newAgent(t, oracle(url), nil)
	w := noWait(a)
	_, err = a.Run(t.Context(), "anything", chain)
	if !errors.Is(err, runtime.ErrModel) {
		t.Fatalf("err = %v, want ErrModel", err)
	}
	for _, want := range []string{url, "step 1", "3 attempts", "refused the connection"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(w.get()) != 2 {
		t.Errorf("waits %v, want two", w.get())
	}
}

// TestMaxRetriesSettings: Options, then the environment, then agent.json;
// each validated, naming what was wrong.
func TestMaxRetriesSettings(t *testing.T) {
	intp := func(n int) *int { return &n }
	for _, tc := range []struct {
		name     string
		opt      int
		env      string
		json     *int
		attempts int
		err      string
	}{
		{name: "default", attempts: 3},
		{name: "agent.json 0", json: intp(0), attempts: 1},
		{name: "agent.json 1", json: intp(1), attempts: 2},
		{name: "environment over agent.json", env: "0", json: intp(5), attempts: 1},
		{name: "Options over the environment", opt: 1, env: "0", attempts: 2},
		{name: "Options negative: none", opt: -1, attempts: 1},
		{name: "environment not a number", env: "two", err: `$SWITCHBOARD_MODEL_MAX_RETRIES="two": want an integer from 0 to 10`},
		{name: "environment too many", env: "11", err: `$SWITCHBOARD_MODEL_MAX_RETRIES="11": want an integer from 0 to 10`},
		{name: "Options too many", opt: 11, err: "Options.MaxRetries = 11: want at most 10"},
		{name: "agent.json out of range", json: intp(12), err: "model.max_retries = 12: want an integer from 0 to 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var answers []http.HandlerFunc
			for range tc.attempts {
				answers = append(answers, fail(502, openAIServer))
			}
			e := newEndpoint(t, answers...)
			def := oracle(e.URL)
			def.Model.MaxRetries = tc.json
			a := newAgent(t, def, &runtime.Options{MaxRetries: tc.opt, Getenv: func(k string) string {
				return map[string]string{runtime.EnvModelMaxRetries: tc.env}[k]
			}})
			noWait(a)
			_, err := a.Run(t.Context(), "anything", chain)
			if tc.err != "" {
				if !errors.Is(err, runtime.ErrNoModel) || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err = %v, want ErrNoModel saying %q", err, tc.err)
				}
				return
			}
			if !errors.Is(err, runtime.ErrModel) || len(e.Bodies()) != tc.attempts {
				t.Errorf("err = %v after %d requests, want ErrModel after %d", err, len(e.Bodies()), tc.attempts)
			}
		})
	}
}

// TestRetryWaitEndsWithTheTurn: a turn cancelled while it waits to retry
// returns the cancellation and sends nothing more.
func TestRetryWaitEndsWithTheTurn(t *testing.T) {
	e := newEndpoint(t, fail(429, groqRateLimit, "retry-after", "30"))
	a := newAgent(t, oracle(e.URL), nil)
	ctx, cancel := context.WithCancel(t.Context())
	runtime.SetRetryWait(a, func(wctx context.Context, _ time.Duration) error {
		cancel()
		<-wctx.Done()
		return wctx.Err()
	})
	_, err := a.Run(ctx, "anything", chain)
	if !errors.Is(err, context.Canceled) || len(e.Bodies()) != 1 {
		t.Errorf("err = %v after %d requests, want context.Canceled after 1", err, len(e.Bodies()))
	}
}
