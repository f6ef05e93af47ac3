package mcphttp_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// partialHead opens a connection from local (nil: any) that sends part of a
// request head and nothing more: a connection that trickles its headers.
func partialHead(t *testing.T, local net.Addr, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: local}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nX-Trickle: a", addr)
	return c
}

// closedByServer reports whether the server closed c (it reads EOF or a
// reset, with nothing before it).
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	return n == 0 && err != nil && !isTimeout(err)
}

// tokenCall makes one MCP initialize with the token on a connection of its
// own, and returns its status.
func tokenCall(t *testing.T, addr, token string) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("a new connection at the cap: %v", err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// At the cap, connections that trickle their headers (or sent only
// requests refused for their credential) give way to a new one; the
// token holder's new connection is served, and the oldest trickler is the
// one closed. Issue 27: 1,100 such connections kept every new client out.
func TestConnectionCapEvictsTheUnproved(t *testing.T) {
	for _, token := range []string{"", "s3cret"} {
		t.Run(fmt.Sprintf("token=%v", token != ""), func(t *testing.T) {
			b := mcphttp.NewBudget(&mcphttp.BudgetOptions{MaxConns: 4})
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
			})
			ts := budgetServer(t, b, mcphttp.New(up, &mcphttp.Options{Budget: b, Token: token}))
			addr := ts.Listener.Addr().String()

			var tricklers []net.Conn
			for range 4 {
				tricklers = append(tricklers, partialHead(t, nil, addr))
				// One at a time, so that their order is known.
				waitFor(t, func() bool { return b.Stats().Conns == int64(len(tricklers)) })
			}
			if st := tokenCall(t, addr, token); st != http.StatusOK {
				t.Fatalf("the token holder's new connection at the cap: %d, want 200", st)
			}
			if !closedByServer(t, tricklers[0]) {
				t.Error("the oldest trickler was not the one closed")
			}
			if st := b.Stats(); st.EvictedConns != 1 || st.RefusedConns != 0 {
				t.Errorf("stats %+v, want 1 evicted and 0 refused", st)
			}
			for i := range 8 {
				// A flood that keeps coming evicts itself: the cap full
				// of tricklers again (the served connection gone), the
				// next new client is served.
				waitFor(t, func() bool { return b.Stats().Conns == 3 })
				tricklers = append(tricklers, partialHead(t, nil, addr))
				waitFor(t, func() bool { return b.Stats().Conns == 4 })
				if st := tokenCall(t, addr, token); st != http.StatusOK {
					t.Fatalf("new connection %d during the flood: %d, want 200", i, st)
				}
				if st := b.Stats(); st.EvictedConns != int64(2+i) || st.RefusedConns != 0 {
					t.Fatalf("round %d: %+v, want %d evicted, none refused", i, st, 2+i)
				}
			}
			if token == "" {
				return
			}
			// Connections whose requests were refused for their credential
			// have not proved themselves either.
			for range 4 {
				if st := tokenCall(t, addr, "wrong"); st != http.StatusUnauthorized {
					t.Fatalf("a wrong token: %d, want 401", st)
				}
			}
			if st := tokenCall(t, addr, token); st != http.StatusOK {
				t.Fatalf("after requests with a wrong token: %d", st)
			}
		})
	}
}

// A connection that proved itself gives way only after every unproved one,
// even when it is older; one in a request never does, and when every
// connection is in a request the new one is refused with 503.
func TestConnectionCapKeepsTheProvedAndTheBusy(t *testing.T) {
	b := mcphttp.NewBudget(&mcphttp.BudgetOptions{MaxConns: 3})
	release := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	ts := budgetServer(t, b, mcphttp.New(up, &mcphttp.Options{Budget: b}))
	addr := ts.Listener.Addr().String()

	// A proved keep-alive connection, the oldest.
	proved := &http.Client{Transport: &http.Transport{}}
	defer proved.CloseIdleConnections()
	call := func(hc *http.Client, hold bool) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if hold {
			req.Header.Set("X-Hold", "1")
		}
		res, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	if st, err := call(proved, false); err != nil || st != http.StatusOK {
		t.Fatalf("first call: %d %v", st, err)
	}
	waitFor(t, func() bool { st := b.Stats(); return st.Conns == 1 && st.BusyConns == 0 })
	a := partialHead(t, nil, addr)
	waitFor(t, func() bool { return b.Stats().Conns == 2 })
	c := partialHead(t, nil, addr)
	waitFor(t, func() bool { return b.Stats().Conns == 3 })
	d := partialHead(t, nil, addr) // evicts a, not the older proved one
	if !closedByServer(t, a) {
		t.Fatal("the oldest unproved connection was not closed")
	}
	if st, err := call(proved, false); err != nil || st != http.StatusOK {
		t.Fatalf("the proved keep-alive connection after an eviction: %d %v", st, err)
	}
	if n := b.Stats().EvictedConns; n != 1 {
		t.Fatalf("%d evicted, want 1 (the proved connection kept)", n)
	}

	// Every connection in a request: nothing gives way.
	c.Close()
	d.Close()
	proved.CloseIdleConnections()
	waitFor(t, func() bool { return b.Stats().Conns == 0 })
	done := make(chan error, 3)
	for range 3 {
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		go func() {
			_, err := call(hc, true)
			done <- err
		}()
	}
	waitFor(t, func() bool { return b.Stats().BusyConns == 3 })
	late := rawRequest(t, addr, 2, "{}")
	resp, _ := readResponse(t, late)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("every connection in a request: %s, want 503", resp.Status)
	}
	close(release)
	for range 3 {
		if err := <-done; err != nil {
			t.Errorf("a call in a request at the cap: %v (it was evicted)", err)
		}
	}
}

// One remote address holds at most its share: past it, its new connection
// takes its own oldest one's place, and another address's connections are
// untouched.
func TestConnectionsPerAddress(t *testing.T) {
	b := mcphttp.NewBudget(&mcphttp.BudgetOptions{MaxConns: 8, MaxConnsPerAddress: 2})
	mcphttp.TreatLoopbackAsDistinct(b)
	ts := budgetServer(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	addr := ts.Listener.Addr().String()
	from := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip)} }

	other := partialHead(t, from("127.0.0.3"), addr)
	waitFor(t, func() bool { return b.Stats().Conns == 1 })
	var mine []net.Conn
	for range 5 {
		mine = append(mine, partialHead(t, from("127.0.0.2"), addr))
	}
	waitFor(t, func() bool { return b.Stats().EvictedConns == 3 })
	for i, c := range mine[:3] {
		if !closedByServer(t, c) {
			t.Errorf("connection %d of the address over its share is open", i)
		}
	}
	// 3 evicted, all of them the address's own: the other one is open.
	if st := b.Stats(); st.Conns != 3 || st.EvictedConns != 3 {
		t.Errorf("%+v, want 3 open (2 of the address, 1 of the other), 3 evicted", st)
	}
	other.Close()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
