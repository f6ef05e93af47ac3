package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// The restart loop (Run, control.go) driven without processes: each run of
// the child is a fake that listens at once and ends when the test says so
// or when a request or shutdown cancels it, and time is testing/synctest's,
// so a backoff of 8 s is waited out exactly and instantly. The real child,
// its signals and its ready line are the studio's end-to-end tests.

// Test settings: small round numbers, so that the expected delays read
// plainly (1 s doubling to 8 s).
const (
	testMinBackoff   = time.Second
	testMaxBackoff   = 8 * time.Second
	testHealthyAfter = 30 * time.Second
)

func TestRestartPolicy(t *testing.T) {
	p := restartPolicy{minBackoff: testMinBackoff, maxBackoff: testMaxBackoff, healthyAfter: testHealthyAfter, giveUpAfter: 8}
	for _, c := range []struct {
		name      string
		failures  int
		ranFor    time.Duration
		wantN     int
		wantDelay time.Duration
		wantGone  bool
	}{
		{"first failure, at once", 0, 0, 1, time.Second, false},
		{"second", 1, 0, 2, 2 * time.Second, false},
		{"third", 2, time.Second, 3, 4 * time.Second, false},
		{"capped", 4, 0, 5, 8 * time.Second, false},
		{"capped, last before giving up", 6, 0, 7, 8 * time.Second, false},
		{"given up", 7, 0, 8, 8 * time.Second, true},
		{"just short of healthy counts", 6, testHealthyAfter - time.Nanosecond, 7, 8 * time.Second, false},
		{"healthy run starts the count again", 7, testHealthyAfter, 1, time.Second, false},
		{"long healthy run", 3, time.Hour, 1, time.Second, false},
	} {
		n, delay, gone := p.afterExit(c.failures, c.ranFor)
		if n != c.wantN || delay != c.wantDelay || gone != c.wantGone {
			t.Errorf("%s: afterExit(%d, %v) = %d, %v, %v; want %d, %v, %v", c.name, c.failures, c.ranFor, n, delay, gone, c.wantN, c.wantDelay, c.wantGone)
		}
	}
	if got := (&Config{MinBackoff: 1, MaxBackoff: 2, HealthyAfter: 3}).policy(); got.giveUpAfter != studioapi.GiveUpAfter || got.minBackoff != 1 || got.maxBackoff != 2 || got.healthyAfter != 3 {
		t.Errorf("Config.policy() = %+v", got)
	}
}

// loop is one agent's Run with fake runs.
type loop struct {
	t      *testing.T
	a      *Agent
	exits  chan error // sent to: the current run ends on its own with this error
	runs   atomic.Int32
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returns
}

