package journal

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/runtime"
)

// TestSummaries: the listing filters by credential, run id and state,
// counts each run's steps and delegations, reads its end's status and
// reason, cuts the task, and lists newest first, on both backends.
func TestSummaries(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		// A clock that moves a millisecond each reading, so that "newest
		// first" has one answer.
		now := time.Now()
		var mu sync.Mutex
		j := b.open(t, b.place(t), &Options{Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			now = now.Add(time.Millisecond)
			return now
		}})
		mk := func(runID, cred, task string) *Run {
			r, err := j.Begin(ctx, Start{RunID: runID, Key: "key-" + runID, ParentKey: "p-" + runID, Credential: cred, Task: task, Settings: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		done := mk("done", "alice", "a task")
		record(t, done, 1)
		if err := done.RecordEnd(ctx, runtime.JournalEnd{Result: json.RawMessage(`{"status":"answered","reason":""}`)}); err != nil {
			t.Fatal(err)
		}
		failed := mk("failed", "alice", strings.Repeat("long ", 100))
		record(t, failed, 1)
		record(t, failed, 2)
		if err := failed.RecordEnd(ctx, runtime.JournalEnd{Result: json.RawMessage(`{"status":"error","reason":"model down"}`), Err: "model down", Resumable: true}); err != nil {
			t.Fatal(err)
		}
		mk("bob's", "bob", "not alice's")

		all, err := j.Summaries(ctx, ListFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 || all[0].RunID != "bob's" || all[2].RunID != "done" {
			t.Fatalf("all runs: %+v, want 3, newest first", all)
		}
		alice, err := j.Summaries(ctx, ListFilter{Credential: "alice", States: []State{StateFailed, StateInterrupted}})
		if err != nil {
			t.Fatal(err)
		}
		if len(alice) != 1 {
			t.Fatalf("alice's resumable runs: %+v, want the failed one", alice)
		}
		f := alice[0]
		if f.RunID != "failed" || f.Steps != 2 || f.Delegations != 2 || f.Status != "error" || f.Reason != "model down" || f.Result != nil {
			t.Fatalf("the failed run's summary: %+v", f)
		}
		if len(f.Task) != summaryTask {
			t.Fatalf("task of %d characters, want cut to %d", len(f.Task), summaryTask)
		}
		one, err := j.Summaries(ctx, ListFilter{RunID: "done", Limit: 5})
		if err != nil || len(one) != 1 || one[0].Status != "answered" || one[0].Steps != 1 {
			t.Fatalf("by run id: %+v %v", one, err)
		}
		if lim, err := j.Summaries(ctx, ListFilter{Limit: 2}); err != nil || len(lim) != 2 {
			t.Fatalf("limit 2: %d runs, %v", len(lim), err)
		}
	})
}
