package agentserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// This file is the one place where the agent server meets the turn loop:
// the ask tool, the runtime.Agent behind it, and the progress channel back
// to the caller. Extend it here.

type askInput struct {
	Task string `json:"task" jsonschema:"the task for this agent, in plain language; the agent works on it with its own model and tools and answers in text"`
	// Resume is switchboard ask --resume: with an empty task.
	Resume string `json:"resume,omitempty" jsonschema:"leave out: the id of an earlier run of this agent to resume from its journal instead of a new task (the task is then empty)"`
}

// asker owns the runtime.Agent behind the ask tool. Both the agent and its
// pool are made on first use: most calls to an agent server are to its
// native tools, and an agent without a model should not pay for a pool.
type asker struct {
	def     *agentdef.Definition
	logger  *slog.Logger
	metrics *serverMetrics // set once by New, before any call
	// secrets are the credentials the agent's tools/mcp.json configures
	// (mcpconfig.Config.Secrets), scrubbed from everything the ask tool sends.
	secrets []string
	// modelTimeout is runtime.Options.ModelTimeout; set once by New.
	modelTimeout time.Duration
	// journal keeps every run (journal.go); set once by New.
	journal *journal.Journal

	mu      sync.Mutex // protects following fields
	pool    *pool.Pool
	ownPool bool // pool was made here; close it
	agent   *runtime.Agent
	self    *nativeCaller // the agent's own tools; nil without toolsets
	closed  bool
	// callers are the asks in flight whose callers can be asked on the
	// person's behalf (agent.json "elicit"), for elicit.
	callers map[*askCall]struct{}

	// native, when set, connects the turn to the agent's own tools
	// (native.go). Set once by New.
	native func(ctx context.Context, next delegation.Caller) (*nativeCaller, error)
}

func newAsker(def *agentdef.Definition, p *pool.Pool, logger *slog.Logger) *asker {
	return &asker{def: def, logger: logger, pool: p, secrets: def.MCP.Secrets(os.Environ())}
}

func (a *asker) register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        "ask",
		Description: fmt.Sprintf("Give agent %s a task. %s", a.def.Name, a.def.Description),
	}, a.handle)
}

