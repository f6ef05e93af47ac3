package clientcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/pool"
)

// Resource subscriptions (resources/subscribe, resources/unsubscribe).
//
// Unlike every other method, a subscription outlives its request: it is
// answered once, {"id":ID,"result":{}}, and from then on each
// notifications/resources/updated the server sends for it is a line of its
// own, {"notification":"resources/updated","subscription":ID,"server":S,"uri":U},
// until resources/unsubscribe, the end of stdin or a signal. The pool keeps
// it across the server's restarts (pool.Subscribe); this file only keeps
// the lines in order: no update line before the subscribe's answer, none
// after the unsubscribe's answer or the end.
//
// One subscription per server and URI: a second subscribe of the same pair
// is an input error naming the first request, so that unsubscribe is never
// ambiguous about which one it ends.

// endTimeout bounds the resources/unsubscribe the client sends to every
// server at the end of stdin, so that a server that went away cannot hold
// the exit for the whole request --timeout.
const endTimeout = 5 * time.Second

// subKey names a subscription: the server's name in mcp.json and the URI.
type subKey struct{ server, uri string }

// subscriptions are the client's live subscriptions.
type subscriptions struct {
	mu     sync.Mutex // guards following fields
	by     map[subKey]*sub
	closed bool // the client is ending: no new subscription
	// reading holds, by key, the line numbers of the resources/subscribe
	// lines read and not yet answered. Lines run concurrently, so an
	// unsubscribe's may run before the subscribe's read just before it:
	// the unsubscribe waits for those (earlierLocked).
	reading map[subKey]map[int]struct{}
	changed chan struct{} // closed, and replaced, when a line leaves reading
}

// read notes a resources/subscribe line, in the order lines are read,
// before it is dispatched; done is called once its answer is written. For
// any other line it does nothing.
func (t *subscriptions) read(req request) (done func()) {
	if req.Method != "resources/subscribe" || req.Server == "" {
		return func() {}
	}
	k, aerr := subKeyOf(req.Method, req)
	if aerr != nil {
		return func() {}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reading == nil {
		t.reading = make(map[subKey]map[int]struct{})
	}
	if t.reading[k] == nil {
		t.reading[k] = make(map[int]struct{})
	}
	t.reading[k][req.line] = struct{}{}
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.reading[k], req.line)
		if len(t.reading[k]) == 0 {
			delete(t.reading, k)
		}
		if t.changed != nil {
			close(t.changed)
			t.changed = nil
		}
	}
}

// earlierLocked returns a channel to wait on if a subscribe of k read
// before line is not answered yet, nil if none is.
func (t *subscriptions) earlierLocked(k subKey, line int) <-chan struct{} {
	for n := range t.reading[k] {
		if n < line {
			if t.changed == nil {
				t.changed = make(chan struct{})
			}
			return t.changed
		}
	}
	return nil
}

// A sub is one subscription and the state that orders its lines.
type sub struct {
	id  json.RawMessage // the subscribe request's id, named by each update line
	key subKey
	out *writer

	ps *pool.Subscription // nil while resources/subscribe is in flight; guarded by subscriptions.mu

	mu      sync.Mutex // guards following fields; held while one of its lines is written
	ready   bool       // the subscribe's answer is written
	pending bool       // an update came before that: written right after it
	ended   bool       // unsubscribed or ending: no more lines
}

// notification is an update line on stdout.
type notification struct {
	Notification string          `json:"notification"`
	Subscription json.RawMessage `json:"subscription"`
	Server       string          `json:"server"`
	URI          string          `json:"uri"`
}

// updated is the pool's update function for s. It runs on the session's
// notification path; the line it writes waits only for stdout.
func (s *sub) updated(*mcp.ResourceUpdatedNotificationParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ended:
	case !s.ready:
		// The pool routes updates from before resources/subscribe is sent,
		// so one may come before the answer is written: it is written right
		// after the answer. Every update of a URI says the same thing (read
		// it again), so those held are one line.
		s.pending = true
	default:
		s.write()
	}
}

func (s *sub) write() {
	s.out.writeLine(notification{Notification: "resources/updated", Subscription: s.id, Server: s.key.server, URI: s.key.uri})
}

// answer writes the subscribe's answer with write, and from then on
// updates are written as they come. It holds s.mu while it writes, so that
// an update that comes meanwhile waits for the answer rather than being
// held: a caller who saw the answer and then made the server send an
// update gets its line.
func (s *sub) answer(write func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	write()
	s.ready = true
	if s.pending && !s.ended {
		s.write()
	}
	s.pending = false
}

// end stops s's lines; once it returns, none is written.
func (s *sub) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
}

