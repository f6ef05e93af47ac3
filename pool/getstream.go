package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
)

// The standalone GET stream of a session-era HTTP session, as the pool
// sees it (MCP 2025-11-25 "Transports", "Listening for Messages from the
// Server").
//
// A server sends notifications/resources/updated on that stream, and a
// server without an event store (go-sdk v1.8.0's default, the TypeScript
// SDK's) drops a notification while the stream is not connected. go-sdk
// opens the stream during Connect and reopens it on its own, after a
// backoff, when it ends (a proxy's read timeout, a server that closes it);
// it tells nobody either way. So that a subscription is not made into that
// gap, the pool follows the stream from its HTTP client: a RoundTripper
// that sees every GET's response, as go-sdk sees it, and the end of its
// body. Subscribe waits until the stream is open (its 200 headers have
// arrived: go-sdk's server registers the stream before it writes them, so
// from then on no update is dropped) or refused, before it sends
// resources/subscribe.
//
// Which GET is the standalone one: go-sdk sends it without Last-Event-ID
// the first time; a reconnection carries one only if the server gave its
// events ids, and so does the resumption of a POST's cut answer. A GET
// with Last-Event-ID is taken for the standalone stream only while that
// stream is not open; a resumption that lands in that gap marks the
// stream open early, which is the behaviour the pool had before.

// ErrNoUpdateStream says that the server refused the session's standalone
// GET stream (405 Method Not Allowed, or any answer but 200
// text/event-stream, which go-sdk also gives up on): a session-era
// server then has nowhere to send notifications/resources/updated, and a
// subscription on that session gets none. See Subscription.UpdatesRefused.
var ErrNoUpdateStream = errors.New("the server refused the session's standalone GET stream, where resource updates arrive")

type streamState int

const (
	streamPending streamState = iota // no GET answered yet, or the last one ended (go-sdk opens another)
	streamOpen                       // a GET's 200 text/event-stream headers arrived and its body has not ended
	streamRefused                    // the server refused the GET; go-sdk does not try again on this session
)

// standaloneStream is the state of one session's standalone GET stream.
type standaloneStream struct {
	mu      sync.Mutex    // protects the fields below
	state   streamState   //
	refused error         // why, when state is streamRefused
	opened  uint64        // GET streams opened so far; a body ends only its own
	changed chan struct{} // closed, and replaced, at each change of state
}

func (s *standaloneStream) setLocked(st streamState, why error) {
	if s.state == st {
		return
	}
	s.state, s.refused = st, why
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

func (s *standaloneStream) set(st streamState, why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(st, why)
}

// open reports whether the stream is open now.
func (s *standaloneStream) open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == streamOpen
}

// wait returns once the stream is open (refused nil), refused (refused
// says why), or ended is closed or ctx is done (err says which; ended gives
// errSessionGone). It does no I/O.
func (s *standaloneStream) wait(ctx context.Context, ended <-chan struct{}) (refused, err error) {
	for {
		s.mu.Lock()
		switch s.state {
		case streamOpen:
			s.mu.Unlock()
			return nil, nil
		case streamRefused:
			why := s.refused
			s.mu.Unlock()
			return why, nil
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		if hook := testHookStreamWait.Load(); hook != nil {
			(*hook)()
		}
		select {
		case <-changed:
		case <-ended:
			return nil, errSessionGone
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the session's standalone GET stream to open: %w", context.Cause(ctx))
		}
	}
}

var errSessionGone = errors.New("the session ended")

// testHookStreamWait, if set, is called each time wait is about to block.
var testHookStreamWait atomic.Pointer[func()]

// streamTracker is the RoundTripper that follows s; it is the outermost
// one of an HTTP session's client, so it sees what go-sdk sees.
type streamTracker struct {
	base http.RoundTripper
	s    *standaloneStream
}

func (t *streamTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet {
		return resp, err
	}
	if req.Header.Get("Last-Event-ID") != "" && t.s.open() {
		return resp, err // a POST answer's resumption (see the top of the file)
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusOK && mediaType == "text/event-stream":
		t.s.mu.Lock()
		t.s.opened++
		n := t.s.opened
		t.s.setLocked(streamOpen, nil)
		t.s.mu.Unlock()
		resp.Body = &streamBody{ReadCloser: resp.Body, s: t.s, n: n}
	default:
		// go-sdk v1.8.0 gives the stream up for 405 (the spec's "no stream
		// here"), any answer that is not text/event-stream, and other 4xx
		// (connectStandaloneSSE), keeping the session; it fails the
		// session for the rest. Either way no stream is coming: a waiter
		// must not wait for one.
		t.s.set(streamRefused, fmt.Errorf("%w (HTTP %d, Content-Type %q)", ErrNoUpdateStream, resp.StatusCode, resp.Header.Get("Content-Type")))
	}
	return resp, err
}

// streamBody marks the stream pending again when its body ends: go-sdk
// then reconnects after a backoff, and until it has, updates are dropped.
type streamBody struct {
	io.ReadCloser
	s    *standaloneStream
	n    uint64 // which opening of the stream this body is
	once sync.Once
}

func (b *streamBody) ended() {
	b.once.Do(func() {
		b.s.mu.Lock()
		defer b.s.mu.Unlock()
		if b.s.state == streamOpen && b.s.opened == b.n {
			b.s.setLocked(streamPending, nil)
		}
	})
}

func (b *streamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.ended()
	}
	return n, err
}

func (b *streamBody) Close() error {
	b.ended()
	return b.ReadCloser.Close()
}