// startLoop starts Run in the current synctest bubble. onCancel is what a
// run returns when a request or shutdown ends it: nil for a child that
// stopped as asked, an error for one that exited on its own at that
// moment (or did not take SIGTERM quietly).
func startLoop(t *testing.T, onCancel error) *loop {
	t.Helper()
	cfg := &Config{
		MinBackoff: testMinBackoff, MaxBackoff: testMaxBackoff, HealthyAfter: testHealthyAfter,
		Logger: slog.New(slog.DiscardHandler),
	}
	l := &loop{t: t, exits: make(chan error), done: make(chan struct{})}
	l.a = New(&agentdef.Definition{Name: "abacus"}, "/agents/abacus", "/data/abacus", cfg)
	l.a.run = func(ctx context.Context) (time.Duration, error) {
		n := l.runs.Add(1)
		l.a.markStarting()
		l.a.markRunning(&url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", 40000+n), Path: "/mcp"})
		began := time.Now()
		select {
		case err := <-l.exits:
			return time.Since(began), err
		case <-ctx.Done():
			l.a.unroute()
			return time.Since(began), onCancel
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() {
		defer close(l.done)
		l.a.Run(ctx)
	}()
	// A test that fails part way still ends Run inside the bubble, so the
	// failure is reported as itself rather than as goroutines left behind.
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	synctest.Wait()
	return l
}

// exit ends the current run on its own and waits for the loop to settle.
func (l *loop) exit(msg string) {
	l.t.Helper()
	l.exits <- errors.New(msg)
	synctest.Wait()
}

// close shuts the loop down as the studio does and checks the end state.
func (l *loop) close() {
	l.t.Helper()
	l.cancel()
	<-l.done
	if st := l.a.Status(); st.State != studioapi.StateStopped || st.Upstream != nil || st.PID != 0 {
		l.t.Errorf("after shutdown: %+v, want stopped with no upstream", st)
	}
	select {
	case <-l.a.FirstDone():
	default:
		l.t.Error("FirstDone not closed after shutdown")
	}
}

// want checks the agent's state, its run count and its counters.
func (l *loop) want(state studioapi.State, runs, restarts, failures int) Status {
	l.t.Helper()
	st := l.a.Status()
	if st.State != state || int(l.runs.Load()) != runs || st.Restarts != restarts || st.Failures != failures {
		l.t.Fatalf("state %s, %d runs, %d restarts, %d failures; want %s, %d, %d, %d (status %+v)",
			st.State, l.runs.Load(), st.Restarts, st.Failures, state, runs, restarts, failures, st)
	}
	if routable := st.Upstream != nil; routable != (state == studioapi.StateRunning) {
		l.t.Fatalf("state %s with upstream %v", st.State, st.Upstream)
	}
	return st
}

// newest is the newest control event, which must be ev.
func (l *loop) newest(ev, reason string) {
	l.t.Helper()
	h := l.a.History()
	if len(h) == 0 || string(h[0].Event) != ev || !strings.Contains(h[0].Reason, reason) {
		l.t.Fatalf("newest event: %+v, want %s with reason containing %q", h, ev, reason)
	}
}

// TestRestartBackoffGrowsCapsAndGivesUp: runs that fail at once are
// restarted after 1, 2, 4 and then 8 s, each retry time reported as it
// is set and no run starting a nanosecond before it; the eighth failure
// in a row gives the agent up, after which nothing starts it but a start
// asked for, which begins a fresh count.
func TestRestartBackoffGrowsCapsAndGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := startLoop(t, nil)
		select {
		case <-l.a.FirstDone():
		default:
			t.Fatal("FirstDone not closed once the first run listens")
		}
		l.want(studioapi.StateRunning, 1, 0, 0)
		for i, d := range []time.Duration{1, 2, 4, 8, 8, 8, 8} {
			d *= time.Second
			l.exit("exit status 1")
			st := l.want(studioapi.StateRestarting, i+1, i+1, i+1)
			if !st.NextStart.Equal(time.Now().Add(d)) || st.LastErr != "exit status 1" || !st.LastErrAt.Equal(time.Now()) {
				t.Fatalf("failure %d: next start in %v, last error %q at %v; want in %v, \"exit status 1\" now", i+1, time.Until(st.NextStart), st.LastErr, st.LastErrAt, d)
			}
			l.newest(studioapi.EventExited, "exit status 1")
			time.Sleep(d - time.Nanosecond)
			synctest.Wait()
			l.want(studioapi.StateRestarting, i+1, i+1, i+1)
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			st = l.want(studioapi.StateRunning, i+2, i+1, i+1)
			if st.LastErr != "" || st.LastExit != "exit status 1" || !st.NextStart.IsZero() {
				t.Fatalf("running again: last error %q, last exit %q, next start %v; want none, the exit kept, none", st.LastErr, st.LastExit, st.NextStart)
			}
		}

		l.exit("exit status 1")
		st := l.want(studioapi.StateGivenUp, 8, 7, studioapi.GiveUpAfter)
		if !st.NextStart.IsZero() || st.LastErr != "exit status 1" {
			t.Fatalf("given up: next start %v, last error %q", st.NextStart, st.LastErr)
		}
		l.newest(studioapi.EventExited, "(given up)")
		time.Sleep(time.Hour)
		synctest.Wait()
		l.want(studioapi.StateGivenUp, 8, 7, studioapi.GiveUpAfter)
		// Given up is parked as stopped: only a start acts on it.
		if err := l.a.Restart("try"); !errors.Is(err, ErrNoProcess) {
			t.Errorf("Restart of a given-up agent: %v, want ErrNoProcess", err)
		}
		if err := l.a.Stop("try"); !errors.Is(err, ErrNoProcess) {
			t.Errorf("Stop of a given-up agent: %v, want ErrNoProcess", err)
		}
		if err := l.a.Start("fixed it"); err != nil {
			t.Fatalf("Start of a given-up agent: %v", err)
		}
		synctest.Wait()
		l.want(studioapi.StateRunning, 9, 7, studioapi.GiveUpAfter)
		l.newest(studioapi.EventStarted, "fixed it")

		// A fresh count: the next failure waits the shortest backoff.
		l.exit("exit status 2")
		st = l.want(studioapi.StateRestarting, 9, 8, 1)
		if !st.NextStart.Equal(time.Now().Add(testMinBackoff)) {
			t.Fatalf("first failure after a start: next start in %v, want %v", time.Until(st.NextStart), testMinBackoff)
		}
		l.close()
	})
}

