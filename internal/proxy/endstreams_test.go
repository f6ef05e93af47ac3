package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestEndStreamsLetsShutdownFinish: a client's standalone GET stream,
// carried by continuity, stays open for as long as the session lives, so
// http.Server.Shutdown of the proxy waits for it in vain; after
// EndStreams the stream's handler returns and Shutdown finishes (the
// studio's Close does exactly this).
func TestEndStreamsLetsShutdownFinish(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "0"}, nil)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	streamOpen := make(chan struct{})
	var once sync.Once
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			once.Do(func() { close(streamOpen) })
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)
	u, _ := url.Parse(upstream.URL)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cont := NewContinuity(tr, testSessionTTL, nil)
	front := httptest.NewServer(New(u, &Options{Transport: cont}))
	t.Cleanup(front.Close)

	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: front.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	select {
	case <-streamOpen:
	case <-t.Context().Done():
		t.Fatal("the client never opened its standalone stream")
	}

	// The stream is held: a Shutdown that does not wait long gives up.
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := front.Config.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with the stream held: %v, want it to wait (DeadlineExceeded)", err)
	}

	cont.EndStreams()
	cont.EndStreams() // idempotent
	// A ceiling, not a measurement: it only has to end at all.
	long, cancel2 := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel2()
	if err := front.Config.Shutdown(long); err != nil {
		t.Fatalf("Shutdown after EndStreams: %v, want nil", err)
	}
}
