package askcmd

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// When ask is interrupted, its call to the agent returns at once and go-sdk
// sends notifications/cancelled from a goroutine of its own. A process that
// then closes its session and exits loses that notification (closing the
// session does not cancel the agent's handler either: go-sdk's server lets
// in-flight requests finish), and the agent would go on delegating for a
// user who has gone. So ask watches its own HTTP traffic and, after an
// interrupted call, waits until a notifications/cancelled POST has been
// answered before it closes the pool, at most cancelGrace (a studio that
// has gone away cannot be told anything).

// cancelGrace bounds the wait for the cancellation to be delivered.
const cancelGrace = 5 * time.Second

// cancelWatch is an http.RoundTripper that notices when a
// notifications/cancelled message has been delivered.
type cancelWatch struct {
	base http.RoundTripper

	once      sync.Once
	delivered chan struct{} // closed when a cancellation POST was answered
}

func newCancelWatch(base http.RoundTripper) *cancelWatch {
	return &cancelWatch{base: base, delivered: make(chan struct{})}
}

var cancelledMethod = []byte(`"notifications/cancelled"`)

func (c *cancelWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	isCancel := false
	if req.Method == http.MethodPost && req.Body != nil {
		// Inspect a copy of the body: a RoundTripper must not consume the
		// request's own.
		if req.GetBody != nil {
			if b, err := req.GetBody(); err == nil {
				data, _ := io.ReadAll(b)
				b.Close()
				isCancel = bytes.Contains(data, cancelledMethod)
			}
		} else {
			data, err := io.ReadAll(req.Body)
			req.Body.Close()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = io.NopCloser(bytes.NewReader(data))
			isCancel = bytes.Contains(data, cancelledMethod)
		}
	}
	resp, err := c.base.RoundTrip(req)
	if isCancel && err == nil {
		c.once.Do(func() { close(c.delivered) })
	}
	return resp, err
}

// wait returns once a cancellation was delivered, or after cancelGrace.
func (c *cancelWatch) wait() {
	t := time.NewTimer(cancelGrace)
	defer t.Stop()
	select {
	case <-c.delivered:
	case <-t.C:
	}
}