// TestHealthyRunResetsBackoff: a run that lasts HealthyAfter ends the
// streak of failures; one a nanosecond shorter is another failure.
func TestHealthyRunResetsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := startLoop(t, nil)
		for i, d := range []time.Duration{1, 2, 4} {
			l.exit("crash")
			time.Sleep(d * time.Second)
			synctest.Wait()
			l.want(studioapi.StateRunning, i+2, i+1, i+1)
		}
		time.Sleep(testHealthyAfter - time.Nanosecond)
		l.exit("crash")
		st := l.want(studioapi.StateRestarting, 4, 4, 4)
		if !st.NextStart.Equal(time.Now().Add(8 * time.Second)) {
			t.Fatalf("run short of healthy: next start in %v, want 8s", time.Until(st.NextStart))
		}
		time.Sleep(8 * time.Second)
		synctest.Wait()
		time.Sleep(testHealthyAfter)
		l.exit("crash")
		st = l.want(studioapi.StateRestarting, 5, 5, 1)
		if !st.NextStart.Equal(time.Now().Add(testMinBackoff)) {
			t.Fatalf("after a healthy run: next start in %v, want %v", time.Until(st.NextStart), testMinBackoff)
		}
		l.close()
	})
}

// TestRequestsWhileRunning: the console's restart, stop and start of a
// running agent. A restart starts a new run at once and is no failure; a
// stop keeps the agent stopped, however long, until a start; a request
// that does not apply is refused with its sentinel error.
func TestRequestsWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := startLoop(t, nil)
		t0 := time.Now()
		if err := l.a.Start("again"); !errors.Is(err, ErrNotStopped) {
			t.Errorf("Start of a running agent: %v, want ErrNotStopped", err)
		}
		if err := l.a.Restart("new key"); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		synctest.Wait()
		l.want(studioapi.StateRunning, 2, 1, 0)
		l.newest(studioapi.EventRestarted, "new key")

		if err := l.a.Stop("maintenance"); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		synctest.Wait()
		l.want(studioapi.StateStopped, 2, 1, 0)
		l.newest(studioapi.EventStopped, "maintenance")
		if !time.Now().Equal(t0) {
			t.Errorf("the restart and stop took %v of the fake clock, want none", time.Since(t0))
		}
		for name, f := range map[string]func(string) error{"Stop": l.a.Stop, "Restart": l.a.Restart} {
			if err := f("again"); !errors.Is(err, ErrNoProcess) {
				t.Errorf("%s of a stopped agent: %v, want ErrNoProcess", name, err)
			}
		}
		// The proxy does not hold a request for a stopped agent.
		if st := l.a.AwaitRunning(context.Background(), time.Minute, ""); st.State != studioapi.StateStopped || !time.Now().Equal(t0) {
			t.Errorf("AwaitRunning on a stopped agent: %s after %v, want stopped at once", st.State, time.Since(t0))
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		l.want(studioapi.StateStopped, 2, 1, 0)

		if err := l.a.Start("back"); err != nil {
			t.Fatalf("Start: %v", err)
		}
		synctest.Wait()
		l.want(studioapi.StateRunning, 3, 1, 0) // a start is not a restart
		l.newest(studioapi.EventStarted, "back")
		if err := l.a.Start("twice"); !errors.Is(err, ErrNotStopped) {
			t.Errorf("second Start: %v, want ErrNotStopped", err)
		}
		l.close()
	})
}

