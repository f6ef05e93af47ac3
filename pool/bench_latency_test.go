package pool_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcptest"
)

// proxyDelay is the one-way latency the proxy adds: 10 ms round trip, a
// server in the same region.
const proxyDelay = 5 * time.Millisecond

// BenchmarkDelayedProxy is BenchmarkCallTool's pooled and connect-per-call
// behind a loopback reverse proxy that holds every request 5 ms before
// forwarding it and every answer 5 ms before passing it back, as a network
// with 10 ms of round trip would. A pooled call pays one round trip;
// connect-per-call pays one per HTTP request (four). ns/op at c16 is the
// inverse of the throughput of 16 callers.
func BenchmarkDelayedProxy(b *testing.B) {
	ts := mcptest.Start(b, &mcptest.Options{NoRecord: true})
	proxyURL := startDelayingProxy(b, ts.URL(), proxyDelay)
	hc := benchClient(b, nil)
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("pooled/c%d", conc), func(b *testing.B) {
			p := newBenchPool(b, hc, nil)
			srv := benchServer(proxyURL)
			if _, err := p.CallTool(context.Background(), srv, echo()); err != nil {
				b.Fatal(err)
			}
			parallel(b, conc, func() error {
				_, err := p.CallTool(context.Background(), srv, echo())
				return err
			})
		})
		b.Run(fmt.Sprintf("connect-per-call/c%d", conc), func(b *testing.B) {
			parallel(b, conc, func() error { return connectPerCall(context.Background(), proxyURL, hc, true) })
		})
	}
}

// startDelayingProxy serves a reverse proxy to target on a loopback port
// and returns its URL (same path as target). Answers stream through as they
// come (FlushInterval -1), so an SSE answer is not held back beyond the
// delay.
func startDelayingProxy(b *testing.B, target string, d time.Duration) string {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	upstream := &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 1024}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
			r.Out.Host = r.In.Host
		},
		Transport:     delayingTransport{upstream, d},
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: rp}
	go srv.Serve(ln)
	b.Cleanup(func() {
		srv.Close()
		upstream.CloseIdleConnections()
	})
	return "http://" + ln.Addr().String() + u.Path
}

// delayingTransport holds a request d before sending it upstream and the
// answer d before handing it back: latency in each direction.
type delayingTransport struct {
	base http.RoundTripper
	d    time.Duration
}

func (t delayingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := wait(r.Context(), t.d); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if err := wait(r.Context(), t.d); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// wait is the simulated wire: d, or less if ctx ends first.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
