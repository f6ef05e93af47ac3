package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
// It is itself the request's context (its parent's, with the probe as a
// value), which saves a context.WithValue per request.
//
// go-sdk sends notifications/cancelled for a cancelled call on
// context.WithoutCancel of the call's context, so that POST carries the
// probe too: it is the request's second POST, and the probe's notice channel
// is closed when it has been answered (see Pool.closeSession).
type probe struct {
	context.Context // the request's parent context

	posts   atomic.Int32 // POSTs issued with this probe's context
	attempt *attempt     // the attempt it belongs to; nil for a probe of no request

	mu           sync.Mutex           // protects the fields below
	noticeSent   chan struct{}        // closed when a later POST (the cancel notice) completed; made on first use
	noticeClosed bool                 // noticeSent is closed
	status       int                  // HTTP status of the first POST; 0 if unanswered
	withSession  bool                 // the first POST carried Mcp-Session-Id
	notWritten   bool                 // the first POST failed before anything reached the server
	sendErr      error                // the first POST's own transport error, if any
	answer       answer               // what the first POST's error answer (status >= 400) said
	overCap      *ResultTooLargeError // the first POST's answer passed the server's MaxResultBytes
}

// answer is what a server said in an error answer (status >= 400) to a
// request's own POST, read by the recorder before go-sdk sees the body.
// go-sdk decodes a JSON-RPC error body only when its id is a request's, and
// otherwise reports the status text alone; the pool keeps what the server
// said, in every error it returns.
type answer struct {
	rpc          *jsonrpc.Error // the body was a JSON-RPC error response
	rpcIDNull    bool           // ... whose id was null or absent
	body         string         // the body otherwise, at most maxErrorBody bytes
	authenticate string         // the WWW-Authenticate header
}

// maxErrorBody bounds how much of an error answer's body is read for the
// error message (and to parse a JSON-RPC error): enough for any server's
// message, little enough that a hostile server cannot make errors large.
const maxErrorBody = 512

// newProbe returns a probe for a request made with ctx; the probe is the
// context to make it with.
func newProbe(ctx context.Context) *probe { return &probe{Context: ctx} }

// Value makes the probe findable from the request's context and every
// context derived from it.
func (p *probe) Value(k any) any {
	if _, ok := k.(probeKey); ok {
		return p
	}
	return p.Context.Value(k)
}

// notice returns the channel closed when the request's cancel notice has
// been answered.
func (p *probe) notice() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.noticeSent == nil {
		p.noticeSent = make(chan struct{})
	}
	return p.noticeSent
}

func (p *probe) noticeDone() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.noticeClosed {
		return
	}
	if p.noticeSent == nil {
		p.noticeSent = make(chan struct{})
	}
	close(p.noticeSent)
	p.noticeClosed = true
}

// record notes what happened to the request's first POST.
func (p *probe) record(resp *http.Response, err error, withSession, notWritten bool, a answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.withSession = withSession
	if err != nil {
		p.notWritten, p.sendErr = notWritten || isNotWritten(err), err
		return
	}
	p.status = resp.StatusCode
	p.answer = a
}

// readAnswer reads what an error answer says, and puts the bytes read back
// in front of the rest of the body for go-sdk.
func readAnswer(resp *http.Response) answer {
	a := answer{authenticate: resp.Header.Get("WWW-Authenticate")}
	buf, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
	var msg struct {
		ID    json.RawMessage `json:"id"`
		Error *jsonrpc.Error  `json:"error"`
	}
	if len(buf) <= maxErrorBody && json.Unmarshal(buf, &msg) == nil && msg.Error != nil {
		a.rpc = msg.Error
		a.rpcIDNull = len(msg.ID) == 0 || string(msg.ID) == "null"
		return a
	}
	a.body = string(bytes.TrimSpace(buf[:min(len(buf), maxErrorBody)]))
	return a
}

// addTo puts what the server said on pe.
func (a answer) addTo(pe *Error, status int) {
	if status < 400 {
		return
	}
	pe.Status, pe.Body, pe.Authenticate = status, a.body, a.authenticate
	if a.rpc != nil && pe.Message == "" {
		pe.Code, pe.Message = a.rpc.Code, boundMessage(a.rpc.Message)
	}
}

// answered returns the first POST's status and error answer.
// tooLarge records that the first POST's answer passed the cap, and ends
// the attempt: go-sdk waits for a call's answer on the attempt's context,
// and a stream cut short would otherwise leave it waiting (a JSON body it
// fails to read fails its session, which the pool then replaces).
func (p *probe) resultTooLarge(e *ResultTooLargeError) {
	p.mu.Lock()
	p.overCap = e
	p.mu.Unlock()
	if p.attempt != nil {
		p.attempt.cancel()
	}
}

func (p *probe) answered() (int, answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.answer
}

type dialLogKey struct{}

