package clientcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-run/switchboard/internal/rpccode"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// maxLine bounds one request line. A longer line is answered with an input
// error and skipped; the process goes on.
const maxLine = 16 << 20

// Error kinds beyond the pool's own (pool.Kind.String()).
const (
	kindConfig = "config" // the request names a server the configuration does not have
	kindInput  = "input"  // the line is not a valid request
)

// Error codes of answers, from the tree's one list (internal/rpccode): the
// JSON-RPC reserved codes for a bad line, and one code per pool kind, the
// same the studio says on the wire (outcome unknown is -32060 from the
// studio, the pool and this command alike). Only kind rpc carries the
// server's own code.
const (
	codeParseError     = rpccode.ParseError
	codeInvalidRequest = rpccode.InvalidRequest
	codeMethodNotFound = rpccode.MethodNotFound
	codeInvalidParams  = rpccode.InvalidParams
	codeTransport      = rpccode.Transport
	codeSessionExpired = rpccode.SessionExpired
	codeOutcomeUnknown = rpccode.OutcomeUnknown
	codeRefused        = rpccode.Refused
	codeInterrupted    = rpccode.Interrupted
)

type client struct {
	cfg         *mcpconfig.Config
	pool        *pool.Pool
	timeout     time.Duration
	maxInFlight int
	out         *writer
	log         *slog.Logger
	subs        subscriptions
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Server string          `json:"server"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`

	line int // its line of stdin, from 1, in the order lines are read
}

type answer struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result,omitempty"`
	Error  *answerError    `json:"error,omitempty"`

	// around, when set, writes the answer by calling its argument: a
	// subscription writes it under its own lock, so that no update line
	// comes before it and none is held back after it.
	around func(write func())
}

type answerError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Kind    string `json:"kind"`
	// Retried is set when the pool re-initialized the session and sent the
	// request again.
	Retried bool `json:"retried,omitempty"`
}

// errInterrupted is what serve returns when its context ended (SIGINT,
// SIGTERM) before stdin did.
var errInterrupted = errors.New("interrupted")

// serve reads requests until EOF and waits for all of them to be answered.
//
// When ctx ends first (a signal), serve stops reading, sends nothing new,
// and answers every line it has read: a request in flight is cancelled and
// answered with what the pool knows (outcome_unknown if its request went
// out, transport if not), and a line read but not yet sent is answered
// transport, "not sent". It then returns errInterrupted. Stdin is read by a
// goroutine of its own, because a read from a terminal or a pipe cannot be
// interrupted: a signal must not wait for the next line to arrive.
func (c *client) serve(ctx context.Context, in io.Reader) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, c.maxInFlight)
	rd := newLineReader(in, c)
	go rd.run()
	interrupted := func(held *line) error {
		if held != nil {
			c.notSent(*held)
		}
		rd.stop()
		return errInterrupted
	}
	for {
		var l line
		select {
		case <-ctx.Done():
			return interrupted(nil)
		case err := <-rd.err:
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("reading stdin: %w", err)
		case l = <-rd.lines:
		}
		req, aerr := parse(l.text, l.tooLong, l.no)
		if aerr != nil {
			c.out.write(answer{ID: idOrNull(req.ID), Error: aerr})
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return interrupted(&l)
		}
		if ctx.Err() != nil {
			// Both were ready and select chose the slot: still send nothing.
			<-slots
			return interrupted(&l)
		}
		req.line = l.no
		answered := c.subs.read(req) // before the line runs: see subscriptions.reading
		wg.Go(func() {
			defer func() { <-slots }()
			defer answered()
			a := c.handle(ctx, req)
			write := func() { c.out.write(a) }
			if a.around != nil {
				a.around(write)
			} else {
				write()
			}
		})
	}
}

// notSent answers a line that was read and never sent.
func (c *client) notSent(l line) {
	req, aerr := parse(l.text, l.tooLong, l.no)
	if aerr == nil {
		aerr = &answerError{Code: codeTransport, Kind: pool.KindTransport.String(),
			Message: fmt.Sprintf("line %d: not sent: the client was interrupted before sending this request", l.no)}
	}
	c.out.write(answer{ID: idOrNull(req.ID), Error: aerr})
}

// line is one non-blank line of stdin.
type line struct {
	no      int
	text    []byte
	tooLong bool
}

