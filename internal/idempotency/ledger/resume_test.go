package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
)

// TestResumableAfterCrash: a call a crash interrupted goes on under its key
// when its tool is Resumable and the resumer says it can (the ask tool's
// run journal holds its run): it runs in the next process instead of being
// answered interrupted, a repeat while it runs is still running, and once
// it is done a repeat is its replay. A resumer that says no, or another
// request under the key, gets what it got before.
func TestResumableAfterCrash(t *testing.T) { eachBackend(t, testResumableAfterCrash) }

func testResumableAfterCrash(t *testing.T, b backend) {
	path := b.place(t)
	r := newRig(t, b, path, nil)
	key, other := idempotency.NewKey(time.Now()), idempotency.NewKey(time.Now())
	done := make(chan struct{}, 2)
	for _, k := range []string{key, other} {
		go func() {
			r.call("slow", "s", k)
			done <- struct{}{}
		}()
		<-r.enter
	}
	defer func() {
		close(r.gate)
		<-done
		<-done
	}()

	b.crash(r.ledger)
	next := newRig(t, b, path, nil)
	asked := make(chan string, 4)
	next.guard.Resumable("slow", func(ctx context.Context, k string) bool {
		asked <- k
		return k == key
	})
	if _, err := next.call("slow", "another request", key); code(t, err) != idempotency.CodeConflict {
		t.Fatalf("another request under the key: %v, want a conflict", err)
	}
	if _, err := next.call("slow", "s", other); code(t, err) != idempotency.CodeInterrupted {
		t.Fatalf("a call its resumer refuses: %v, want interrupted", err)
	}
	if k := <-asked; k != other {
		t.Fatalf("the resumer was asked about %q, want %q", k, other)
	}

	resumed := make(chan error, 1)
	go func() {
		res, err := next.call("slow", "s", key)
		if err == nil && res.IsError {
			t.Errorf("resumed call: %v", res)
		}
		resumed <- err
	}()
	<-next.enter // it runs again, here
	if _, err := next.call("slow", "s", key); code(t, err) != idempotency.CodeStillRunning {
		t.Fatalf("a repeat while it is resumed: %v, want still running", err)
	}
	close(next.gate)
	if err := <-resumed; err != nil {
		t.Fatal(err)
	}
	res, err := next.call("slow", "s", key)
	if err != nil || res.Meta[idempotency.ReplayMetaKey] != true {
		t.Fatalf("after the resume: %v %v, want its replay", res, err)
	}
	if n := next.runsOf("s"); n != 1 {
		t.Errorf("the next process ran the tool %d times, want once", n)
	}
	if st := next.guard.Stats(); st.Resumed != 1 || st.Interrupted != 1 {
		t.Errorf("stats %+v, want 1 resumed and 1 interrupted", st)
	}
}