func (a *asker) handle(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
	name := a.def.Name
	switch {
	case in.Resume != "" && strings.TrimSpace(in.Task) != "":
		return toolError("agent %s: give a task or a run to resume, not both", name), nil, nil
	case in.Resume == "" && strings.TrimSpace(in.Task) == "":
		return toolError("agent %s: the task is empty", name), nil, nil
	case in.Resume != "" && a.journal == nil:
		return toolError("agent %s: it keeps no run journal, so run %q cannot be resumed", name, in.Resume), nil, nil
	}
	chain, ok := ChainFrom(ctx)
	if !ok {
		// The chain middleware runs before every tools/call; reaching this
		// means it was not installed.
		return toolError("agent %s: internal error: no delegation chain", name), nil, nil
	}

	if a.def.Elicit && req.Session != nil {
		c := &askCall{ctx: ctx, session: req.Session}
		if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= mcphttp.EraVersion {
			c.sessionless = true
		}
		a.mu.Lock()
		if a.callers == nil {
			a.callers = make(map[*askCall]struct{})
		}
		a.callers[c] = struct{}{}
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			delete(a.callers, c)
			a.mu.Unlock()
		}()
	}

	var reportRun func(string) // the first message, once the run is known
	rawReport, stopReporting := progressReporter(ctx, req, a.logger)
	defer stopReporting()
	if rawReport != nil {
		// Every message goes to the caller: an unavailable sibling's error
		// names its URL, and a delegation's error what the server said.
		answers := newAnswerBatch(func(msg string) { rawReport(msg) }, a.scrub)
		defer answers.close() // before stopReporting: the last text goes out first
		// Every message goes after the answer text before it, so that the
		// caller sees them in the order the turn made them.
		report := func(msg string) {
			answers.flush()
			rawReport(a.scrub(msg))
		}
		reportRun = func(msg string) { report(fmt.Sprintf("agent %s: %s", name, msg)) }
		// Each delegation of the turn, as it starts and as it finishes,
		// reaches the caller as one progress message: a delegation.Event
		// as a JSON line. Notes (an unavailable sibling) are plain text.
		// The answer's text as the model writes it is a JSON line too, a
		// runtime.AnswerDelta ({"step":2,"answer_delta":"..."}), a batch
		// of deltas per message (answerBatch).
		ctx = runtime.WithEventHandler(ctx, func(e delegation.Event) {
			b, err := json.Marshal(e)
			if err != nil {
				return
			}
			report(string(b))
		})
		ctx = runtime.WithNoteHandler(ctx, func(msg string) {
			report(fmt.Sprintf("agent %s: %s", name, msg))
		})
		ctx = runtime.WithAnswerHandler(ctx, answers.add)
	}

	agent, err := a.runtimeAgent()
	if err != nil {
		return toolError("%s", a.scrub(namedErr(name, err))), nil, nil
	}
	task := in.Task
	var res *runtime.Result
	var cut *cutJournal
	if a.journal != nil {
		jr, err := a.openRun(ctx, req, in, chain, agent)
		var refused *errJournalRefused
		var busy *jsonrpc.Error
		switch {
		case errors.As(err, &busy):
			return nil, nil, busy
		case errors.As(err, &refused):
			a.logger.InfoContext(ctx, "ask refused by the run journal", "err", err)
			return toolError("%s", a.scrub(refused.msg)), nil, nil
		case err != nil:
			return toolError("%s", a.scrub(namedErr(name, fmt.Errorf("the run journal: %w; nothing was run", err)))), nil, nil
		}
		task, chain = jr.task, jr.chain
		if jr.note != "" {
			a.logger.InfoContext(ctx, jr.note, "run", chain.RunID)
		}
		if reportRun != nil {
			reportRun(cmp.Or(jr.note, fmt.Sprintf("working on the task (run %s)", chain.RunID)))
		}
		if jr.run == nil {
			return a.answer(ctx, chain, jr.end, jr.endErr)
		}
		defer jr.run.Release()
		cut = &cutJournal{Run: jr.run, attempt: ctx}
		ctx = runtime.WithJournal(delegation.WithParentKey(ctx, jr.run.Info().ParentKey), cut)
	} else if reportRun != nil {
		reportRun(fmt.Sprintf("working on the task (run %s)", chain.RunID))
	}
	res, err = agent.Run(ctx, task, chain)
	if cut != nil && cut.left.Load() {
		// Cut off by this process's shutdown, not ended: no outcome to
		// answer or to record (journal.go, cutJournal).
		return nil, nil, a.cutOff(ctx, chain.RunID, in.Resume != "")
	}
	if a.metrics != nil && res != nil {
		a.metrics.observeAsk(res.Duration, err != nil || res.Status != runtime.StatusAnswered)
	}
	return a.answer(ctx, chain, res, err)
}

// answer is the ask tool's result for a turn's res and err.
func (a *asker) answer(ctx context.Context, chain delegation.Chain, res *runtime.Result, err error) (*mcp.CallToolResult, any, error) {
	name := a.def.Name
	if err != nil {
		a.logger.InfoContext(ctx, "ask failed", "run", chain.RunID, "err", err)
		// The structured result still says what the turn did before it
		// ended, and why (res.Reason, res.Delegations).
		r := toolError("%s", a.scrub(namedErr(name, err)))
		if res == nil {
			return r, nil, nil
		}
		if res.Reason == "" {
			res.Reason = err.Error()
		}
		r.Meta = usageMeta(res)
		return r, a.scrubResult(res), nil
	}
	// The structured result (runtime.Result) lists every delegation: the
	// caller's client may handle the last progress notifications after the
	// response, too late to show them. A turn that did not do its task
	// fully is a tool error (isError), so that the caller, the studio's
	// record of the call and a delegating model all see it; its text is
	// still the answer, followed by why.
	text := res.Answer
	if res.Status != runtime.StatusAnswered {
		text = strings.TrimRight(text, "\n") + "\n\n(" + res.Reason + ")"
		a.logger.InfoContext(ctx, "ask did not fully succeed", "run", chain.RunID, "status", res.Status, "reason", res.Reason)
	}
	return &mcp.CallToolResult{
		IsError: res.Status != runtime.StatusAnswered,
		Content: []mcp.Content{&mcp.TextContent{Text: a.scrub(strings.TrimSpace(text))}},
		Meta:    usageMeta(res),
	}, a.scrubResult(res), nil
}

