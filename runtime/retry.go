package runtime

// A model request is sent again when the endpoint's failure is one that
// passes: a rate limit, an overloaded or restarting server, a connection
// that was reset, refused or timed out. openai-python does the same (two
// retries by default, exponential backoff, Retry-After honoured); this is
// that policy with full jitter (AWS's "Exponential Backoff And Jitter") so
// that the agents of a studio that all met the same 429 do not come back in
// step. Only the chat request is sent again: the tool calls of earlier steps
// are in the history the request carries, and are never run twice. A
// request is safe to resend whatever happened to it: a chat completion has
// no effect but its answer.
//
// The decision is classifyModel, a pure function of the error and what the
// transport saw of the attempt's own response (attempt, transport.go), in
// the style of pool/classify.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// DefaultMaxRetries is how many times a failed model request is sent again
// when neither Options.MaxRetries, $SWITCHBOARD_MODEL_MAX_RETRIES nor
// agent.json's model.max_retries says otherwise: openai-python's default.
const DefaultMaxRetries = 2

// MaxMaxRetries bounds every way of setting the retries.
const MaxMaxRetries = agentdef.MaxMaxRetries

// EnvModelMaxRetries names the variable (an integer from 0 to
// MaxMaxRetries) that sets the retries of every agent whose Options do
// not.
const EnvModelMaxRetries = "SWITCHBOARD_MODEL_MAX_RETRIES"

const (
	// maxRetryWait caps one wait, asked for or computed. An endpoint that
	// asks for longer (a daily quota's Retry-After of hours) fails the
	// request at once, saying how long it asked for: nobody waits that
	// long for an answer in a terminal.
	maxRetryWait = 60 * time.Second
	// retryBase and retryMaxBackoff are openai-python's INITIAL_RETRY_DELAY
	// and MAX_RETRY_DELAY: the backoff before retry n (from 0) is drawn
	// from [0, min(retryBase·2ⁿ, retryMaxBackoff)].
	retryBase       = 500 * time.Millisecond
	retryMaxBackoff = 8 * time.Second
)

// errNoChoices is the failure of a 200 answer whose choices list is empty
// (OpenRouter and Azure do this when the upstream model failed or a filter
// dropped the answer): there is nothing to go on, and asking again usually
// gets an answer.
var errNoChoices = errors.New("the endpoint answered 200 with no choices")

// modelVerdict is what the turn does with a failed model request.
type modelVerdict struct {
	retry bool
	// status is the HTTP status of the answer, 0 when there was none.
	status int
	// what describes the failure for a note and the final error
	// ("answered 503 Service Unavailable", "refused the connection"),
	// after the endpoint's name.
	what string
	// wait is what the endpoint asked for (Retry-After, retry-after-ms);
	// asked says it asked.
	wait  time.Duration
	asked bool
	// fix says what to change, for a failure that retrying cannot mend.
	fix string
	// offered are the request's tools, for fixFor to name the one a 400
	// refused (refusal.go), and toolbox the turn's, which says where each
	// came from.
	offered []openai.Tool
	toolbox *delegation.Toolbox
}

