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
	"github.com/switchboard-run/switchboard/internal/mcpconfig"
	"github.com/switchboard-run/switchboard/pool"
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

// serve reads requests until EOF and waits for all of them to be answered.
func (c *client) serve(ctx context.Context, in io.Reader) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, c.maxInFlight)
	r := bufio.NewReaderSize(in, 64<<10)
	for lineNo := 1; ; lineNo++ {
		line, tooLong, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			req, aerr := parse(line, tooLong, lineNo)
			if aerr != nil {
				c.out.write(answer{ID: idOrNull(req.ID), Error: aerr})
			} else {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				wg.Go(func() {
					defer func() { <-slots }()
					c.out.write(c.handle(ctx, req))
				})
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
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
