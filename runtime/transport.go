package runtime

// Every model request goes through modelTransport, an http.RoundTripper
// below go-openai. go-openai keeps nothing of an error answer but its
// status and body: the Retry-After an endpoint sent with its 429 is lost
// by the time the turn sees the error. So, as the pool's recorder does for
// MCP (pool/evidence.go), each attempt carries a record in its context, and
// the transport writes onto it what the attempt's own response said.
//
// The same transport puts right what some OpenAI-compatible servers send
// differently from OpenAI, before go-openai decodes it (normalizeResponse):
// tool-call arguments as a JSON object rather than a string (some Ollama
// and vLLM builds; go-openai fails the whole response with "cannot
// unmarshal object into ... string"), and an error object in a 200 body
// (OpenRouter), which becomes the error answer it is. Anything else passes
// through byte for byte, and so does a body it cannot parse: go-openai's
// own error about it is the real one. An event stream (a streamed
// request's answer) is never read here: it passes through as it comes,
// and stream.go puts its chunks right as it reads them.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
)

// attempt is what the transport saw of one model request's response.
// It is written by RoundTrip, which net/http's Client calls on the
// goroutine of the request, and read after the request has returned.
type attempt struct {
	status int         // the HTTP status as the endpoint sent it; 0 when none came
	header http.Header // the response's headers
	// errorIn200: the endpoint answered 200 with an error object and no
	// choices (OpenRouter); the transport turned it into the error answer
	// it is, with that status.
	errorIn200 bool
	// requestBytes is the size of the request body as sent.
	requestBytes int
	// cacheHit is DeepSeek's usage.prompt_cache_hit_tokens in a whole
	// answer, which go-openai's Usage has no member for.
	cacheHit int
}

type attemptKey struct{}

func withAttempt(ctx context.Context, at *attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, at)
}

// modelTransport records each response on its request's attempt.
type modelTransport struct {
	base http.RoundTripper
}

func (t *modelTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	at, _ := req.Context().Value(attemptKey{}).(*attempt)
	if at != nil && req.ContentLength > 0 {
		at.requestBytes = int(req.ContentLength) // go-openai sends a bytes.Reader: the length is known
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if at != nil {
		at.status, at.header = resp.StatusCode, resp.Header
	}
	if resp.StatusCode/100 != 2 {
		return resp, nil
	}
	live := livenessOf(req.Context()) // set for a streamed request only
	if live != nil && isEventStream(resp.Header) {
		// An event stream passes through as it comes, each read seen:
		// its chunks are normalised as they are read (stream.go).
		resp.Body = live.body(resp.Body)
		return resp, nil
	}
	if resp.ContentLength > maxModelResponse {
		return resp, nil // too large to rewrite; go-openai reads it as it is
	}
	var b bytes.Buffer
	if resp.ContentLength > 0 {
		b.Grow(int(resp.ContentLength) + bytes.MinRead) // one allocation for a body of known length
	}
	_, err = b.ReadFrom(io.LimitReader(resp.Body, maxModelResponse+1))
	buf := b.Bytes()
	if err != nil || len(buf) > maxModelResponse {
		// Too large to rewrite, or the read failed: go-openai reads the
		// rest and reports what it finds.
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	if at != nil && bytes.Contains(buf, []byte(`prompt_cache_hit_tokens"`)) {
		var probe struct {
			Usage wireUsage `json:"usage"`
		}
		if json.Unmarshal(buf, &probe) == nil {
			at.cacheHit = probe.Usage.PromptCacheHitTokens
		}
	}
	out, status := normalizeResponse(buf)
	if status != 0 {
		resp.StatusCode, resp.Status = status, strconv.Itoa(status)+" "+http.StatusText(status)
		if at != nil {
			at.errorIn200 = true
		}
	} else if live != nil {
		// A streamed request answered with one body: a JSON completion is
		// the answer, handed on as a stream of one chunk.
		out, live.plainJSON = asStream(out)
		live.notStream = !live.plainJSON
		if live.plainJSON {
			resp.Header.Set("Content-Type", "text/event-stream")
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// isEventStream reports whether a response is a server-sent event stream.
func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// maxModelResponse bounds the body normalizeResponse reads: far beyond any
// chat completion (a 128k-token answer is about 512 KB).
const maxModelResponse = 16 << 20

type readCloser struct {
	io.Reader
	io.Closer
}

// normalizeResponse puts a chat completion's body in OpenAI's shape. It
// returns the body to decode and, for an error object in a 200 answer with
// no choices, the status to report it with: the error's own code when it
// is an HTTP status (OpenRouter sends 429, 502), else 502 Bad Gateway (the
// endpoint passed on a failure).
func normalizeResponse(body []byte) ([]byte, int) {
	// Most answers are in OpenAI's shape and hold neither member that may
	// need work; they are passed on without being parsed twice. The test
	// leaves out the first letter because encoding/json, and so go-openai,
	// matches member names without regard to case.
	if !bytes.Contains(body, []byte(`rguments"`)) && !bytes.Contains(body, []byte(`rror"`)) {
		return body, 0
	}
	var probe struct {
		Error   json.RawMessage `json:"error"`
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct {
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return body, 0
	}
	if len(probe.Choices) == 0 && len(probe.Error) > 0 && string(probe.Error) != "null" {
		var e struct {
			Code json.RawMessage `json:"code"`
		}
		status := http.StatusBadGateway
		if json.Unmarshal(probe.Error, &e) == nil {
			if n, err := strconv.Atoi(string(e.Code)); err == nil && n >= 400 && n <= 599 {
				status = n
			}
		}
		return body, status
	}
	rewrite := false
	for _, c := range probe.Choices {
		for _, tc := range c.Message.ToolCalls {
			if a := bytes.TrimSpace(tc.Function.Arguments); len(a) > 0 && a[0] != '"' {
				rewrite = true
			}
		}
	}
	if !rewrite {
		return body, 0
	}
	if out, err := stringifyArguments(body); err == nil {
		return out, 0
	}
	return body, 0
}

// stringifyArguments rewrites every tool call's arguments that is not a
// JSON string (an object, or null) into the string OpenAI sends: the
// object's compact text, "{}" for null.
func stringifyArguments(body []byte) ([]byte, error) {
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	var choices []map[string]json.RawMessage
	if err := json.Unmarshal(resp["choices"], &choices); err != nil {
		return nil, err
	}
	for _, c := range choices {
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(c["message"], &msg); err != nil {
			return nil, err
		}
		var calls []map[string]json.RawMessage
		if raw, ok := msg["tool_calls"]; !ok || json.Unmarshal(raw, &calls) != nil {
			continue
		}
		for _, tc := range calls {
			var fn map[string]json.RawMessage
			if err := json.Unmarshal(tc["function"], &fn); err != nil {
				return nil, err
			}
			a := bytes.TrimSpace(fn["arguments"])
			if len(a) == 0 || a[0] == '"' {
				continue
			}
			text := "{}"
			if string(a) != "null" {
				var compact bytes.Buffer
				if err := json.Compact(&compact, a); err != nil {
					return nil, err
				}
				text = compact.String()
			}
			fn["arguments"], _ = json.Marshal(text)
			tc["function"], _ = json.Marshal(fn)
		}
		msg["tool_calls"], _ = json.Marshal(calls)
		c["message"], _ = json.Marshal(msg)
	}
	resp["choices"], _ = json.Marshal(choices)
	return json.Marshal(resp)
}

// wrapClient returns a client like hc (nil: http.DefaultClient) whose
// requests go through modelTransport.
func wrapClient(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &modelTransport{base: base}
	return &c
}
