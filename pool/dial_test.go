package pool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

// TestOneDialPerKey races many callers on the first use of many fresh keys.
// Deciding "no entry, dial" under the lock and dialing after releasing it
// let a caller that looked just before dial A was installed start dial B
// after singleflight forgot A: two sessions for one key, the first orphaned
// (counted nowhere, its watcher holding Close forever). Every key must get
// exactly one dial, the server exactly one session per key, and Close must
// return.
func TestOneDialPerKey(t *testing.T) {
	ts := mcptest.Start(t, &mcptest.Options{NoRecord: true})
	const keys, callers = 150, 16
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	// What this proves is one dial per key, not speed: on a loaded machine
	// 150 handshakes and 2,400 calls can take minutes, so neither the dials
	// nor the calls get a deadline the machine could miss (go test's
	// -timeout still ends a hang).
	p := New(&Options{Transport: tr, IdleTimeout: -1, DialTimeout: 10 * time.Minute})

	var wg sync.WaitGroup
	errs := make(chan error, keys*callers)
	for k := range keys {
		srv := server(ts, "k")
		srv.Identity = fmt.Sprint("user-", k)
		start := make(chan struct{})
		for c := range callers {
			wg.Go(func() {
				<-start
				_, err := call(t.Context(), p, srv, "echo", fmt.Sprint(k, "-", c))
				errs <- err
			})
		}
		close(start)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("call: %v", err)
		}
	}
	st := p.Stats()
	if st.Dials != keys || st.Open != keys {
		t.Errorf("%d keys: stats %+v, want exactly one dial and one open session per key", keys, st)
	}
	if n := ts.Sessions(); n != keys {
		t.Errorf("server holds %d sessions for %d keys", n, keys)
	}
	closeWithin(t, p, 5*time.Minute)
	if n := ts.Sessions(); n != 0 {
		t.Errorf("server holds %d sessions after Close", n)
	}
}

// closeWithin fails the test when p.Close has not returned within d. The
// goroutine is left behind only when the test fails anyway.
func closeWithin(t *testing.T, p *Pool, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		p.Close()
		close(done)
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("Close has not returned after %v; stats %+v", d, p.Stats())
	}
}

// TestCallerDelayedAfterLookupJoinsTheDial makes the losing interleaving
// certain: the first caller of each key to look it up is held right after
// its lookup found no entry, until another caller's call on that key has
// completed. It must then use the session that call used, not dial a
// second one.
func TestCallerDelayedAfterLookupJoinsTheDial(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{IdleTimeout: -1})
	const keys = 8
	type hold struct {
		once             sync.Once
		entered, release chan struct{}
	}
	holds := map[key]*hold{}
	var srvs []*Server
	for i := range keys {
		srv := server(ts, "k")
		srv.Identity = fmt.Sprint("user-", i)
		srvs = append(srvs, srv)
		holds[srv.key()] = &hold{entered: make(chan struct{}), release: make(chan struct{})}
	}
	old := testHookAcquireWait
	t.Cleanup(func() { testHookAcquireWait = old })
	testHookAcquireWait = func(k key) {
		h := holds[k]
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.entered)
			<-h.release
		}
	}
	var wg sync.WaitGroup
	for i, srv := range srvs {
		h := holds[srv.key()]
		wg.Go(func() { mustCall(t, p, srv, "echo", fmt.Sprint(i, "-first")) })
		wg.Go(func() {
			<-h.entered
			// Released however the call ends: mustCall's Fatalf ends
			// this goroutine, and the first caller must not wait for ever.
			defer close(h.release)
			mustCall(t, p, srv, "echo", fmt.Sprint(i, "-second"))
		})
	}
	wg.Wait()
	if st := p.Stats(); st.Dials != keys || st.Open != keys {
		t.Errorf("stats %+v, want %d dials and %d open sessions", st, keys, keys)
	}
	if n := ts.Sessions(); n != keys {
		t.Errorf("server holds %d sessions for %d keys", n, keys)
	}
	closeWithin(t, p, 20*time.Second)
}

// TestShutdownBoundsTheWaitForCallsInFlight: a call the server never
// answers would hold Close for ever; Shutdown waits for it until its
// context ends, then aborts it, and returns.
func TestShutdownBoundsTheWaitForCallsInFlight(t *testing.T) {
	ts := newTestServer(t, false)
	p := newTestPool(t, nil)
	srv := server(ts, "a")
	mustCall(t, p, srv, "echo", "warm")
	inflight := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), p, srv, "block", "stuck")
		inflight <- err
	}()
	ts.WaitEntered("stuck")

	ctx, cancel := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- p.Shutdown(ctx) }()
	// Shutdown is waiting for the call: new calls are refused meanwhile.
	waittest.Until(t, 10*time.Second, "the pool to refuse new calls", func() bool {
		_, err := call(context.Background(), p, srv, "echo", "late")
		return errors.Is(err, ErrClosed)
	})
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a call in flight and its context live", err)
	default:
	}
	cancel()
	if err := <-shut; !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	err := <-inflight
	if pe := asPoolError(t, err); pe.Kind != KindOutcomeUnknown {
		t.Fatalf("aborted call: %v, want outcome_unknown (it was running)", err)
	}
	if st := p.Stats(); st.Open != 0 || st.Dialing != 0 {
		t.Fatalf("stats after Shutdown: %+v", st)
	}
	closeWithin(t, p, 10*time.Second) // idempotent
}

// TestFreshSessionIsNotSweptBeforeItsCaller: a session dialed for a caller
// that has not yet taken it (here held between the dial and the take, as a
// loaded machine may hold it for longer than IdleTimeout) is not idle; the
// cleaner leaves it, and the caller gets it.
func TestFreshSessionIsNotSweptBeforeItsCaller(t *testing.T) {
	sweeps := make(chan struct{}, 1000)
	oldSwept := testHookCleanerSwept
	testHookCleanerSwept = func() {
		select {
		case sweeps <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { testHookCleanerSwept = oldSwept })
	release := make(chan struct{})
	oldWait := testHookAcquireWait
	testHookAcquireWait = func(key) { <-release }
	t.Cleanup(func() { testHookAcquireWait = oldWait })

	ts := newTestServer(t, false)
	p := newTestPool(t, &Options{IdleTimeout: 5 * time.Millisecond})
	srv := server(ts, "a")
	errc := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), p, srv, "echo", "late")
		errc <- err
	}()
	waittest.Until(t, 20*time.Second, "the dial to install a session", func() bool { return p.Stats().Open == 1 })
	for range 10 { // ten sweeps, each past the idle timeout, before the caller takes it
		<-sweeps
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("the caller the session was dialed for: %v", err)
	}
	if st := p.Stats(); st.Dials != 1 || st.ClosesByReason[reasonIdle] != 0 {
		t.Fatalf("stats %+v: want one dial and no idle close before its caller took it", st)
	}
}
