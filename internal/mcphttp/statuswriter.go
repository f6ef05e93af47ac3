package mcphttp

import "net/http"

// statusWriter notes the status the next handler answers with and lets the
// middleware act on the response header just before it is sent. It must not
// get in the way of streaming: Flush passes through, and Unwrap lets
// http.ResponseController (which httputil.ReverseProxy uses) reach the
// underlying writer's other features.
type statusWriter struct {
	http.ResponseWriter
	onHeader func(status int, h http.Header)
	status   int
}

func (r *statusWriter) WriteHeader(status int) {
	if r.status == 0 && status >= 200 {
		r.status = status
		if r.onHeader != nil {
			r.onHeader(status, r.Header())
		}
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusWriter) Write(p []byte) (int, error) {
	r.ensureHeader()
	return r.ResponseWriter.Write(p)
}

func (r *statusWriter) Flush() {
	r.ensureHeader()
	http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *statusWriter) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// ensureHeader records the implicit 200 of a handler that writes (or
// returns) without calling WriteHeader.
func (r *statusWriter) ensureHeader() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
}
