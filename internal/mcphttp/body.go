package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
)

// A body is read once per request, by ReadRequest, whoever needs it first:
// in the studio that is the observer, which wraps the route outside the
// middleware; in an agent server, the middleware. The bytes are held against
// the process's Budget until the request ends, and the parsed Message rides
// in the context, so nobody reads or parses the body a second time (go-sdk
// reads the buffered copy put back in r.Body).

type bodyKey struct{}

// bodyResult is what ReadRequest found: the message, or the answer the
// request gets instead of being served.
type bodyResult struct {
	msg    Message
	status int       // non-zero: refuse with this status
	rpcErr *RPCError // and this error
}

// minBodyBuffer is the first buffer of a body of unknown length; it grows
// by doubling, each growth taken from the budget before it is made.
const minBodyBuffer = 16 << 10

// metaEntryBytes is what one _meta member costs in the parsed message's
// map, for the budget.
const metaEntryBytes = 64

// smallBody is the size up to which a body may also use the budget's
// reserve: a flood of large bodies cannot shut out ordinary calls, which are
// a few kB.
const smallBody = 64 << 10

// ReadRequest reads r's body (once: a second call finds the first's result),
// bounded by maxBody and by b, parses it as a JSON-RPC message when it is a
// JSON POST, and returns r carrying the result in its context. release gives
// the body's bytes back to b; call it when the request has been served.
// A body that cannot be used is not answered here: the middleware answers it
// (413, 503, 408 or a JSON-RPC error), so an observer outside it sees that
// answer like any other.
func ReadRequest(w http.ResponseWriter, r *http.Request, b *Budget, maxBody int64) (_ *http.Request, release func()) {
	if _, ok := r.Context().Value(bodyKey{}).(*bodyResult); ok {
		return r, func() {}
	}
	res, held := readBody(w, r, b, maxBody)
	r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, res))
	var done bool
	return r, func() {
		if !done {
			done = true
			b.release(held)
		}
	}
}

// MessageFrom returns the message ReadRequest parsed for the request of
// ctx; ok is false when there is none (not a JSON POST, or a body that was
// refused).
func MessageFrom(ctx context.Context) (m *Message, ok bool) {
	res, _ := ctx.Value(bodyKey{}).(*bodyResult)
	if res == nil || res.status != 0 {
		return nil, false
	}
	return &res.msg, true
}

func refuse(status int, id json.RawMessage, code int64, format string, args ...any) *bodyResult {
	return &bodyResult{msg: Message{ID: id}, status: status, rpcErr: &RPCError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// readBody does ReadRequest's work; held is what it took from the budget.
func readBody(w http.ResponseWriter, r *http.Request, b *Budget, maxBody int64) (res *bodyResult, held int64) {
	if r.Body == nil {
		r.Body = http.NoBody
	}
	if r.ContentLength > maxBody {
		return refuse(http.StatusRequestEntityTooLarge, nil, CodeInvalidRequest, "request body exceeds the limit of %d bytes", maxBody), 0
	}
	if r.Method != http.MethodPost {
		// GET and DELETE carry no message. Without a body, the deadline
		// goes: a GET is the SSE stream, which lives long. With one, it
		// stays and bounds whatever they send.
		if r.Body == http.NoBody {
			clearDeadline(w)
		} else {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		return &bodyResult{}, 0
	}
	// MaxBytesReader also tells net/http to close the connection after an
	// oversized body instead of reading the rest of it.
	body, held, err := readBounded(http.MaxBytesReader(w, r.Body, maxBody), r.ContentLength, maxBody, b)
	r.Body.Close()
	if err != nil {
		b.release(held)
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return refuse(http.StatusRequestEntityTooLarge, nil, CodeInvalidRequest, "request body exceeds the limit of %d bytes", maxBody), 0
		case errors.Is(err, ErrOverBudget):
			return refuse(http.StatusServiceUnavailable, nil, CodeServerOverloaded, "server overloaded: %v; try again", err), 0
		case errors.Is(err, os.ErrDeadlineExceeded):
			return refuse(http.StatusRequestTimeout, nil, CodeInvalidRequest, "the request body did not arrive within %v of its headers", b.bodyTimeout), 0
		}
		return refuse(http.StatusBadRequest, nil, CodeInvalidRequest, "reading the request body: %v", err), 0
	}
	clearDeadline(w)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }

	if !isJSON(r.Header.Get("Content-Type")) {
		// Leave the answer (415) to the MCP handler, which knows the rules.
		return &bodyResult{}, held
	}
	msg, rpcErr := parseMessage(body)
	if rpcErr != nil {
		return &bodyResult{msg: msg, status: http.StatusBadRequest, rpcErr: rpcErr}, held
	}
	// The parsed members are slices of the body; the _meta map's entries
	// are what parsing adds, held as long as the body.
	extra := int64(len(msg.Meta)) * metaEntryBytes
	if !b.reserve(extra, int64(len(body))+extra <= smallBody) {
		return refuse(http.StatusServiceUnavailable, msg.ID, CodeServerOverloaded, "server overloaded: %v; try again", ErrOverBudget), held
	}
	return &bodyResult{msg: msg}, held + extra
}

// readBounded reads a body of at most limit bytes, taking its buffer from
// the budget as it grows. size is the Content-Length, or -1.
func readBounded(body io.Reader, size, limit int64, b *Budget) (buf []byte, held int64, err error) {
	first := int64(minBodyBuffer)
	if size >= 0 {
		// One buffer of the announced size (+1 to see the EOF without a
		// growth); a body longer than announced is net/http's error.
		first = size + 1
	}
	if !b.reserve(first, first <= smallBody) {
		return nil, 0, ErrOverBudget
	}
	held = first
	buf = make([]byte, 0, first)
	for {
		if int64(len(buf)) == int64(cap(buf)) {
			if int64(len(buf)) > limit {
				return nil, held, &http.MaxBytesError{Limit: limit}
			}
			grow := min(int64(cap(buf)), limit+1-int64(cap(buf)))
			if !b.reserve(grow, int64(cap(buf))+grow <= smallBody) {
				return nil, held, ErrOverBudget
			}
			held += grow
			nb := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(nb, buf)
			buf = nb
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, held, &http.MaxBytesError{Limit: limit}
		}
		if errors.Is(err, io.EOF) {
			return buf, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}
