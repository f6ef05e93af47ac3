// Package observe watches what passes through the studio's proxy and keeps
// what the console and the metrics show of it: an Observer wraps each
// agent's route (observe.go); what it sees is recorded as recent
// delegations (delegations.go), as runs with their hops (runs.go), as
// per-minute series (series.go) and as Prometheus counters with labels from
// bounded sets (metrics.go, labels.go). The agents' log lines are kept here
// too (logs.go). It serves nothing: the console renders these records and
// the studio serves /metrics.
package observe

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/telemetry"
)

// The proxy's observation of each request to an agent, for the metrics and
// the recent delegations. It wraps the whole route, outside the mcphttp
// middleware, so that the middleware's own answers (a 404 for a session it
// no longer binds, a 413) and the studio's 503 for an agent that is down are
// seen like the agent's.
//
// The request body is read once, here, against the studio's budget
// (mcphttp.ReadRequest); the middleware inside uses the same parsed message
// from the context. Nothing the observer keeps of it is unbounded: labels
// come from known sets (labels.go), strings are truncated, and the chain is
// read only when its text is small enough to be a chain. The response is
// watched as it streams, never held back: a tools/call answered
// as an SSE stream is parsed event by event for the JSON-RPC response to
// this request, to tell a result from a JSON-RPC error and a tool's own
// isError. Progress notifications pass through as they come.

// observation is one proxied request.
type observation struct {
	agent    string
	method   string // JSON-RPC method, or GET, DELETE, response
	tool     string // tools/call only
	start    time.Time
	duration time.Duration
	timed    bool // a POST; a GET stream's life is not a latency

	// From the tools/call's _meta.
	runID       string
	from        string // the delegating agent; "" for a client outside the fleet
	fromSeen    bool   // from is the agent whose key the request carried, not only the chain's claim
	traceparent string
	argsDigest  string
	args        json.RawMessage // the call's arguments, for the run page
	depth       int             // agents on the chain before the callee

	// Set by the route (marks.go): how long the studio held the
	// request for a (re)starting agent, and whether it re-sent it to the
	// agent's new process.
	held     time.Duration
	replayed bool

	// kind is the error kind, "" when the request succeeded.
	kind    string
	message string // the error's message, when there is one
}

// outcome is "ok" or the error kind.
func (o *observation) outcome() string {
	if o.kind == "" {
		return "ok"
	}
	return o.kind
}

// retryKey identifies a tools/call across the pool's retry of it: the
// traceparent of the caller's request span is the same on both attempts;
// without one, the agent, run, tool and arguments are.
func (o *observation) retryKey() string {
	if o.traceparent != "" {
		return "tp:" + o.traceparent
	}
	return "call:" + o.agent + "\x00" + o.runID + "\x00" + o.tool + "\x00" + o.argsDigest
}

// traceID is the trace id in the traceparent, if any.
func (o *observation) traceID() string {
	parts := strings.Split(o.traceparent, "-")
	if len(parts) == 4 && len(parts[1]) == 32 {
		return parts[1]
	}
	return ""
}

// Bounds on what an observation keeps of the client's strings.
const (
	maxToolName    = 128
	maxTraceparent = 55 // version-traceid-parentid-flags, W3C Trace Context
	maxMessage     = 512
)

// Observer records every request to an agent. Its fields are set once,
// before it serves.
type Observer struct {
	// Budget and MaxBody bound the read of a request body (the whole
	// process's budget, and one body).
	Budget  *mcphttp.Budget
	MaxBody int64
	// RefusesUnread, optional, reports whether agent's middleware refuses
	// r before reading its body: then the observer does not read it either.
	RefusesUnread func(agent string, r *http.Request) bool
	// AgentOfKey returns the agent whose key r carries, or "".
	AgentOfKey func(r *http.Request) string

	Delegations *Delegations
	Runs        *Runs
	Series      *Series
	Metrics     *Metrics
}