// subKeyOf reads the uri of a resources/subscribe or unsubscribe request
// (both take {"uri": URI}): the subscription it names on req's server.
func subKeyOf(method string, req request) (subKey, *answerError) {
	params, aerr := decodeParams[mcp.SubscribeParams](method, req.Params, `{"uri": URI}`)
	if aerr != nil {
		return subKey{}, aerr
	}
	if params.URI == "" {
		return subKey{}, &answerError{Code: codeInvalidParams, Kind: kindInput, Message: method + " params: missing \"uri\""}
	}
	return subKey{server: req.Server, uri: params.URI}, nil
}

// subscribe answers resources/subscribe for srv, named server in mcp.json.
func (c *client) subscribe(ctx context.Context, req request, srv *pool.Server) answer {
	ans := answer{ID: req.ID}
	k, aerr := subKeyOf("resources/subscribe", req)
	if aerr != nil {
		ans.Error = aerr
		return ans
	}
	s := &sub{id: req.ID, key: k, out: c.out}
	c.subs.mu.Lock()
	if c.subs.closed {
		c.subs.mu.Unlock()
		ans.Error = &answerError{Code: codeTransport, Kind: pool.KindTransport.String(), Message: "resources/subscribe: not sent: the client is ending"}
		return ans
	}
	if old, ok := c.subs.by[k]; ok {
		c.subs.mu.Unlock()
		ans.Error = &answerError{Code: codeInvalidParams, Kind: kindInput,
			Message: fmt.Sprintf("resources/subscribe: already subscribed to %q on server %q by request %s; unsubscribe first", k.uri, k.server, quoted(old.id))}
		return ans
	}
	if c.subs.by == nil {
		c.subs.by = make(map[subKey]*sub)
	}
	c.subs.by[k] = s // reserved while the request is in flight
	c.subs.mu.Unlock()

	ps, err := c.pool.Subscribe(ctx, srv, k.uri, s.updated)
	c.subs.mu.Lock()
	defer c.subs.mu.Unlock()
	if err != nil {
		delete(c.subs.by, k)
		ans.Error = poolError(err)
		return ans
	}
	s.ps = ps
	ans.Result = struct{}{}
	ans.around = s.answer
	return ans
}

// unsubscribe answers resources/unsubscribe: it ends the subscription made
// for the same server and URI. The subscription has ended when the answer
// is written, also when it is the server's error to resources/unsubscribe.
func (c *client) unsubscribe(ctx context.Context, req request) answer {
	ans := answer{ID: req.ID}
	k, aerr := subKeyOf("resources/unsubscribe", req)
	if aerr != nil {
		ans.Error = aerr
		return ans
	}
	var s *sub
	for {
		c.subs.mu.Lock()
		if wait := c.subs.earlierLocked(k, req.line); wait != nil {
			// A subscribe of the same server and URI read before this
			// line is not answered yet (a caller that writes both at
			// once; lines run concurrently): wait for its answer, then
			// end what it made, so that this answer comes after it.
			c.subs.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				ans.Error = &answerError{Code: codeTransport, Kind: pool.KindTransport.String(),
					Message: fmt.Sprintf("resources/unsubscribe: not sent: waiting for the answer to the subscribe of %q on server %q read before it: %v", k.uri, k.server, context.Cause(ctx))}
				return ans
			}
		}
		var ok bool
		s, ok = c.subs.by[k]
		if !ok {
			c.subs.mu.Unlock()
			ans.Error = &answerError{Code: codeInvalidParams, Kind: kindInput,
				Message: fmt.Sprintf("resources/unsubscribe: no subscription to %q on server %q", k.uri, k.server)}
			return ans
		}
		break // with the lock held; s.ps is set, as no subscribe of k is in flight
	}
	delete(c.subs.by, k)
	c.subs.mu.Unlock()
	s.end()
	if err := s.ps.Unsubscribe(ctx); err != nil {
		ans.Error = poolError(fmt.Errorf("the subscription has ended; the server's answer to resources/unsubscribe: %w", err))
		return ans
	}
	ans.Result = struct{}{}
	return ans
}

// endSubscriptions ends every subscription: no update line is written once
// it returns. With tell (the end of stdin), each server is sent
// resources/unsubscribe, all at once, within endTimeout; after a signal
// nothing new is sent, and the pool's Close ends them with their sessions.
func (c *client) endSubscriptions(tell bool) {
	c.subs.mu.Lock()
	c.subs.closed = true
	all := c.subs.by
	c.subs.by = nil
	c.subs.mu.Unlock()
	for _, s := range all {
		s.end()
	}
	if !tell || len(all) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), endTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range all {
		if s.ps == nil {
			continue // cannot be: serve returns once every request is answered
		}
		wg.Go(func() {
			if err := s.ps.Unsubscribe(ctx); err != nil {
				c.log.Warn("resources/unsubscribe at the end of stdin failed; the subscription has ended here", "server", s.key.server, "uri", s.key.uri, "err", err)
			}
		})
	}
	wg.Wait()
}
