package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// Continuity in front of a handler in the same process: `agent serve`'s
// own sessions. The agent's go-sdk handler is to its continuity what an
// agent process is to the studio's: it forgets every session when the
// process restarts (or never knew one begun on another replica), and
// answers 404 to it before dispatching anything. So the same Continuity
// wraps it, its upstream a RoundTripper that serves each request with the
// handler in-process (HandlerTransport), and Local serves the client
// through it.

// EnvContinuity, set to 0 in the environment of `agent serve`, turns its
// own continuity off: the studio sets it for the agents it starts, whose
// sessions its own continuity keeps (it also knows which call each of
// their streams answers, which is not kept beyond a process).
const EnvContinuity = "SWITCHBOARD_SESSION_CONTINUITY"

// HandlerTransport returns a RoundTripper that answers each request with
// h, in this process: the response is returned once h has written its
// header, and its body streams what h writes after that (an SSE stream
// included). h runs on the request's context; closing the body before its
// end makes h's next write fail.
func HandlerTransport(h http.Handler) http.RoundTripper { return handlerTransport{h} }

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing
			pw.Close()
		}()
		t.h.ServeHTTP(w, req)
	}()
	<-w.ready
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          pr,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// pipeWriter is the ResponseWriter of an in-process request.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{} // closed once status and sent are set
	status int
	sent   http.Header // the header as it was when written
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush: the pipe has no buffer; what was written has been read.
func (w *pipeWriter) Flush() { w.WriteHeader(http.StatusOK) }

// Local returns the handler that serves MCP through c, whose upstream is
// a HandlerTransport: what the client is answered is the response c
// returns, streamed as it comes.
func Local(c *Continuity) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := c.RoundTrip(r)
		if err != nil {
			// HandlerTransport fails no request; a replay that could not
			// be made is answered by c itself. This is only a safety net.
			mcphttp.WriteJSONRPCError(w, http.StatusInternalServerError, nil, CodeServerError, fmt.Sprintf("session continuity: %v", err))
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		rc := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return // the client went away; closing the body ends the handler's writes
				}
				if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}
