package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/agentserver"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/version"
	"github.com/switchboard-run/switchboard/pool"
)

// Asks started from the page: a task box (fleet page, agent page) and a
// run page's Re-run button POST a task; the console calls the agent's ask
// tool as `switchboard ask` does (internal/askcmd), through the studio's
// own proxy route, so the run is observed and listed like any other. The
// page follows it on a server-sent event stream:
//
//	POST /api/agents/<name>/ask      {"task": …}        start; 202 {id, run, events}
//	POST /api/runs/<id>/rerun        {}                 the same task on the same agent
//	GET  /api/asks/<id>              the ask so far, as JSON
//	GET  /api/asks/<id>/events       text/event-stream: every event, then live ones
//	POST /api/asks/<id>/elicit       {"elicitation", "action", "content"}: the person's answer
//
// The ask belongs to the console, not to the request or the stream that
// started it: a page that closes leaves it running to its end (its run
// page shows it), and Close cancels what is left. Everything is bounded:
// maxPageAsks at once (a 503 past them), maxAskEvents kept per ask (the
// oldest dropped first, counted; the answer event carries the whole answer
// anyway), maxAsksKept finished asks remembered.
//
// An elicitation is asked in the page. Who asks is ours: the agent the
// page called and the server that agent named in _meta (the first hop of
// agentserver.ElicitOrigin); what the server wrote is sent as data, which
// the script shows as text, never as markup.

// Bounds of the page's asks.
const (
	maxPageAsks   = 4
	maxAskEvents  = 1024
	maxAsksKept   = 32
	maxTaskBytes  = 16 << 10
	askTimeout    = 15 * time.Minute
	elicitTimeout = 10 * time.Minute
	askKeepalive  = 25 * time.Second
	// askWriteTimeout bounds each write of an event stream: a reader that
	// stops draining (a tab frozen in the background, a client that
	// connects and never reads) fills the socket's buffers, and without a
	// deadline the write, the handler and its goroutine would wait for it
	// for ever, holding the connection. A page that reads gets its events
	// in well under a second; the keepalive comes every askKeepalive.
	askWriteTimeout = 30 * time.Second
)

// Errors of the page's asks, for errors.Is.
var (
	// ErrTooManyAsks: maxPageAsks are running.
	ErrTooManyAsks = errors.New("too many asks started from the page are running")
	// ErrConsoleClosed: the studio is shutting down.
	ErrConsoleClosed = errors.New("the studio is shutting down")
)