// classifyModel decides whether a failed model request is sent again. The
// table, first matching row wins:
//
//	200 with no choices                                   retry
//	no answer within Options.ModelTimeout                 retry
//	an answer, x-should-retry: false (OpenAI's own word)  fail
//	an answer asking to wait longer than maxRetryWait     fail, saying how long
//	429 with code insufficient_quota                      fail: the account, not the moment
//	408, 409, 429, any 5xx; x-should-retry: true          retry
//	400                                                   fail: the provider's message
//	401                                                   fail: the API key, and where it came from
//	403                                                   fail: the key's permissions
//	404                                                   fail: the model name or the base URL
//	other answers                                         fail
//	connection refused, reset, closed without an answer   retry
//	a network timeout (dial, TLS handshake, headers)      retry
//	anything else (DNS name unknown, TLS certificate)     fail: retrying gets the same
//
// now is the clock for a Retry-After given as an HTTP date.
func classifyModel(err error, at attempt, now time.Time) modelVerdict {
	if errors.Is(err, errNoChoices) {
		return modelVerdict{retry: true, status: at.status, what: "answered with no choices"}
	}
	if errors.Is(err, ErrModelTimeout) {
		return modelVerdict{retry: true, what: "did not answer in time"}
	}
	if status := httpStatus(err); status != 0 {
		v := modelVerdict{status: status, what: describeStatus(status, at)}
		v.wait, v.asked = retryAfter(at.header, now)
		shouldRetry := at.header.Get("X-Should-Retry")
		switch {
		case shouldRetry == "false":
			return v
		case v.asked && v.wait > maxRetryWait:
			v.fix = fmt.Sprintf("the endpoint asked to wait %v before trying again, longer than a turn waits (%v)", v.wait.Round(time.Second), maxRetryWait)
			return v
		case status == http.StatusTooManyRequests && apiCode(err) == "insufficient_quota":
			v.fix = "the account has no quota left (insufficient_quota): check its plan and billing; retrying does not help"
			return v
		case status == http.StatusRequestTimeout, status == http.StatusConflict,
			status == http.StatusTooManyRequests, status >= 500, shouldRetry == "true":
			v.retry = true
			return v
		}
		return v
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return modelVerdict{retry: true, what: "refused the connection"}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return modelVerdict{retry: true, what: "reset the connection"}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return modelVerdict{retry: true, what: "closed the connection without an answer"}
	case errors.As(err, &ne) && ne.Timeout():
		return modelVerdict{retry: true, what: "timed out on the connection"}
	}
	return modelVerdict{} // conservatively: the same request would fail the same way
}

// httpStatus is the HTTP status of the endpoint's error answer, 0 when the
// request got none.
func httpStatus(err error) int {
	if apiErr, ok := errors.AsType[*openai.APIError](err); ok && apiErr.HTTPStatusCode != 0 {
		return apiErr.HTTPStatusCode
	}
	if reqErr, ok := errors.AsType[*openai.RequestError](err); ok {
		return reqErr.HTTPStatusCode
	}
	return 0
}

// apiCode is the error's code member when it is a string (OpenAI's
// "insufficient_quota", "rate_limit_exceeded").
func apiCode(err error) string {
	if apiErr, ok := errors.AsType[*openai.APIError](err); ok {
		s, _ := apiErr.Code.(string)
		return s
	}
	return ""
}

// apiMessage is the provider's own message in its error answer: OpenAI's
// error.message, Ollama's error string, or the start of a body that is
// neither.
func apiMessage(err error) string {
	if apiErr, ok := errors.AsType[*openai.APIError](err); ok {
		return apiErr.Message
	}
	if reqErr, ok := errors.AsType[*openai.RequestError](err); ok {
		// go-openai knows only OpenAI's shape. vLLM answers
		// {"object":"error","message":...}, Ollama and LM Studio
		// {"error":"..."}.
		var body struct {
			Message string `json:"message"`
			Error   any    `json:"error"`
		}
		if json.Unmarshal(reqErr.Body, &body) == nil {
			if s, ok := body.Error.(string); ok && s != "" {
				return truncate(s)
			}
			if body.Message != "" {
				return truncate(body.Message)
			}
		}
		return truncate(strings.TrimSpace(string(reqErr.Body)))
	}
	return ""
}

func truncate(s string) string {
	if len(s) <= maxErrorMessage {
		return s
	}
	return strings.ToValidUTF8(s[:maxErrorMessage], "") + "…"
}

// maxErrorMessage bounds how much of an endpoint's error body an error
// quotes.
const maxErrorMessage = 512

func describeStatus(status int, at attempt) string {
	if at.errorIn200 {
		return fmt.Sprintf("answered 200 with an error in the body (code %d)", status)
	}
	if status == http.StatusTooManyRequests {
		return "rate-limited the request (429 Too Many Requests)"
	}
	return fmt.Sprintf("answered %d %s", status, http.StatusText(status))
}

// retryAfter reads how long the endpoint asked to wait: retry-after-ms
// (milliseconds, OpenAI and Azure), else Retry-After in seconds (possibly
// fractional) or as an HTTP date (RFC 9110 §10.2.3).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return duration(ms, time.Millisecond), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return duration(s, time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// duration is n units, saturating: an endpoint's "1e300" or "Inf" is a
// very long wait, never an overflow into a negative one.
func duration(n float64, unit time.Duration) time.Duration {
	if d := n * float64(unit); d < float64(math.MaxInt64) {
		return time.Duration(d)
	}
	return math.MaxInt64
}

