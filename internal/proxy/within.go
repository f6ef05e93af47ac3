package proxy

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// RoundTripWithin sends req with rt, bounded by life as well as by req's
// own context: when life ends (with cause, or context.Canceled when cause
// is nil), the request ends, and so does the response's body if it is
// still being read. The bound goes with the body: it is released when the
// body is closed, so a stream that lasts (an SSE GET) stays bounded for as
// long as it is open. This is how the studio's Close ends what nothing
// else would: continuity's held streams (EndStreams) and the requests to
// remote agents.
func RoundTripWithin(life context.Context, cause error, req *http.Request, rt func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	stop := context.AfterFunc(life, func() { cancel(cause) })
	end := func() { stop(); cancel(nil) }
	resp, err := rt(req.WithContext(ctx))
	if err != nil {
		end()
		return nil, err
	}
	resp.Body = &endingBody{ReadCloser: resp.Body, end: end}
	return resp, nil
}

// endingBody calls end once closed.
type endingBody struct {
	io.ReadCloser
	once sync.Once
	end  func()
}

func (b *endingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.end)
	return err
}