// lineReader hands stdin's lines to serve one at a time. It is never
// waited for while it waits in a read (after a signal it may stay there
// until the process exits); stop waits only when it holds lines already
// read, which it then answers as not sent.
type lineReader struct {
	r     *bufio.Reader
	c     *client
	lines chan line
	err   chan error // the read error that ended it (io.EOF at the end)
	quit  chan struct{}
	done  chan struct{} // closed once the lines it held are answered

	mu      sync.Mutex // guards following fields
	stopped bool
	holding bool // it has read a line serve has not taken
}

func newLineReader(in io.Reader, c *client) *lineReader {
	return &lineReader{
		r: bufio.NewReaderSize(in, 64<<10), c: c,
		lines: make(chan line), err: make(chan error, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
}

func (lr *lineReader) run() {
	for no := 1; ; no++ {
		text, tooLong, err := readLine(lr.r)
		if len(bytes.TrimSpace(text)) > 0 || tooLong {
			lr.mu.Lock()
			if lr.stopped {
				// Read after serve stopped: not a line serve read.
				lr.mu.Unlock()
				return
			}
			lr.holding = true
			lr.mu.Unlock()
			select {
			case lr.lines <- line{no: no, text: text, tooLong: tooLong}:
				lr.mu.Lock()
				lr.holding = false
				lr.mu.Unlock()
			case <-lr.quit:
				lr.c.notSent(line{no: no, text: text, tooLong: tooLong})
				lr.drain(no + 1)
				close(lr.done)
				return
			}
		}
		if err != nil {
			lr.err <- err
			return
		}
	}
}

// drain answers, as not sent, the complete lines already in the buffer:
// read from stdin before the signal, never handed over. It reads nothing
// more from stdin.
func (lr *lineReader) drain(no int) {
	for ; ; no++ {
		buf, _ := lr.r.Peek(lr.r.Buffered())
		if !bytes.Contains(buf, []byte("\n")) {
			return
		}
		text, tooLong, _ := readLine(lr.r)
		if len(bytes.TrimSpace(text)) > 0 || tooLong {
			lr.c.notSent(line{no: no, text: text, tooLong: tooLong})
		}
	}
}

// stop ends the reader; when it holds lines read from stdin, stop returns
// once they are answered.
func (lr *lineReader) stop() {
	lr.mu.Lock()
	lr.stopped = true
	holding := lr.holding
	lr.mu.Unlock()
	close(lr.quit)
	if holding {
		<-lr.done
	}
}

// readLine returns the next line without its newline. A line longer than
// maxLine is consumed to its end and reported as tooLong.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxLine {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

func parse(line []byte, tooLong bool, lineNo int) (request, *answerError) {
	var req request
	if tooLong {
		return req, &answerError{Code: codeInvalidRequest, Kind: kindInput, Message: fmt.Sprintf("line %d: longer than %d bytes", lineNo, maxLine)}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var partial request
		json.Unmarshal(line, &partial) // best effort, to answer with the right id
		code := int64(codeParseError)
		if json.Valid(line) {
			code = codeInvalidRequest
		}
		return partial, &answerError{Code: code, Kind: kindInput, Message: fmt.Sprintf("line %d: not a request: %v", lineNo, err)}
	}
	if dec.More() {
		return req, &answerError{Code: codeInvalidRequest, Kind: kindInput, Message: fmt.Sprintf("line %d: more than one JSON value on the line; send one request per line", lineNo)}
	}
	if len(req.ID) == 0 {
		return req, &answerError{Code: codeInvalidRequest, Kind: kindInput, Message: fmt.Sprintf("line %d: missing \"id\"", lineNo)}
	}
	switch req.ID[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
	default:
		bad := req.ID
		req.ID = nil // answered with a null id: it is not one
		return req, &answerError{Code: codeInvalidRequest, Kind: kindInput, Message: fmt.Sprintf("line %d: \"id\" must be a string or a number, got %s", lineNo, quoted(bad))}
	}
	return req, nil
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// handle runs one request and returns its answer.
func (c *client) handle(ctx context.Context, req request) answer {
	ans := answer{ID: req.ID}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if req.Method == "pool/stats" {
		ans.Result = c.pool.Stats()
		return ans
	}
	run, known := methods[req.Method]
	if !known && !subscriptionMethods[req.Method] {
		ans.Error = &answerError{Code: codeMethodNotFound, Kind: kindInput, Message: fmt.Sprintf("unknown method %q; want %s or pool/stats", req.Method, strings.Join(methodNames, ", "))}
		return ans
	}
	if req.Server == "" {
		ans.Error = &answerError{Code: codeInvalidParams, Kind: kindInput, Message: fmt.Sprintf("%s needs \"server\"", req.Method)}
		return ans
	}
	s, ok := c.cfg.Server(req.Server)
	if !ok {
		ans.Error = &answerError{Code: codeInvalidParams, Kind: kindConfig, Message: fmt.Sprintf("unknown server %q; %s has %s", req.Server, c.cfg.Path, serverNames(c.cfg))}
		return ans
	}
	srv := s.Pool()
	if s.Timeout > 0 && (c.timeout <= 0 || s.Timeout < c.timeout) {
		// The server's own "timeout" in mcp.json, when it is the tighter.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}

	switch req.Method {
	case "resources/subscribe":
		return c.subscribe(ctx, req, srv)
	case "resources/unsubscribe":
		return c.unsubscribe(ctx, req)
	}
	res, aerr := run(ctx, c.pool, srv, req.Params)
	if aerr != nil {
		ans.Error = aerr
		return ans
	}
	ans.Result = res
	return ans
}

// A method runs one request's params against srv through the pool.
type method func(ctx context.Context, p *pool.Pool, srv *pool.Server, params json.RawMessage) (any, *answerError)

// methods are the MCP methods the client speaks: every one the pool has.
// A list answers every page at once, under the method's own member name
// ("tools", "resources", "resourceTemplates", "prompts"); a request with
// params answers the server's result as it is.
var methods = map[string]method{
	"tools/list": listMethod("tools", (*pool.Pool).ListTools),
	"tools/call": func(ctx context.Context, p *pool.Pool, srv *pool.Server, raw json.RawMessage) (any, *answerError) {
		params, aerr := decodeParams[mcp.CallToolParams]("tools/call", raw, `{"name": TOOL, "arguments": {...}}`)
		if aerr != nil {
			return nil, aerr
		}
		if params.Name == "" {
			return nil, &answerError{Code: codeInvalidParams, Kind: kindInput, Message: "tools/call params: missing \"name\""}
		}
		return result(p.CallTool(ctx, srv, params))
	},
	"resources/list":           listMethod("resources", (*pool.Pool).ListResources),
	"resources/templates/list": listMethod("resourceTemplates", (*pool.Pool).ListResourceTemplates),
	"resources/read": func(ctx context.Context, p *pool.Pool, srv *pool.Server, raw json.RawMessage) (any, *answerError) {
		params, aerr := decodeParams[mcp.ReadResourceParams]("resources/read", raw, `{"uri": URI}`)
		if aerr != nil {
			return nil, aerr
		}
		if params.URI == "" {
			return nil, &answerError{Code: codeInvalidParams, Kind: kindInput, Message: "resources/read params: missing \"uri\""}
		}
		return result(p.ReadResource(ctx, srv, params))
	},
	"prompts/list": listMethod("prompts", (*pool.Pool).ListPrompts),
	"prompts/get": func(ctx context.Context, p *pool.Pool, srv *pool.Server, raw json.RawMessage) (any, *answerError) {
		params, aerr := decodeParams[mcp.GetPromptParams]("prompts/get", raw, `{"name": PROMPT, "arguments": {...}}`)
		if aerr != nil {
			return nil, aerr
		}
		if params.Name == "" {
			return nil, &answerError{Code: codeInvalidParams, Kind: kindInput, Message: "prompts/get params: missing \"name\""}
		}
		return result(p.GetPrompt(ctx, srv, params))
	},
	"completion/complete": func(ctx context.Context, p *pool.Pool, srv *pool.Server, raw json.RawMessage) (any, *answerError) {
		params, aerr := decodeParams[mcp.CompleteParams]("completion/complete", raw, `{"ref": {"type": "ref/prompt", "name": PROMPT}, "argument": {"name": ARG, "value": PREFIX}}`)
		if aerr != nil {
			return nil, aerr
		}
		if params.Ref == nil || params.Argument.Name == "" {
			return nil, &answerError{Code: codeInvalidParams, Kind: kindInput, Message: "completion/complete params: want \"ref\" and \"argument\": {\"name\": ARG, \"value\": PREFIX}"}
		}
		return result(p.Complete(ctx, srv, params))
	},
}

// subscriptionMethods answer once and then go on (subscribe.go).
var subscriptionMethods = map[string]bool{"resources/subscribe": true, "resources/unsubscribe": true}

// methodNames are every method's name, sorted, for the unknown-method
// answer.
var methodNames = func() []string {
	names := append(slices.Collect(maps.Keys(methods)), slices.Collect(maps.Keys(subscriptionMethods))...)
	slices.Sort(names)
	return names
}()

// listMethod answers a list method with every item under member; a list
// method takes no params (the pool follows the cursors itself).
func listMethod[T any](member string, list func(*pool.Pool, context.Context, *pool.Server) ([]T, error)) method {
	return func(ctx context.Context, p *pool.Pool, srv *pool.Server, raw json.RawMessage) (any, *answerError) {
		if len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("{}")) && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return nil, &answerError{Code: codeInvalidParams, Kind: kindInput, Message: fmt.Sprintf("%s takes no params: the client returns every page (got %s)", member, quoted(raw))}
		}
		items, err := list(p, ctx, srv)
		if err != nil {
			return nil, poolError(err)
		}
		if items == nil {
			items = []T{}
		}
		return map[string]any{member: items}, nil
	}
}

// decodeParams decodes a request's params strictly into P; what names the
// shape it wants, for the error.
func decodeParams[P any](name string, raw json.RawMessage, want string) (*P, *answerError) {
	if len(raw) == 0 {
		return nil, &answerError{Code: codeInvalidParams, Kind: kindInput, Message: fmt.Sprintf("%s needs \"params\": %s", name, want)}
	}
	var params P
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&params); err != nil {
		return nil, &answerError{Code: codeInvalidParams, Kind: kindInput, Message: fmt.Sprintf("%s params: %v; want %s", name, err, want)}
	}
	return &params, nil
}

// result is a pool call's answer.
func result[R any](res *R, err error) (any, *answerError) {
	if err != nil {
		return nil, poolError(err)
	}
	return res, nil
}

// maxQuoted bounds what of a request's own bytes an error answer quotes: a
// 16 MB line must not come back in its error.
const maxQuoted = 64

// quoted is raw for an error message, cut to maxQuoted bytes.
func quoted(raw []byte) string {
	if len(raw) <= maxQuoted {
		return string(raw)
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(string(raw[:maxQuoted]), ""), len(raw))
}

func serverNames(cfg *mcpconfig.Config) string {
	if len(cfg.Servers) == 0 {
		return "no servers"
	}
	names := make([]string, len(cfg.Servers))
	for i, s := range cfg.Servers {
		names[i] = fmt.Sprintf("%q", s.Name)
	}
	return "servers " + strings.Join(names, ", ")
}

func poolError(err error) *answerError {
	var pe *pool.Error
	if !errors.As(err, &pe) {
		return &answerError{Code: codeTransport, Kind: pool.KindTransport.String(), Message: err.Error()}
	}
	ae := &answerError{Kind: pe.Kind.String(), Message: err.Error(), Retried: pe.Retried}
	switch pe.Kind {
	case pool.KindRPC:
		ae.Code = pe.Code
	case pool.KindSessionExpired:
		ae.Code = codeSessionExpired
	case pool.KindOutcomeUnknown:
		ae.Code = codeOutcomeUnknown
	case pool.KindRefused:
		ae.Code = codeRefused
		if pe.Code == rpccode.IdempotencyConflict || pe.Code == rpccode.KeyExpired {
			// The ledger's refusal of a key keeps its own code: it says
			// which refusal (a key used for another call, or too old).
			ae.Code = pe.Code
		}
	case pool.KindInterrupted:
		ae.Code = codeInterrupted
	default:
		ae.Code = codeTransport
	}
	return ae
}

// writer writes answers, one JSON line each, whole lines only.
type writer struct {
	mu sync.Mutex
	w  io.Writer
}

func newWriter(w io.Writer) *writer { return &writer{w: w} }

func (w *writer) write(a answer) {
	b, err := json.Marshal(a)
	if err != nil {
		b, _ = json.Marshal(answer{ID: a.ID, Error: &answerError{Code: codeTransport, Kind: pool.KindTransport.String(), Message: fmt.Sprintf("encoding the result: %v", err)}})
	}
	w.line(b)
}

// writeLine writes v, which always encodes (a notification), as a line.
func (w *writer) writeLine(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("clientcmd: encoding %T: %v", v, err))
	}
	w.line(b)
}

func (w *writer) line(b []byte) {
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w.Write(b)
}
