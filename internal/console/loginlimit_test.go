package console

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// loginRig is a token-mode console's /login on a real loopback server,
// with the limiter's clock in the test's hands.
type loginRig struct {
	t   *testing.T
	url string
	lim *loginLimiter

	mu  sync.Mutex
	now time.Time
}

const rigToken = "tok-limit-test-0123456789"

func newLoginRig(t *testing.T, distinctLoopback bool) *loginRig {
	t.Helper()
	c := New(&Options{Token: rigToken})
	rig := &loginRig{t: t, lim: c.sessions.attempts(), now: time.Unix(1_700_000_000, 0)}
	rig.lim.now = func() time.Time { rig.mu.Lock(); defer rig.mu.Unlock(); return rig.now }
	if distinctLoopback {
		rig.lim.shared = func(a netip.Addr) bool { return !a.IsValid() }
	}
	srv := httptest.NewServer(http.HandlerFunc(c.ServeLogin))
	t.Cleanup(srv.Close)
	rig.url = srv.URL
	return rig
}

func (rig *loginRig) advance(d time.Duration) {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	rig.now = rig.now.Add(d)
}

// client returns an HTTP client whose connections come from ip.
func (rig *loginRig) client(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	rig.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// signIn posts token from hc and returns the status and Retry-After.
func (rig *loginRig) signIn(hc *http.Client, token string) (int, string) {
	rig.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, rig.url+"/login", strings.NewReader(fmt.Sprintf(`{"token":%q}`, token)))
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		rig.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Retry-After")
}

// Five wrong tokens from an address are answered 401; after that the
// address waits a delay that doubles with each failure, and an attempt
// before its time is refused with 429 unheard (even with the right token:
// the refusal must not tell a right guess from a wrong one). Another
// address is not touched, and a correct sign-in forgets the failures.
func TestLoginLimitPerAddress(t *testing.T) {
	rig := newLoginRig(t, true)
	attacker, person := rig.client("127.0.0.2"), rig.client("127.0.0.3")
	for i := range loginFreeFailures {
		if st, _ := rig.signIn(attacker, "wrong"); st != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, st)
		}
	}
	for i, want := range []string{"1", "2", "4", "8"} {
		if st, ra := rig.signIn(attacker, "wrong"); st != http.StatusTooManyRequests || ra != want {
			t.Fatalf("wrong token %d: %d Retry-After %q, want 429 %s", loginFreeFailures+1+i, st, ra, want)
		}
		if st, _ := rig.signIn(attacker, rigToken); st != http.StatusTooManyRequests {
			t.Fatalf("the right token before the delay ends: %d, want 429 (unheard)", st)
		}
		if st, _ := rig.signIn(person, rigToken); st != http.StatusNoContent {
			t.Fatalf("another address's correct sign-in: %d, want 204", st)
		}
		rig.advance(time.Duration(1<<i) * time.Second)
	}
	if st, _ := rig.signIn(attacker, rigToken); st != http.StatusNoContent {
		t.Fatalf("the right token after the delay: %d, want 204", st)
	}
	if st, _ := rig.signIn(attacker, "wrong"); st != http.StatusUnauthorized {
		t.Fatalf("a wrong token after a correct sign-in: %d, want 401 (failures forgotten)", st)
	}

	// The delay is capped, and failures are forgotten after a quiet while.
	for range 40 {
		rig.signIn(attacker, "wrong")
		rig.advance(loginMaxDelay)
	}
	if _, ra := rig.signIn(attacker, "wrong"); ra != fmt.Sprint(int(loginMaxDelay/time.Second)) {
		t.Errorf("Retry-After after 40 failures: %q, want the cap %v", ra, loginMaxDelay)
	}
	rig.advance(loginForget + time.Second)
	if st, _ := rig.signIn(attacker, "wrong"); st != http.StatusUnauthorized {
		t.Errorf("a wrong token %v after the last: %d, want 401", loginForget, st)
	}
}

// A flood of wrong tokens from one address does not stop a correct sign-in
// from another; past the global rate (failures from many addresses) every
// address is slowed from its first failure, and an address that has not
// failed is still heard.
func TestLoginLimitFloodDoesNotLockOutAnother(t *testing.T) {
	rig := newLoginRig(t, true)
	attacker := rig.client("127.0.0.2")
	for range 2 * loginGlobalRate {
		rig.signIn(attacker, "wrong")
	}
	if st, _ := rig.signIn(rig.client("127.0.0.3"), rigToken); st != http.StatusNoContent {
		t.Fatalf("a correct sign-in from another address during the flood: %d, want 204", st)
	}
	// One address cannot slow the others: what it sends in its backoff is
	// not heard, so not counted. Many addresses, one failure each, can.
	// The attacker's address was heard loginFreeFailures+1 times; the
	// clock stands still, so the bucket refills not at all.
	for i := range loginGlobalRate - loginFreeFailures - 1 {
		if st, _ := rig.signIn(rig.client(fmt.Sprintf("127.0.1.%d", i+1)), "wrong"); st != http.StatusUnauthorized {
			t.Fatalf("the first wrong token of address %d: %d, want 401", i+1, st)
		}
	}
	if st, _ := rig.signIn(rig.client("127.0.0.5"), rigToken); st != http.StatusNoContent {
		t.Fatalf("a correct sign-in past the global rate: %d, want 204", st)
	}
	typo := rig.client("127.0.0.4")
	if st, ra := rig.signIn(typo, "wrong"); st != http.StatusTooManyRequests || ra != "1" {
		t.Fatalf("a first wrong token while the flood is past the global rate: %d %q, want 429 1", st, ra)
	}
	rig.advance(time.Second)
	if st, _ := rig.signIn(typo, rigToken); st != http.StatusNoContent {
		t.Fatalf("its correct sign-in a second later: %d, want 204", st)
	}
}

// Loopback is every local client: there the token is compared first, so a
// local flood of wrong tokens (answered 429 past five) never keeps the
// person's correct sign-in out.
func TestLoginLimitLoopbackNeverLocksOut(t *testing.T) {
	rig := newLoginRig(t, false)
	hc := rig.client("127.0.0.1")
	for i := range 3 * loginFreeFailures {
		want := http.StatusUnauthorized
		if i >= loginFreeFailures {
			want = http.StatusTooManyRequests
		}
		if st, _ := rig.signIn(hc, "wrong"); st != want {
			t.Fatalf("wrong token %d on loopback: %d, want %d", i+1, st, want)
		}
	}
	if st, _ := rig.signIn(hc, rigToken); st != http.StatusNoContent {
		t.Fatalf("the correct token on loopback after a flood: %d, want 204", st)
	}
}

// The limiter keeps at most loginMaxAddrs addresses, and IPv6 addresses
// count by their /64.
func TestLoginLimitStateIsBounded(t *testing.T) {
	l := newLoginLimiter()
	for i := range 3 * loginMaxAddrs {
		l.failed(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	if n := len(l.byAddr); n != loginMaxAddrs || l.lru.Len() != loginMaxAddrs {
		t.Fatalf("%d addresses kept (%d in the LRU), want %d", n, l.lru.Len(), loginMaxAddrs)
	}
	a, b := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2:ffff::9")
	for range loginFreeFailures + 1 {
		l.failed(a)
	}
	if _, ok := l.admit(b); ok {
		t.Error("another address of the same /64 was heard during the backoff")
	}
}