// A dialLog records the last error answer to any POST of a dial
// (server/discover, initialize), for the dial's error.
type dialLog struct {
	mu     sync.Mutex
	status int
	answer answer
}

func (d *dialLog) set(status int, a answer) {
	d.mu.Lock()
	d.status, d.answer = status, a
	d.mu.Unlock()
}

func (d *dialLog) get() (int, answer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status, d.answer
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
		rpc:         p.answer.rpc,
		rpcIDNull:   p.answer.rpcIDNull,
		overCap:     p.overCap,
	}
}

const sessionIDHeader = "Mcp-Session-Id"

// errStaleInitialize is returned by the recorder, before anything is sent,
// for an initialize request that would carry a session id. That happens in
// go-sdk when a server/discover answer set a session id and the client falls
// back to initialize on the same connection. The pool then dials again with
// the protocol pinned, so initialize goes out on a fresh connection.
var errStaleInitialize = errors.New("refusing to send initialize carrying an Mcp-Session-Id")

// errForgottenInDial fails a dial during which a request carrying the new
// session id was answered 404: the server (or the replica a balancer chose)
// no longer knew the session before the handshake was over. The pool dials
// once more; only the handshake ran, so nothing is sent twice.
var errForgottenInDial = errors.New("the server forgot the session during its handshake (404 on a request carrying the new session id)")

// recorder is the http.RoundTripper of one pool entry. It adds the server's
// configured headers (to requests for the server's own origin only, see
// origin.go), records per-request evidence on the call's probe, tells the
// entry when any request carrying its session id is answered 404, and
// aborts everything when the entry's close times out.
type recorder struct {
	base    http.RoundTripper
	headers map[string]string
	home    origin // the origin of the server's URL: the only one its headers go to
	entry   *entry
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	withSession := req.Header.Get(sessionIDHeader) != ""
	if withSession && req.Method == http.MethodPost && r.entry.dialing.Load() && isInitialize(req) {
		return nil, errStaleInitialize
	}
	var pr, notice *probe
	if p, ok := req.Context().Value(probeKey{}).(*probe); ok && req.Method == http.MethodPost {
		switch {
		case req.Response != nil && p.posts.Load() == 1:
			// http.Client following a redirect (within the origin) of the
			// request's own POST: the same request, sent where the server
			// said; its answer, not the redirect, is the evidence.
			pr = p
		case p.posts.Add(1) == 1:
			pr = p
		default:
			notice = p
		}
	}

	// A request must end when the entry is aborted (a close that overruns
	// CloseTimeout, a Shutdown past its context). A pooled request's first
	// POST runs on its attempt's context, which the abort cancels (see
	// attempt); every other request (a cancel notice, the standalone GET,
	// DELETE, the dial's) is tied to the entry's abort here.
	ctx := req.Context()
	out := req
	var release func()
	if pr == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		stop := context.AfterFunc(r.entry.abortCtx, cancel)
		release = func() { stop(); cancel() }
		out = req.WithContext(ctx)
	}
	// A RoundTripper must not modify the caller's request: the configured
	// headers go on a copy, with the header map cloned. They go to the
	// server's origin only; the client refuses a redirect elsewhere before
	// it gets here (checkRedirect), and this keeps them home should anything
	// else send a request elsewhere.
	cloned := false
	if originOf(out.URL) == r.home {
		for k, v := range r.headers {
			if out.Header.Get(k) == "" {
				if !cloned {
					if out == req {
						out = new(http.Request)
						*out = *req
					}
					out.Header, cloned = out.Header.Clone(), true
				}
				out.Header.Set(k, v)
			}
		}
	}

	// A request whose context ended before it was handed on is not sent at
	// all, so that the pool knows it never reached the server (net/http
	// could fail it before or after writing, and would not say which).
	var resp *http.Response
	err := ctx.Err()
	cancelledFirst := err != nil
	if cancelledFirst {
		err = fmt.Errorf("not sent: %w", context.Cause(ctx))
	} else {
		resp, err = r.base.RoundTrip(out)
	}
	if notice != nil {
		notice.noticeDone()
	}
	if pr != nil {
		var a answer
		if err == nil && resp.StatusCode >= 400 {
			a = readAnswer(resp)
		}
		pr.record(resp, err, withSession, cancelledFirst, a)
	} else if dl, ok := ctx.Value(dialLogKey{}).(*dialLog); ok && err == nil && resp.StatusCode >= 400 && req.Method == http.MethodPost {
		dl.set(resp.StatusCode, readAnswer(resp))
	}
	if err != nil {
		if release != nil {
			release()
		}
		return nil, err
	}
	if req.Method == http.MethodPost && tooLarge(resp.StatusCode) {
		// Refused for its size, before it ran (see tooLarge). Handed to
		// go-sdk as the answer, a refusal without a JSON-RPC body would fail
		// its connection for good (checkResponse), and every later request
		// of the session would fail without being sent, costing a new
		// session per request. As an error of the round trip it is a
		// refusal of this request only (go-sdk marks it ErrRejected). What
		// the server said is on the probe already.
		resp.Body.Close()
		if release != nil {
			release()
		}
		return nil, &tooLargeError{status: resp.StatusCode}
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
	if pr != nil && pr.attempt != nil {
		// The request's own answer: the attempt's context must outlive
		// its body (see attempt), and a result or a page is bounded here,
		// below go-sdk, which reads a JSON body whole and an SSE event up
		// to its own limit, so that no answer past the cap is ever held.
		// The cap is the calling Server's (sessions are shared by
		// endpoint).
		a := pr.attempt
		ab := &answerBody{ReadCloser: resp.Body, a: a, pr: pr}
		if a.maxBody > 0 && resp.StatusCode < 300 {
			if resp.ContentLength > a.maxBody {
				resp.Body.Close()
				over := a.tooLarge(resp.ContentLength)
				pr.resultTooLarge(over)
				return nil, over
			}
			ab.capped, ab.left, ab.events.limit = true, a.maxBody, a.maxBody
			if ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); strings.EqualFold(strings.TrimSpace(ct), "text/event-stream") {
				ab.sse = true
			}
		}
		a.refs.Add(1)
		resp.Body = ab
	} else if release != nil {
		resp.Body = &cancelBody{ReadCloser: resp.Body, release: release}
	}
	return resp, nil
}