// usageMeta carries what the turn cost (its nested turns included) in the
// result's _meta, where the turn that asked this agent reads it to add it
// to its own bill (runtime.UsageMetaKey).
func usageMeta(res *runtime.Result) mcp.Meta {
	return mcp.Meta{runtime.UsageMetaKey: res.Usage}
}

// The ask tool's result, its errors and its progress messages go to every
// caller, and a turn's text is built from errors that quote configured
// values: an unavailable sibling's error holds its URL, query and all,
// with the ${VAR}s of tools/mcp.json expanded. The logs redact them, so
// does everything the ask tool sends: the same logging.Scrub (the
// environment's credentials, what follows a credential's name in a URL or
// an Authorization-like phrase, OpenAI-style keys), with the credentials
// the agent's own tools/mcp.json configures added.

// scrub redacts s.
func (a *asker) scrub(s string) string { return logging.Scrub(s, a.secrets...) }

// scrubResult returns res as the JSON object the caller receives, every
// string in it redacted: every field, those a later Result grows too.
func (a *asker) scrubResult(res *runtime.Result) any {
	b, err := json.Marshal(res)
	if err != nil {
		return nil // a Result always marshals; without it the text still says it all
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil
	}
	secrets := append(logging.SecretsFromEnv(os.Environ()), a.secrets...)
	var walk func(any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case string:
			return logging.Scrub(t, secrets...)
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
		case map[string]any:
			for k, e := range t {
				t[k] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}

// runtimeAgent returns the agent's turn loop, making it (and its pool) on
// first use. A failure is not cached: the next ask tries again.
func (a *asker) runtimeAgent() (*runtime.Agent, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, fmt.Errorf("the agent server is shutting down")
	}
	if a.agent != nil {
		return a.agent, nil
	}
	p := a.pool
	if p == nil {
		po := &pool.Options{
			Logger:     a.logger.With("component", "pool"),
			ClientInfo: &mcp.Implementation{Name: "switchboard-agent-" + a.def.Name, Version: version()},
		}
		if a.def.Elicit {
			// Without it the pool does not offer elicitation, and a server
			// this agent calls cannot ask through it.
			po.Elicit = a.elicit
		}
		p = pool.New(po)
	}
	// a.logger already names the agent; the runtime adds only what it is.
	ro := &runtime.Options{Logger: a.logger.With("component", "runtime"), ModelTimeout: a.modelTimeout}
	if a.metrics != nil {
		ro.OnEvent = a.metrics.delegations.Observe
		ro.OnModelRequest = a.metrics.model.observe
	}
	// Every call names its server in its context, so that an elicitation
	// the server sends later can say who asks (elicit, serverNamer).
	var caller delegation.Caller = serverNamer{p}
	var self *nativeCaller
	if a.native != nil {
		// In memory: no network I/O happens under the lock.
		nc, err := a.native(context.Background(), caller)
		if err != nil {
			if a.pool == nil {
				p.Close()
			}
			return nil, err
		}
		self, caller = nc, nc
		ro.Servers = []*pool.Server{nc.self}
	}
	agent, err := runtime.New(a.def, caller, ro)
	if err != nil {
		if self != nil {
			self.close()
		}
		if a.pool == nil {
			p.Close()
		}
		return nil, err
	}
	a.self = self
	if a.pool == nil {
		a.pool, a.ownPool = p, true
	}
	a.agent = agent
	return agent, nil
}

// An askCall is an ask in flight: its request's context and the session
// of its caller.
type askCall struct {
	ctx     context.Context
	session *mcp.ServerSession
	// sessionless: the caller speaks 2026-07-28, where go-sdk v1.8.0 sends
	// no server-to-client request (see elicit).
	sessionless bool
}

// ErrNobodyToAsk is matched (errors.Is) by the error elicit answers with
// when it has no caller to forward an elicitation to.
var ErrNobodyToAsk = errors.New("nobody to ask")

// elicit forwards an elicitation/create from a server the agent called to
// the caller of the ask that made the call, so that it crosses delegation
// hops back to the person who asked; that caller answers (or declines).
//
// go-sdk hands the pool's handler a context of the client session, not of
// the call that caused the request, and the request itself names no call:
// so the caller is found among the asks in flight, and must be the only
// one. With none, or with asks of several callers in flight, the pool's
// request fails with ErrNobodyToAsk: asking the wrong person to confirm
// would be worse than not asking (the server then does nothing, as with a
// caller that cannot elicit).
//
// The request goes on with this agent's word on where it came from in
// _meta[ElicitOriginKey]: this agent's name and the configured name of the
// server whose session sent it (from the context, see serverNamer), never
// anything the server wrote, followed by what that server says about where
// it got the request from (it may be an agent forwarding in turn, or a
// server lying). So the person's side can name the server that asks, in a
// frame the server cannot forge.
func (a *asker) elicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	var to *askCall
	n := 0
	for c := range a.callers {
		if to == nil || c.session != to.session {
			n++
		}
		to = c
	}
	a.mu.Unlock()
	switch {
	case n == 0:
		return nil, fmt.Errorf("agent %s: %w: no ask in flight", a.def.Name, ErrNobodyToAsk)
	case n > 1:
		return nil, fmt.Errorf("agent %s: %w: asks of more than one caller are in flight, and the request does not say whose turn made it", a.def.Name, ErrNobodyToAsk)
	}
	if to.sessionless {
		// A caller of the sessionless era cannot be asked during its call:
		// go-sdk v1.8.0 refuses any server-to-client request on a 2026-07-28
		// request (mcp/server.go, ServerSession.assertServerInitiatedRequestAllowed:
		// "return an InputRequests map instead"), and forwarding this one as
		// an input request of the ask's own result would mean holding the
		// turn across the caller's retry. So the person declines, as one who
		// cannot be asked does: the server does nothing and says so, where an
		// error would make the delegation's outcome unknown.
		a.logger.Info("elicitation declined: the ask's caller speaks MCP 2026-07-28, where it cannot be asked during its call; a caller that can answer pins 2025-11-25",
			"server", serverName(ctx), "message", req.Params.Message)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	// Under the ask's own context, go-sdk sends the request on that call's
	// stream, which the caller reads (see progressReporter).
	res, err := to.session.Elicit(to.ctx, withOrigin(req.Params, ElicitHop{Agent: a.def.Name, Server: serverName(ctx)}))
	if err != nil {
		a.logger.Info("elicitation not forwarded to the caller", "err", err)
		return nil, fmt.Errorf("agent %s: asking its caller: %w", a.def.Name, err)
	}
	return res, nil
}

// ElicitOriginKey is the _meta member of an elicitation/create in which
// each agent that forwards it says where it came from: a JSON array of
// ElicitHop, the nearest to the person first. Each agent puts its own hop
// in front of what it received, so only the first hop is the word of the
// agent the person asked; every later hop is what the server named before
// it says.
const ElicitOriginKey = "run.switchboard/elicitation-origin"

// An ElicitHop is one agent's word on a forwarded elicitation: the agent,
// and the name its own configuration (agent.json, tools/mcp.json) gives
// the server whose session sent the request; Server is empty when the
// agent could not tell.
type ElicitHop struct {
	Agent  string `json:"agent"`
	Server string `json:"server,omitempty"`
}

// Bounds on the hops an origin carries, and on each name: a server can
// write whatever it likes after the first hop, and the person's side
// should not print a megabyte of it.
const (
	maxElicitHops   = 8
	maxElicitHopLen = 128
)

// ElicitOrigin reads the hops from an elicitation's _meta as decoded from
// JSON (every MCP transport carries JSON, in memory too): nil when there
// are none, at most maxElicitHops, names cut at maxElicitHopLen bytes (the
// names are not made printable: that is for who shows them).
func ElicitOrigin(meta map[string]any) []ElicitHop {
	list, _ := meta[ElicitOriginKey].([]any)
	var hops []ElicitHop
	for _, v := range list {
		if len(hops) == maxElicitHops {
			break
		}
		m, _ := v.(map[string]any)
		agent, _ := m["agent"].(string)
		server, _ := m["server"].(string)
		hops = append(hops, ElicitHop{Agent: cut(agent, maxElicitHopLen), Server: cut(server, maxElicitHopLen)})
	}
	return hops
}

// withOrigin returns a copy of p whose origin starts with hop, followed by
// the hops p carried (the sending server's claim), bounded.
func withOrigin(p *mcp.ElicitParams, hop ElicitHop) *mcp.ElicitParams {
	q := *p
	claimed := ElicitOrigin(p.Meta)
	hops := append([]ElicitHop{hop}, claimed[:min(len(claimed), maxElicitHops-1)]...)
	origin := make([]any, len(hops))
	for i, h := range hops {
		m := map[string]any{"agent": h.Agent}
		if h.Server != "" {
			m["server"] = h.Server
		}
		origin[i] = m
	}
	q.Meta = make(mcp.Meta, len(p.Meta)+1)
	for k, v := range p.Meta {
		q.Meta[k] = v
	}
	q.Meta[ElicitOriginKey] = origin
	return &q
}

// cut returns s cut to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

type serverNameKey struct{}

// serverNamer is the turn's Caller: it puts the configured name of the
// server each call goes to in the call's context. The pool dials a session
// under the context of the call that needed it (without its cancellation),
// and go-sdk hands a server's requests on that session (elicitation/create)
// a context derived from the one the session was dialed with
// (jsonrpc2.NewConnection keeps its values): so the pool's Elicit handler
// learns, from our own configuration, which server's session sent the
// request. A session is keyed by endpoint and credentials, so two names
// for one endpoint share a session, and the name is the one its first
// call used; both name the same server.
type serverNamer struct{ next delegation.Caller }

func (c serverNamer) CallTool(ctx context.Context, srv *pool.Server, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return c.next.CallTool(context.WithValue(ctx, serverNameKey{}, srv.Name), srv, params)
}

func (c serverNamer) ListTools(ctx context.Context, srv *pool.Server) ([]*mcp.Tool, error) {
	return c.next.ListTools(context.WithValue(ctx, serverNameKey{}, srv.Name), srv)
}

// serverName is the name serverNamer put in ctx; empty without one.
func serverName(ctx context.Context) string {
	name, _ := ctx.Value(serverNameKey{}).(string)
	return name
}

// poolStats is the stats of the pool carrying the agent's delegations, or
// zero before the first ask made it.
func (a *asker) poolStats() pool.Stats {
	a.mu.Lock()
	p := a.pool
	a.mu.Unlock()
	if p == nil {
		return pool.Stats{}
	}
	return p.Stats()
}

func (a *asker) close() error {
	a.mu.Lock()
	a.closed = true
	p := a.pool
	own := a.ownPool
	self := a.self
	a.mu.Unlock()
	var err error
	if self != nil {
		err = self.close()
	}
	if own {
		// Outside the lock: closing sends DELETEs and waits for them.
		err = errors.Join(err, p.Close())
	}
	return err
}

// progressQueue bounds how many progress messages wait to be sent; past it
// a message is dropped (progress is a courtesy: the ask result carries every
// delegation).
const progressQueue = 256

// progressReporter returns a func that sends its message as an MCP progress
// notification on the request's progress token, numbered in order, and a
// func that sends what is queued and stops; without a token (the caller
// asked for no progress) report is nil. ctx must be the request's: go-sdk
// sends a notification made under it on the request's own SSE stream, and
// anything else on the standalone GET stream, which the caller may not have
// open.
//
// report only queues: the notification is written to the caller's stream
// by a goroutine of its own, because the delegation executor calls its event
// handler in order, under a lock, and a slow caller must not hold up the
// turn's delegations. stop waits for that goroutine, so every message
// queued goes out before the ask's result.
func progressReporter(ctx context.Context, req *mcp.CallToolRequest, logger *slog.Logger) (report func(msg string), stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil, func() {}
	}
	queue := make(chan string, progressQueue)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n := 0
		for msg := range queue {
			n++
			// A late event after the request ended fails to send; a lost
			// progress note is not worth failing the call for.
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(n),
				Message:       msg,
			})
			if err != nil {
				logger.Debug("progress notification not sent", "err", err)
			}
		}
	}()
	var mu sync.Mutex // guards closed and the sends on queue
	closed := false
	report = func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return // the ask has answered; nobody reads its progress now
		}
		select {
		case queue <- msg:
		default:
			logger.Debug("progress notification dropped: the caller reads too slowly", "queued", progressQueue)
		}
	}
	stop = func() {
		mu.Lock()
		if !closed {
			closed = true
			close(queue)
		}
		mu.Unlock()
		<-done
	}
	return report, stop
}

