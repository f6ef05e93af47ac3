package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-run/switchboard/runtime"
)

// pipeModel serves a handler in-process, its body through an io.Pipe, so
// that a test in a synctest bubble can let fake time pass between the
// chunks of a stream: loopback sockets are not durably blocking, and the
// deadline under test is about time. The rest of the path (go-openai,
// the model transport, the stream reader) is the real one.
type pipeModel func(w io.Writer, ctx context.Context)

func (m pipeModel) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	pr, pw := io.Pipe()
	ctx := req.Context()
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		m(pw, ctx)
		pw.Close()
	})
	go func() {
		select {
		case <-ctx.Done():
			pw.CloseWithError(context.Cause(ctx)) // as a connection closed under the reader
		case <-done:
		}
	}()
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    readCloseWaiter{pr, &wg},
		Request: req, ContentLength: -1,
	}, nil
}

type readCloseWaiter struct {
	*io.PipeReader
	wg *sync.WaitGroup
}

func (r readCloseWaiter) Close() error {
	err := r.PipeReader.Close()
	r.wg.Wait()
	return err
}

// chunksAfter writes a content chunk after each gap, then the finish.
func chunksAfter(gaps ...time.Duration) pipeModel {
	return func(w io.Writer, ctx context.Context) {
		for i, gap := range gaps {
			select {
			case <-time.After(gap):
			case <-ctx.Done():
				return
			}
			if _, err := fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"w%d "},"finish_reason":null}]}`+"\n\n", i); err != nil {
				return
			}
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}
}

func every(n int, gap time.Duration) []time.Duration {
	gaps := make([]time.Duration, n)
	for i := range gaps {
		gaps[i] = gap
	}
	return gaps
}

// TestStreamIdleDeadline: for a stream, ModelTimeout is the wait for the
// first byte and then between one byte and the next, not the whole
// answer's: an answer that takes ten times the timeout, each chunk within
// it, is never cut; one whose chunks stop for longer than it, before the
// first or after some, is, with an error that says which.
func TestStreamIdleDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		gaps []time.Duration
		want string // in the error; "" for none
	}{
		{"20 chunks 0.5 s apart", every(20, 500*time.Millisecond), ""},
		{"a stall after two chunks", []time.Duration{500 * time.Millisecond, 500 * time.Millisecond, 1500 * time.Millisecond}, "the answer stopped coming: nothing for 1s after 2 chunks"},
		{"a first chunk too late", []time.Duration{1500 * time.Millisecond}, "no answer within 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newAgent(t, oracle("http://model.invalid/v1"), &runtime.Options{
					ModelTimeout: time.Second, MaxRetries: -1,
					HTTPClient: &http.Client{Transport: chunksAfter(tc.gaps...)},
				})
				start := time.Now()
				res, err := a.Run(t.Context(), "a long answer", chain)
				if tc.want != "" {
					if !errors.Is(err, runtime.ErrModelTimeout) || !strings.Contains(err.Error(), tc.want) {
						t.Errorf("err %v, want ErrModelTimeout saying %q", err, tc.want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				answer := strings.TrimSpace(res.Answer)
				if took := time.Since(start); took != 10*time.Second || !strings.HasPrefix(answer, "w0 w1") || !strings.HasSuffix(answer, "w19") {
					t.Errorf("answer %q after %v of fake time, want all 20 words after 10 s", answer, took)
				}
			})
		})
	}
}

// TestStillWorkingEveryTenSeconds: a model that takes 25 s to send its
// first byte is said, at 10 s and at 20 s, to be still working, naming
// itself, its endpoint, the step and how long it has been at it.
func TestStillWorkingEveryTenSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAgent(t, oracle("http://model.invalid/v1"), &runtime.Options{
			ModelTimeout: time.Minute, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: chunksAfter(25 * time.Second)},
		})
		var n notes
		if _, err := a.Run(n.ctx(t.Context()), "a slow answer", chain); err != nil {
			t.Fatal(err)
		}
		var got []string
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, s := range n.s {
			if strings.Contains(s, "still working") {
				got = append(got, s)
			}
		}
		want := []string{
			"model scripted at http://model.invalid/v1 is still working on step 1 (10 s)",
			"model scripted at http://model.invalid/v1 is still working on step 1 (20 s)",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("notes %q\nwant %q", got, want)
		}
	})
}
