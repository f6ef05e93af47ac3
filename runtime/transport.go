package runtime

// Every model request goes through modelTransport, an http.RoundTripper
// below go-openai. go-openai keeps nothing of an error answer but its
// status and body: the Retry-After an endpoint sent with its 429 is lost
// by the time the turn sees the error. So, as the pool's recorder does for
// MCP (pool/evidence.go), each attempt carries a record in its context, and
// the transport writes onto it what the attempt's own response said.

import (
	"context"
	"net/http"
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
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if at, ok := req.Context().Value(attemptKey{}).(*attempt); ok {
		at.status, at.header = resp.StatusCode, resp.Header
	}
	return resp, nil
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
