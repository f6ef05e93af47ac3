package faultsuite

import (
	"bytes"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
)

// dropPercent is the share of calls whose first answer dropProxy drops.
const dropPercent = 30

// A dropProxy stands between the pool and the balancer of a replica row, as
// a forwarder or a second balancer would, and loses answers after the tool
// ran: for dropPercent of the calls (chosen by a hash of the call's tag, so
// a run is reproducible) it passes the first tools/call POST on, reads the
// replica's whole answer (the note committed, its record with it), and
// resets the pool's connection instead of answering. The pool's resend, with
// the same key, may reach any replica; every replica must answer it as a
// replay from the shared database, never run it again.
type dropProxy struct {
	url     string
	calls   atomic.Int64 // tools/call POSTs passed on
	dropped atomic.Int64 // of which the answer was dropped

	mu   sync.Mutex      // protects seen
	seen map[string]bool // tags whose first POST has passed
}

// dropTag finds the call's tag in a store_note body (storeNotesUnderFaults:
// the text is "note " + tag).
var dropTag = regexp.MustCompile(`"note ([^"\\]+)"`)

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	rp.FlushInterval = -1 // an event stream passes as it comes
	dp := &dropProxy{seen: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			rp.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"tools/call"`)) {
			rp.ServeHTTP(w, r)
			return
		}
		dp.calls.Add(1)
		if !dp.drop(body) {
			rp.ServeHTTP(w, r)
			return
		}
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = u.Scheme, u.Host, u.Host, ""
		out.Body = io.NopCloser(bytes.NewReader(body))
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.Copy(io.Discard, resp.Body) // the whole answer: the tool ran
		resp.Body.Close()
		dp.dropped.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // reset, as a forwarder that died would
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	dp.url = srv.URL
	return dp
}

// drop reports whether the answer to the tools/call body is to be dropped:
// the first POST of a chosen call's tag; never its resends.
func (dp *dropProxy) drop(body []byte) bool {
	m := dropTag.FindSubmatch(body)
	if m == nil {
		return false
	}
	tag := string(m[1])
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.seen[tag] {
		return false
	}
	dp.seen[tag] = true
	h := fnv.New32a()
	h.Write(m[1])
	return h.Sum32()%100 < dropPercent
}