// TestRequestsDuringBackoff: a restart asked for while the agent waits out
// its backoff starts it now instead of at its retry time (the exit already
// counted that restart, and the streak of failures ends); a stop cancels
// the pending start and takes back the restart the exit counted.
func TestRequestsDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := startLoop(t, nil)
		l.exit("crash")
		l.want(studioapi.StateRestarting, 1, 1, 1)
		t0 := time.Now()
		if err := l.a.Restart("now"); err != nil {
			t.Fatalf("Restart in backoff: %v", err)
		}
		synctest.Wait()
		l.want(studioapi.StateRunning, 2, 1, 1)
		l.newest(studioapi.EventRestarted, "now")
		if !time.Now().Equal(t0) {
			t.Errorf("the restart waited %v, want none", time.Since(t0))
		}

		l.exit("crash")
		st := l.want(studioapi.StateRestarting, 2, 2, 1) // the request ended the streak
		if !st.NextStart.Equal(time.Now().Add(testMinBackoff)) {
			t.Fatalf("next start in %v, want %v", time.Until(st.NextStart), testMinBackoff)
		}
		if err := l.a.Stop("hold"); err != nil {
			t.Fatalf("Stop in backoff: %v", err)
		}
		synctest.Wait()
		st = l.want(studioapi.StateStopped, 2, 1, 1)
		if !st.NextStart.IsZero() {
			t.Errorf("stopped with a next start %v", st.NextStart)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		l.want(studioapi.StateStopped, 2, 1, 1)
		if err := l.a.Start("go"); err != nil {
			t.Fatalf("Start: %v", err)
		}
		synctest.Wait()
		l.want(studioapi.StateRunning, 3, 1, 1)
		l.close()
	})
}

// TestExitWhileStopping: a child that exits with an error as it is being
// stopped or restarted (it crashed at that moment, or did not take SIGTERM
// quietly) is taken as the request asked, not as a failure: no backoff,
// no count, no "exited" in its history.
func TestExitWhileStopping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := startLoop(t, errors.New("signal: terminated"))
		if err := l.a.Stop("maintenance"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st := l.want(studioapi.StateStopped, 1, 0, 0); st.LastErr != "" || st.LastExit != "" {
			t.Errorf("stopped: last error %q, last exit %q; want none", st.LastErr, st.LastExit)
		}
		if err := l.a.Start("back"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := l.a.Restart("reload"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		l.want(studioapi.StateRunning, 3, 1, 0)
		for _, e := range l.a.History() {
			if e.Event == studioapi.EventExited {
				t.Errorf("history has an exit: %+v", l.a.History())
			}
		}
		l.close()
	})
}

// TestAwaitRunningAcrossBackoff: the proxy's hold. A request for a
// restarting agent whose retry time is within its wait gets the next run's
// upstream when it listens; one whose wait ends before the retry time is
// answered at once; a request that found the running upstream gone waits
// past it.
func TestAwaitRunningAcrossBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := startLoop(t, nil)
		first := l.a.Status().Upstream
		if st := l.a.AwaitRunning(context.Background(), time.Minute, ""); st.Upstream != first {
			t.Fatalf("AwaitRunning on a running agent: %+v", st)
		}
		l.exit("crash")
		t0 := time.Now()
		if st := l.a.AwaitRunning(context.Background(), testMinBackoff/2, ""); st.State != studioapi.StateRestarting || !time.Now().Equal(t0) {
			t.Errorf("retry time beyond the wait: %s after %v, want restarting at once", st.State, time.Since(t0))
		}
		st := l.a.AwaitRunning(context.Background(), 2*testMinBackoff, "")
		if !st.Routable() || st.Upstream.Host == first.Host || time.Since(t0) != testMinBackoff {
			t.Errorf("retry time within the wait: %+v after %v, want the next run's upstream after %v", st, time.Since(t0), testMinBackoff)
		}
		// Told the current upstream is gone, AwaitRunning waits for a
		// change, and answers as things are when its wait ends.
		gone := st.Upstream.Host
		t1 := time.Now()
		if st := l.a.AwaitRunning(context.Background(), time.Second, gone); st.Upstream.Host != gone || time.Since(t1) != time.Second {
			t.Errorf("gone upstream: %+v after %v, want it back after the whole wait", st, time.Since(t1))
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if st := l.a.AwaitRunning(ctx, time.Minute, gone); !time.Now().Equal(t1.Add(time.Second)) || st.Upstream.Host != gone {
			t.Errorf("ended context: %+v after %v", st, time.Since(t1))
		}
		l.close()
	})
}