// Serve runs next for a request to agent and records it.
func (ob *Observer) Serve(agent string, w http.ResponseWriter, r *http.Request, next http.HandlerFunc) {
	o := &observation{agent: agent, method: r.Method, start: time.Now()}
	sn := &sniffer{ResponseWriter: w}
	if ob.RefusesUnread == nil || !ob.RefusesUnread(agent, r) {
		r2, release := mcphttp.ReadRequest(w, r, ob.Budget, ob.MaxBody)
		defer release()
		r = r2
	}
	if r.Method == http.MethodPost {
		o.timed = true
		o.method = "unknown"
		if msg, ok := mcphttp.MessageFrom(r.Context()); ok {
			o.readRequest(msg)
			o.fromSeen = o.from != "" && ob.AgentOfKey(r) == o.from
			sn.wantID = msg.ID
			sn.parse = msg.Method != "" && msg.ID != nil
		}
	}
	var deleg *studioapi.Delegation
	var call *callRecord
	if o.method == "tools/call" {
		deleg = ob.Delegations.start(o)
		call = ob.Runs.start(deleg, o)
	}
	// A call is recorded when its answer is known: at the end of a JSON
	// body, or, in an SSE stream, as soon as the response passes, before
	// it is sent on. The stream may stay open a moment after that, and by
	// then the caller already has its answer; a record still "running"
	// would contradict what the caller saw.
	var once sync.Once
	record := func() {
		o.duration = time.Since(o.start)
		sn.finish(o, r.Context())
		ob.Metrics.observe(r.Context(), o)
		if deleg != nil {
			ob.Delegations.finish(deleg, o)
			ob.Runs.finishAnswer(call, o, &sn.answer)
		}
		ob.Series.observe(o)
	}
	sn.answered = func() { once.Do(record) }
	next(sn, withObservation(r, o))
	once.Do(record)
}

func (o *observation) readRequest(msg *mcphttp.Message) {
	switch {
	case msg.Method != "":
		o.method = truncate(msg.Method, maxToolName)
	case msg.ID != nil:
		o.method = "response"
	}
	if msg.Method != "tools/call" {
		return
	}
	o.tool = truncate(msg.Tool, maxToolName)
	var tp string
	if raw, ok := msg.Meta[telemetry.MetaTraceparent]; ok && len(raw) <= maxTraceparent+2 && json.Unmarshal(raw, &tp) == nil {
		o.traceparent = tp
	}
	if raw, ok := msg.Meta[delegation.MetaKey]; ok {
		// FromMetaJSON refuses a text too long to be a chain before
		// parsing it: the cost is independent of the rest of the body.
		if c, err := delegation.FromMetaJSON(raw); err == nil {
			o.runID = c.RunID
			if n := len(c.Agents); n > 0 {
				o.from = c.Agents[n-1]
			}
			o.depth = len(c.Agents)
		}
	}
	o.args = msg.Arguments
	sum := sha256.Sum256(msg.Arguments)
	o.argsDigest = hex.EncodeToString(sum[:8])
}

// truncate bounds a string kept from a request, at a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// sniffer passes a response through and reads, on the way, the JSON-RPC
// response to the request (from a JSON body or an SSE stream) with a
// msgScan (scan.go): one pass over the bytes, nothing held back, nothing
// copied but the bounded members it keeps.
type sniffer struct {
	http.ResponseWriter
	wantID json.RawMessage
	parse  bool

	status      int
	wroteHeader bool
	sse         bool

	scan msgScan // the JSON body, or the SSE event's data
	// The SSE stream's line: its state, and the start of a line read so
	// far (to tell a data line, "data:").
	line    lineState
	field   [5]byte
	nfield  int
	hasData bool // the event has a data line (the next is joined with '\n')

	found    bool   // the response to the request was seen
	answered func() // called when the response is seen in an SSE stream, before it is passed on
	runID    string
	answer   answer // the result, for the run record
	rpcErr   *rpcErrorBody
	isError  bool
}

type rpcErrorBody struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

type lineState uint8

const (
	lnStart lineState = iota // at the start of a line, reading its field name
	lnSpace                  // after "data:", an optional space
	lnData                   // in a data line
	lnSkip                   // in a line that is not data
)

