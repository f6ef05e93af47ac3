package builtin

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// This file serves the handler to an http.Client without a socket: the
// request goes straight to ServeHTTP and the recorded response comes back
// as an *http.Response. Each round trip records into its own buffer and the
// handler is stateless, so one Transport serves any number of goroutines.

// ModelName is the name the builtin model answers to and lists.
const ModelName = "builtin"

// BaseURL is a base URL for OpenAI clients using [Transport]. Its host is
// never resolved (.invalid is reserved, RFC 6761), so a client that lost
// the transport fails at once instead of reaching a real server.
const BaseURL = "http://builtin.invalid/v1"

// Transport returns an http.RoundTripper that serves [Handler] in-process,
// whatever the request's host. Use it as an http.Client's Transport with
// [BaseURL] as the client's base URL:
//
//	cfg := openai.DefaultConfig("")
//	cfg.BaseURL = builtin.BaseURL
//	cfg.HTTPClient = &http.Client{Transport: builtin.Transport()}
//
// It is safe for concurrent use.
func Transport() http.RoundTripper { return transport{h: Handler()} }

type transport struct{ h http.Handler }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// http.RoundTripper: RoundTrip must close the body, even on errors,
	// and must not modify the request.
	body := req.Body
	if body == nil {
		body = http.NoBody
	}
	defer body.Close()
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	in := req.Clone(ctx)
	in.Body = body
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "builtin:0"
	in.Proto, in.ProtoMajor, in.ProtoMinor = "HTTP/1.1", 1, 1
	if in.Host == "" {
		in.Host = req.URL.Host
	}

	rec := &responseBuffer{header: http.Header{}}
	t.h.ServeHTTP(rec, in)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rec.response(req), nil
}

// responseBuffer is a minimal http.ResponseWriter that buffers the response.
type responseBuffer struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (r *responseBuffer) Header() http.Header { return r.header }

func (r *responseBuffer) WriteHeader(code int) {
	if r.wroteHeader {
		return
	}
	r.wroteHeader, r.status = true, code
}

func (r *responseBuffer) Write(b []byte) (int, error) {
	if !r.wroteHeader {
		if r.header.Get("Content-Type") == "" {
			r.header.Set("Content-Type", http.DetectContentType(b))
		}
		r.WriteHeader(http.StatusOK)
	}
	return r.body.Write(b)
}

// Flush is a no-op: the whole response is delivered when the handler
// returns. It lets the streaming path run unchanged.
func (r *responseBuffer) Flush() {}

func (r *responseBuffer) response(req *http.Request) *http.Response {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	h := r.header.Clone()
	h.Set("Content-Length", strconv.Itoa(r.body.Len()))
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", r.status, http.StatusText(r.status)),
		StatusCode:    r.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(r.body.Bytes())),
		ContentLength: int64(r.body.Len()),
		Request:       req,
	}
}
