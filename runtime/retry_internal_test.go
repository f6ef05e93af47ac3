package runtime

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"
)

// timeoutErr is a net.Error that timed out, as a dial or TLS handshake
// timeout is.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestClassifyModel is classifyModel's table, row by row.
func TestClassifyModel(t *testing.T) {
	api := func(status int, code any) error {
		return fmt.Errorf("wrapped: %w", &openai.APIError{HTTPStatusCode: status, Code: code, Message: "m"})
	}
	urlErr := func(err error) error { return &url.Error{Op: "Post", URL: "http://x/v1/chat/completions", Err: err} }
	opErr := func(errno syscall.Errno) error {
		return urlErr(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", errno)})
	}
	hdr := func(kv ...string) attempt {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return attempt{header: h}
	}
	for _, tc := range []struct {
		name  string
		err   error
		at    attempt
		retry bool
		fix   bool
	}{
		{"no choices", errNoChoices, attempt{status: 200}, true, false},
		{"model timeout", fmt.Errorf("%w: no answer", ErrModelTimeout), attempt{}, true, false},
		{"429", api(429, "rate_limit_exceeded"), attempt{}, true, false},
		{"429 insufficient_quota", api(429, "insufficient_quota"), attempt{}, false, true},
		{"429 asking an hour", api(429, nil), hdr("Retry-After", "3600"), false, true},
		{"408", api(408, nil), attempt{}, true, false},
		{"409", api(409, nil), attempt{}, true, false},
		{"500", api(500, nil), attempt{}, true, false},
		{"529 (overloaded)", &openai.RequestError{HTTPStatusCode: 529}, attempt{}, true, false},
		{"500 x-should-retry false", api(500, nil), hdr("X-Should-Retry", "false"), false, false},
		{"400 x-should-retry true", api(400, nil), hdr("X-Should-Retry", "true"), true, false},
		{"400", api(400, "context_length_exceeded"), attempt{}, false, false},
		{"401", api(401, "invalid_api_key"), attempt{}, false, false},
		{"403", api(403, nil), attempt{}, false, false},
		{"404", &openai.RequestError{HTTPStatusCode: 404, Body: []byte(`{"error":"model not found"}`)}, attempt{}, false, false},
		{"422", api(422, nil), attempt{}, false, false},
		{"refused", urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), attempt{}, true, false},
		{"reset", opErr(syscall.ECONNRESET), attempt{}, true, false},
		{"broken pipe", opErr(syscall.EPIPE), attempt{}, true, false},
		{"EOF", urlErr(io.EOF), attempt{}, true, false},
		{"unexpected EOF", urlErr(io.ErrUnexpectedEOF), attempt{}, true, false},
		{"dial timeout", urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}), attempt{}, true, false},
		{"unknown host", urlErr(&net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}), attempt{}, false, false},
		{"something else", errors.New("unsupported protocol scheme"), attempt{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := classifyModel(tc.err, tc.at, time.Now())
			if v.retry != tc.retry || (v.fix != "") != tc.fix {
				t.Errorf("classifyModel(%v) = retry %v, fix %q; want retry %v, fix %v", tc.err, v.retry, v.fix, tc.retry, tc.fix)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header, value string
		want          time.Duration
		ok            bool
	}{
		{"Retry-After", "2", 2 * time.Second, true},
		{"Retry-After", "0.25", 250 * time.Millisecond, true},
		{"Retry-After", now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{"Retry-After", now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"Retry-After", "soon", 0, false},
		{"Retry-After", "-3", 0, false},
		{"Retry-After-Ms", "1500", 1500 * time.Millisecond, true},
		{"Retry-After", "1e300", math.MaxInt64, true},
		{"Retry-After-Ms", "Inf", math.MaxInt64, true},
		{"Retry-After", "NaN", 0, false},
		{"X-Other", "2", 0, false},
	} {
		h := http.Header{}
		h.Set(tc.header, tc.value)
		if got, ok := retryAfter(h, now); got != tc.want || ok != tc.ok {
			t.Errorf("%s: %s = %v, %v; want %v, %v", tc.header, tc.value, got, ok, tc.want, tc.ok)
		}
	}
	// retry-after-ms is the finer of the two and wins.
	h := http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"1500"}}
	if got, _ := retryAfter(h, now); got != 1500*time.Millisecond {
		t.Errorf("both headers: %v, want retry-after-ms's 1.5s", got)
	}
}

// TestBackoffBounds: every draw is within [0, min(500ms·2ⁿ, 8s)].
func TestBackoffBounds(t *testing.T) {
	for n := range 12 {
		bound := min(retryBase<<n, retryMaxBackoff)
		for range 200 {
			if d := backoff(n); d < 0 || d > bound {
				t.Fatalf("backoff(%d) = %v, outside [0, %v]", n, d, bound)
			}
		}
	}
}
