package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource subscriptions (resources/subscribe, MCP 2025-11-25 "Resources",
// "Subscriptions"; SEP-2575's subscriptions/listen in the 2026-07-28 era,
// which go-sdk's ClientSession.Subscribe speaks for us).
//
// A subscription belongs to a session, and the pool's sessions come and go:
// a server that forgot one (404), a restart, a broken stream. A caller who
// subscribed expects updates for as long as it holds the subscription, so
// each Subscription has one goroutine of its own that waits for the
// session it is subscribed on to end and then subscribes again, through
// do, on the key's next session (which do dials). The goroutine does no
// I/O while idle and ends on Unsubscribe or Pool.Close, which waits for it.
//
// Updates are routed by session: an update is delivered to the
// subscriptions of that URI made on the session it arrived on, so no other
// identity's session can inject updates into a caller's subscription. A
// session with a subscription is never closed as idle (collectIdle): the
// subscription is a use of it.

// Backoff between failed re-subscriptions, doubled per failure up to
// resubscribeBackoffMax, for as long as the subscription is held: a server
// that is down is tried again at most every few seconds, not in a loop.
const (
	resubscribeBackoff    = 100 * time.Millisecond
	resubscribeBackoffMax = 5 * time.Second
)

// ErrSubscribeNeedsNotifications is returned by Subscribe for an HTTP
// server on a Pool without Options.Notifications: a session-era server
// sends notifications/resources/updated on the session's standalone GET
// stream, which the pool opens only with Notifications, so updates would
// be lost without a word.
var ErrSubscribeNeedsNotifications = errors.New("resources/subscribe over HTTP needs pool.Options.Notifications (updates arrive on the session's standalone stream)")

// A Subscription is a resource subscription made with Pool.Subscribe.
type Subscription struct {
	p   *Pool
	srv Server
	uri string
	fn  func(*mcp.ResourceUpdatedNotificationParams)

	ctx    context.Context // cancelled by Unsubscribe
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned

	// Written by run before done is closed, read after.
	last *entry // the session it was subscribed on when run returned; nil if none

	// refused is why the session it is subscribed on cannot carry updates
	// (ErrNoUpdateStream), nil if it can; see UpdatesRefused.
	refused atomic.Pointer[error]

	unsubOnce sync.Once
	unsubErr  error

	// deliverMu is held while fn runs and while Unsubscribe sets ended:
	// an update routed just before Unsubscribe finishes its call to fn
	// before Unsubscribe returns, and none is delivered after.
	deliverMu sync.Mutex
	ended     bool
}

// deliver passes params to fn unless the subscription has ended.
func (s *Subscription) deliver(params *mcp.ResourceUpdatedNotificationParams) {
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	if !s.ended {
		s.fn(params)
	}
}

func (s *Subscription) setRefused(why error) {
	if why == nil {
		s.refused.Store(nil)
		return
	}
	s.refused.Store(&why)
}

// UpdatesRefused reports why no update can reach the subscription on the
// session it is subscribed on now: an error wrapping ErrNoUpdateStream when
// the server refused the session's standalone GET stream (405, as a
// stateless session-era server answers), where a session-era server sends
// its updates. It is nil while updates can arrive. The server accepted the
// subscription all the same; a caller that needs updates polls the
// resource, or uses a server that keeps sessions.
func (s *Subscription) UpdatesRefused() error {
	if p := s.refused.Load(); p != nil {
		return *p
	}
	return nil
}

// URI is the subscribed resource's URI.
func (s *Subscription) URI() string { return s.uri }

// subscriptions routes notifications/resources/updated to subscribers.
type subscriptions struct {
	mu sync.Mutex                            // protects on
	on map[*entry]map[*Subscription]struct{} // by the session they are subscribed on
}

func (t *subscriptions) attach(s *Subscription, e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.on == nil {
		t.on = make(map[*entry]map[*Subscription]struct{})
	}
	if t.on[e] == nil {
		t.on[e] = make(map[*Subscription]struct{})
	}
	t.on[e][s] = struct{}{}
	e.subscribed.Add(1)
}

func (t *subscriptions) detach(s *Subscription, e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.on[e][s]; !ok {
		return
	}
	delete(t.on[e], s)
	if len(t.on[e]) == 0 {
		delete(t.on, e)
	}
	e.subscribed.Add(-1)
}

// shared reports whether another subscription to uri is attached to e: the
// server's subscription is then still wanted, and is not unsubscribed.
func (t *subscriptions) shared(e *entry, uri string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := range t.on[e] {
		if s.uri == uri {
			return true
		}
	}
	return false
}

// route delivers an update that arrived on e's session. The subscribers'
// functions run after the lock is released.
func (t *subscriptions) route(e *entry, params *mcp.ResourceUpdatedNotificationParams) {
	if params == nil {
		return
	}
	t.mu.Lock()
	var to []*Subscription
	for s := range t.on[e] {
		if s.uri == params.URI {
			to = append(to, s)
		}
	}
	t.mu.Unlock()
	for _, s := range to {
		s.deliver(params)
	}
}

// Subscribe subscribes to the resource uri on srv (resources/subscribe)
// and passes each notifications/resources/updated for it to fn, until the
// Subscription's Unsubscribe or the pool's Close. fn must not block for
// long: it runs on the session's notification path; calls to it are not
// concurrent for one session. fn must not call its own Subscription's
// Unsubscribe (Unsubscribe waits for a call to fn in progress); call it
// from another goroutine.
//
// The subscription survives the session: when the session it was made on
// ends (the server forgot it, restarted, or the stream broke), the pool
// subscribes again on the key's next session, and keeps trying, with a
// backoff of up to 5 s, while the server is unreachable. Updates the server
// sent while no session was subscribed are lost, as they would be for any
// client: read the resource again if a gap matters. A session with a
// subscription is not closed as idle.
//
// Over HTTP in the session era, resources/subscribe is sent once the
// session's standalone GET stream is open, so an update the server sends
// as soon as it has answered is not lost; if the server refused that
// stream, the Subscription says so (UpdatesRefused). In the 2026-07-28 era
// go-sdk subscribes with subscriptions/listen, whose own stream carries
// the updates.
//
// The first subscription is made before Subscribe returns; its error (the
// server refused it, it has no resources.subscribe capability, it is
// unreachable) is returned as an *Error, and no Subscription is made. Over
// HTTP the pool needs Options.Notifications (ErrSubscribeNeedsNotifications).
func (p *Pool) Subscribe(ctx context.Context, srv *Server, uri string, fn func(*mcp.ResourceUpdatedNotificationParams)) (*Subscription, error) {
	switch {
	case srv == nil:
		return nil, errors.New("pool: Subscribe: nil server")
	case uri == "":
		return nil, fmt.Errorf("pool: Subscribe to server %q: empty resource uri", srv.Name)
	case fn == nil:
		return nil, fmt.Errorf("pool: Subscribe to %q on server %q: nil update function", uri, srv.Name)
	case srv.URL != "" && !p.opts.Notifications:
		return nil, &Error{Kind: KindRefused, Server: srv.Name, Method: "resources/subscribe", Err: ErrSubscribeNeedsNotifications}
	}
	s := &Subscription{p: p, srv: *srv, uri: uri, fn: fn, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	e, _, err := s.subscribe(ctx)
	if err != nil {
		s.cancel()
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.subs.detach(s, e)
		s.cancel()
		return nil, &Error{Kind: KindTransport, Server: srv.Name, Method: "resources/subscribe", Err: ErrClosed}
	}
	p.bg.Add(1)
	p.mu.Unlock()
	go s.run(e)
	return s, nil
}

// subscribe sends resources/subscribe on the key's live session (do dials
// one if there is none) and returns the session it is attached to. The
// route is attached before the request goes out, so that an update sent
// right after the server's answer is not lost.
//
// sent is the session the last attempt went out on, also when it failed:
// a request cut by Unsubscribe may have subscribed on the server all the
// same, and Unsubscribe then ends it there.
func (s *Subscription) subscribe(ctx context.Context) (on, sent *entry, err error) {
	err = s.p.do(ctx, &s.srv, "resources/subscribe", "", func(a *attempt, e *entry) error {
		if e.http && e.protocol < Protocol20260728 {
			// Updates come on the standalone GET stream, and a server
			// drops those it sends while that is not open
			// (getstream.go): subscribe once it is. A session that ends
			// meanwhile fails the request below as it always has.
			refused, err := e.stream.wait(ctx, e.ended)
			if err != nil && !errors.Is(err, errSessionGone) {
				return err
			}
			s.setRefused(refused)
		} else {
			s.setRefused(nil)
		}
		sent = e
		s.p.subs.attach(s, e)
		if err := e.cs.Subscribe(a.request(), &mcp.SubscribeParams{URI: s.uri}); err != nil {
			s.p.subs.detach(s, e)
			return err
		}
		on = e
		return nil
	})
	return on, sent, err
}

// run keeps s subscribed until Unsubscribe or Pool.Close.
func (s *Subscription) run(e *entry) {
	p := s.p
	defer p.bg.Done()
	defer close(s.done)
	for {
		select {
		case <-s.ctx.Done():
			s.last = e
			return
		case <-p.closeNow:
			// The pool closes the session, which ends the server's
			// subscription with it.
			p.subs.detach(s, e)
			return
		case <-e.ended:
		}
		p.subs.detach(s, e)
		p.log.Debug("resource subscription lost its session; subscribing again", "server", s.srv.Name, "uri", s.uri, "generation", e.gen)
		e = nil
		for backoff := resubscribeBackoff; e == nil; backoff = min(2*backoff, resubscribeBackoffMax) {
			on, sent, err := s.subscribe(s.ctx)
			if err == nil {
				e = on
				break
			}
			if s.ctx.Err() != nil {
				s.last = sent
				return
			}
			if errors.Is(err, ErrClosed) {
				return
			}
			p.log.Warn("resource subscription: subscribing again failed", "server", s.srv.Name, "uri", s.uri, "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-p.closeNow:
				t.Stop()
				return
			}
		}
	}
}

// Unsubscribe ends the subscription: no update reaches its function once
// it returns, and the server is sent resources/unsubscribe on the session
// the subscription was on, if that session is still the pool's and no
// other Subscription of the same URI shares it. It is idempotent; after
// Pool.Close it only ends the subscription. The error is the server's
// answer to resources/unsubscribe; the subscription has ended either way.
func (s *Subscription) Unsubscribe(ctx context.Context) error {
	s.unsubOnce.Do(func() {
		s.cancel()
		<-s.done
		s.deliverMu.Lock()
		s.ended = true
		s.deliverMu.Unlock()
		e := s.last
		if e == nil {
			return
		}
		p := s.p
		p.subs.detach(s, e)
		p.mu.Lock()
		live := !p.closed && p.entries[e.key] == e && e.state == stateLive
		p.mu.Unlock()
		if !live || p.subs.shared(e, s.uri) {
			return
		}
		s.unsubErr = p.do(ctx, &s.srv, "resources/unsubscribe", "", func(a *attempt, got *entry) error {
			if got != e {
				// The session changed meanwhile; the new one holds no
				// subscription of ours to end.
				return nil
			}
			return e.cs.Unsubscribe(a.request(), &mcp.UnsubscribeParams{URI: s.uri})
		})
	})
	return s.unsubErr
}
