package pool

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// go-sdk retires every call in flight on a session with the ErrSessionMissing
// of whichever request first saw a 404, even when the call's own tool ran to
// completion (see docs/ARCHITECTURE.md). So "was this request executed?"
// cannot be read off the error. Instead each call carries a probe in its
// context, and the entry's RoundTripper records on it what happened to that
// call's own POST. go-sdk issues a call's POST with the call's context, so the
// probe sees exactly that request and nothing else; the standalone GET stream
// and the closing DELETE run on the connection's context, which has no probe.

type probeKey struct{}

// A probe records what happened to the first POST of one pooled request.
//
// go-sdk sends notifications/cancelled for a cancelled call on
// context.WithoutCancel of the call's context, so that POST carries the
// probe too: it is the request's second POST, and noticeSent is closed when
// it has been answered (see Pool.closeEntry).
type probe struct {
	posts      atomic.Int32 // POSTs issued with this probe's context
	noticeOnce sync.Once
	noticeSent chan struct{} // closed when a later POST (the cancel notice) completed

	mu          sync.Mutex // protects the fields below
	status      int        // HTTP status of the first POST; 0 if unanswered
	withSession bool       // the first POST carried Mcp-Session-Id
	notWritten  bool       // the first POST failed before anything reached the server
	sendErr     error      // the first POST's own transport error, if any
}

func withProbe(ctx context.Context, p *probe) context.Context {
	return context.WithValue(ctx, probeKey{}, p)
}

// record notes what happened to the request's first POST.
func (p *probe) record(resp *http.Response, err error, withSession bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.withSession = withSession
	if err != nil {
		p.notWritten, p.sendErr = isNotWritten(err), err
		return
	}
	p.status = resp.StatusCode
}

// ownError returns the error of this request's own POST when it never reached
// the server. go-sdk may report another request's failure instead (the
// session it shared died first); the caller should read what happened to
// its own request.
func (p *probe) ownError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.notWritten {
		return p.sendErr
	}
	return nil
}

func (p *probe) evidence(overHTTP bool) evidence {
	p.mu.Lock()
	defer p.mu.Unlock()
	return evidence{
		overHTTP:    overHTTP,
		posts:       int(p.posts.Load()),
		status:      p.status,
		withSession: p.withSession,
		notWritten:  p.notWritten,
	}
}

const sessionIDHeader = "Mcp-Session-Id"

// errStaleInitialize is returned by the recorder, before anything is sent,
// for an initialize request that would carry a session id. That happens in
// go-sdk when a server/discover answer set a session id and the client falls
// back to initialize on the same connection. The pool then dials again with
// the protocol pinned, so initialize goes out on a fresh connection.
var errStaleInitialize = errors.New("refusing to send initialize carrying an Mcp-Session-Id")

// recorder is the http.RoundTripper of one pool entry. It adds the server's
// configured headers, records per-request evidence on the call's probe, tells
// the entry when any request carrying its session id is answered 404, and
// aborts everything when the entry's close times out.
type recorder struct {
	base    http.RoundTripper
	headers map[string]string
	entry   *entry
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	withSession := req.Header.Get(sessionIDHeader) != ""
	if withSession && req.Method == http.MethodPost && r.entry.dialing.Load() && isInitialize(req) {
		return nil, errStaleInitialize
	}

	// Tie the request to the entry's lifetime so a close that overruns its
	// timeout can abort it. WithContext copies the request, so adding the
	// configured headers below does not modify the caller's (a RoundTripper
	// must not), once the header map is cloned too.
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(r.entry.abortCtx, cancel)
	out := req.WithContext(ctx)
	cloned := false
	for k, v := range r.headers {
		if out.Header.Get(k) == "" {
			if !cloned {
				out.Header, cloned = out.Header.Clone(), true
			}
			out.Header.Set(k, v)
		}
	}

	var pr, notice *probe
	if p, ok := ctx.Value(probeKey{}).(*probe); ok && req.Method == http.MethodPost {
		if p.posts.Add(1) == 1 {
			pr = p
		} else {
			notice = p
		}
	}
	resp, err := r.base.RoundTrip(out)
	if notice != nil {
		notice.noticeOnce.Do(func() { close(notice.noticeSent) })
	}
	if pr != nil {
		pr.record(resp, err, withSession)
	}
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	// A POST carrying the session id answered 404: the server has forgotten
	// the session, whatever request this was (a call, or a notification such
	// as notifications/cancelled). A 404 to the standalone GET is left to
	// go-sdk: some servers answer the first GET with 404 instead of 405 and
	// go-sdk rightly keeps such a session; a 404 on reconnect fails the
	// session, and the entry's watcher replaces it.
	if resp.StatusCode == http.StatusNotFound && withSession && req.Method == http.MethodPost {
		r.entry.sawExpiry()
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, release: func() { stop(); cancel() }}
	return resp, nil
}

// cancelBody releases the request's abort hook when the body is closed: the
// response may stream (SSE) long after RoundTrip returns.
type cancelBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// isInitialize reports whether req's body is a JSON-RPC initialize request.
// It is only asked while an entry is dialing, so the body copy is cheap.
func isInitialize(req *http.Request) bool {
	if req.GetBody == nil {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	var msg struct {
		Method string `json:"method"`
	}
	if err := json.NewDecoder(io.LimitReader(body, 1<<20)).Decode(&msg); err != nil {
		return false
	}
	return msg.Method == "initialize"
}

// isNotWritten reports whether a RoundTrip error proves the request never
// reached the server: the connection could not be made at all. Like
// net/http's nothingWrittenError, anything less certain counts as written.
func isNotWritten(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return false
}