// tooLargeError is the recorder's error for a POST the server refused for
// its size (413, 414, 431); it matches ErrTooLarge.
type tooLargeError struct{ status int }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%v (HTTP %d %s)", ErrTooLarge, e.status, http.StatusText(e.status))
}

func (e *tooLargeError) Unwrap() error { return ErrTooLarge }

// answerBody is the body of a request's own answer (an attempt's POST):
// it holds a reference on the attempt until it is closed, and, capped,
// fails a read past the cap with the attempt's ResultTooLargeError,
// recorded on the probe (see probe.resultTooLarge). What was read is
// go-sdk's buffer, dropped with the failed request. Every pooled call
// has one, so the cap, its SSE counter and the reference are one
// allocation, and the error is made only when the cap is passed.
//
// An SSE stream (sse) is counted per event, not as a whole: go-sdk holds
// one event at a time, and a long-running tool's progress notifications
// come before its result on the same stream; counted together they
// refused a small result after enough progress. Every event (the result,
// or one notification) is bounded by the cap; the stream as a whole only
// by the caller's deadline, since nothing of an event is kept once it is
// handled.
type answerBody struct {
	io.ReadCloser
	a      *attempt
	pr     *probe // the request's probe: the attempt's, when it was sent
	capped bool   // the attempt has a cap (a result or a page under 300)
	left   int64  // bytes still allowed (a JSON body)
	sse    bool   // counted per event, in events
	events sseEvents
	over   *ResultTooLargeError // returned from every read once the cap is passed
	closed atomic.Bool
}

func (b *answerBody) Read(p []byte) (int, error) {
	if b.over != nil {
		return 0, b.over
	}
	if !b.capped {
		n, err := b.ReadCloser.Read(p)
		b.a.answered.Add(int64(n))
		return n, err
	}
	if b.sse {
		n, err := b.ReadCloser.Read(p)
		b.a.answered.Add(int64(n))
		if b.events.count(p[:n]) {
			return 0, b.passed()
		}
		return n, err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.a.answered.Add(int64(n))
	if int64(n) > b.left {
		return 0, b.passed()
	}
	b.left -= int64(n)
	return n, err
}

// passed records that the answer passed the cap, and returns the error
// every read returns from now on.
func (b *answerBody) passed() error {
	b.over = b.a.tooLarge(-1)
	b.pr.resultTooLarge(b.over)
	return b.over
}

func (b *answerBody) Close() error {
	err := b.ReadCloser.Close()
	if b.closed.CompareAndSwap(false, true) {
		b.a.unref()
	}
	return err
}

// sseEvents counts the bytes of the SSE event being read. An event ends at
// a blank line; a line ends at CRLF, LF or CR (the SSE spec's
// end-of-line).
type sseEvents struct {
	limit     int64
	n         int64 // bytes of the current event
	lineStart bool  // the last byte ended a line
	cr        bool  // the last byte was CR (an LF after it ends no line)
}

// count adds b to the current event and reports whether an event passed
// the limit.
func (e *sseEvents) count(b []byte) bool {
	for _, c := range b {
		switch {
		case c == '\n' && e.cr:
			e.cr = false // the LF of a CRLF
			continue
		case c == '\n' || c == '\r':
			if e.lineStart {
				e.n = 0 // a blank line: the event ended
			}
			e.lineStart, e.cr = true, c == '\r'
			continue
		}
		e.lineStart, e.cr = false, false
		if e.n++; e.n > e.limit {
			return true
		}
	}
	return false
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