// TestShutdownInEveryState: Run returns, stopped, when its context ends
// whatever the agent is doing.
func TestShutdownInEveryState(t *testing.T) {
	for name, setup := range map[string]func(l *loop){
		"running":    func(l *loop) {},
		"in backoff": func(l *loop) { l.exit("crash") },
		"stopped": func(l *loop) {
			if err := l.a.Stop("x"); err != nil {
				l.t.Fatal(err)
			}
			synctest.Wait()
		},
		"given up": func(l *loop) {
			for range studioapi.GiveUpAfter - 1 {
				l.exit("crash")
				time.Sleep(testMaxBackoff)
				synctest.Wait()
			}
			l.exit("crash")
			l.want(studioapi.StateGivenUp, studioapi.GiveUpAfter, studioapi.GiveUpAfter-1, studioapi.GiveUpAfter)
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := startLoop(t, nil)
				setup(l)
				l.close()
			})
		})
	}
}

// TestControlCallsConcurrently: restarts, stops and starts from several
// callers at once, with runs ending on their own among them, leave the
// agent in a state that the loop and the control agree on: each call is
// accepted or refused with one of the package's errors, and afterwards a
// stopped agent starts on request and a running one refuses a start.
func TestControlCallsConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := startLoop(t, nil)
		quit := make(chan struct{})
		var exiter sync.WaitGroup
		exiter.Go(func() {
			for range 20 {
				select {
				case l.exits <- errors.New("crash"):
				case <-quit:
					return
				}
			}
		})
		var callers sync.WaitGroup
		for c := range 4 {
			callers.Go(func() {
				for i := range 50 {
					var err error
					switch (c + i) % 3 {
					case 0:
						err = l.a.Restart("r")
					case 1:
						err = l.a.Stop("s")
					case 2:
						err = l.a.Start("g")
					}
					if err != nil && !errors.Is(err, ErrNoProcess) && !errors.Is(err, ErrNotStopped) {
						t.Errorf("control call: %v", err)
					}
					if i%10 == 0 {
						time.Sleep(testMinBackoff / 4) // some calls land in a backoff
					}
				}
			})
		}
		callers.Wait()
		close(quit)
		exiter.Wait()
		time.Sleep(time.Hour) // past any backoff
		synctest.Wait()

		st := l.a.Status()
		if st.Restarts < 0 {
			t.Errorf("restarts %d", st.Restarts)
		}
		if n := len(l.a.History()); n > maxControlHistory {
			t.Errorf("history of %d events, bound %d", n, maxControlHistory)
		}
		runs := l.runs.Load()
		switch st.State {
		case studioapi.StateRunning:
			if err := l.a.Start("g"); !errors.Is(err, ErrNotStopped) {
				t.Errorf("running agent, Start: %v", err)
			}
		case studioapi.StateStopped, studioapi.StateGivenUp:
			if err := l.a.Start("g"); err != nil {
				t.Errorf("%s agent, Start: %v", st.State, err)
			}
			synctest.Wait()
			if got := l.a.Status(); got.State != studioapi.StateRunning || l.runs.Load() != runs+1 {
				t.Errorf("after Start: %s, %d runs; want running, %d", got.State, l.runs.Load(), runs+1)
			}
		default:
			t.Errorf("settled in state %s", st.State)
		}
		l.close()
	})
}