func (sn *sniffer) WriteHeader(code int) {
	if !sn.wroteHeader {
		sn.wroteHeader = true
		sn.status = code
		ct := sn.Header().Get("Content-Type")
		sn.sse = strings.HasPrefix(ct, "text/event-stream")
		if code >= 400 {
			// Read an error body for its message, whatever the request.
			sn.parse = true
		}
		sn.scan.reset()
		if code < 400 {
			// An error body is read whole for its message, whatever its id.
			sn.scan.stop = sn.notOurs
		}
		if !sn.sse {
			if n, err := strconv.ParseInt(sn.Header().Get("Content-Length"), 10, 64); err == nil {
				sn.scan.expect(n)
			}
		}
	}
	sn.ResponseWriter.WriteHeader(code)
}

func (sn *sniffer) Write(p []byte) (int, error) {
	if !sn.wroteHeader {
		sn.WriteHeader(http.StatusOK)
	}
	if sn.parse && !sn.found {
		sn.feed(p)
	}
	return sn.ResponseWriter.Write(p)
}

// Flush and Unwrap keep SSE streaming through the proxy
// (http.ResponseController finds the real writer's Flush).
func (sn *sniffer) Flush() {
	if f, ok := sn.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (sn *sniffer) Unwrap() http.ResponseWriter { return sn.ResponseWriter }

func (sn *sniffer) feed(p []byte) {
	if !sn.sse {
		sn.scan.feed(p)
		return
	}
	for len(p) > 0 && !sn.found {
		switch sn.line {
		case lnData:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				sn.scan.feed(p)
				return
			}
			sn.scan.feed(p[:i])
			p = p[i+1:]
			sn.line, sn.nfield = lnStart, 0
		case lnSkip:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				return
			}
			p = p[i+1:]
			sn.line, sn.nfield = lnStart, 0
		case lnSpace:
			if p[0] == ' ' {
				p = p[1:]
			}
			sn.line = lnData
		case lnStart:
			c := p[0]
			p = p[1:]
			switch {
			case c == '\n':
				if sn.nfield == 0 {
					sn.eventEnded()
				}
				sn.nfield = 0
			case c == '\r' && sn.nfield == 0:
				// A blank line ending in CRLF: the '\n' ends the event.
			case sn.nfield < len("data:") && c == "data:"[sn.nfield]:
				sn.field[sn.nfield] = c
				sn.nfield++
				if sn.nfield == len("data:") {
					if sn.hasData {
						sn.scan.feed([]byte{'\n'})
					}
					sn.hasData = true
					sn.line = lnSpace
				}
			default:
				sn.line = lnSkip
			}
		}
	}
	if sn.found && sn.answered != nil {
		sn.answered()
	}
}

// eventEnded checks the SSE event just ended for the response.
func (sn *sniffer) eventEnded() {
	if sn.hasData {
		sn.message(&sn.scan)
		sn.scan.reset()
	}
	sn.hasData = false
}

// notOurs tells the scan to skip the rest of a message that is a request
// or notification, or the response to another request.
func (sn *sniffer) notOurs(s *msgScan) bool {
	if raw, ok := s.member(pMethod); ok {
		if m, ok := decodeString(raw, false); !ok || m != "" {
			return true
		}
	}
	if s.seen[pID] && sn.wantID != nil {
		raw, ok := s.member(pID)
		return !ok || !sameID(raw, sn.wantID)
	}
	return false
}

// message checks one JSON-RPC message for the response to the request.
func (sn *sniffer) message(s *msgScan) {
	if !s.complete() || sn.notOurs(s) {
		return
	}
	isResult := s.resultStart >= 0 && s.resultKind != 'n'
	if !isResult && !s.errorObj {
		return
	}
	sn.found = true
	if s.errorObj {
		sn.rpcErr = s.rpcError()
	}
	if isResult {
		if raw, ok := s.member(pIsError); ok {
			sn.isError = string(raw) == "true"
		}
		if raw, ok := s.member(pRunID); ok {
			sn.runID, _ = decodeString(raw, false)
		}
		sn.answer = answer{raw: s.result(), size: s.resultSize(), usage: s.usage(), usageRead: true}
	}
}

