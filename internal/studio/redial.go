package studio

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
)

// redialTransport carries the proxy's requests to the agents. When the
// connection to an agent is refused, nothing of the request reached it: the
// agent died (a crash, a SIGKILL) and the supervisor has not noticed yet, or
// is starting it again. Then the transport waits for the agent's new process
// (at most wait) and sends the request there, once. The new process does not
// know the caller's session and answers 404, from which the caller's pool
// recovers. Answering 502 instead would leave the caller unable to tell
// whether anything ran.
type redialTransport struct {
	base http.RoundTripper
	wait time.Duration
}

func (t *redialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil || !refused(err) || t.wait <= 0 {
		return resp, err
	}
	proc, ok := req.Context().Value(procKey{}).(*supervisor.Agent)
	if !ok || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return nil, err
	}
	st := proc.AwaitRunning(req.Context(), t.wait, req.URL.Host)
	if st.State != studioapi.StateRunning || st.Upstream == nil || st.Upstream.Host == req.URL.Host {
		return nil, err
	}
	again := req.Clone(req.Context())
	again.URL.Host = st.Upstream.Host
	if req.GetBody != nil {
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, err
		}
		again.Body = body
	}
	noteReplayed(req.Context())
	return t.base.RoundTrip(again)
}

// refused reports whether err means the connection could not be made, so
// nothing of the request was sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
