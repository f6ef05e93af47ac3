package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Redial carries the proxy's requests to an agent. When the connection to
// the agent is refused, nothing of the request reached it: the agent died
// (a crash, a SIGKILL) and its supervisor has not noticed yet, or is
// starting it again. Then Redial waits for the agent's new process (at most
// Wait) and sends the request there, once. The new process does not know
// the caller's session and answers 404, from which the caller's pool (or
// Continuity, in front) recovers. Answering 502 instead would leave the
// caller unable to tell whether anything ran.
type Redial struct {
	Base http.RoundTripper
	Wait time.Duration
	// Await returns the agent's address once it runs somewhere other than
	// gone (the address that refused), waiting at most max; nil when it
	// does not within that.
	Await func(ctx context.Context, max time.Duration, gone string) *url.URL
	// Resent, optional, is told of every request sent again.
	Resent func(ctx context.Context)
}

// RoundTrip sends req, and once more to the agent's new address if its
// connection was refused.
func (t *Redial) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Base.RoundTrip(req)
	if err == nil || !refused(err) || t.Wait <= 0 || t.Await == nil {
		return resp, err
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return nil, err
	}
	up := t.Await(req.Context(), t.Wait, req.URL.Host)
	if up == nil || up.Host == req.URL.Host {
		return nil, err
	}
	again := req.Clone(req.Context())
	again.URL.Host = up.Host
	if req.GetBody != nil {
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, err
		}
		again.Body = body
	}
	if t.Resent != nil {
		t.Resent(req.Context())
	}
	return t.Base.RoundTrip(again)
}

// refused reports whether err means the connection could not be made, so
// nothing of the request was sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