// backoff is the wait before retry n (from 0) when the endpoint asked for
// none: full jitter over an exponential bound.
func backoff(n int) time.Duration {
	bound := min(retryBase<<min(n, 16), retryMaxBackoff)
	return rand.N(bound + 1)
}

// parseMaxRetries reads $SWITCHBOARD_MODEL_MAX_RETRIES; ok is false when it
// is not set.
func parseMaxRetries(s string) (n int, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > MaxMaxRetries {
		return 0, false, fmt.Errorf("$%s=%q: want an integer from 0 to %d", EnvModelMaxRetries, s, MaxMaxRetries)
	}
	return n, true, nil
}

// maxRetries resolves the retries of an agent: Options.MaxRetries, then
// the environment, then agent.json, then DefaultMaxRetries.
func maxRetries(def *agentdef.Definition, opts *Options) (int, error) {
	switch {
	case opts.MaxRetries < 0:
		return 0, nil
	case opts.MaxRetries > MaxMaxRetries:
		return 0, fmt.Errorf("Options.MaxRetries = %d: want at most %d (or negative for none)", opts.MaxRetries, MaxMaxRetries)
	case opts.MaxRetries > 0:
		return opts.MaxRetries, nil
	}
	if n, ok, err := parseMaxRetries(opts.Getenv(EnvModelMaxRetries)); err != nil || ok {
		return n, err
	}
	if def.Model.MaxRetries != nil {
		n := *def.Model.MaxRetries
		if n < 0 || n > MaxMaxRetries {
			return 0, fmt.Errorf("model.max_retries = %d: want an integer from 0 to %d", n, MaxMaxRetries)
		}
		return n, nil
	}
	return DefaultMaxRetries, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// seconds renders a wait for a person: "2 s", "0.4 s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', -1, 64) + " s"
}

// complete runs the chat request of one step, sending it again while the
// failure is one that passes (classifyModel), at most a.retries times. A
// note tells the caller of each wait as it begins. The error names the
// endpoint, the step, the attempts and the last failure, and wraps ErrModel
// and the endpoint's own error.
//
// su, when not nil, is filled in with what the step sent and cost.
func (a *Agent) complete(ctx context.Context, req openai.ChatCompletionRequest, tools *delegation.Toolbox, step int, su *StepUsage) (openai.ChatCompletionResponse, error) {
	if a.plain {
		resp, err := a.chat(ctx, req, step)
		if err == nil && len(resp.Choices) == 0 {
			err = errNoChoices
		}
		return resp, err
	}
	note := noteHandler(ctx)
	name, where := a.Model()
	for n := 0; ; n++ {
		var at attempt
		began := time.Now()
		resp, err := a.chat(withAttempt(ctx, &at), req, step)
		if err == nil && len(resp.Choices) == 0 {
			err = errNoChoices
		}
		mr := ModelRequest{Agent: a.def.Name, Model: name, Endpoint: where, Step: step, Attempt: n + 1,
			Duration: time.Since(began), RequestBytes: at.requestBytes}
		if su != nil {
			su.Attempts, su.RequestBytes = n+1, at.requestBytes
		}
		if err == nil {
			u := usageOf(resp.Usage)
			if u.CachedTokens == 0 {
				u.CachedTokens = at.cacheHit
			}
			mr.Outcome, mr.Usage = OutcomeOK, a.priced(u)
			if su != nil {
				su.Usage.Add(mr.Usage)
			}
			a.observe(mr)
			return resp, nil
		}
		if ctx.Err() != nil {
			mr.Outcome = OutcomeCanceled
			a.observe(mr)
			return resp, context.Cause(ctx)
		}
		v := classifyModel(err, at, time.Now())
		v.offered, v.toolbox = req.Tools, tools
		mr.Status, mr.Outcome = v.status, OutcomeFailed
		if v.retry && n < a.retries {
			mr.Outcome = OutcomeRetried
		}
		a.observe(mr)
		if errors.Is(err, ErrModelTimeout) {
			v.what = fmt.Sprintf("did not answer within %v", a.opts.ModelTimeout)
		}
		// The endpoint's error body may echo the key it was sent
		// ("Incorrect API key provided: sk-..."); the error goes into a
		// tool result and logs, so it is scrubbed like a log line.
		err = logging.RedactError(err, a.model.apiKey)
		if !v.retry || n >= a.retries {
			return resp, a.modelError(step, n+1, v, err)
		}
		wait := v.wait
		if !v.asked {
			wait = backoff(n)
		}
		wait = min(wait, maxRetryWait)
		msg := fmt.Sprintf("%s %s, retrying in %s, %d of %d", where, v.what, seconds(wait), n+1, a.retries)
		if v.status == http.StatusTooManyRequests && !at.errorIn200 {
			msg = fmt.Sprintf("rate-limited by %s (429), retrying in %s, %d of %d", where, seconds(wait), n+1, a.retries)
		}
		a.log.Warn("model request failed, retrying", "model", name, "endpoint", where, "step", step, "attempt", n+1, "status", v.status, "wait", wait, "err", err)
		if note != nil {
			note(msg)
		}
		if err := a.wait(ctx, wait); err != nil {
			return resp, err
		}
	}
}