// An answer streamed a token per chunk would be thousands of progress
// notifications, each a JSON-RPC message on the caller's stream. The
// deltas are gathered, and sent as one message when answerFlushBytes have
// gathered or answerFlushEvery has passed since the first of them: a
// person reading sees no lag, and the caller handles a few dozen messages
// an answer.
const (
	answerFlushEvery = 50 * time.Millisecond
	answerFlushBytes = 256
)

// answerBatch gathers a turn's answer deltas into progress messages.
type answerBatch struct {
	send  func(string) // queues a progress message; never blocks
	scrub func(string) string

	mu     sync.Mutex // guards following fields
	step   int
	text   strings.Builder
	timer  *time.Timer // armed while text holds something
	closed bool
}

func newAnswerBatch(send func(string), scrub func(string) string) *answerBatch {
	return &answerBatch{send: send, scrub: scrub}
}

// add is the runtime.WithAnswerHandler callback.
func (b *answerBatch) add(d runtime.AnswerDelta) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if d.Discard || d.Step != b.step {
		b.flushLocked()
	}
	if d.Discard {
		b.sendLocked(d)
		return
	}
	b.step = d.Step
	b.text.WriteString(d.Text)
	if b.text.Len() >= answerFlushBytes {
		b.flushLocked()
		return
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(answerFlushEvery, b.flush)
	} else if b.text.Len() == len(d.Text) {
		b.timer.Reset(answerFlushEvery) // the first text since the last message
	}
}

// flush sends the text gathered.
func (b *answerBatch) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *answerBatch) flushLocked() {
	if b.text.Len() == 0 {
		return
	}
	// Scrubbed as every other message is; a credential split across two
	// messages is not caught here, but the ask result, scrubbed whole, is
	// what the caller keeps.
	b.sendLocked(runtime.AnswerDelta{Step: b.step, Text: b.scrub(b.text.String())})
	b.text.Reset()
}

func (b *answerBatch) sendLocked(d runtime.AnswerDelta) {
	if msg, err := json.Marshal(d); err == nil {
		b.send(string(msg))
	}
}

// close sends what is gathered and stops the timer; later deltas are
// dropped.
func (b *answerBatch) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
}

// namedErr is err's text with the agent's name in front, once.
func namedErr(name string, err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "agent "+name+":") {
		return msg
	}
	return "agent " + name + ": " + msg
}

func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}