// askEvent is one event of an ask's stream; Data is its JSON.
type askEvent struct {
	Seq  int             `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// AskView is GET /api/asks/<id>.
type AskView struct {
	ID      string     `json:"id"`
	Agent   string     `json:"agent"`
	Task    string     `json:"task"`
	Run     string     `json:"run"`
	Started time.Time  `json:"started"`
	Done    bool       `json:"done"`
	Dropped int        `json:"dropped_events,omitempty"`
	Events  []askEvent `json:"events"`
}

// pageAsk is one ask started from the page.
type pageAsk struct {
	id, agent, task, run string
	started              time.Time

	mu      sync.Mutex // protects following fields
	events  []askEvent
	next    int // the next event's Seq
	dropped int
	done    bool
	changed chan struct{} // closed, and replaced, at every event
	pending map[string]chan elicitAnswer
}

type elicitAnswer struct {
	action  string
	content map[string]any
}

// asks is the console's set of page asks.
type asks struct {
	once   sync.Once
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// writeTimeout bounds each write of a stream (0: askWriteTimeout);
	// a variable for tests, set before any stream.
	writeTimeout time.Duration

	mu      sync.Mutex // protects following fields
	closed  bool
	running int
	byID    map[string]*pageAsk
	order   []string // ids, oldest first
}

func (a *asks) init() {
	a.once.Do(func() {
		a.ctx, a.cancel = context.WithCancel(context.Background())
		a.byID = map[string]*pageAsk{}
	})
}

// Close cancels the asks still running, ends their streams and waits for
// them. It is idempotent.
func (s *Console) Close() {
	s.asks.init()
	s.asks.mu.Lock()
	s.asks.closed = true
	s.asks.mu.Unlock()
	s.asks.cancel()
	s.asks.wg.Wait()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// StartAsk starts task on agent, as the page does; the ask runs until it
// ends, whoever follows it.
func (s *Console) StartAsk(agent, task string) (*pageAsk, error) {
	a := &s.asks
	a.init()
	if _, ok := s.Procs[agent]; !ok {
		return nil, fmt.Errorf("unknown agent %s; known agents: %s", quote(agent), strings.Join(s.Names, ", "))
	}
	task = strings.TrimSpace(task)
	switch {
	case task == "":
		return nil, errors.New(`"task" is empty: say what the agent should do`)
	case len(task) > maxTaskBytes:
		return nil, fmt.Errorf(`"task" is %d bytes; at most %d`, len(task), maxTaskBytes)
	}
	// The run is known by a trace id of ours from its first call (the
	// observer files a call by its traceparent, observe.Runs), so its page
	// link is shown at once.
	var tid trace.TraceID
	var sid trace.SpanID
	rand.Read(tid[:])
	rand.Read(sid[:])
	p := &pageAsk{id: randomHex(12), agent: agent, task: task, run: tid.String(), started: time.Now(),
		changed: make(chan struct{}), pending: map[string]chan elicitAnswer{}}
	// Decide and reserve in one critical section.
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, ErrConsoleClosed
	}
	if a.running >= maxPageAsks {
		a.mu.Unlock()
		return nil, fmt.Errorf("%w: %d at once; wait for one to end", ErrTooManyAsks, maxPageAsks)
	}
	a.running++
	a.byID[p.id] = p
	a.order = append(a.order, p.id)
	a.forgetLocked()
	a.wg.Add(1)
	a.mu.Unlock()

	model := ""
	if m := s.model(agent); m != nil {
		model = m.Name
	}
	p.emit("start", map[string]any{"id": p.id, "agent": agent, "model": model, "task": task, "run": p.run, "run_url": "/runs/" + p.run})
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true})
	go func() {
		defer a.wg.Done()
		defer func() {
			a.mu.Lock()
			a.running--
			a.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(trace.ContextWithRemoteSpanContext(a.ctx, sc), askTimeout)
		defer cancel()
		s.runAsk(ctx, p)
	}()
	return p, nil
}

// forgetLocked drops the oldest finished asks past maxAsksKept.
func (a *asks) forgetLocked() {
	for len(a.order) > maxAsksKept {
		i := slices.IndexFunc(a.order, func(id string) bool {
			p := a.byID[id]
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.done
		})
		if i < 0 {
			return // all running: at most maxPageAsks more than kept
		}
		delete(a.byID, a.order[i])
		a.order = slices.Delete(a.order, i, i+1)
	}
}

func (s *Console) lookupAsk(id string) *pageAsk {
	s.asks.init()
	s.asks.mu.Lock()
	defer s.asks.mu.Unlock()
	return s.asks.byID[id]
}

// emit appends an event, dropping the oldest past maxAskEvents, and wakes
// the streams.
func (p *pageAsk) emit(typ string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Errorf("console: an ask's %s event does not marshal: %w", typ, err))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.events = append(p.events, askEvent{Seq: p.next, Type: typ, Data: raw})
	p.next++
	if n := len(p.events) - maxAskEvents; n > 0 {
		p.events = slices.Delete(p.events, 0, n)
		p.dropped += n
	}
	if typ == "end" {
		p.done = true
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// since returns the events from seq on, whether the ask is over, and the
// channel closed at the next event.
func (p *pageAsk) since(seq int) ([]askEvent, bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, _ := slices.BinarySearchFunc(p.events, seq, func(e askEvent, seq int) int { return e.Seq - seq })
	return slices.Clone(p.events[i:]), p.done, p.changed
}

func (p *pageAsk) view() AskView {
	evs, done, _ := p.since(0)
	p.mu.Lock()
	defer p.mu.Unlock()
	return AskView{ID: p.id, Agent: p.agent, Task: p.task, Run: p.run, Started: p.started, Done: done, Dropped: p.dropped, Events: evs}
}

// runAsk calls the agent's ask tool and turns what comes back into events.
func (s *Console) runAsk(ctx context.Context, p *pageAsk) {
	pl := pool.New(&pool.Options{
		ClientInfo: &mcp.Implementation{Name: "switchboard-studio-page", Version: version.String()},
		Elicit: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return s.elicit(ctx, p, req)
		},
	})
	defer pl.Close()
	// The session era as ask pins it (askcmd/ask.go): the page answers
	// elicitations, which are server-to-client requests during the call.
	srv := &pool.Server{Name: p.agent, URL: s.AgentURL(p.agent), ProtocolVersion: pool.Protocol20251125}
	if s.Token != "" {
		srv.Headers = map[string]string{"Authorization": "Bearer " + s.Token}
	}
	res, err := pl.CallTool(pool.WithProgress(ctx, func(n *mcp.ProgressNotificationParams) { s.progress(p, n) }), srv,
		&mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": p.task}})
	end := map[string]any{"duration_ms": time.Since(p.started).Milliseconds()}
	switch {
	case err != nil:
		why := err.Error()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = fmt.Sprintf("no answer within %v: %v", askTimeout, err)
		} else if ctx.Err() != nil {
			why = "the studio is shutting down: " + why
		}
		p.emit("error", map[string]any{"message": s.scrub(fmt.Sprintf("asking agent %s: %s", p.agent, why))})
	default:
		var r struct {
			Answer      string   `json:"answer"`
			Status      string   `json:"status"`
			Reason      string   `json:"reason"`
			RunID       string   `json:"run_id"`
			Unavailable []string `json:"unavailable"`
		}
		if res.StructuredContent != nil {
			if b, err := json.Marshal(res.StructuredContent); err == nil {
				_ = json.Unmarshal(b, &r) // a field of the wrong type is left zero
			}
		}
		if r.Status == "" {
			// Not a turn result: the agent refused the call itself, or is
			// not a switchboard agent.
			r.Answer = delegation.ResultText(res)
			r.Status = "answered"
			if res.IsError {
				r.Status = "failed"
			}
		}
		for i, u := range r.Unavailable {
			r.Unavailable[i] = s.scrub(u)
		}
		p.emit("answer", map[string]any{"status": r.Status, "answer": s.scrub(r.Answer), "reason": s.scrub(r.Reason),
			"run_id": r.RunID, "unavailable": r.Unavailable, "is_error": res.IsError})
	}
	p.emit("end", end)
}

// progress turns one progress notification into an event: a piece of the
// answer, a delegation, or a note.
func (s *Console) progress(p *pageAsk, n *mcp.ProgressNotificationParams) {
	if n.Message == "" {
		return
	}
	var delta struct {
		Text    *string `json:"answer_delta"`
		Step    int     `json:"step"`
		Discard bool    `json:"discard"`
	}
	if json.Unmarshal([]byte(n.Message), &delta) == nil && delta.Text != nil {
		p.emit("delta", map[string]any{"text": s.scrub(*delta.Text), "step": delta.Step, "discard": delta.Discard})
		return
	}
	var ev delegation.Event
	if json.Unmarshal([]byte(n.Message), &ev) == nil && ev.Phase != "" {
		ev.Message = s.scrub(ev.Message)
		p.emit("delegation", ev)
		return
	}
	p.emit("note", map[string]any{"text": s.scrub(n.Message)})
}

// whoAsks names who asks, from our side: the agent the page called, and
// the server it named as the first hop. Hops after it are what that server
// says, and are shown as its claim.
func whoAsks(agent string, hops []agentserver.ElicitHop) string {
	if len(hops) == 0 || hops[0].Server == "" {
		return fmt.Sprintf("a server of agent %s (the agent did not say which)", quote(agent))
	}
	who := fmt.Sprintf("server %s of agent %s", quote(hops[0].Server), quote(agent))
	for _, h := range hops[1:] {
		who += fmt.Sprintf(", forwarding (it says) for server %s of agent %s", quote(h.Server), quote(h.Agent))
	}
	return who
}

// elicit asks the person in the page and waits for the answer, the ask's
// end, or elicitTimeout (then it declines).
func (s *Console) elicit(ctx context.Context, p *pageAsk, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	params := req.Params
	id := randomHex(8)
	ev := map[string]any{"elicitation": id, "who": whoAsks(p.agent, agentserver.ElicitOrigin(params.Meta)), "message": s.scrub(params.Message), "mode": params.Mode}
	if params.Mode == "url" {
		ev["url"] = s.scrub(params.URL)
		ev["declined"] = "the page does not follow URL elicitations"
		p.emit("elicit", ev)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	ev["schema"] = params.RequestedSchema
	ch := make(chan elicitAnswer, 1)
	p.mu.Lock()
	p.pending[id] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}()
	p.emit("elicit", ev)
	t := time.NewTimer(elicitTimeout)
	defer t.Stop()
	select {
	case ans := <-ch:
		p.emit("elicited", map[string]any{"elicitation": id, "action": ans.action})
		return &mcp.ElicitResult{Action: ans.action, Content: ans.content}, nil
	case <-t.C:
		p.emit("elicited", map[string]any{"elicitation": id, "action": "decline", "why": fmt.Sprintf("not answered within %v", elicitTimeout)})
		return &mcp.ElicitResult{Action: "decline"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answerElicit hands the person's answer to the elicitation waiting for it.
func (p *pageAsk) answerElicit(id, action string, content map[string]any) error {
	switch action {
	case "accept", "decline", "cancel":
	default:
		return fmt.Errorf(`"action" is %s: want accept, decline or cancel`, quote(action))
	}
	if action != "accept" {
		content = nil
	}
	p.mu.Lock()
	ch, ok := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("no elicitation %s is waiting in ask %s (answered, timed out, or its ask ended)", quote(id), p.id)
	}
	ch <- elicitAnswer{action: action, content: content} // buffered: never blocks
	return nil
}

// writeAskError answers an ask's error with its status.
func writeAskError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrTooManyAsks), errors.Is(err, ErrConsoleClosed):
		w.Header().Set("Retry-After", "5")
		mcphttp.WriteJSONError(w, http.StatusServiceUnavailable, err.Error())
	default:
		mcphttp.WriteJSONError(w, http.StatusBadRequest, err.Error())
	}
}

func writeStarted(w http.ResponseWriter, p *pageAsk) {
	mcphttp.WriteJSON(w, http.StatusAccepted, map[string]any{
		"id": p.id, "agent": p.agent, "run": p.run, "run_url": "/runs/" + p.run, "events": "/api/asks/" + p.id + "/events"})
}

// serveStartAsk is POST /api/agents/<name>/ask.
func (s *Console) serveStartAsk(w http.ResponseWriter, r *http.Request, agent string) {
	var req struct {
		Task string `json:"task"`
	}
	if !readJSON(w, r, &req, "task") {
		return
	}
	p, err := s.StartAsk(agent, req.Task)
	if err != nil {
		writeAskError(w, err)
		return
	}
	writeStarted(w, p)
}

// serveRerun is POST /api/runs/<id>/rerun: the run's task, as recorded, on
// its agent.
func (s *Console) serveRerun(w http.ResponseWriter, r *http.Request, id string) {
	var req struct{}
	if !readJSON(w, r, &req, "no fields: {}") {
		return
	}
	run, ok := s.Runs.RunFrom(id, 0)
	if !ok {
		mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("no run %s is recorded", quote(id)))
		return
	}
	if run.Tool != "ask" || run.Task == "" {
		mcphttp.WriteJSONError(w, http.StatusConflict, fmt.Sprintf("run %s is a call of %s.%s, not an ask with a task: nothing to re-run", id, run.Agent, run.Tool))
		return
	}
	p, err := s.StartAsk(run.Agent, run.Task)
	if err != nil {
		writeAskError(w, err)
		return
	}
	writeStarted(w, p)
}

// serveAsks serves /api/asks/<id>[/events|/elicit]; rest is what follows
// /api/asks/.
func (s *Console) serveAsks(w http.ResponseWriter, r *http.Request, rest string) {
	id, action, _ := strings.Cut(rest, "/")
	p := s.lookupAsk(id)
	if p == nil || !ValidName(id) {
		mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("no ask %s: the studio keeps the last %d asks started from the page", quote(id), maxAsksKept))
		return
	}
	switch action {
	case "":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+r.URL.Path+" only")
			return
		}
		mcphttp.WriteJSON(w, http.StatusOK, p.view())
	case "events":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+r.URL.Path+" only")
			return
		}
		s.serveAskEvents(w, r, p)
	case "elicit":
		var req struct {
			Elicitation string         `json:"elicitation"`
			Action      string         `json:"action"`
			Content     map[string]any `json:"content"`
		}
		if !readJSON(w, r, &req, "elicitation, action, content") {
			return
		}
		if err := p.answerElicit(req.Elicitation, req.Action, req.Content); err != nil {
			mcphttp.WriteJSONError(w, http.StatusConflict, err.Error())
			return
		}
		mcphttp.WriteJSON(w, http.StatusOK, map[string]any{"elicitation": req.Elicitation, "action": req.Action})
	default:
		NotFound(w, r.URL.EscapedPath())
	}
}

// serveAskEvents streams p's events: those kept (from Last-Event-ID on, when
// the browser reconnects), then each as it comes, until the ask ends, the
// page goes, or the studio shuts down.
func (s *Console) serveAskEvents(w http.ResponseWriter, r *http.Request, p *pageAsk) {
	seq := 0
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			mcphttp.WriteJSONError(w, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID %s is not an event of this stream", quote(v)))
			return
		}
		seq = n + 1
	}
	rc := http.NewResponseController(w)
	timeout := cmp.Or(s.asks.writeTimeout, askWriteTimeout)
	// Each write gets its deadline (askWriteTimeout says why); an error is a
	// writer without deadlines (a test's recorder), which has no socket to
	// fill. The last one set also bounds what net/http writes after the
	// handler (the end of the chunked body), and the connection is closed
	// after the stream, so that no later request on it inherits the
	// deadline (net/http resets it only with a Server.WriteTimeout).
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(timeout)) }
	defer deadline()
	deadline()
	h := w.Header()
	h.Set("Connection", "close")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	// A comment line now and then while nothing happens (an elicitation
	// waiting for the person, a long model step), so that no proxy between
	// takes the stream for dead.
	tick := time.NewTicker(askKeepalive)
	defer tick.Stop()
	for {
		evs, done, changed := p.since(seq)
		for _, e := range evs {
			deadline() // per event: a long backlog to a slow reader is not one write
			// One data line: the JSON has no newline in it.
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, e.Data); err != nil {
				return
			}
			seq = e.Seq + 1
		}
		deadline()
		if err := rc.Flush(); err != nil {
			return
		}
		if done {
			return
		}
	wait:
		select {
		case <-changed:
		case <-tick.C:
			deadline()
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			goto wait
		case <-r.Context().Done():
			return
		case <-s.asks.ctx.Done():
			return
		}
	}
}
