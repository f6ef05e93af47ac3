package clientcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// Error codes for answers that carry no server JSON-RPC error. The JSON-RPC
// reserved range is used for what it means; the pool's kinds get codes from
// the implementation-defined server-error range.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeTransport      = -32000
	codeSessionExpired = -32001
	codeOutcomeUnknown = -32002
	// codeRefused: the pool refused the request whole before it ran (too
	// large for the server, a redirect to another origin, a list without
	// end); next to pool.CodeOutcomeUnknown, clear of go-sdk's codes.
	codeRefused = -32061
)

type client struct {
	cfg         *mcpconfig.Config
	pool        *pool.Pool
	timeout     time.Duration
	maxInFlight int
	out         *writer
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Server string          `json:"server"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type answer struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result,omitempty"`
	Error  *answerError    `json:"error,omitempty"`
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
		wg.Go(func() {
			defer func() { <-slots }()
			c.out.write(c.handle(ctx, req))
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
		return req, &answerError{Code: codeInvalidRequest, Kind: kindInput, Message: fmt.Sprintf("line %d: \"id\" must be a string or a number, got %s", lineNo, req.ID)}
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
	if req.Method != "tools/list" && req.Method != "tools/call" {
		ans.Error = &answerError{Code: codeMethodNotFound, Kind: kindInput, Message: fmt.Sprintf("unknown method %q; want tools/list, tools/call or pool/stats", req.Method)}
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

	if req.Method == "tools/list" {
		tools, err := c.pool.ListTools(ctx, srv)
		if err != nil {
			ans.Error = poolError(err)
			return ans
		}
		if tools == nil {
			tools = []*mcp.Tool{}
		}
		ans.Result = map[string]any{"tools": tools}
		return ans
	}

	var params mcp.CallToolParams
	if len(req.Params) == 0 {
		ans.Error = &answerError{Code: codeInvalidParams, Kind: kindInput, Message: "tools/call needs \"params\": {\"name\": TOOL, \"arguments\": {...}}"}
		return ans
	}
	dec := json.NewDecoder(bytes.NewReader(req.Params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&params); err != nil {
		ans.Error = &answerError{Code: codeInvalidParams, Kind: kindInput, Message: fmt.Sprintf("tools/call params: %v", err)}
		return ans
	}
	if params.Name == "" {
		ans.Error = &answerError{Code: codeInvalidParams, Kind: kindInput, Message: "tools/call params: missing \"name\""}
		return ans
	}
	res, err := c.pool.CallTool(ctx, srv, &params)
	if err != nil {
		ans.Error = poolError(err)
		return ans
	}
	ans.Result = res
	return ans
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
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w.Write(b)
}
