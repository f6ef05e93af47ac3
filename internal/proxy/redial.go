package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
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
//
// A GET is sent again also when its connection was lost before any answer
// came (reset, or closed): a GET opens a stream and runs nothing, so there
// is nothing to run twice, and an agent killed between accepting the
// connection and answering it is the restart it waits out like a refusal
// (the standalone stream of a client reconnecting just as the agent dies).
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

// maxUnsentResends bounds the resends of a request for which no
// connection began a write (transport.go): each one met a kept connection
// the agent had closed, and each resend takes another or dials.
const maxUnsentResends = 3

// RoundTrip sends req, again on another connection if none began writing
// it, and once more to the agent's new address if its connection was
// refused.
func (t *Redial) RoundTrip(req *http.Request) (*http.Response, error) {
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	probe := &sendProbe{}
	resp, err := t.Base.RoundTrip(probe.with(req))
	for i := 0; err != nil && !refused(err) && probe.unsent() && replayable && i < maxUnsentResends; i++ {
		again, gerr := rewound(req, req.URL.Host)
		if gerr != nil {
			break
		}
		probe = &sendProbe{}
		resp, err = t.Base.RoundTrip(probe.with(again))
	}
	if err == nil {
		return resp, nil
	}
	if !(refused(err) || req.Method == http.MethodGet && lost(err)) || t.Wait <= 0 || t.Await == nil {
		if !refused(err) && probe.unsent() {
			return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		return resp, err
	}
	if !replayable {
		return nil, err
	}
	up := t.Await(req.Context(), t.Wait, req.URL.Host)
	if up == nil || up.Host == req.URL.Host {
		return nil, err
	}
	again, gerr := rewound(req, up.Host)
	if gerr != nil {
		return nil, err
	}
	if t.Resent != nil {
		t.Resent(req.Context())
	}
	return t.Base.RoundTrip(again)
}

// rewound is req to be sent again to host, with its body from the start.
func rewound(req *http.Request, host string) (*http.Request, error) {
	again := req.Clone(req.Context())
	again.URL.Host = host
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		again.Body = body
	}
	return again, nil
}

// lost reports whether err means the connection ended before an answer:
// the peer reset or closed it.
func lost(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// refused reports whether err means the connection could not be made, so
// nothing of the request was sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