// sameID reports whether two JSON ids are the same value.
func sameID(a, b json.RawMessage) bool {
	return bytes.Equal(a, b) || bytes.Equal(compact(a), compact(b))
}

func compact(b json.RawMessage) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// finish sets o's error kind and message from what the response was.
func (sn *sniffer) finish(o *observation, ctx context.Context) {
	status := http.StatusOK
	if sn.wroteHeader {
		status = sn.status
	}
	if status >= 400 {
		// The body is a JSON-RPC error (any id: an HTTP-level error has a
		// null one) or the studio's {"error": "..."}.
		if s := &sn.scan; !sn.sse && s.complete() {
			if s.errorObj {
				o.message = s.rpcError().Message
			} else if raw, ok := s.member(pError); ok {
				o.message, _ = decodeString(raw, s.full[pError])
			}
		}
	} else if !sn.sse && sn.scan.n > 0 && sn.parse && !sn.found {
		sn.message(&sn.scan)
	}
	if o.runID == "" {
		o.runID = truncate(sn.runID, delegation.MaxRunIDLen)
	}
	switch {
	case status == http.StatusNotFound:
		o.kind = "session_not_found"
	case status == http.StatusServiceUnavailable:
		o.kind = "agent_unavailable"
	case status == http.StatusBadGateway:
		o.kind = "upstream_error"
	case status >= 400:
		o.kind = statusLabel(status)
	case !sn.parse || sn.found && sn.rpcErr == nil && !sn.isError:
		// Nothing to find (a notification, a stream), or a result.
	case sn.found && sn.rpcErr != nil:
		o.kind, o.message = "rpc_error", sn.rpcErr.Message
	case sn.found:
		o.kind = "tool_error"
	case ctx.Err() != nil:
		// The client went away before the answer.
		o.kind = "canceled"
	default:
		o.kind = "no_response"
	}
	o.message = truncate(o.message, maxMessage)
}

// statusLabel renders an HTTP status for an error kind.
func statusLabel(code int) string { return "http_" + strconv.Itoa(code) }

// Call is what the observer learns of a tools/call from its request.
type Call struct {
	Agent, Tool string
	// From is the delegating agent, Depth the agents on the chain before
	// the callee, RunID the chain's run: all empty or zero for a client's
	// own call.
	From  string
	Depth int
	RunID string
	Start time.Time
	// Args are the call's arguments; ArgsDigest stands for them in the
	// key that tells the pool's retry of a call (default: a digest of Args).
	Args       json.RawMessage
	ArgsDigest string
}

// Recording is a call Begin recorded as running.
type Recording struct {
	ob   *Observer
	o    *observation
	d    *studioapi.Delegation
	call *callRecord
}

// Begin records c as Serve records a call it forwards, without HTTP, in
// the delegations, the runs and (at End) the series; not in the metrics.
// What the pages show of a call depends only on these records, so a test
// or a benchmark of the pages fills them this way with thousands of calls
// in milliseconds.
func (ob *Observer) Begin(c Call) *Recording {
	o := &observation{agent: c.Agent, method: "tools/call", tool: c.Tool, from: c.From, depth: c.Depth, runID: c.RunID, start: c.Start, args: c.Args, argsDigest: c.ArgsDigest}
	if o.argsDigest == "" {
		sum := sha256.Sum256(c.Args)
		o.argsDigest = hex.EncodeToString(sum[:8])
	}
	d := ob.Delegations.start(o)
	return &Recording{ob: ob, o: o, d: d, call: ob.Runs.start(d, o)}
}

// End records the call as ended after d with the error kind ("" for
// success) and message, the run id its answer names, and its JSON-RPC
// result (nil for an error).
func (r *Recording) End(d time.Duration, kind, message, runID string, result json.RawMessage) {
	r.o.duration, r.o.kind, r.o.message = d, kind, message
	if runID != "" {
		r.o.runID = runID
	}
	r.ob.Delegations.finish(r.d, r.o)
	r.ob.Runs.finish(r.call, r.o, result)
	if r.ob.Series != nil {
		r.ob.Series.observe(r.o)
	}
}