// modelError is the error of a step whose model request failed for good
// after attempts attempts.
func (a *Agent) modelError(step, attempts int, v modelVerdict, err error) error {
	name, where := a.Model()
	if v.status == http.StatusBadRequest && contextExceeded(err) {
		// Its own sentinel, so that the turn can make room and ask again
		// (budget.go) rather than fail the step.
		msg := logging.Scrub(apiMessage(err), a.model.apiKey)
		return fmt.Errorf("%w: %w: model %q at %s, step %d: the endpoint refused the request as longer than the model's context (400): %q: %w", ErrModel, ErrContextLength, name, where, step, msg, err)
	}
	var why string
	switch {
	case v.fix != "":
		why = v.fix
	case v.retry:
		why = fmt.Sprintf("%d %s, the endpoint %s", attempts, plural(attempts, "attempt", "attempts"), v.what)
	default:
		why = a.fixFor(v, err)
	}
	return fmt.Errorf("%w: model %q at %s, step %d: %s: %w", ErrModel, name, where, step, why, err)
}

// fixFor says what to change for a failure that retrying does not mend.
func (a *Agent) fixFor(v modelVerdict, err error) string {
	name, where := a.Model()
	msg := logging.Scrub(apiMessage(err), a.model.apiKey)
	switch v.status {
	case http.StatusBadRequest:
		if fix := a.refusalFix(v.offered, v.toolbox, err, msg); fix != "" {
			return fix
		}
		return fmt.Sprintf("the endpoint refused the request (400): %q", msg)
	case http.StatusUnauthorized:
		if a.model.keySource == "" {
			return "the endpoint wants an API key (401) and none was sent: set $OPENAI_API_KEY, or name the variable in agent.json's model.api_key_env"
		}
		return fmt.Sprintf("the endpoint refused the API key (401): the key in %s is wrong, expired or for another endpoint", a.model.keySource)
	case http.StatusForbidden:
		return fmt.Sprintf("the endpoint forbids this key to use model %q (403): check the key's permissions, project or region: %q", name, msg)
	case http.StatusNotFound:
		return fmt.Sprintf("the endpoint knows no model %q there (404): the model name (--model, $OPENAI_MODEL, model.name in agent.json) or the base URL %s is wrong (it usually ends in /v1)", name, where)
	case 0:
		return "the request could not be sent"
	}
	return fmt.Sprintf("the endpoint %s: %q", v.what, msg)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// observe tells Options.OnModelRequest of an attempt.
func (a *Agent) observe(mr ModelRequest) {
	if a.opts.OnModelRequest != nil {
		a.opts.OnModelRequest(mr)
	}
}

// priced returns u with its cost by agent.json's price table
// (model.prices), under the model name the request was sent with: cached
// prompt tokens at cached_input when the table gives it, else at input,
// the other prompt tokens at input, completion tokens (reasoning
// included) at output. A model without a price costs 0, and so does the
// builtin model, which runs in the process.
func (a *Agent) priced(u Usage) Usage {
	p, ok := a.def.Model.Prices[a.model.name]
	if a.model.builtin || !ok {
		u.CostUSD = 0
		return u
	}
	cached := min(max(u.CachedTokens, 0), u.PromptTokens)
	cachedPrice := p.Input
	if p.CachedInput != nil {
		cachedPrice = *p.CachedInput
	}
	u.CostUSD = (float64(u.PromptTokens-cached)*p.Input + float64(cached)*cachedPrice + float64(u.CompletionTokens)*p.Output) / 1e6
	return u
}
